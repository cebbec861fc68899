"""The long-input view: each question of the sample asked about its own paragraph and about its whole
article (all its paragraphs joined: tens of windows), decoded under every window rule
(:data:`variants.answering.qa.WINDOW_RULES`) from the same logits, at the app's "no answer" rule
(threshold 0). It shows what a person pasting a long passage gets, and which rule keeps it closest to
the single-paragraph answers; ``scores_above_one`` counts the answers whose ranked score (what the
pipeline's rule would show) passes 1.

Each question is one call, as the app answers it (all its windows in one request), so dynamic INT8
answers as it does in the app. Accuracy only: no timing.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from variants.answering.qa import WINDOW_RULES, Answer, DecodeSettings, decode, run_windows, tokenize
from variants.answering.timing import Progress
from variants.core.squad import QAExample, answered_share, squad_v2_scores

SEPARATOR = "\n\n"  # between an article's paragraphs, as a pasted passage keeps them


def whole_articles(examples: list[QAExample], pool: list[QAExample] | None = None) -> list[QAExample]:
    """Every question again with its whole article as context: its paragraphs in file order (those of
    ``pool``, all the questions of the file, when ``examples`` are a draw from it), joined by
    :data:`SEPARATOR`, the gold answers at their new starts."""
    paragraphs: dict[str, list[str]] = {}
    for ex in pool or examples:
        seen = paragraphs.setdefault(ex.title, [])
        if ex.context not in seen:
            seen.append(ex.context)
    joined = {title: SEPARATOR.join(ps) for title, ps in paragraphs.items()}
    offsets = {
        (title, p): sum(len(q) + len(SEPARATOR) for q in ps[:i])
        for title, ps in paragraphs.items()
        for i, p in enumerate(ps)
    }
    made = []
    for ex in examples:
        shift = offsets[(ex.title, ex.context)]
        made.append(replace(ex, context=joined[ex.title], answer_starts=tuple(s + shift for s in ex.answer_starts)))
    return made


# Every window rule at the settings' own parameters; a probe may add others by label (e.g. "focus 2": the
# "focus" rule at weight 2), each a set of DecodeSettings fields.
RULES: dict[str, dict[str, Any]] = {rule: {"windows": rule} for rule in WINDOW_RULES}


# Start/end logits of a question's windows, by (question, context): a probe that decodes the same logits under
# new rules keeps them between runs (experiments/window_rule_probe.py --logits-cache) instead of running the
# model again; the windows themselves are made again from the same tokenizer and settings.
LogitsCache = dict[tuple[str, str], tuple[np.ndarray, np.ndarray]]


def answers_by_rule(
    model: Any,
    tokenizer: Any,
    ex: QAExample,
    settings: DecodeSettings,
    rules: dict[str, dict[str, Any]] = RULES,
    cache: LogitsCache | None = None,
) -> dict[str, Answer]:
    """One question's answer under each of ``rules`` (label -> DecodeSettings fields), from one run of the
    model over its windows (none where ``cache`` holds their logits; a new run's are added to it)."""
    windows = tokenize(tokenizer, [(ex.question, ex.context)], settings)
    key = (ex.question, ex.context)
    if cache is not None and key in cache:
        starts, ends = cache[key]
    else:
        starts, ends = run_windows(model, windows, settings.batch_size)
        if cache is not None:
            cache[key] = (starts, ends)
    return {
        label: decode(windows, starts, ends, [ex.context], replace(settings, **fields, null_threshold=0.0))[0]
        for label, fields in rules.items()
    }


def scores(examples: list[QAExample], answers: dict[str, Answer]) -> dict[str, Any]:
    """F1 (all, answerable, unanswerable) at threshold 0, the share of answerable questions answered, and
    how many ranked scores passed 1."""
    preds = {qid: a.text for qid, a in answers.items()}
    squad = squad_v2_scores(examples, preds)
    return {
        "f1": round(squad.f1, 2),
        "has_ans_f1": None if squad.has_ans_f1 is None else round(squad.has_ans_f1, 2),
        "no_ans_f1": None if squad.no_ans_f1 is None else round(squad.no_ans_f1, 2),
        "answered_share": answered_share(examples, preds),
        "scores_above_one": sum(1 for a in answers.values() if (a.ranked_score or 0.0) > 1.0),
        "shown_above_one": sum(1 for a in answers.values() if a.score > 1.0),
    }


def long_input_view(
    engine: Any,
    examples: list[QAExample],
    names: list[str] | None = None,
    progress: Progress | None = None,
    pool: list[QAExample] | None = None,
    rules: dict[str, dict[str, Any]] = RULES,
    caches: dict[str, LogitsCache] | None = None,
) -> dict[str, Any]:
    """The view for the engine's variants ``names`` (default: the headline ones that are not latency-only);
    articles are made of ``pool``'s paragraphs where given (:func:`whole_articles`); ``rules`` as
    :func:`answers_by_rule` takes them; ``caches``: a logits cache per variant name, filled as it goes."""
    articles = whole_articles(examples, pool)
    chosen = [
        v
        for v in engine.loaded
        if v.ok and not v.spec.latency_only and (v.spec.name in names if names else v.spec.headline)
    ]
    view: dict[str, Any] = {
        "rules": list(rules),
        "rule_settings": rules,
        "threshold": 0.0,
        "separator": SEPARATOR,
        "n_questions": len(examples),
        "n_answerable": sum(not e.is_impossible for e in examples),
        "n_articles": len({e.title for e in examples}),
        "article_chars": sorted({len(a.context) for a in articles}),
        "variants": {},
    }
    steps, done = 2 * len(chosen) * len(examples), 0
    for loaded in chosen:
        settings = engine.settings_for(loaded)
        cache = None if caches is None else caches.setdefault(loaded.spec.name, {})
        started = time.perf_counter()
        entry: dict[str, Any] = {}
        windows = 0
        for kind, asked in (("paragraph", examples), ("article", articles)):
            by_rule: dict[str, dict[str, Answer]] = {rule: {} for rule in rules}
            for ex in asked:
                for rule, ans in answers_by_rule(loaded.model, loaded.tokenizer, ex, settings, rules, cache).items():
                    by_rule[rule][ex.id] = ans
                done += 1
                if progress and done % 25 == 0:
                    progress(done / steps, f"long inputs: {loaded.spec.name}, {kind}")
            entry[kind] = {rule: scores(asked, answers) for rule, answers in by_rule.items()}
            if kind == "article":
                windows = len(tokenize(loaded.tokenizer, [(asked[0].question, asked[0].context)], settings).owner)
        entry["focus_weight"] = settings.focus  # the "focus" rule's, where a label does not set its own
        entry["seconds"] = round(time.perf_counter() - started, 1)
        entry["windows_first_article"] = windows
        view["variants"][loaded.spec.name] = entry
    return view
