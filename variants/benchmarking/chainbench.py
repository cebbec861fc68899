"""Latency of each step of the chain beside what its operation count promises, as a record.

Pruning promises a speedup equal to the ratio of operations (matrix-product FLOP of the dense model
over the variant's, computed from the structure); each step of the chain (compaction, ONNX, ORT
fusions, INT8/FP16) shows how much of it the runtime turns into time. Used by
``variants/benchmarking/replica_bench.py`` (the CPU record) and :mod:`variants.benchmarking.gpu.report`.
"""

from __future__ import annotations

import json
import os
import platform
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from variants.building.replica import LATENCY_ONLY, Structure
from variants.core import config
from variants.core.hardware import current_hardware
from variants.core.versions import artifact_versions, dist_version


def environment(device: str) -> dict[str, Any]:
    """Hardware, ISA, library versions, threads and load: what a latency record needs to be read."""

    env: dict[str, Any] = {
        "hardware": current_hardware(),  # with the CPU ISA and the INT8 choice (variants.core.hardware)
        "versions": {**artifact_versions(), "python": platform.python_version(), "fastapi": dist_version("fastapi")},
        "device": device,
        "threads": {"onnxruntime": config.cpu_threads() or "all cores", "torch": _torch_threads()},
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
    return env


def _torch_threads() -> int | None:
    import sys  # noqa: PLC0415

    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def structure_of(variant: str, pruned: Structure) -> tuple[Structure, bool]:
    """The structure a chain variant computes with, and whether its zeros are cut out."""
    if variant == "baseline":
        return pruned.dense(), True
    return pruned, variant != "pruned-dense"  # pruned-dense: heads cut, FFN zeros still multiplied


def promise_table(pruned: Structure, variants: list[str], seq_len: int) -> dict[str, dict[str, Any]]:
    """Per variant: matrix-product GFLOP at ``seq_len`` and the speedup over the baseline it promises."""
    dense_flops = pruned.dense().matmul_flops(seq_len)
    table = {}
    for name in variants:
        structure, cut = structure_of(name, pruned)
        flops = structure.matmul_flops(seq_len, zeros_cut=cut)
        table[name] = {"gflop": round(flops / 1e9, 3), "promised_speedup": round(dense_flops / flops, 3)}
    return table


def chain_rows(sweep: dict[str, list[dict]], pruned: Structure, seq_len: int) -> list[dict[str, Any]]:
    """Measured speedups at ``seq_len`` beside the promised ones, and each step's gain over the one before."""
    promises = promise_table(pruned, list(sweep), seq_len)
    p50, fastest, cpu = (_column(sweep, key, seq_len) for key in ("p50_ms", "min_ms", "thread_cpu_p50_ms"))
    base, base_min = p50.get("baseline"), fastest.get("baseline")
    rows, previous = [], None
    for name, ms in p50.items():
        row: dict[str, Any] = {"variant": name, "seq_len": seq_len, "p50_ms": ms, "min_ms": fastest[name]}
        row.update(promises[name])
        if ms and base:
            row["measured_speedup"] = round(base / ms, 3)
            row["share_of_promise"] = round(row["measured_speedup"] / row["promised_speedup"], 3)
        if fastest[name] and base_min:  # on a shared machine the fastest runs are the least disturbed
            row["speedup_of_fastest_runs"] = round(base_min / fastest[name], 3)
        if cpu.get(name) and cpu.get("baseline"):  # CPU time of the one compute thread: blind to other load
            row["thread_cpu_p50_ms"] = cpu[name]
            row["speedup_in_cpu_time"] = round(cpu["baseline"] / cpu[name], 3)
            row["share_of_promise_in_cpu_time"] = round(row["speedup_in_cpu_time"] / row["promised_speedup"], 3)
        if ms and previous and p50.get(previous):
            row["step_gain"] = round(p50[previous] / ms, 3)
            row["step_promised"] = round(promises[name]["promised_speedup"] / promises[previous]["promised_speedup"], 3)
        rows.append(row)
        previous = name
    return rows


def _column(sweep: dict[str, list[dict]], key: str, seq_len: int) -> dict[str, float | None]:
    """Per variant, the value of ``key`` in its row for ``seq_len`` (None where missing or failed)."""
    return {n: next((r.get(key) for r in rows if r["seq_len"] == seq_len), None) for n, rows in sweep.items()}


def structure_summary(pruned: Structure, seq_len: int) -> dict[str, Any]:
    """The counts a reader checks the record against (computed from the structure, not measured)."""
    dense = pruned.dense()
    return {
        "checkpoint": pruned.name,
        "layers": pruned.num_layers,
        "hidden_size": pruned.hidden,
        "heads_per_layer": pruned.heads_per_layer,
        "ffn_kept_per_layer": list(pruned.ffn_kept),
        "parameters": {
            "dense": dense.parameters(),
            "pruned_as_stored": pruned.parameters(zeros_cut=False),
            "pruned_compacted": pruned.parameters(),
        },
        f"gflop_at_{seq_len}": {
            "dense": round(dense.matmul_flops(seq_len) / 1e9, 3),
            "pruned_as_stored": round(pruned.matmul_flops(seq_len, zeros_cut=False) / 1e9, 3),
            "pruned_compacted": round(pruned.matmul_flops(seq_len) / 1e9, 3),
        },
        "flop_counted": "matrix products only (2 per multiply-add); softmax, LayerNorm, GELU, additions left out",
    }


def write_record(record: dict[str, Any], out_dir: Path, stem: str) -> Path:
    """``out_dir/<stem>-<UTC time>.json``; the record gets its ``created`` time."""
    now = datetime.now(UTC)
    record = {"created": now.isoformat(timespec="seconds"), **record}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{stem}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def latency_only_note() -> str:
    return f"{LATENCY_ONLY}: models of the published shape with random weights; no accuracy is measured"


def elapsed(started: float) -> float:
    return round(time.perf_counter() - started, 1)
