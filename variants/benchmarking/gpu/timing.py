"""Timing for the GPU report: a wall-clock budget, per-call latency sweeps and the throughput table.

A *factory* ``make(length, batch)`` returns the call to time (inputs prepared, on the device); the
helpers here time it after warm-up, the device synchronized around each call, and keep a failure on its
own row so that one mode that breaks never stops the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from variants.answering.timing import describe, summarize

Factory = Callable[..., Callable[[], Any]]  # make(length, batch=1) -> call

THROUGHPUT_BATCHES = (1, 8, 32, 128)
THROUGHPUT_LENGTHS = (128, 384)


class Budget:
    """A wall-clock budget: steps past it are skipped (and say so) so the report always finishes."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    @property
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self, reserve: float = 0.0) -> None:
        if self.left < reserve:
            raise TimeoutError(f"skipped: the report's time budget is spent ({self.left:.0f} s left)")


def time_calls(fn: Callable[[], Any], runs: int, warmup: int, sync: Callable[[], None]) -> dict[str, Any]:
    """Wall time of ``runs`` calls of ``fn`` after ``warmup``, the device synchronized around each."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - started) * 1000)
    stats = summarize(times)
    return {f"{k}_ms" if k != "n" else k: v for k, v in stats.items() if k not in ("mean", "std")}


def no_sync() -> None:
    """For calls that return only when their outputs are ready (ONNX Runtime through IOBinding)."""
    return None


def sweep(
    make: Factory,
    lengths: Iterable[int],
    runs: int,
    warmup: int,
    sync: Callable[[], None],
    budget: Budget,
    reserve: float = 0.0,
) -> list[dict[str, Any]]:
    """One batch-1 row per length: ``make(length)`` returns the call to time; a failure stays on its row.
    A row starts only with ``reserve`` seconds of the budget left (a first call that compiles takes long)."""
    rows = []
    for length in lengths:
        try:
            budget.check(reserve)
            rows.append({"seq_len": length, **time_calls(make(length), runs, warmup, sync)})
        except Exception as exc:
            rows.append({"seq_len": length, "error": describe(exc)})
    return rows


def throughput_rows(
    make: Factory,
    batches: Iterable[int],
    lengths: Iterable[int],
    runs: int,
    warmup: int,
    sync: Callable[[], None],
    budget: Budget,
    reserve: float = 0.0,
) -> list[dict[str, Any]]:
    """Questions per second (one window of ``seq_len`` tokens per question) for each batch and length:
    ``batch / p50``. Rows past the budget, or whose call fails (out of memory, say), carry the reason."""
    rows = []
    for length in lengths:
        for batch in batches:
            row: dict[str, Any] = {"batch": batch, "seq_len": length}
            try:
                budget.check(reserve)
                stats = time_calls(make(length, batch), runs, warmup, sync)
                row.update(p50_ms=stats["p50_ms"], min_ms=stats["min_ms"], n=stats["n"])
                row["qps"] = round(batch * 1000 / stats["p50_ms"], 1)
            except Exception as exc:
                row["error"] = describe(exc)
            rows.append(row)
    return rows


def graph_step(entry: dict[str, Any]) -> str:
    """An ONNX Runtime entry's graph step ("onnx", "onnx-opt", "onnx-opt-fp16" ...): its variant less the
    model's name; "" for PyTorch's. Two graphs of one precision (as exported, optimized) share a mode."""
    variant, model = str(entry.get("variant") or ""), str(entry.get("model") or "")
    return variant.removeprefix(model).lstrip("-") if str(entry.get("mode", "")).startswith("ort-") else ""


def throughput_table(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Where pruning pays: per mode, graph step, batch and length, the baseline's and the pruned model's
    questions per second and their ratio (None where either is missing). ``entries`` hold ``model``
    ("baseline" or "pruned"), ``mode``, ``variant`` and ``throughput`` rows."""
    qps: dict[tuple[str, str, int, int], dict[str, float]] = {}
    keys: list[tuple[str, str, int, int]] = []
    for entry in entries:
        for row in entry.get("throughput", []):
            key = (entry["mode"], graph_step(entry), row["batch"], row["seq_len"])
            keys += [key] if key not in keys else []
            if row.get("qps"):
                qps.setdefault(key, {})[entry["model"]] = row["qps"]
    table = []
    for mode, step, batch, length in keys:  # in the order measured: the user's chain first
        found = qps.get((mode, step, batch, length), {})
        base, pruned = found.get("baseline"), found.get("pruned")
        ratio = round(pruned / base, 2) if base and pruned else None
        row = {"mode": mode, "step": step, "batch": batch, "seq_len": length}
        table.append({**row, "baseline_qps": base, "pruned_qps": pruned, "pruned_over_baseline": ratio})
    return table
