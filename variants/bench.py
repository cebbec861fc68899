"""The benchmark: SQuAD v2 accuracy, latency percentiles, sweeps and memory of every variant, as records.

``python -m variants bench`` loads a preset, measures each variant and, in the same run, the
transformers ``question-answering`` pipeline on the baseline model (the "peer": what users would
reach for instead), then writes one JSON record and a CSV to ``assets/results`` (read back with
:mod:`variants.results`). What is measured, and how, is in ``METHOD`` (also stored in each record);
the timing and memory primitives are in :mod:`variants.measure`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from variants import profile as profiling
from variants.cache import dist_version
from variants.cache import library_versions as artifact_versions
from variants.measure import (
    Answerer,
    MemoryProbe,
    Progress,
    Timing,
    batch_sweep,
    describe,
    free_gpu,
    latency_pass,
    latency_passes,
    seq_len_sweep,
    summarize,
)
from variants.qa import DecodeSettings, NullThreshold, answer_pairs, parse_null_threshold, says_answer
from variants.record import PEER, AccuracyView, LatencyStats, Record, VariantEntry
from variants.replica import LATENCY_ONLY
from variants.results import RESULTS_DIR, current_hardware, hardware_slug
from variants.spec import ASSETS
from variants.squad import QAExample, answered_share, load_squad, normalize_answer, squad_v2_scores

log = logging.getLogger("variants.bench")

DEFAULT_DATA = ASSETS / "data" / "squad_v2_dev_sample.json"
SEQ_LENS = (32, 64, 128, 256, 384)
LATENCY_PASSES = 5  # whole latency passes per bench run, by default (see measure.latency_passes)
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
METHOD = {
    "accuracy": "official SQuAD v2 metric (percent); answers from the engine's decoding, accuracy_batch questions "
    "per call, except for a model whose answers depend on what shares its batch (dynamic INT8: one activation scale "
    "per pass), which answers one question per call, as the app calls it. "
    "Each question is decoded once, keeping its best span and ln(null score / span score); three views decide "
    "from those: 'pipeline' at null threshold 0 (transformers' pipeline rule, what the app does), 'best' at the "
    "threshold that maximizes F1 on these questions (official best_f1 search; HasAns/NoAns at that threshold), "
    "'calibrated' at the model's own threshold from its config.json (none for a model without one). The peer "
    "has the pipeline view only: the pipeline returns no null score beside a span, and has no threshold to set",
    "latency_ms": "batch 1, one question end to end (tokenize, every window, decode: what Engine.answer_one "
    "times) after warm-up; time.perf_counter. Variants take turns in rounds of latency_round questions, each "
    "turn after one untimed question (the first call after another backend ran is slower). The whole pass runs "
    "latency_passes times, one after another, each with its warm-up: the statistics pool every pass's times, "
    "and latency_pass_p50_ms keeps each pass's median",
    "throughput_qps": "1000 / mean batch-1 latency (every pass); peak_throughput_qps: the best of the batch sweep",
    "speedup": "p50 latency of the baseline (or the peer) / p50 latency of the variant. With latency_passes > 1 "
    "the whole latency pass runs that many times, one after another: the speedup is then the median of the "
    "per-pass ratios, and *_range their lowest and highest (latency_ms pools every pass's times)",
    "agreement_with_baseline": "share of questions whose normalized answer (at threshold 0) equals the baseline's",
    "profile": "per variant, on the first profile_questions questions at batch 1: median ms of tokenizing, the forward "
    "pass (every window) and decoding, timed apart; variants take turns as in latency_ms; GFLOP per question "
    "counted by torch's FlopCounterMode on the torch model whose arithmetic the variant runs, at each "
    "question's window shape; achieved GFLOP/s = that count / forward time (median over questions). "
    "hardware.measured_peak: the best FP32 and INT8 matrix products this machine ran on the same threads "
    "(variants.profile)",
    "seq_len_sweep": "one synthetic window of exactly seq_len tokens through model.run; variants take turns, "
    "5 runs each (after one untimed run), so load from elsewhere falls on all of them alike",
    "batch_sweep": "batch_size real questions per call, their windows in one forward pass where they fit",
    "memory": "MB = 1e6 bytes. Process RSS, and its peak during this variant's accuracy pass and sweeps "
    "(the whole process, with every variant loaded); on CUDA torch's peak allocation (PyTorch "
    "tensors only) and NVML's used device memory (all processes)",
}


@dataclass
class Options:
    """How much to measure."""

    latency_samples: int = 200
    warmup: int = 5
    latency_round: int = 25
    latency_passes: int = 1  # the command line's default is LATENCY_PASSES; the app's quick runs keep one
    runs: int = 30
    seq_lens: tuple[int, ...] = SEQ_LENS
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    sweep_questions: int = 64
    sort_by_length: bool = False
    skip_sweeps: bool = False
    accuracy_batch: int = 16
    profile_questions: int = 100  # 0: no profile


@dataclass
class Runner:
    """Something that answers questions (a loaded variant, or the peer) and the record entry it fills."""

    name: str
    answer: Answerer  # (text, ln(null/span) or None) per pair; engine variants give the undecided best span
    entry: VariantEntry
    model: Any = None  # a variants.runtime.QAModel, for the sequence-length sweep
    tokenizer: Any = None
    settings: DecodeSettings | None = None


# --- command line -----------------------------------------------------------------------------------


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options (the model options come from ``variants.__main__.add_model_arguments``)."""
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="SQuAD v2 JSON file or Hub dataset name")
    parser.add_argument("--split", default="validation", help="split of a Hub dataset")
    parser.add_argument("--limit", type=int, default=None, help="use the first N questions only")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="folder for the JSON record and the CSV")
    parser.add_argument("--latency-samples", type=int, default=200, help="timed questions per variant at batch 1")
    parser.add_argument("--warmup", type=int, default=5, help="untimed questions per variant before timing")
    parser.add_argument("--latency-round", type=int, default=25, help="questions per variant per turn at batch 1")
    parser.add_argument(
        "--latency-passes",
        type=_positive,
        default=LATENCY_PASSES,
        help=f"times the whole latency pass runs; speedups: median of the passes' ratios (default {LATENCY_PASSES})",
    )
    parser.add_argument("--runs", type=int, default=30, help="timed runs per point of the sequence-length sweep")
    parser.add_argument("--skip-sweeps", action="store_true", help="no sequence-length or batch-size sweeps")
    parser.add_argument("--seq-lens", type=_ints, default=SEQ_LENS, help="comma-separated (default 32,...,384)")
    parser.add_argument("--batch-sizes", type=_ints, default=BATCH_SIZES, help="comma-separated (default 1,...,64)")
    parser.add_argument("--sweep-questions", type=int, default=64, help="questions per point of the batch sweep")
    parser.add_argument("--sort-by-length", action="store_true", help="batch sweep: sort questions by length first")
    parser.add_argument("--accuracy-batch", type=int, default=16, help="questions per call for accuracy")
    parser.add_argument("--profile-questions", type=int, default=100, help="questions profiled per variant (0: none)")
    parser.add_argument("--no-peer", action="store_true", help="skip the transformers pipeline peer")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for PyTorch and ONNX Runtime alike")


def run(args: argparse.Namespace, engine_from_args: Callable[..., Any]) -> int:
    """``python -m variants bench``: measure, write the record and CSV, print a summary.

    Returns 1 when a variant failed (the record is written anyway), else 0.
    """
    try:
        examples, data = load_data(args.data, args.split, args.limit)
    except RuntimeError as exc:  # e.g. a Hub dataset without the datasets package
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.threads:
        _set_threads(args.threads)
    progress = _printer()
    engine = engine_from_args(args, progress=progress)
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    options = Options(
        latency_samples=args.latency_samples,
        warmup=args.warmup,
        latency_round=args.latency_round,
        latency_passes=args.latency_passes,
        runs=args.runs,
        seq_lens=tuple(args.seq_lens),
        batch_sizes=tuple(args.batch_sizes),
        sweep_questions=args.sweep_questions,
        sort_by_length=args.sort_by_length,
        skip_sweeps=args.skip_sweeps,
        accuracy_batch=args.accuracy_batch,
        profile_questions=args.profile_questions,
    )
    peer = None if args.no_peer else peer_runner(engine, args)
    record = benchmark(engine, examples, options, data, peer=peer, progress=progress)
    json_path, csv_path = record.save(args.out)
    print(summary_table(record, view=_view_for(getattr(args, "null_threshold", 0.0))))
    print(f"\nwrote {json_path}\n      {csv_path}")
    return 1 if any(v.error for v in record.variants) else 0


def _view_for(mode: NullThreshold) -> str:
    """The accuracy view the summary shows for a threshold mode (every view is in the record)."""
    return "calibrated" if parse_null_threshold(mode) == "calibrated" else "pipeline"


# --- data and environment ---------------------------------------------------------------------------


def load_data(source: str | Path, split: str = "validation", limit: int | None = None) -> tuple[list, dict]:
    """The questions (the first ``limit`` if given) and a description of them for the record."""
    if str(source).endswith(".json") and not Path(source).is_file():
        raise FileNotFoundError(f"no such data file: {source}")
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
    return examples, {**info, "limit": limit, "n_total": total, **_counts(examples)}


def _counts(examples: list[QAExample]) -> dict[str, int]:
    no_answer = sum(e.is_impossible for e in examples)
    return {"n_questions": len(examples), "has_answer": len(examples) - no_answer, "no_answer": no_answer}


def library_versions() -> dict[str, str | None]:
    """Versions of the libraries that shape the numbers (None where not installed)."""
    return {
        "python": platform.python_version(),
        **artifact_versions(),
        "tokenizers": dist_version("tokenizers"),
        "numpy": dist_version("numpy"),
    }


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    """The model options every probe script shares (``scripts/*_probe.py`` and the like)."""
    parser.add_argument("--preset", default="embedded")
    parser.add_argument("--baseline", help="the preset's baseline model instead (a Hub id or folder)")
    parser.add_argument("--pruned", help="the preset's pruned model instead (a Hub id or folder)")


def probe_engine(preset: str, names: list[str], baseline: str | None = None, pruned: str | None = None) -> Any:
    """The CPU engine a probe script measures: only the variants ``names`` of ``preset`` (its baseline or pruned
    model replaced where given), no fallback. Exits naming each variant that did not load."""
    from variants.engine import load_engine  # noqa: PLC0415

    overrides = {k: v for k, v in (("baseline", baseline), ("pruned", pruned)) if v}
    engine = load_engine(preset, "cpu", overrides, names=names, fallback=False)
    failed = [f"{name}: {engine.variants[name].error}" for name in names if not engine.variants[name].ok]
    if failed:
        engine.close()
        raise SystemExit("; ".join(failed))
    return engine


def save_probe_record(record: dict[str, Any], started: float, out: str | Path | None) -> dict[str, Any]:
    """A probe's JSON record (``scripts/*_probe.py`` and the like: not a benchmark record) with the seconds since
    ``started``, this machine and the library versions added; written to ``out`` when given."""
    record |= {"seconds": round(time.time() - started, 1), "hardware": current_hardware()}
    record["versions"] = library_versions()
    if out:
        Path(out).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _set_threads(n: int) -> None:
    """The same number of CPU threads for PyTorch and for ONNX Runtime sessions made after this call."""
    import torch  # noqa: PLC0415

    torch.set_num_threads(n)
    os.environ["VARIANTS_THREADS"] = str(n)  # read by variants.runtime.cpu_threads when sessions are made


def _settings(settings: DecodeSettings, options: Options) -> dict[str, Any]:
    import torch  # noqa: PLC0415

    from variants.runtime import cpu_threads  # noqa: PLC0415

    threads = {
        "torch": torch.get_num_threads(),
        "onnxruntime": cpu_threads() or "default (all cores)",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
    }
    return {
        "max_length": settings.max_length,
        "stride": settings.stride,
        "max_answer_length": settings.max_answer_length,
        "null_thresholds": "every view is measured: 0 (pipeline), best on these questions, each model's calibrated",
        "window_batch_size": settings.batch_size,
        "threads": threads,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(options).items()},
    }


# --- runners ----------------------------------------------------------------------------------------


def variant_runners(engine: Any) -> tuple[list[Runner], list[VariantEntry]]:
    """A runner per loaded variant, and an entry per variant (one that failed to load carries its error)."""
    runners, entries = [], []
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
        )
        entries.append(entry)
        if loaded.ok:
            model, tokenizer = loaded.model, loaded.tokenizer
            info = model.describe()
            entry.device, entry.provider, entry.dtype = info["device"], info["provider"], info["dtype"]
            entry.size_mb, entry.parameters, entry.notes = info["size_mb"], info["parameters"], list(info["notes"])
            entry.build = info["build"]
            settings = engine.settings_for(loaded)
            answer = _engine_answerer(model, tokenizer, settings)
            runners.append(Runner(spec.name, answer, entry, model, tokenizer, settings))
    return runners, entries


def _engine_answerer(model: Any, tokenizer: Any, settings: DecodeSettings) -> Answerer:
    """The engine's decoding, undecided: each pair's best span and ln(null / span), from which the accuracy
    views decide at any threshold (the decision itself is one comparison: see ``qa.says_answer``)."""
    spans = replace(settings, handle_impossible=False)

    def answer(pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        # At batch 1 this is the very call Engine.answer_one times; larger batches may put more windows in a pass.
        use = spans if batch <= spans.batch_size else replace(spans, batch_size=batch)
        return [(a.text, a.null_margin) for a in answer_pairs(model, tokenizer, pairs, use)]

    return answer


def baseline_source(engine: Any, args: argparse.Namespace | None = None) -> Path:
    """The local folder of the baseline model (for the pipeline peer)."""
    from variants import spec as specs  # noqa: PLC0415
    from variants.sources import resolve  # noqa: PLC0415

    for spec in engine.specs:
        if spec.name == "baseline":
            return engine.source(spec).path
    source = getattr(args, "baseline", None) or specs.FAMILIES[engine.preset].baseline
    return resolve(source).path


def peer_runner(engine: Any, args: argparse.Namespace | None = None) -> Runner | dict[str, Any]:
    """transformers' ``pipeline("question-answering", handle_impossible_answer=True)`` on the baseline model.

    Same device, FP32, and the engine's window and answer-length limits. The pipeline gives the null
    score only when the null answer wins, so the peer has the pipeline view only. If it cannot
    load, the returned entry carries the error.
    """
    label = "transformers pipeline (PyTorch FP32)"
    try:
        import torch  # noqa: PLC0415
        from transformers import pipeline  # noqa: PLC0415

        path = str(baseline_source(engine, args))
        started = time.perf_counter()
        pipe = pipeline("question-answering", model=path, tokenizer=path, device=engine.device, dtype=torch.float32)
        load_seconds = time.perf_counter() - started
    except Exception as exc:
        return VariantEntry(PEER, label, backend="transformers-pipeline", error=describe(exc))
    s = engine.settings
    kwargs = {
        "handle_impossible_answer": True,
        "max_answer_len": s.max_answer_length,
        "max_seq_len": s.max_length,
        "doc_stride": min(s.stride, s.max_length // 2),
    }

    def answer(pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        if len(pairs) == 1:  # the call a user makes for one question
            out = [pipe(question=pairs[0][0], context=pairs[0][1], **kwargs)]
        else:
            out = pipe(question=[q for q, _ in pairs], context=[c for _, c in pairs], batch_size=batch, **kwargs)
        return [(o["answer"], None) for o in out]  # decided by the pipeline itself, at its threshold 0

    first = next(pipe.model.parameters())
    entry = VariantEntry(
        PEER,
        label,
        backend="transformers-pipeline",
        device=str(first.device),
        provider="PyTorch",
        dtype={torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}.get(first.dtype, str(first.dtype)),
        size_mb=round(sum(p.numel() * p.element_size() for p in pipe.model.parameters()) / 1e6, 1),
        parameters=sum(p.numel() for p in pipe.model.parameters()),
        load_seconds=round(load_seconds, 3),
        source=path,
    )
    return Runner(PEER, answer, entry)


# --- accuracy and comparisons -----------------------------------------------------------------------


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
    return options.accuracy_batch if runner.model is None or runner.model.batch_invariant else 1


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


def speedup(reference: VariantEntry | None, entry: VariantEntry) -> tuple[float | None, list[float] | None]:
    """``reference``'s p50 over ``entry``'s, and None; where both ran the same passes (more than one), the
    median of the per-pass ratios and their [lowest, highest]."""
    if reference is None or not reference.latency_ms or not entry.latency_ms or not entry.latency_ms.p50:
        return None, None
    ref, own = reference.latency_pass_p50_ms, entry.latency_pass_p50_ms
    if len(ref) == len(own) > 1 and all(own):
        ratios = [r / o for r, o in zip(ref, own, strict=True)]
        return round(float(np.median(ratios)), 3), [round(min(ratios), 3), round(max(ratios), 3)]
    return (round(reference.latency_ms.p50 / entry.latency_ms.p50, 3) if reference.latency_ms.p50 else None), None


def compare(entries: list[VariantEntry], peer: VariantEntry | None, preds: dict[str, dict[str, str]]) -> None:
    """Fill in the speedups over the baseline and the peer (see :func:`speedup`), and agreement with the baseline."""
    base = next((e for e in entries if e.variant == "baseline"), None)
    for entry in [*entries, *([peer] if peer else [])]:
        entry.speedup_vs_baseline, entry.speedup_vs_baseline_range = speedup(base, entry)
        entry.speedup_vs_peer, entry.speedup_vs_peer_range = speedup(peer, entry)
        if entry.variant in preds and "baseline" in preds:
            entry.agreement_with_baseline = agreement(preds[entry.variant], preds["baseline"])


def _fill_latency(entry: VariantEntry, timing: Timing) -> None:
    entry.latency_ms = LatencyStats.from_dict(summarize(timing.times_ms))
    entry.latency_pass_p50_ms = list(timing.pass_p50_ms) if len(timing.pass_p50_ms) > 1 else []
    entry.throughput_qps = round(1000 / entry.latency_ms.mean, 2) if timing.times_ms else None


# --- the runs ---------------------------------------------------------------------------------------


def benchmark(
    engine: Any,
    examples: list[QAExample],
    options: Options | None = None,
    data: dict[str, Any] | None = None,
    peer: Runner | VariantEntry | None = None,
    progress: Progress | None = None,
) -> Record:
    """Measure every variant of ``engine`` (and ``peer``) on ``examples``; returns the record.

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
    after_load = probe.read()

    answerers = {r.name: r.answer for r in runners}
    timings = latency_passes(
        answerers,
        examples,
        options.latency_samples,
        options.warmup,
        options.latency_passes,
        _scaled(progress, 0, 0.3),
        options.latency_round,
    )
    preds: dict[str, dict[str, str]] = {}
    for i, runner in enumerate(runners):
        entry, timing = runner.entry, timings[runner.name]
        step = _scaled(progress, 0.3 + 0.6 * i / len(runners), 0.6 / len(runners))
        if timing.error:
            entry.error = timing.error
            continue
        _fill_latency(entry, timing)
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
        entry.memory = probe.read()
    if not options.skip_sweeps:
        progress(0.9, "sequence-length sweep, all variants taking turns")
        models = {r.name: (r.model, r.tokenizer) for r in runners if r.model is not None and not r.entry.error}
        for name, rows in seq_len_sweep(models, options.seq_lens, options.runs).items():
            next(r.entry for r in runners if r.name == name).seq_len_sweep = rows
    peak = None
    if not options.skip_sweeps and options.profile_questions:
        progress(0.95, "profile: tokenize / forward / decode, operations per question, machine peak")
        profile_runners(engine, runners, examples[: options.profile_questions], options.latency_round)
        peak = profiling.machine_peak(_threads())
    compare(entries, peer_entry, preds)
    progress(1.0, "done")
    record = make_record(engine, entries, peer_entry, data or _counts(examples), options, created, after_load)
    if peak:
        record.hardware["measured_peak"] = peak
    return record


def profile_runners(engine: Any, runners: list[Runner], examples: list[QAExample], round_size: int = 25) -> None:
    """Each engine variant's profile (:func:`variants.profile.profile_in_turns`, the variants taking turns),
    in its entry; a failure stays in that entry."""
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


def _threads() -> int:
    """The CPU threads the variants run on (PyTorch's count; the bench gives ONNX Runtime the same)."""
    import torch  # noqa: PLC0415

    return torch.get_num_threads()


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
        _fill_latency(entry, timing)
        if timing.preds and not entry.latency_only:
            preds[runner.name] = fill_accuracy(entry, examples, timing.preds, timing.na_probs)
    compare(entries, None, preds)
    options = Options(len(examples), warmup=1, runs=0, seq_lens=(), batch_sizes=(), skip_sweeps=True, accuracy_batch=1)
    data = {"file": None, "sample": f"{len(examples)} questions drawn at random (seed 0)", **_counts(examples)}
    record = make_record(engine, entries, None, data, options, created, kind="quick")
    if out is not None:
        record.save(out)
    if progress:
        progress(1.0, "done")
    return record


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
        created=created.isoformat(timespec="seconds").replace("+00:00", "Z"),
        device=engine.device,
        variants=entries,
        peer=peer,
        kind=kind,
        hardware=current_hardware(),
        versions=library_versions(),
        data=data,
        settings=_settings(engine.settings, options),
        method=METHOD,
        notice=engine.notice or None,
        memory_after_load=memory_after_load,
    )


# --- output -------------------------------------------------------------------------------------------


def summary_table(record: Record, view: str = "pipeline") -> str:
    """A plain-text table of the headline numbers, one line per variant and the peer, accuracy of ``view``."""

    def fmt(value: Any, spec: str) -> str:
        return f"{'-':>8}" if value is None else format(value, spec)

    columns = ("F1", "EM", "HasAns", "NoAns", "p50 ms", "p90 ms", "p99 ms", "q/s", "MB", "x base", "x peer", "agree")
    lines = [
        f"{record.preset} on {record.device} ({hardware_slug(record.hardware, record.device)}), "
        f"{record.n_questions} questions; accuracy view '{view}'",
        f"{'variant':<26}" + "".join(f"{c:>8}" for c in columns),
    ]
    for e in record.entries:
        acc, lat = e.view(view), e.latency_ms
        values = (
            (acc and acc.f1, "8.2f"),
            (acc and acc.exact, "8.2f"),
            (acc and acc.has_ans_f1, "8.2f"),
            (acc and acc.no_ans_f1, "8.2f"),
            (lat and lat.p50, "8.2f"),
            (lat and lat.p90, "8.2f"),
            (lat and lat.p99, "8.2f"),
            (e.throughput_qps, "8.1f"),
            (e.size_mb, "8.1f"),
            (e.speedup_vs_baseline, "8.2f"),
            (e.speedup_vs_peer, "8.2f"),
            (e.agreement_with_baseline, "8.3f"),
        )
        line = f"{e.variant:<26}" + "".join(fmt(v, spec) for v, spec in values)
        against, bounds = ("peer", e.speedup_vs_peer_range) if record.peer else ("base", e.speedup_vs_baseline_range)
        if bounds and not (e.is_peer or (against == "base" and e.variant == "baseline")):
            line += f"  x {against} {bounds[0]:.2f}-{bounds[1]:.2f} over {len(e.latency_pass_p50_ms)} passes"
        line += f"  ({LATENCY_ONLY})" if e.latency_only else ""
        lines.append(line + (f"  ERROR: {e.error}" if e.error else ""))
    return "\n".join(lines)


def _scaled(progress: Progress, start: float, span: float) -> Progress:
    return lambda fraction, message: progress(start + span * fraction, message)


def _printer(every: float = 5.0) -> Progress:
    """Progress lines on stderr: each new phase, and otherwise at most every ``every`` seconds."""
    state: dict[str, Any] = {"phase": None, "at": 0.0}

    def show(fraction: float, message: str) -> None:
        phase, now = message.split(":", maxsplit=1)[0], time.monotonic()
        if phase != state["phase"] or now - state["at"] >= every:
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)
            state.update(phase=phase, at=now)

    return show
