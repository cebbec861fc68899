"""SQuAD v2 data (local JSON file or Hub dataset) and the official SQuAD v2 metric.

The metric is written here rather than taken from ``evaluate`` because ``evaluate.load`` fetches
its scripts from the Hub, which is out of reach offline. It follows the official
``evaluate-v2.0.py`` script: the same normalization, EM, F1, HasAns/NoAns splits and best-threshold
search.
"""

from __future__ import annotations

import collections
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class QAExample:
    """One SQuAD question with its context and gold answers (empty for unanswerable)."""

    id: str
    question: str
    context: str
    answers: tuple[str, ...] = ()
    answer_starts: tuple[int, ...] = ()
    title: str = ""

    @property
    def is_impossible(self) -> bool:
        return len(self.answers) == 0


def load_squad_json(path: str | Path) -> list[QAExample]:
    """Read a file in the official SQuAD v2 JSON format."""
    with open(path, encoding="utf-8") as handle:
        raw = json.load(handle)
    examples: list[QAExample] = []
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                examples.append(
                    QAExample(
                        id=qa["id"],
                        question=qa["question"],
                        context=paragraph["context"],
                        answers=tuple(a["text"] for a in answers),
                        answer_starts=tuple(int(a["answer_start"]) for a in answers),
                        title=article.get("title", ""),
                    )
                )
    return examples


def load_squad_hub(name: str = "rajpurkar/squad_v2", split: str = "validation") -> list[QAExample]:
    """Read a SQuAD v2 split from the Hugging Face Hub (needs network and the ``datasets`` package)."""
    try:
        import datasets  # noqa: PLC0415 - optional dependency, only for the Hub path
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError(
            f"Loading the Hub dataset {name!r} needs the 'datasets' package; pass a local SQuAD v2 JSON file instead."
        ) from exc
    rows = datasets.load_dataset(name, split=split)
    return [
        QAExample(
            id=row["id"],
            question=row["question"],
            context=row["context"],
            answers=tuple(row["answers"]["text"]),
            answer_starts=tuple(row["answers"]["answer_start"]),
            title=row.get("title", ""),
        )
        for row in rows
    ]


def data_files(source: str | Path) -> list[Path] | None:
    """The local SQuAD v2 JSON files ``source`` names (one path, or several joined by commas), or None
    when it names none (a Hub dataset name)."""
    paths = [Path(part) for part in str(source).split(",")]
    return paths if all(p.is_file() for p in paths) else None


def load_squad(source: str | Path, split: str = "validation") -> list[QAExample]:
    """Local SQuAD v2 JSON files if ``source`` names them (``train.json,train-extra.json`` joins two,
    in that order), else a Hub dataset name."""
    if (files := data_files(source)) is not None:
        return [example for path in files for example in load_squad_json(path)]
    return load_squad_hub(str(source), split=split)


# --- the official SQuAD v2 metric -------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official script)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def get_tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def compute_exact(gold: str, pred: str) -> int:
    return int(normalize_answer(gold) == normalize_answer(pred))


def compute_f1(gold: str, pred: str) -> float:
    gold_toks, pred_toks = get_tokens(gold), get_tokens(pred)
    if not gold_toks or not pred_toks:
        # If either is no-answer, F1 is 1 if they agree, 0 otherwise.
        return float(gold_toks == pred_toks)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_toks)
    recall = num_same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def _gold_answers(example: QAExample) -> list[str]:
    # Official script: unanswerable questions have the single gold answer "".
    golds = [a for a in example.answers if normalize_answer(a)]
    return golds or [""]


def question_exact(example: QAExample, prediction: str) -> int:
    """One question's exact match (0 or 1) as the official script scores it: the best over its gold answers."""
    return max(compute_exact(g, prediction) for g in _gold_answers(example))


def question_f1(example: QAExample, prediction: str) -> float:
    """One question's F1 (0 to 1) as the official script scores it: the best over its gold answers."""
    return max(compute_f1(g, prediction) for g in _gold_answers(example))


def answered_share(examples: list[QAExample], predictions: dict[str, str]) -> float | None:
    """Percent of the answerable questions given an answer (not "no answer"); None without any."""
    answerable = [e for e in examples if not e.is_impossible]
    if not answerable:
        return None
    return round(100.0 * sum(bool(predictions.get(e.id)) for e in answerable) / len(answerable), 2)


def paired_bootstrap(diffs: np.ndarray, rounds: int = 5000, seed: int = 0, level: float = 0.95) -> tuple[float, float]:
    """The ``level`` percentile interval of the mean of per-question ``diffs`` (two systems on the same
    questions), the questions resampled with replacement: a difference inside it is a tie."""
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, len(diffs), size=(rounds, len(diffs)))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


@dataclass
class SquadScores:
    """SQuAD v2 scores in percent, with the counts they are computed over."""

    exact: float
    f1: float
    total: int
    has_ans_exact: float | None = None
    has_ans_f1: float | None = None
    has_ans_total: int = 0
    no_ans_exact: float | None = None
    no_ans_f1: float | None = None
    no_ans_total: int = 0
    best_exact: float | None = None
    best_exact_thresh: float | None = None
    best_f1: float | None = None
    best_f1_thresh: float | None = None
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        out = {k: v for k, v in self.__dict__.items() if k != "extra"}
        out.update(self.extra)
        return out


def _best_threshold(
    raw: dict[str, float], preds: dict[str, str], na_probs: dict[str, float], qid_has_ans: dict[str, bool]
) -> tuple[float, float]:
    """Official ``find_best_thresh``: the no-answer threshold that maximizes the score."""
    num_no_ans = sum(1 for has in qid_has_ans.values() if not has)
    cur_score = best_score = float(num_no_ans)
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in raw:
            continue
        if qid_has_ans[qid]:
            diff = raw[qid]
        elif preds[qid]:
            diff = -1
        else:
            diff = 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(raw), best_thresh


def squad_v2_scores(
    examples: list[QAExample],
    predictions: dict[str, str],
    no_answer_probs: dict[str, float] | None = None,
) -> SquadScores:
    """Score ``predictions`` (question id -> answer text, "" for no answer) as the official script.

    ``no_answer_probs`` (question id -> probability of no answer) enables the best-threshold
    EM/F1; without it every question counts as predicted as given.
    """
    by_id = {ex.id: ex for ex in examples}
    missing = [qid for qid in by_id if qid not in predictions]
    if missing:
        raise ValueError(f"{len(missing)} questions have no prediction, e.g. {missing[0]!r}")
    exact_raw: dict[str, float] = {}
    f1_raw: dict[str, float] = {}
    for qid, ex in by_id.items():
        exact_raw[qid] = question_exact(ex, predictions[qid])
        f1_raw[qid] = question_f1(ex, predictions[qid])
    has_ans = {qid: bool(ex.answers) for qid, ex in by_id.items()}

    def mean(values: list[float]) -> float | None:
        return 100.0 * sum(values) / len(values) if values else None

    has_ids = [q for q, h in has_ans.items() if h]
    no_ids = [q for q, h in has_ans.items() if not h]
    scores = SquadScores(
        exact=mean(list(exact_raw.values())) or 0.0,
        f1=mean(list(f1_raw.values())) or 0.0,
        total=len(by_id),
        has_ans_exact=mean([exact_raw[q] for q in has_ids]),
        has_ans_f1=mean([f1_raw[q] for q in has_ids]),
        has_ans_total=len(has_ids),
        no_ans_exact=mean([exact_raw[q] for q in no_ids]),
        no_ans_f1=mean([f1_raw[q] for q in no_ids]),
        no_ans_total=len(no_ids),
    )
    if no_answer_probs is not None:
        scores.best_exact, scores.best_exact_thresh = _best_threshold(exact_raw, predictions, no_answer_probs, has_ans)
        scores.best_f1, scores.best_f1_thresh = _best_threshold(f1_raw, predictions, no_answer_probs, has_ans)
    return scores


def sample_squad(src: str | Path, dst: str | Path, n: int, seed: int = 2026, include: tuple[str, ...] = ()) -> int:
    """Write a random sample of ``n`` questions (plus the ``include`` questions) of a SQuAD v2 JSON file.

    The sample keeps the official format, ids and article titles. Returns the number of questions.
    """
    import random  # noqa: PLC0415

    with open(src, encoding="utf-8") as handle:
        raw = json.load(handle)
    questions = [qa for article in raw["data"] for p in article["paragraphs"] for qa in p["qas"]]
    keep = {qa["id"] for qa in random.Random(seed).sample(questions, min(n, len(questions)))}
    keep |= {qa["id"] for qa in questions if qa["question"] in include}
    out = {"version": raw.get("version", "v2.0"), "data": []}
    for article in raw["data"]:
        paragraphs = [
            {"context": p["context"], "qas": [qa for qa in p["qas"] if qa["id"] in keep]}
            for p in article["paragraphs"]
            if any(qa["id"] in keep for qa in p["qas"])
        ]
        if paragraphs:
            out["data"].append({"title": article["title"], "paragraphs": paragraphs})
    with open(dst, "w", encoding="utf-8") as handle:
        json.dump(out, handle, ensure_ascii=False)
    return len(keep)
