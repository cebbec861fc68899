"""Benchmark records on disk: find them, flatten them into a table, pick the one for this machine.

A record is one JSON file written by ``python -m variants bench`` (see :mod:`variants.bench`): the
hardware, library versions, data and settings of one run, with one entry per variant under
``variants`` and the transformers pipeline measured alongside under ``peer``.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

from variants.hardware import cpu_facts
from variants.spec import ASSETS

log = logging.getLogger("variants.results")

RESULTS_DIR = ASSETS / "results"
SCHEMA_VERSION = 1
COLUMNS = [
    "variant",
    "label",
    "f1",
    "exact",
    "has_ans_f1",
    "no_ans_f1",
    "best_f1",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "throughput_qps",
    "size_mb",
    "parameters",
    "speedup_vs_baseline",
    "device",
    "provider",
    "dtype",
    "hardware",
    "created",
    "n_questions",
    "n_latency",
    # extra columns
    "is_peer",
    "headline",
    "backend",
    "has_ans_exact",
    "no_ans_exact",
    "best_exact",
    "mean_ms",
    "std_ms",
    "peak_throughput_qps",
    "speedup_vs_peer",
    "agreement_with_baseline",
    "load_seconds",
    "preset",
    "record",
    "error",
]


# --- hardware -----------------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _gpus() -> list[dict[str, Any]]:
    """Name and memory of each visible GPU: NVML first, torch if it is already imported."""
    try:
        import pynvml  # noqa: PLC0415 - from nvidia-ml-py

        pynvml.nvmlInit()
        try:
            gpus = []
            for i in range(pynvml.nvmlDeviceGetCount()):
                handle = pynvml.nvmlDeviceGetHandleByIndex(i)
                name = pynvml.nvmlDeviceGetName(handle)
                name = name.decode() if isinstance(name, bytes) else name
                total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
                gpus.append({"name": name, "memory_gb": round(total / 2**30, 1)})
            return gpus
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver / no library: no GPU as far as NVML knows
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return [
            {
                "name": torch.cuda.get_device_name(i),
                "memory_gb": round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1),
            }
            for i in range(torch.cuda.device_count())
        ]
    return []


def slugify(text: str, length: int = 40) -> str:
    """``Intel(R) Xeon(R) Platinum 8480C @ 2.0GHz`` -> ``intel-xeon-platinum-8480c``."""
    text = re.sub(r"\((r|tm|c)\)|@.*$|\bcpu\b|\bprocessor\b", " ", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:length].strip("-") or "unknown"


def current_hardware() -> dict[str, Any]:
    """The machine this process runs on: CPU model, cores, memory and GPUs (``gpu`` None without one)."""
    import psutil  # noqa: PLC0415

    gpus = _gpus()
    cpu = _cpu_model()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "gpu": gpus[0]["name"] if gpus else None,
        "gpu_count": len(gpus),
        "gpu_memory_gb": gpus[0]["memory_gb"] if gpus else None,
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_slug": slugify(cpu),
        "gpu_slug": slugify(gpus[0]["name"]) if gpus else None,
        **cpu_facts(),  # ISA flags and the INT8 weight format chosen from them
    }


def device_kind(device: str | None) -> str:
    """``cuda:0`` -> ``cuda``; ``cpu`` -> ``cpu``."""
    return "cuda" if (device or "").startswith("cuda") else "cpu"


def hardware_slug(hardware: dict[str, Any], device: str) -> str:
    """The part of the machine that runs ``device``: the GPU for CUDA, the CPU otherwise."""
    if device_kind(device) == "cuda" and hardware.get("gpu_slug"):
        return hardware["gpu_slug"]
    return hardware.get("cpu_slug") or slugify(hardware.get("cpu") or "")


def hardware_label(hardware: dict[str, Any], device: str) -> str:
    if device_kind(device) == "cuda" and hardware.get("gpu"):
        return hardware["gpu"]
    cores = hardware.get("usable_cores") or hardware.get("cores")
    return f"{hardware.get('cpu', 'unknown CPU')} ({cores} cores)" if cores else hardware.get("cpu", "unknown CPU")


def same_hardware(record: dict[str, Any], hardware: dict[str, Any]) -> bool:
    """Whether ``record`` was measured on hardware like ``hardware`` (same GPU, or same CPU and cores)."""
    theirs = record.get("hardware") or {}
    if device_kind(record.get("device")) == "cuda":
        return bool(theirs.get("gpu")) and theirs.get("gpu") == hardware.get("gpu")
    return theirs.get("cpu") == hardware.get("cpu") and theirs.get("usable_cores") == hardware.get("usable_cores")


# --- records ------------------------------------------------------------------------------------


def load_records(folder: str | Path | None = None) -> list[dict[str, Any]]:
    """Every readable record in ``folder`` (default assets/results), newest first, each with ``_file``."""
    records = []
    for path in sorted(Path(folder or RESULTS_DIR).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        if not isinstance(record, dict) or "variants" not in record or "created" not in record:
            log.warning("skipping %s: not a benchmark record", path)
            continue
        record["_file"] = path.name
        records.append(record)
    return sorted(records, key=lambda r: r["created"], reverse=True)


def pick_record(
    records: list[dict[str, Any]], device: str | None = None, hardware: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The newest record for this hardware (and ``device`` kind if given), else the newest one.

    Preference: same device kind and hardware, then same device kind, then same hardware, then any;
    at each level full runs before quick ones (``kind`` "quick"), then the newest.
    ``hardware`` defaults to :func:`current_hardware`.
    """
    if not records:
        return None
    hardware = hardware if hardware is not None else current_hardware()
    newest = sorted(records, key=lambda r: (r.get("kind") != "quick", r.get("created", "")), reverse=True)

    def kind_ok(r: dict) -> bool:
        return device is None or device_kind(r.get("device")) == device_kind(device)

    for test in (
        lambda r: kind_ok(r) and same_hardware(r, hardware),
        kind_ok,
        lambda r: same_hardware(r, hardware),
    ):
        found = [r for r in newest if test(r)]
        if found:
            return found[0]
    return newest[0]


def _row(record: dict[str, Any], entry: dict[str, Any], is_peer: bool) -> dict[str, Any]:
    acc = entry.get("accuracy") or {}
    lat = entry.get("latency_ms") or {}
    device = entry.get("device") or record.get("device", "")
    return {
        "variant": entry.get("variant"),
        "label": entry.get("label"),
        "f1": acc.get("f1"),
        "exact": acc.get("exact"),
        "has_ans_f1": acc.get("has_ans_f1"),
        "no_ans_f1": acc.get("no_ans_f1"),
        "best_f1": acc.get("best_f1"),
        "p50_ms": lat.get("p50"),
        "p90_ms": lat.get("p90"),
        "p99_ms": lat.get("p99"),
        "throughput_qps": entry.get("throughput_qps"),
        "size_mb": entry.get("size_mb"),
        "parameters": entry.get("parameters"),
        "speedup_vs_baseline": entry.get("speedup_vs_baseline"),
        "device": device,
        "provider": entry.get("provider"),
        "dtype": entry.get("dtype"),
        "hardware": hardware_label(record.get("hardware") or {}, record.get("device", "")),
        "created": record.get("created"),
        "n_questions": acc.get("total", (record.get("data") or {}).get("n_questions")),
        "n_latency": lat.get("n"),
        "is_peer": is_peer,
        "headline": entry.get("headline", False),
        "backend": entry.get("backend"),
        "has_ans_exact": acc.get("has_ans_exact"),
        "no_ans_exact": acc.get("no_ans_exact"),
        "best_exact": acc.get("best_exact"),
        "mean_ms": lat.get("mean"),
        "std_ms": lat.get("std"),
        "peak_throughput_qps": entry.get("peak_throughput_qps"),
        "speedup_vs_peer": entry.get("speedup_vs_peer"),
        "agreement_with_baseline": entry.get("agreement_with_baseline"),
        "load_seconds": entry.get("load_seconds"),
        "preset": record.get("preset"),
        "record": record.get("_file"),
        "error": entry.get("error"),
    }


def records_to_frame(records: list[dict[str, Any]] | dict[str, Any]):
    """A pandas DataFrame with one row per variant per record (the peer last, ``is_peer`` True)."""
    import pandas as pd  # noqa: PLC0415

    if isinstance(records, dict):
        records = [records]
    rows = []
    for record in records:
        rows += [_row(record, entry, False) for entry in record.get("variants", [])]
        if record.get("peer"):
            rows.append(_row(record, record["peer"], True))
    return pd.DataFrame(rows, columns=COLUMNS)
