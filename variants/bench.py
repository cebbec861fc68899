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
    seq_len_sweep,
    summarize,
)
from variants.qa import DecodeSettings, answer_pairs
from variants.results import RESULTS_DIR, SCHEMA_VERSION, current_hardware, hardware_slug, records_to_frame
from variants.spec import ASSETS
from variants.squad import QAExample, load_squad, normalize_answer, squad_v2_scores

DEFAULT_DATA = ASSETS / "data" / "squad_v2_dev_sample.json"
SEQ_LENS = (32, 64, 128, 256, 384)
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
PEER = "peer"
METHOD = {
    "accuracy": "official SQuAD v2 metric (percent); answers from the engine's decoding, questions batched",
    "latency_ms": "batch 1, one question end to end (tokenize, every window, decode: what Engine.answer_one "
    "times) after warm-up; time.perf_counter. Variants take turns in rounds of latency_round questions, each "
    "turn after one untimed question (the first call after another backend ran is slower)",
    "throughput_qps": "1000 / mean batch-1 latency; peak_throughput_qps: the best of the batch sweep",
    "speedup": "p50 latency of the baseline (or the peer) / p50 latency of the variant",
    "agreement_with_baseline": "share of questions whose normalized answer equals the baseline's",
    "seq_len_sweep": "one synthetic window of exactly seq_len tokens through model.run; variants take turns, "
    "5 runs each (after one untimed run), so load from elsewhere falls on all of them alike",
    "batch_sweep": "batch_size real questions per call, their windows in one forward pass where they fit",
    "memory": "MB = 1e6 bytes. Process RSS, and its peak during this variant's accuracy pass and sweeps "
    "(the whole process, with every variant loaded); on CUDA torch's peak allocation (PyTorch "
    "tensors only) and NVML's used device memory (all processes)",
}
ENTRY_KEYS = (
    "variant",
    "label",
    "headline",
    "backend",
    "device",
    "provider",
    "dtype",
    "size_mb",
    "parameters",
    "null_threshold",
    "load_seconds",
    "accuracy",
    "latency_ms",
    "throughput_qps",
    "peak_throughput_qps",
    "speedup_vs_baseline",
    "speedup_vs_peer",
    "agreement_with_baseline",
    "seq_len_sweep",
    "batch_sweep",
    "memory",
    "notes",
    "error",
)


@dataclass
class Options:
    """How much to measure."""

    latency_samples: int = 200
    warmup: int = 5
    latency_round: int = 25
    runs: int = 30
    seq_lens: tuple[int, ...] = SEQ_LENS
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    sweep_questions: int = 64
    sort_by_length: bool = False
    skip_sweeps: bool = False
    accuracy_batch: int = 16


@dataclass
class Runner:
    """Something that answers questions (a loaded variant, or the peer) and the record entry it fills."""

    name: str
    answer: Answerer
    entry: dict[str, Any]
    model: Any = None  # a variants.runtime.QAModel, for the sequence-length sweep
    tokenizer: Any = None


# --- command line -----------------------------------------------------------------------------------


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options (the model options come from ``variants.__main__.add_model_arguments``)."""
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="SQuAD v2 JSON file or Hub dataset name")
    parser.add_argument("--split", default="validation", help="split of a Hub dataset")
    parser.add_argument("--limit", type=int, default=None, help="use the first N questions only")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="folder for the JSON record and the CSV")
    parser.add_argument("--latency-samples", type=int, default=200, help="timed questions per variant at batch 1")
    parser.add_argument("--warmup", type=int, default=5, help="untimed questions per variant before timing")
    parser.add_argument("--latency-round", type=int, default=25, help="questions per variant per turn at batch 1")
    parser.add_argument("--runs", type=int, default=30, help="timed runs per point of the sequence-length sweep")
    parser.add_argument("--skip-sweeps", action="store_true", help="no sequence-length or batch-size sweeps")
    parser.add_argument("--seq-lens", type=_ints, default=SEQ_LENS, help="comma-separated (default 32,...,384)")
    parser.add_argument("--batch-sizes", type=_ints, default=BATCH_SIZES, help="comma-separated (default 1,...,64)")
    parser.add_argument("--sweep-questions", type=int, default=64, help="questions per point of the batch sweep")
    parser.add_argument("--sort-by-length", action="store_true", help="batch sweep: sort questions by length first")
    parser.add_argument("--accuracy-batch", type=int, default=16, help="questions per call for accuracy")
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
        runs=args.runs,
        seq_lens=tuple(args.seq_lens),
        batch_sizes=tuple(args.batch_sizes),
        sweep_questions=args.sweep_questions,
        sort_by_length=args.sort_by_length,
        skip_sweeps=args.skip_sweeps,
        accuracy_batch=args.accuracy_batch,
    )
    peer = None if args.no_peer else peer_runner(engine, args)
    record = benchmark(engine, examples, options, data, peer=peer, progress=progress)
    json_path, csv_path = save_record(record, args.out)
    print(summary_table(record))
    print(f"\nwrote {json_path}\n      {csv_path}")
    return 1 if any(v.get("error") for v in record["variants"]) else 0


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
        "null_threshold": "per model (calibrated, in its config.json; 0 without)"
        if settings.null_threshold is None
        else settings.null_threshold,
        "window_batch_size": settings.batch_size,
        "threads": threads,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(options).items()},
    }


# --- runners ----------------------------------------------------------------------------------------


def _entry(variant: str, label: str, **info: Any) -> dict[str, Any]:
    """A record entry with every key present (None or empty until measured)."""
    entry: dict[str, Any] = dict.fromkeys(ENTRY_KEYS)
    entry.update(variant=variant, label=label, headline=False, seq_len_sweep=[], batch_sweep=[], memory={}, notes=[])
    entry.update(info)
    return entry


def variant_runners(engine: Any) -> tuple[list[Runner], list[dict[str, Any]]]:
    """A runner per loaded variant, and an entry per variant (one that failed to load carries its error)."""
    runners, entries = [], []
    for loaded in engine.loaded:
        spec = loaded.spec
        entry = _entry(
            spec.name,
            spec.label,
            headline=spec.headline,
            backend=spec.backend,
            load_seconds=round(loaded.load_seconds, 3),
            error=None if loaded.ok else loaded.error or "not loaded",
        )
        entries.append(entry)
        if loaded.ok:
            model, tokenizer = loaded.model, loaded.tokenizer
            entry.update({k: v for k, v in model.describe().items() if k != "notes"}, notes=list(model.notes))
            settings = loaded.settings or engine.settings
            entry["null_threshold"] = settings.null_threshold
            answer = _engine_answerer(model, tokenizer, settings)
            runners.append(Runner(spec.name, answer, entry, model, tokenizer))
    return runners, entries


def _engine_answerer(model: Any, tokenizer: Any, settings: DecodeSettings) -> Answerer:
    def answer(pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        # At batch 1 this is the very call Engine.answer_one times; larger batches may put more windows in a pass.
        use = settings if batch <= settings.batch_size else replace(settings, batch_size=batch)
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
    score only when the null answer wins, so the peer has no best-threshold scores. If it cannot
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
        return _entry(PEER, label, backend="transformers-pipeline", error=describe(exc))
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
        return [(o["answer"], None if o["answer"] else o["score"]) for o in out]

    first = next(pipe.model.parameters())
    entry = _entry(
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


def score(examples: list[QAExample], preds: dict[str, str], na_probs: dict[str, float]) -> dict[str, Any]:
    """SQuAD v2 scores of the answered questions; best-threshold ones only if each has a null probability."""
    answered = [e for e in examples if e.id in preds]
    result = squad_v2_scores(answered, preds, na_probs if len(na_probs) == len(preds) else None).as_dict()
    return {k: round(v, 6 if k.endswith("thresh") else 3) if isinstance(v, float) else v for k, v in result.items()}


def measure_accuracy(runner: Runner, examples: list[QAExample], batch: int) -> tuple[dict[str, Any], dict[str, str]]:
    """SQuAD v2 scores over ``examples`` answered ``batch`` at a time, and the answers by question id."""
    preds: dict[str, str] = {}
    na_probs: dict[str, float] = {}
    for lo in range(0, len(examples), batch):
        chunk = examples[lo : lo + batch]
        answers = runner.answer([(e.question, e.context) for e in chunk], batch)
        for e, (text, na_prob) in zip(chunk, answers, strict=True):
            preds[e.id] = text
            if na_prob is not None:
                na_probs[e.id] = na_prob
    return score(examples, preds, na_probs), preds


def agreement(preds: dict[str, str], reference: dict[str, str]) -> float | None:
    """Share of the questions answered by both whose normalized answers are equal."""
    common = [q for q in preds if q in reference]
    if not common:
        return None
    return round(sum(normalize_answer(preds[q]) == normalize_answer(reference[q]) for q in common) / len(common), 4)


def compare(entries: list[dict[str, Any]], peer: dict[str, Any] | None, preds: dict[str, dict[str, str]]) -> None:
    """Fill in the speedups (p50 ratios) over the baseline and the peer, and agreement with the baseline."""

    def p50(entry: dict | None) -> float | None:
        return ((entry or {}).get("latency_ms") or {}).get("p50")

    base_p50 = p50(next((e for e in entries if e["variant"] == "baseline"), None))
    peer_p50 = p50(peer)
    for entry in [*entries, *([peer] if peer else [])]:
        own = p50(entry)
        if own:
            entry["speedup_vs_baseline"] = round(base_p50 / own, 3) if base_p50 else None
            entry["speedup_vs_peer"] = round(peer_p50 / own, 3) if peer_p50 else None
        if entry["variant"] in preds and "baseline" in preds:
            entry["agreement_with_baseline"] = agreement(preds[entry["variant"]], preds["baseline"])


def _fill_latency(entry: dict[str, Any], timing: Timing) -> None:
    entry["latency_ms"] = summarize(timing.times_ms)
    entry["throughput_qps"] = round(1000 / entry["latency_ms"]["mean"], 2) if timing.times_ms else None


# --- the runs ---------------------------------------------------------------------------------------


def benchmark(
    engine: Any,
    examples: list[QAExample],
    options: Options | None = None,
    data: dict[str, Any] | None = None,
    peer: Runner | dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
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
    timings = latency_pass(
        answerers, examples, options.latency_samples, options.warmup, _scaled(progress, 0, 0.3), options.latency_round
    )
    preds: dict[str, dict[str, str]] = {}
    for i, runner in enumerate(runners):
        entry, timing = runner.entry, timings[runner.name]
        step = _scaled(progress, 0.3 + 0.6 * i / len(runners), 0.6 / len(runners))
        if timing.error:
            entry["error"] = timing.error
            continue
        _fill_latency(entry, timing)
        probe.reset()
        try:
            step(0.0, f"{runner.name}: accuracy on {len(examples)} questions")
            entry["accuracy"], preds[runner.name] = measure_accuracy(runner, examples, options.accuracy_batch)
            if not options.skip_sweeps and runner.model is not None:
                step(0.5, f"{runner.name}: batch-size sweep")
                entry["batch_sweep"] = batch_sweep(
                    runner.answer, examples, options.batch_sizes, options.sweep_questions, options.sort_by_length
                )
                rates = [row["throughput_qps"] for row in entry["batch_sweep"] if "throughput_qps" in row]
                entry["peak_throughput_qps"] = max(rates, default=None)
        except Exception as exc:
            free_gpu()
            entry["error"] = describe(exc)
        entry["memory"] = probe.read()
    if not options.skip_sweeps:
        progress(0.9, "sequence-length sweep, all variants taking turns")
        models = {r.name: (r.model, r.tokenizer) for r in runners if r.model is not None and not r.entry.get("error")}
        for name, rows in seq_len_sweep(models, options.seq_lens, options.runs).items():
            next(r.entry for r in runners if r.name == name)["seq_len_sweep"] = rows
    compare(entries, peer_entry, preds)
    progress(1.0, "done")
    return make_record(engine, entries, peer_entry, data or _counts(examples), options, created, after_load)


def quick_benchmark(
    engine: Any,
    examples: list[QAExample],
    n: int,
    progress: Progress | None = None,
    out: str | Path | None = None,
) -> dict[str, Any]:
    """A small fresh run for the app: accuracy and batch-1 latency on ``n`` questions drawn at random.

    No sweeps and no peer. Each question is answered once per variant at batch 1, after one warm-up
    question; those answers are scored. Returns a record of the usual shape (``kind`` "quick"),
    written to the folder ``out`` only if given. ``progress(fraction, message)`` after each question.
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
            entry["error"] = timing.error
            continue
        _fill_latency(entry, timing)
        entry["accuracy"] = score(examples, timing.preds, timing.na_probs) if timing.preds else None
        preds[runner.name] = timing.preds
    compare(entries, None, preds)
    options = Options(len(examples), warmup=1, runs=0, seq_lens=(), batch_sizes=(), skip_sweeps=True, accuracy_batch=1)
    record = make_record(engine, entries, None, _counts(examples), options, created, kind="quick")
    if out is not None:
        save_record(record, out)
    if progress:
        progress(1.0, "done")
    return record


def make_record(
    engine: Any,
    entries: list[dict[str, Any]],
    peer: dict[str, Any] | None,
    data: dict[str, Any],
    options: Options,
    created: datetime,
    memory_after_load: dict[str, Any] | None = None,
    kind: str = "full",
) -> dict[str, Any]:
    """The record: where, when and how it was measured, then one entry per variant and the peer's."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "preset": engine.preset,
        "created": created.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "device": engine.device,
        "hardware": current_hardware(),
        "versions": library_versions(),
        "data": data,
        "settings": _settings(engine.settings, options),
        "method": METHOD,
        "notice": engine.notice or None,
        "memory_after_load": memory_after_load,
        "variants": entries,
        "peer": peer,
    }


# --- output -------------------------------------------------------------------------------------------


def record_name(record: dict[str, Any]) -> str:
    """``<preset>-<device>-<hardware>-<UTC timestamp>``, e.g. ``embedded-cpu-intel-xeon-20260101T120000Z``."""
    device = "cuda" if record["device"].startswith("cuda") else "cpu"
    stamp = record["created"].replace("-", "").replace(":", "")
    return f"{record['preset']}-{device}-{hardware_slug(record['hardware'], record['device'])}-{stamp}"


def save_record(record: dict[str, Any], folder: str | Path) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.csv`` (one row per variant, and the peer) into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = record_name(record)
    json_path, csv_path = folder / f"{name}.json", folder / f"{name}.csv"
    json_path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    records_to_frame([{**record, "_file": json_path.name}]).to_csv(csv_path, index=False)
    return json_path, csv_path


def summary_table(record: dict[str, Any]) -> str:
    """A plain-text table of the headline numbers, one line per variant and the peer."""

    def fmt(value: Any, spec: str) -> str:
        return f"{'-':>8}" if value is None else format(value, spec)

    columns = ("F1", "EM", "p50 ms", "p90 ms", "p99 ms", "q/s", "MB", "x base", "x peer", "agree")
    lines = [
        f"{record['preset']} on {record['device']} ({hardware_slug(record['hardware'], record['device'])}), "
        f"{record['data'].get('n_questions')} questions",
        f"{'variant':<26}" + "".join(f"{c:>8}" for c in columns),
    ]
    for e in [*record["variants"], *([record["peer"]] if record.get("peer") else [])]:
        acc, lat = e.get("accuracy") or {}, e.get("latency_ms") or {}
        values = (
            (acc.get("f1"), "8.2f"),
            (acc.get("exact"), "8.2f"),
            (lat.get("p50"), "8.2f"),
            (lat.get("p90"), "8.2f"),
            (lat.get("p99"), "8.2f"),
            (e.get("throughput_qps"), "8.1f"),
            (e.get("size_mb"), "8.1f"),
            (e.get("speedup_vs_baseline"), "8.2f"),
            (e.get("speedup_vs_peer"), "8.2f"),
            (e.get("agreement_with_baseline"), "8.3f"),
        )
        line = f"{e['variant']:<26}" + "".join(fmt(v, spec) for v, spec in values)
        lines.append(line + (f"  ERROR: {e['error']}" if e.get("error") else ""))
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
