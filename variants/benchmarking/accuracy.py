"""Accuracy in the benchmark: each runner's answers scored with the official SQuAD v2 metric in three
views (threshold 0 as the pipeline does, the best threshold on the file, each model's calibrated one)."""

from __future__ import annotations

from variants.answering.qa import says_answer
from variants.benchmarking.options import Options, Runner
from variants.core.squad import QAExample, answered_share, normalize_answer, squad_v2_scores
from variants.records.record import AccuracyView, VariantEntry


def decisions(spans: dict[str, str], margins: dict[str, float], threshold: float) -> dict[str, str]:
    """Each question's answer at ``threshold``: its span where the span stands, else "" (no answer)."""
    return {q: text if text and says_answer(margins[q], threshold) else "" for q, text in spans.items()}


def accuracy_views(
    examples: list[QAExample],
    spans: dict[str, str],
    margins: dict[str, float] | None,
    calibrated: float | None,
) -> dict[str, AccuracyView | None]:
    """The three accuracy views from one decoding pass: ``spans`` (question id -> best span, undecided)
    and ``margins`` (question id -> ln(null / span)). Without margins the answers are already decided
    (the pipeline peer): the pipeline view only."""
    answered = [e for e in examples if e.id in spans]
    if margins is None:
        return {"pipeline": _view(answered, spans, 0.0), "best": None, "calibrated": None}
    best = squad_v2_scores(answered, spans, margins)
    threshold = best.best_f1_thresh
    if threshold is not None and margins and best.best_f1 == 100.0 * best.no_ans_total / max(1, best.total):
        # The official search starts from "no answer" everywhere and reports threshold 0 when nothing beats
        # it; the threshold that gives those decisions is below every margin.
        threshold = min(margins.values()) - 1.0

    def at(t: float | None) -> AccuracyView | None:
        return None if t is None else _view(answered, decisions(spans, margins, t), t)

    return {"pipeline": at(0.0), "best": at(threshold), "calibrated": at(calibrated)}


def _view(examples: list[QAExample], preds: dict[str, str], threshold: float) -> AccuracyView:
    view = AccuracyView.from_scores(squad_v2_scores(examples, preds).as_dict(), threshold)
    view.has_ans_answered = answered_share(examples, preds)  # what a person asking answerable questions sees
    return view


def accuracy_batch(runner: Runner, options: Options) -> int:
    """Questions per call when measuring ``runner``'s accuracy: ``options.accuracy_batch``, or 1 for a model
    whose answers depend on what shares its batch (the app never batches those: ``Engine._start_batcher``)."""
    invariant = runner.batch_invariant if runner.model is None else runner.model.batch_invariant
    return options.accuracy_batch if invariant else 1


def measure_accuracy(runner: Runner, examples: list[QAExample], batch: int) -> tuple[dict[str, str], dict[str, float]]:
    """Each question's answer (the undecided span, for engine variants) and ln(null / span) where known,
    ``batch`` questions per call."""
    preds: dict[str, str] = {}
    margins: dict[str, float] = {}
    for lo in range(0, len(examples), batch):
        chunk = examples[lo : lo + batch]
        answers = runner.answer([(e.question, e.context) for e in chunk], batch)
        for e, (text, margin) in zip(chunk, answers, strict=True):
            preds[e.id] = text
            if margin is not None:
                margins[e.id] = margin
    return preds, margins


def fill_accuracy(
    entry: VariantEntry, examples: list[QAExample], preds: dict[str, str], margins: dict[str, float]
) -> dict[str, str]:
    """Set the entry's three views; returns its answers at threshold 0 (for agreement with the baseline)."""
    known = margins if preds and len(margins) == len(preds) else None
    entry.accuracy = accuracy_views(examples, preds, known, entry.calibrated_threshold)
    return decisions(preds, known, 0.0) if known is not None else preds


def agreement(preds: dict[str, str], reference: dict[str, str]) -> float | None:
    """Share of the questions answered by both whose normalized answers are equal."""
    common = [q for q in preds if q in reference]
    if not common:
        return None
    return round(sum(normalize_answer(preds[q]) == normalize_answer(reference[q]) for q in common) / len(common), 4)
