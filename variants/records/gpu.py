"""GPU records on disk: find them and turn one into tidy tables. Read only: nothing here runs a model.

A GPU record is one JSON file written by ``python -m variants gpu-report``
(:mod:`variants.benchmarking.gpu.report`) into ``assets/results/gpu``: ``kind`` "gpu-report", ``created``,
``note``, ``hardware``, ``cuda``, ``onnxruntime``, ``settings`` and one entry per preset under ``presets``.
A preset's entry holds (each part may be missing in older records, or be an ``{"error": ...}`` in its place):

- ``torch`` and ``onnxruntime``: one entry per way of running a model (``model``, ``variant``, ``mode``), with
  its batch-1 ``sweep`` (per ``seq_len``: ``p50_ms``, ``p90_ms``, ``p99_ms``, ``min_ms``, ``max_ms``, ``n``, or
  ``error``) and, in newer records, its ``throughput`` rows (``batch``, ``seq_len``, ``qps``, ``p50_ms``,
  ``min_ms``, ``n``, or ``error``); an ONNX Runtime entry may be an error alone (no CUDA provider, say);
- ``where_pruning_pays``: per ``mode``, ``batch`` and ``seq_len``, ``baseline_qps``, ``pruned_qps`` and
  ``pruned_over_baseline`` (newer records);
- ``served``: ``POST /v1/answer`` latency of one variant, ``rows`` per ``seq_len`` (``client_p50_ms`` ...).

The frames here are tidy (one row per measured point) and carry each mode's plain name (``mode_label``)
beside the report's own (``mode``), which :func:`mode_jargon` explains.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from variants.core.spec import short_label
from variants.records.results import GPU_DIR

log = logging.getLogger("variants.records.gpu")

GPU_KIND = "gpu-report"
ENGINES = {"torch": "PyTorch", "onnxruntime": "ONNX Runtime"}  # a preset's part -> the runtime it timed

# The report's torch modes (variants.benchmarking.gpu.torch_modes) -> (plain name, what it is, for a footnote).
TORCH_MODES = {
    "torch-fp32": ("PyTorch FP32", "the model as trained, eager mode, 32-bit floats"),
    "torch-fp16": ("PyTorch FP16", "a half-precision copy of the model (model.half()), eager mode"),
    "torch-amp": ("PyTorch FP16 autocast", "the FP32 model under torch.autocast(float16): casts per operation"),
    "torch-cudagraph-fp16": (
        "PyTorch FP16, CUDA graph",
        "the FP16 model's forward captured once per shape (torch.cuda.CUDAGraph) and replayed: "
        "no Python or kernel-launch overhead",
    ),
    "torch-compile-fp16": ("PyTorch FP16, compiled", "torch.compile of the FP16 model, default mode"),
    "torch-compile-reduce-overhead-fp16": (
        "PyTorch FP16, compiled (reduce overhead)",
        'torch.compile(mode="reduce-overhead"): compiled code replayed in CUDA graphs',
    ),
    "torch-compile-max-autotune-fp16": (
        "PyTorch FP16, compiled (max autotune)",
        'torch.compile(mode="max-autotune"): also searches kernel configurations',
    ),
}
ORT_HOW = {
    "iobinding": "inputs and outputs bound to buffers on the session's device (IOBinding)",
    "cudagraph": "ONNX Runtime's CUDA graphs (enable_cuda_graph), inputs padded to a bucket of lengths",
}

LATENCY_COLUMNS = ["preset", "model", "variant", "variant_label", "engine", "mode", "mode_label", "seq_len",
                   "p50_ms", "p90_ms", "p99_ms", "min_ms", "max_ms", "n", "padded_to"]  # fmt: skip
THROUGHPUT_COLUMNS = ["preset", "model", "variant", "variant_label", "engine", "mode", "mode_label", "batch",
                      "seq_len", "qps", "p50_ms", "min_ms", "n"]  # fmt: skip
PRUNING_COLUMNS = ["preset", "mode", "step", "mode_label", "batch", "seq_len", "baseline_qps", "pruned_qps",
                   "pruned_over_baseline"]  # fmt: skip
SERVED_COLUMNS = ["preset", "variant", "variant_label", "seq_len", "client_p50_ms", "client_p90_ms", "client_p99_ms",
                  "client_max_ms", "engine_p50_ms", "hop_p50_ms", "engine_share", "model_run_p50_ms", "n", "device",
                  "provider", "dtype", "execution"]  # fmt: skip
# An ONNX Runtime graph's step where its precision does not say it (where_pruning_pays' "step").
STEPS = {"onnx": "as exported", "onnx-opt": "ORT-optimized"}
PROBLEM_COLUMNS = ["preset", "part", "variant", "mode", "mode_label", "seq_len", "batch", "error"]


# --- files ----------------------------------------------------------------------------------------


def load_gpu_records(folder: str | Path | None = None) -> list[dict[str, Any]]:
    """Every readable GPU record in ``folder`` (default ``assets/results/gpu``), newest first, each with its
    path under ``file``. Unreadable files and other kinds of JSON are skipped (logged); a missing folder is
    no records."""
    folder = Path(folder) if folder is not None else GPU_DIR
    if not folder.is_dir():
        return []
    records = []
    for path in folder.glob("*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if isinstance(data, dict) and data.get("kind") == GPU_KIND:
            records.append({**data, "file": str(path)})
    return sorted(records, key=lambda r: (str(r.get("created") or ""), r["file"]), reverse=True)


def on_cuda(record: dict[str, Any]) -> bool:
    """Whether ``record`` was measured on a GPU (``gpu-report --device cpu`` rehearses the code on the CPU)."""
    return str(record.get("device") or "").startswith("cuda")


def newest_gpu_record(folder: str | Path | None = None) -> dict[str, Any] | None:
    """The newest full GPU record in ``folder``; failing one, the newest quick one on a GPU, then the newest
    CPU rehearsal (``--device cpu``); None when there is none."""
    records = load_gpu_records(folder)  # newest first; sorted() keeps that order within each kind
    ranked = sorted(records, key=lambda r: (not on_cuda(r), bool(r.get("quick"))))
    return ranked[0] if ranked else None


# --- names ----------------------------------------------------------------------------------------


def _ort_parts(mode: str) -> tuple[str, str, str, bool]:
    """``ort-<ran_on>-<dtype>-<how>[-cpu-fallback]`` (:func:`variants.benchmarking.gpu.ort.mode_name`) in parts."""
    fallback = mode.endswith("-cpu-fallback")
    ran_on, dtype, how = [*mode.removesuffix("-cpu-fallback").split("-")[1:], "", "", ""][:3]
    return ran_on, dtype, how, fallback


def mode_label(mode: str | None) -> str:
    """A mode's plain name: "torch-cudagraph-fp16" -> "PyTorch FP16, CUDA graph", "ort-cuda-fp16-iobinding"
    -> "ONNX Runtime FP16 (CUDA)"; a name it does not know comes back as it is."""
    mode = str(mode or "")
    if mode in TORCH_MODES:
        return TORCH_MODES[mode][0]
    if not mode.startswith("ort-"):
        return mode
    ran_on, dtype, how, fallback = _ort_parts(mode)
    name = " ".join(p for p in ("ONNX Runtime", dtype.upper()) if p)
    if how == "cudagraph":
        return f"{name}, CUDA graph"
    if fallback:
        return f"{name} (meant for CUDA, ran on the CPU)"
    return f"{name} ({'CUDA' if ran_on == 'cuda' else ran_on.upper()})" if ran_on else name


def mode_jargon(mode: str | None) -> str:
    """What a mode is, in the report's terms (for a footnote or tooltip)."""
    mode = str(mode or "")
    if mode in TORCH_MODES:
        return TORCH_MODES[mode][1]
    if not mode.startswith("ort-"):
        return ""
    ran_on, _dtype, how, fallback = _ort_parts(mode)
    provider = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}.get(ran_on, ran_on)
    text = f"an ONNX Runtime session on {provider}" if provider else "ONNX Runtime"
    if how in ORT_HOW:
        text += f", {ORT_HOW[how]}"
    if fallback:
        text += "; asked for CUDA, ONNX Runtime gave a CPU session (not a GPU number)"
    return text


def variant_label(name: str | None) -> str:
    """A variant's short plain name ("Baseline + ONNX + FP16": the baseline's graphs are a chain of their own)."""
    return short_label(str(name or ""))


# --- frames ---------------------------------------------------------------------------------------


def presets(record: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The record's preset entries that are dicts (an entry may be an error alone)."""
    found = (record or {}).get("presets") or []
    return [p for p in found if isinstance(p, dict)]


def entries(preset: dict[str, Any]):
    """(part, entry) for each torch and ONNX Runtime entry of ``preset``; a part that is not a list (an error
    dict in its place) yields nothing."""
    for part in ENGINES:
        found = preset.get(part)
        for entry in found if isinstance(found, list) else []:
            if isinstance(entry, dict):
                yield part, entry


def _who(preset: dict[str, Any], part: str, entry: dict[str, Any]) -> dict[str, Any]:
    variant = entry.get("variant") or entry.get("model") or ""
    model = entry.get("model") or str(variant).split("-")[0]
    mode = entry.get("mode") or ""
    return {
        "preset": preset.get("preset"),
        "model": model,
        "variant": variant,
        "variant_label": variant_label(variant),
        "engine": ENGINES[part],
        "mode": mode,
        "mode_label": mode_label(mode),
    }


def _frame(rows: list[dict[str, Any]], columns: list[str]):
    import pandas as pd  # noqa: PLC0415

    return pd.DataFrame(rows, columns=columns)


def latency_frame(record: dict[str, Any] | None):
    """Batch-1 latency by sequence length: one row per (preset, variant, mode, seq_len) measured, with p50,
    p90, p99, min, max (ms) and n (timed runs). Rows and entries that failed are in :func:`problem_frame`."""
    return _points(record, "sweep", "p50_ms", LATENCY_COLUMNS)


def throughput_frame(record: dict[str, Any] | None):
    """Questions per second by batch and length: one row per (preset, variant, mode, batch, seq_len) measured
    (empty for records from before the throughput step)."""
    return _points(record, "throughput", "qps", THROUGHPUT_COLUMNS)


def _points(record: dict[str, Any] | None, table: str, measured: str, columns: list[str]):
    """One row per measured point (``measured`` set) of every entry's ``table``, with who measured it."""
    rows = []
    for preset in presets(record):
        for part, entry in entries(preset):
            who = _who(preset, part, entry)
            for point in entry.get(table) or []:
                if isinstance(point, dict) and point.get(measured) is not None:
                    rows.append({**who, **{k: point.get(k) for k in columns if k not in who}})
    return _frame(rows, columns)


def pruning_frame(record: dict[str, Any] | None):
    """``where_pruning_pays``: per preset, mode, batch and length, both models' questions per second and the
    pruned model's over the baseline's (None where either is missing)."""
    rows = []
    for preset in presets(record):
        for row in preset.get("where_pruning_pays") or []:
            if isinstance(row, dict):
                found = {k: row.get(k) for k in PRUNING_COLUMNS if k != "preset"}
                label = mode_label(row.get("mode"))
                step = STEPS.get(str(row.get("step") or ""))
                rows.append(
                    {**found, "preset": preset.get("preset"), "mode_label": f"{label}, {step}" if step else label}
                )
    return _frame(rows, PRUNING_COLUMNS)


def served_frame(record: dict[str, Any] | None):
    """Served latency (``POST /v1/answer``): one row per preset and length (empty when not measured)."""
    rows = []
    for preset in presets(record):
        served = preset.get("served")
        if not isinstance(served, dict):
            continue
        variant = served.get("variant")
        for row in served.get("rows") or []:
            if isinstance(row, dict):
                found = {k: row.get(k) for k in SERVED_COLUMNS if k not in ("preset", "variant", "variant_label")}
                found["execution"] = found["execution"] or served.get("execution")
                rows.append({**found, "preset": preset.get("preset"), "variant": variant,
                             "variant_label": variant_label(variant)})  # fmt: skip
    return _frame(rows, SERVED_COLUMNS)


def problem_frame(record: dict[str, Any] | None):
    """What the record tried and did not measure: a preset, an entry, a latency or throughput point or the
    served step that holds an ``error`` (the budget ran out, no CUDA provider, out of memory ...)."""
    rows = []
    for preset in (record or {}).get("presets") or []:
        if not isinstance(preset, dict):
            continue
        base = {"preset": preset.get("preset"), "variant": None, "mode": None, "mode_label": None}
        if preset.get("error"):
            rows.append({**base, "part": "preset", "error": preset["error"]})
        for part, engine in ENGINES.items():
            if isinstance(preset.get(part), dict) and preset[part].get("error"):
                rows.append({**base, "part": engine, "error": preset[part]["error"]})
        for part, entry in entries(preset):
            who = {k: v for k, v in _who(preset, part, entry).items() if k in PROBLEM_COLUMNS}
            if entry.get("error"):
                rows.append({**who, "part": ENGINES[part], "error": entry["error"]})
            for step, points in (("latency", entry.get("sweep")), ("throughput", entry.get("throughput"))):
                for point in points or []:
                    if isinstance(point, dict) and point.get("error"):
                        rows.append({**who, "part": f"{ENGINES[part]} {step}", "seq_len": point.get("seq_len"),
                                     "batch": point.get("batch"), "error": point["error"]})  # fmt: skip
        served = preset.get("served")
        if isinstance(served, dict) and served.get("error"):
            rows.append({**base, "part": "served", "error": served["error"]})
    return _frame(rows, PROBLEM_COLUMNS)


# --- facts ----------------------------------------------------------------------------------------


def gpu_facts(record: dict[str, Any] | None) -> dict[str, Any]:
    """What a header says about a record: the GPU, when, timed runs per point, the note, the weights."""
    record = record or {}
    hardware, cuda, settings = (record.get(k) if isinstance(record.get(k), dict) else {} for k in
                                ("hardware", "cuda", "settings"))  # fmt: skip
    ort = record.get("onnxruntime") if isinstance(record.get("onnxruntime"), dict) else {}
    latency = latency_frame(record)
    counts = sorted({int(n) for n in latency["n"].dropna()}) if len(latency) else []
    flags = {p.get("preset"): p.get("latency_only") for p in presets(record) if "latency_only" in p}
    return {
        "gpu": cuda.get("gpu") or hardware.get("gpu"),
        "gpu_memory_gb": cuda.get("gpu_memory_gb") or hardware.get("gpu_memory_gb"),
        "created": record.get("created"),
        "device": record.get("device"),
        "on_cuda": on_cuda(record),
        "cpu": hardware.get("cpu"),
        "quick": bool(record.get("quick")),
        "runs": counts or ([settings["runs"]] if settings.get("runs") else []),  # timed runs per point (all kinds)
        "warmup": settings.get("warmup"),
        "note": record.get("note") or "",
        "presets": [p.get("preset") for p in presets(record)],
        "random_weights": [name for name, flag in flags.items() if flag],
        "trained_weights": [name for name, flag in flags.items() if flag is False],
        "driver": cuda.get("driver"),
        "torch_cuda": cuda.get("torch_cuda"),
        "torch": (record.get("versions") or {}).get("torch"),
        "onnxruntime": ort.get("version"),
        "ort_cuda": "CUDAExecutionProvider" in (ort.get("available_providers") or []),
        "file": Path(str(record.get("file") or "")).name,
    }
