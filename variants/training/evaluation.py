"""Scoring a trained model folder: its held-out articles, predictions through the one decoding path, the
SQuAD v2 views at threshold 0, and the calibrated no-answer threshold stored in its ``config.json``."""

from __future__ import annotations

import json
import time
from pathlib import Path

from variants.answering.qa import (
    CALIBRATED_THRESHOLD,
    DecodeSettings,
    answer_pairs,
    calibrated_threshold,
    with_null_decision,
)
from variants.answering.runtime import TorchQAModel
from variants.building.storage import load_qa_model
from variants.core.squad import QAExample, answered_share, load_squad, squad_v2_scores
from variants.training.features import data_name


def training_record(folder: str | Path) -> dict:
    """A trained model folder's ``train_config.json`` (empty for a folder without one)."""
    path = Path(folder) / "train_config.json"
    return json.loads(path.read_text()) if path.exists() else {}


def held_out_questions(data: str | Path, folders: list[str]) -> tuple[list[str], list[QAExample]]:
    """The held-out training articles every model in ``folders`` was calibrated on, and their questions in
    ``data``, for comparisons on questions none of them trained on; SystemExit where there are none."""
    titles = training_record(folders[0]).get("holdout_titles") or []
    if not titles:
        raise SystemExit(f"{folders[0]}: its training record names no held-out articles")
    if any(sorted(training_record(f).get("holdout_titles") or []) != sorted(titles) for f in folders):
        raise SystemExit("the models must have been calibrated on the same held-out articles")
    examples = [e for e in load_squad(data, split="train") if e.title in titles]
    if not examples:
        raise SystemExit(f"{data} has none of the held-out articles {titles}: pass the models' training file")
    return titles, examples


def predict_spans(folder: str | Path, examples: list[QAExample], compact: bool | None = None) -> list:
    """Each question's best span with its null score, through the engine's decoding path (PyTorch, CPU).

    ``compact`` (default: whether the folder's training record says heads were removed) loads the
    pruned model with its zeros cut out.

    Decoded with ``handle_impossible=False``; :func:`variants.answering.qa.with_null_decision` then gives the
    answers at any null threshold without running the model again.
    """
    from transformers import AutoTokenizer  # noqa: PLC0415

    if compact is None:
        compact = "heads_removed" in training_record(folder)
    model = load_qa_model(folder, compacted=compact)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pairs = [(e.question, e.context) for e in examples]
    return answer_pairs(TorchQAModel(model), tokenizer, pairs, DecodeSettings(handle_impossible=False))


def score_spans(examples: list[QAExample], spans: list, threshold: float) -> dict:
    """SQuAD v2 scores of ``spans`` decided at ``threshold``. The best_* scores search the threshold on the
    same questions over every span (na_prob = ln(null / span), so best_f1_thresh is a null threshold)."""

    decided = {e.id: with_null_decision(a, threshold).text for e, a in zip(examples, spans, strict=True)}
    scores = squad_v2_scores(examples, decided).as_dict()
    scores["has_ans_answered"] = answered_share(examples, decided)
    every_span = {e.id: a.text for e, a in zip(examples, spans, strict=True)}
    margins = {e.id: a.null_margin for e, a in zip(examples, spans, strict=True)}
    best = squad_v2_scores(examples, every_span, margins).as_dict()
    scores.update({k: v for k, v in best.items() if k.startswith("best_")})
    return scores


def views_at_zero(examples: list[QAExample], spans: list) -> dict:
    """F1, HasAns F1 and NoAns F1 at threshold 0 and best F1 over thresholds, rounded, with ``span_f1``:
    the answerable questions' F1 of the best span whatever the null decision (what a model reads, apart
    from when it answers). A view the questions lack (no unanswerable ones, say) is None."""

    at_zero = score_spans(examples, spans, 0.0)
    answerable = [(e, a) for e, a in zip(examples, spans, strict=True) if not e.is_impossible]
    span_f1 = None
    if answerable:
        span_f1 = squad_v2_scores([e for e, _ in answerable], {e.id: a.text for e, a in answerable}).f1
    keep = ("f1", "has_ans_f1", "no_ans_f1", "best_f1")
    rounded = {k: None if at_zero.get(k) is None else round(at_zero[k], 2) for k in keep}
    return {**rounded, "span_f1": None if span_f1 is None else round(span_f1, 2)}


def held_out_examples(titles: list[str], data: str | Path) -> list[QAExample]:
    """The questions of ``data`` on the articles ``titles``."""
    return [e for e in load_squad(data, split="train") if e.title in titles]


def calibrate(folder: str | Path, data: str | Path) -> dict:
    """The null threshold that maximizes F1 on the folder's held-out training articles, written into its
    config.json (where the engine reads it) and train_config.json.

    The official best-threshold search over the held-out questions' null margins, spans decoded with no
    null answer so the threshold may move either way; the threshold is set halfway to the next margin.
    """
    from transformers import AutoConfig  # noqa: PLC0415

    folder = Path(folder)
    record = json.loads((folder / "train_config.json").read_text())
    titles = record.get("holdout_titles") or []
    if not titles:
        raise SystemExit(f"{folder} was trained on every article: retrain with --holdout-articles to calibrate")
    examples = held_out_examples(titles, data)
    if not examples:
        raise SystemExit(f"{data} holds none of {folder}'s held-out articles ({', '.join(titles)}): pass the file "
                         "it was trained on to calibrate")  # fmt: skip
    spans = predict_spans(folder, examples)
    at_zero = score_spans(examples, spans, 0.0)
    found = at_zero["best_f1_thresh"]
    above = sorted(m for m in (a.null_margin for a in spans) if m > found)
    threshold = (found + above[0]) / 2 if above else found
    chosen = score_spans(examples, spans, threshold)
    record["calibration"] = {
        "data": data_name(str(data)),
        "titles": titles,
        "questions": len(examples),
        "unanswerable": sum(e.is_impossible for e in examples),
        "null_threshold": round(threshold, 4),
        "f1": chosen["f1"],
        "f1_at_zero": at_zero["f1"],
        "has_ans_f1": chosen["has_ans_f1"],
        "no_ans_f1": chosen["no_ans_f1"],
    }
    (folder / "train_config.json").write_text(json.dumps(record, indent=2))
    config = AutoConfig.from_pretrained(folder)
    setattr(config, CALIBRATED_THRESHOLD, round(threshold, 4))
    config.save_pretrained(folder)
    print(json.dumps(record["calibration"], indent=2), flush=True)
    return record["calibration"]


def evaluate_folder(folder: str | Path, data: str | Path, compact: bool = False) -> tuple[dict, float]:
    """SQuAD v2 scores of a model folder at its calibrated null threshold (0 without one), through the
    engine's decoding path; ``f1_at_zero`` and friends are the scores at threshold 0 (the pipeline's)."""
    from transformers import AutoConfig  # noqa: PLC0415

    threshold = calibrated_threshold(AutoConfig.from_pretrained(folder))
    examples = load_squad(data)
    started = time.time()
    spans = predict_spans(folder, examples, compact)
    seconds = time.time() - started
    scores = score_spans(examples, spans, threshold)
    at_zero = score_spans(examples, spans, 0.0)
    scores.update({f"{k}_at_zero": at_zero[k] for k in ("exact", "f1", "has_ans_f1", "no_ans_f1", "has_ans_answered")})
    scores["null_threshold"] = threshold
    scores["all_null_f1"] = squad_v2_scores(examples, {e.id: "" for e in examples}).f1
    return scores, seconds
