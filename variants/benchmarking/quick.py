"""The Benchmark tab's quick run: a small fresh record on this machine (no sweeps, no peer), measured in chunks.

A :class:`QuickRun` is the Your questions tab's run (:class:`~variants.benchmarking.evaluate.Evaluation`) on
questions drawn from the SQuAD v2 sample: the same chunks, turns and timing, so that the app runs one chunk per
turn of its model queue (a question asked on the Ask tab meanwhile waits for one chunk, not for the whole run),
and Stop keeps what is measured. Only its record says what the quick run is (its sample, its settings).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from variants.answering.timing import Progress
from variants.benchmarking.bench import question_counts
from variants.benchmarking.evaluate import CHUNK_S, Evaluation
from variants.core.question_files import QuestionSet
from variants.core.squad import QAExample
from variants.records.record import Record
from variants.records.results import save_record

QUICK_QUESTIONS = 50
LATENCY_METHOD = (
    "batch 1, one question end to end (tokenize, every window, decode), each question once per variant; the "
    "variants take turns on blocks of questions (as many as the slowest answers in about chunk_s seconds), each "
    "turn after one untimed question where the variant runs under the timing rule's settle_below_ms, and one "
    "untimed question each before the first. On SQuAD v2 questions drawn at random (seed 0); the machine may "
    "have served other requests between chunks"
)


class QuickRun(Evaluation):
    """``n`` questions drawn at random from ``examples`` (a fixed seed, across the whole sample: the first n
    would cover one or two articles), every loaded variant on each at batch 1: accuracy (all three views) and
    latency. Call :meth:`step` until it returns False (or :func:`quick_benchmark` for the whole run); :meth:`stop`
    ends it where it is, and :meth:`record` is what was measured so far."""

    def __init__(self, engine: Any, examples: list[QAExample], n: int = QUICK_QUESTIONS, *, chunk_s: float = CHUNK_S):
        remote = [v.spec.name for v in engine.loaded if v.ok and v.model.backend == "remote"]
        if remote:  # app.py --backend: the models run elsewhere, and this times models in this process
            raise ValueError(
                f"The quick benchmark runs models in this process; {', '.join(remote)} answer from a backend. "
                "Measure them there: python -m variants ray-bench."
            )
        drawn = random.Random(0).sample(examples, min(n, len(examples)))
        super().__init__(engine, QuestionSet(drawn, labelled=True, format="squad"), chunk_s=chunk_s)

    def answers(self) -> dict[str, dict[str, str]]:
        """As the run's, less the random-weight variants' (their answers mean nothing to agree with)."""
        meaningless = {e.variant for e in self.entries if e.latency_only}
        return {name: a for name, a in super().answers().items() if name not in meaningless}

    def record(self) -> Record:
        """A record of kind "quick" on the questions answered so far, with its sample size in ``data`` (and, for
        a run stopped early, how far it got), meant to sit beside the stored records; its settings and method are
        the run's (one untimed question each first, turns on blocks of questions)."""
        record = super().record()
        done = self.done
        sample = f"{len(done)} questions drawn at random (seed 0)"
        if self.stopped:
            sample = f"{len(done)} of the {self.total} questions drawn at random (seed 0): {self.stopped} there"
        record.data = {"file": None, "sample": sample, **question_counts(done)}
        if self.stopped:
            record.data |= {"n_total": self.total, "stopped": self.stopped}
        record.method = {**record.method, "latency_ms": LATENCY_METHOD}
        return record


def quick_benchmark(
    engine: Any,
    examples: list[QAExample],
    n: int = QUICK_QUESTIONS,
    progress: Progress | None = None,
    out: str | Path | None = None,
) -> Record:
    """A whole :class:`QuickRun` at once: accuracy (all three views) and batch-1 latency on ``n`` questions drawn
    at random (50 by default; :attr:`Record.noisy` says when that is too few to compare F1). No sweeps and no
    peer. Returns a record of kind "quick" (written to the folder ``out`` only if given);
    ``progress(fraction, message)`` after each chunk.
    """
    run = QuickRun(engine, examples, n)
    while run.step():
        if progress:
            progress(run.fraction, f"{run.position}/{run.total} questions")
    record = run.record()
    if out is not None:
        save_record(record, out)
    if progress:
        progress(1.0, "done")
    return record
