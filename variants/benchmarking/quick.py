"""The Benchmark tab's quick run: a small fresh record on this machine (no sweeps, no peer)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from variants.answering.timing import (
    Progress,
    latency_pass,
)
from variants.benchmarking.accuracy import fill_accuracy
from variants.benchmarking.bench import compare, fill_latency, make_record, question_counts, variant_runners
from variants.benchmarking.options import Options
from variants.core.squad import QAExample
from variants.records.record import Record
from variants.records.results import save_record

QUICK_QUESTIONS = 50


def quick_benchmark(
    engine: Any,
    examples: list[QAExample],
    n: int = QUICK_QUESTIONS,
    progress: Progress | None = None,
    out: str | Path | None = None,
) -> Record:
    """A small fresh run for the app: accuracy (all three views) and batch-1 latency on ``n`` questions
    drawn at random (50 by default; :attr:`Record.noisy` says when that is too few to compare F1).

    No sweeps and no peer. Each question is answered once per variant at batch 1, after one warm-up
    question; those answers are scored. Returns a record of kind "quick" with its sample size in
    ``data``, meant to sit beside the stored records (written to the folder ``out`` only if given).
    ``progress(fraction, message)`` after each question.
    """
    remote = [v.spec.name for v in engine.loaded if v.ok and v.model.backend == "remote"]
    if remote:  # app.py --backend: the models run elsewhere, and this times models in this process
        raise ValueError(
            f"The quick benchmark runs models in this process; {', '.join(remote)} answer from a backend. "
            "Measure them there: python -m variants ray-bench."
        )
    created = datetime.now(UTC)
    # A fixed-seed draw across the whole sample: the first n questions would cover one or two articles.
    examples = random.Random(0).sample(examples, min(n, len(examples)))
    runners, entries = variant_runners(engine)
    timings = latency_pass({r.name: r.answer for r in runners}, examples, len(examples), 1, progress)
    preds = {}
    for runner in runners:
        entry, timing = runner.entry, timings[runner.name]
        if timing.error:
            entry.error = timing.error
            continue
        fill_latency(entry, timing)
        if timing.preds and not entry.latency_only:
            preds[runner.name] = fill_accuracy(entry, examples, timing.preds, timing.na_probs)
    compare(entries, None, preds)
    options = Options(len(examples), warmup=1, runs=0, seq_lens=(), batch_sizes=(), skip_sweeps=True, accuracy_batch=1)
    data = {"file": None, "sample": f"{len(examples)} questions drawn at random (seed 0)", **question_counts(examples)}
    record = make_record(engine, entries, None, data, options, created, kind="quick")
    if out is not None:
        save_record(record, out)
    if progress:
        progress(1.0, "done")
    return record
