"""The benchmark: every variant of an engine on a SQuAD v2 sample, accuracy (three views) and latency
(whole passes in turns, sequence-length and batch sweeps), beside the transformers pipeline, into a
versioned :class:`~variants.records.record.Record` that names the hardware and versions."""

from __future__ import annotations

import hashlib
import logging
import os
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from variants.answering.qa import DecodeSettings, answer_pairs
from variants.answering.runtime import cpu_threads
from variants.answering.timing import (
    Answerer,
    MemoryProbe,
    Progress,
    Timing,
    batch_sweep,
    describe,
    free_gpu,
    latency_passes,
    seq_len_sweep,
    summarize,
)
from variants.answering.timing import (
    speedup as one_ratio,
)
from variants.benchmarking import profile as profiling
from variants.benchmarking.accuracy import accuracy_batch, agreement, fill_accuracy, measure_accuracy
from variants.benchmarking.options import METHOD, Options, Runner
from variants.building.replica import LATENCY_ONLY
from variants.core.hardware import current_hardware
from variants.core.question_files import SUFFIXES, read_questions
from variants.core.spec import ASSETS
from variants.core.squad import QAExample, data_files, load_squad
from variants.core.versions import record_versions
from variants.records.record import LatencyStats, Record, VariantEntry

log = logging.getLogger("variants.benchmarking.bench")


def load_data(source: str | Path, split: str = "validation", limit: int | None = None) -> tuple[list, dict]:
    """The questions (the first ``limit`` if given) and a description of them for the record."""
    if Path(source).suffix.lower() in SUFFIXES and not Path(source).is_file():
        raise FileNotFoundError(f"no such data file: {source}")
    if (files := data_files(source)) is not None:  # SQuAD JSON, CSV or JSON Lines: the app's own loader
        examples = []
        for file in files:
            questions = read_questions(file)
            if not questions.labelled:
                raise ValueError(
                    f"{file} gives no answers, so the bench has no F1 to measure; "
                    "`python -m variants evaluate --data FILE` shows agreement and latency without them"
                )
            examples += questions.examples
    else:
        examples = load_squad(source, split)
    if not examples:
        raise ValueError(f"{source} has no questions")
    total = len(examples)
    examples = examples[:limit] if limit else examples
    path = Path(source)
    info: dict[str, Any] = {"file": str(source), "split": split, "sha256": None}
    if path.is_file():
        path = path.resolve()
        repo = ASSETS.parent
        info = {
            "file": str(path.relative_to(repo)) if path.is_relative_to(repo) else str(path),
            "split": None,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    return examples, {**info, "limit": limit, "n_total": total, **question_counts(examples)}


def question_counts(examples: list[QAExample]) -> dict[str, int]:
    no_answer = sum(e.is_impossible for e in examples)
    return {"n_questions": len(examples), "has_answer": len(examples) - no_answer, "no_answer": no_answer}


def set_threads(n: int) -> None:
    """The same number of CPU threads for PyTorch and for ONNX Runtime sessions made after this call."""
    import torch  # noqa: PLC0415

    torch.set_num_threads(n)
    os.environ["VARIANTS_THREADS"] = str(n)  # read by variants.answering.runtime.cpu_threads when sessions are made


def run_settings(settings: DecodeSettings, options: Options) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    threads = {
        "torch": torch.get_num_threads(),
        "onnxruntime": cpu_threads() or "default (all cores)",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT"),  # variants.core.config.openmp_spin
    }
    return {
        "max_length": settings.max_length,
        "stride": settings.stride,
        "max_answer_length": settings.max_answer_length,
        "null_thresholds": "every view is measured: 0 (pipeline), best on these questions, each model's calibrated",
        "window_batch_size": settings.batch_size,
        "windows": settings.window_rule(),
        "threads": threads,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(options).items()},
    }


def variant_runners(engine: Any) -> tuple[list[Runner], list[VariantEntry]]:
    """A runner per loaded variant, and an entry per variant (one that failed to load carries its error)."""
    runners, entries = [], []
    weights = engine.weights()
    for loaded in engine.loaded:
        spec = loaded.spec
        entry = VariantEntry(
            spec.name,
            spec.label,
            headline=spec.headline,
            backend=spec.backend,
            load_seconds=round(loaded.load_seconds, 3),
            calibrated_threshold=loaded.calibrated_threshold,
            latency_only=spec.latency_only,
            error=None if loaded.ok else loaded.error or "not loaded",
            weights=weights.get(spec.name),
        )
        entries.append(entry)
        if loaded.ok:
            model, tokenizer = loaded.model, loaded.tokenizer
            info = model.describe()
            entry.device, entry.provider, entry.dtype = info["device"], info["provider"], info["dtype"]
            entry.size_mb, entry.parameters, entry.notes = info["size_mb"], info["parameters"], list(info["notes"])
            entry.build, entry.pass_tokens = info["build"], info["pass_tokens"]
            settings = engine.settings_for(loaded)
            answer = engine_answerer(model, tokenizer, settings)
            runners.append(Runner(spec.name, answer, entry, model, tokenizer, settings))
    return runners, entries


def speedup(reference: VariantEntry | None, entry: VariantEntry) -> tuple[float | None, list[float] | None]:
    """``reference``'s p50 over ``entry``'s, and None; where both ran the same passes (more than one), the
    median of the per-pass ratios and their [lowest, highest]."""
    if reference is None or not reference.latency_ms or not entry.latency_ms or not entry.latency_ms.p50:
        return None, None
    ref, own = reference.latency_pass_p50_ms, entry.latency_pass_p50_ms
    if len(ref) == len(own) > 1 and all(own):
        ratios = [one_ratio(r, o) for r, o in zip(ref, own, strict=True)]
        return round(float(np.median(ratios)), 3), [round(min(ratios), 3), round(max(ratios), 3)]
    ratio = one_ratio(reference.latency_ms.p50, entry.latency_ms.p50)
    return (round(ratio, 3) if ratio else None), None


def compare(
    entries: list[VariantEntry],
    peer: VariantEntry | None,
    preds: dict[str, dict[str, str]],
    others: list[VariantEntry] | None = None,
) -> None:
    """Fill in the speedups over the baseline, the peer and each other peer (see :func:`speedup`), and
    agreement with the baseline. Two chains measured side by side (a visitor's, its names prefixed, e.g.
    ``yours-baseline-onnx``) each have their own baseline: an entry's is the ``<prefix>baseline`` its name starts
    with, the longest such prefix, else ``baseline``."""
    bases = {e.variant.removesuffix("baseline"): e for e in entries if e.variant.endswith("baseline")}

    def base_of(entry: VariantEntry) -> VariantEntry | None:
        prefix = max((p for p in bases if p and entry.variant.startswith(p)), key=len, default="")
        return bases.get(prefix)

    for entry in [*entries, *([peer] if peer else []), *(others or [])]:
        base = base_of(entry)
        entry.speedup_vs_baseline, entry.speedup_vs_baseline_range = speedup(base, entry)
        entry.speedup_vs_peer, entry.speedup_vs_peer_range = speedup(peer, entry)
        for other in others or []:
            ratio, bounds = speedup(other, entry)
            if ratio is not None and other is not entry:
                entry.speedup_vs_peers[other.variant] = [ratio, *(bounds or [])]
        if base is not None and entry.variant in preds and base.variant in preds:
            entry.agreement_with_baseline = agreement(preds[entry.variant], preds[base.variant])


def fill_latency(entry: VariantEntry, timing: Timing) -> None:
    entry.latency_ms = LatencyStats.from_dict(summarize(timing.times_ms))
    entry.latency_pass_p50_ms = list(timing.pass_p50_ms) if len(timing.pass_p50_ms) > 1 else []
    entry.throughput_qps = round(1000 / entry.latency_ms.mean, 2) if timing.times_ms else None
    entry.stretch = timing.stretched


def benchmark(
    engine: Any,
    examples: list[QAExample],
    options: Options | None = None,
    data: dict[str, Any] | None = None,
    peer: Runner | VariantEntry | None = None,
    progress: Progress | None = None,
    others: list[Runner | VariantEntry] | None = None,
) -> Record:
    """Measure every variant of ``engine`` (and ``peer``, the reference, and the ``others`` peers) on
    ``examples``, all in the same passes; returns the record.

    A variant that fails (to load, or while measured) keeps its error; the others are measured.
    """
    options = options or Options()
    progress = progress or (lambda _f, _m: None)
    created = datetime.now(UTC)
    probe = MemoryProbe(engine.device)
    runners, entries = variant_runners(engine)
    peer_entry = peer.entry if isinstance(peer, Runner) else peer
    if isinstance(peer, Runner):
        runners.append(peer)
    other_entries = [o.entry if isinstance(o, Runner) else o for o in others or []]
    runners += [o for o in others or [] if isinstance(o, Runner)]
    after_load = probe.read()

    answerers = {r.name: r.answer for r in runners}
    timings = latency_passes(
        answerers,
        examples,
        options.latency_samples,
        options.warmup,
        options.latency_passes,
        scaled_progress(progress, 0, 0.3),
        options.latency_round,
    )
    preds: dict[str, dict[str, str]] = {}
    for i, runner in enumerate(runners):
        entry, timing = runner.entry, timings[runner.name]
        step = scaled_progress(progress, 0.3 + 0.6 * i / len(runners), 0.6 / len(runners))
        if timing.error:
            entry.error = timing.error
            continue
        fill_latency(entry, timing)
        probe.reset()
        try:
            if entry.latency_only:  # random weights: an F1 would measure nothing but chance
                step(0.0, f"{runner.name}: {LATENCY_ONLY}, no accuracy")
            else:
                step(0.0, f"{runner.name}: accuracy on {len(examples)} questions")
                answers, margins = measure_accuracy(runner, examples, accuracy_batch(runner, options))
                preds[runner.name] = fill_accuracy(entry, examples, answers, margins)
            if not options.skip_sweeps and runner.model is not None:
                step(0.5, f"{runner.name}: batch-size sweep")
                entry.batch_sweep = batch_sweep(
                    runner.answer, examples, options.batch_sizes, options.sweep_questions, options.sort_by_length
                )
                rates = [row["throughput_qps"] for row in entry.batch_sweep if "throughput_qps" in row]
                entry.peak_throughput_qps = max(rates, default=None)
        except Exception as exc:
            free_gpu()
            entry.error = describe(exc)
        entry.memory = runner.memory() if runner.memory else probe.read()
    if not options.skip_sweeps:
        progress(0.9, "sequence-length sweep, all variants taking turns")
        models = {r.name: (r.model, r.tokenizer) for r in runners if r.model is not None and not r.entry.error}
        for name, rows in seq_len_sweep(models, options.seq_lens, options.runs).items():
            next(r.entry for r in runners if r.name == name).seq_len_sweep = rows
    peak = None
    if not options.skip_sweeps and options.profile_questions:
        progress(0.95, "profile: tokenize / forward / decode, operations per question, machine peak")
        profile_runners(engine, runners, examples[: options.profile_questions], options.latency_round)
        peak = profiling.machine_peak(torch_threads())
    compare(entries, peer_entry, preds, other_entries)
    progress(1.0, "done")
    record = make_record(engine, entries, peer_entry, data or question_counts(examples), options, created, after_load)
    record.peers = other_entries
    if peak:
        record.hardware["measured_peak"] = peak
    return record


def profile_runners(engine: Any, runners: list[Runner], examples: list[QAExample], round_size: int = 25) -> None:
    """Each engine variant's profile (:func:`variants.benchmarking.profile.profile_in_turns`, the variants taking
    turns), in its entry; a failure stays in that entry."""
    timers: dict[str, profiling.StageTimer] = {}
    for runner in runners:
        if runner.model is None or runner.entry.error:
            continue
        try:
            flops = profiling.flop_counter(engine.reference_model(runner.name))
        except Exception as exc:
            runner.entry.profile = {"error": describe(exc)}
            continue
        settings = replace(runner.settings or engine.settings, handle_impossible=False)
        timers[runner.name] = profiling.StageTimer(runner.model, runner.tokenizer, settings, flops)
    for name, summary in profiling.profile_in_turns(timers, examples, round_size=round_size).items():
        next(r for r in runners if r.name == name).entry.profile = summary


def torch_threads() -> int:
    """The CPU threads the variants run on (PyTorch's count; the bench gives ONNX Runtime the same)."""
    import torch  # noqa: PLC0415

    return torch.get_num_threads()


def make_record(
    engine: Any,
    entries: list[VariantEntry],
    peer: VariantEntry | None,
    data: dict[str, Any],
    options: Options,
    created: datetime,
    memory_after_load: dict[str, Any] | None = None,
    kind: str = "full",
) -> Record:
    """The record: where, when and how it was measured, then one entry per variant and the peer's."""
    return Record(
        preset=engine.preset,
        chain=dict(getattr(engine, "chain", None) or {}),
        created=created.isoformat(timespec="seconds").replace("+00:00", "Z"),
        device=engine.device,
        variants=entries,
        peer=peer,
        kind=kind,
        hardware=current_hardware(),
        versions=record_versions(),
        data=data,
        settings=run_settings(engine.settings, options),
        method=METHOD,
        notice=engine.notice or None,
        memory_after_load=memory_after_load,
    )


def scaled_progress(progress: Progress, start: float, span: float) -> Progress:
    return lambda fraction, message: progress(start + span * fraction, message)


def engine_answerer(model: Any, tokenizer: Any, settings: DecodeSettings) -> Answerer:
    """The engine's decoding, undecided: each pair's best span and ln(null / span), from which the accuracy
    views decide at any threshold (the decision itself is one comparison: see ``qa.says_answer``)."""
    spans = replace(settings, handle_impossible=False)

    def answer(pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        # At batch 1 this is the very call Engine.answer_one times; larger batches may put more windows in a pass.
        use = spans if batch <= spans.batch_size else replace(spans, batch_size=batch)
        return [(a.text, a.null_margin) for a in answer_pairs(model, tokenizer, pairs, use)]

    return answer
