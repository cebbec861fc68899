"""Benchmark records on disk: find them, flatten them into a table, pick the one for this machine.

A record is one JSON file written by ``python -m variants bench`` (see :mod:`variants.bench`): the
hardware, library versions, data and settings of one run, with one entry per variant under
``variants`` and the transformers pipeline measured alongside under ``peer``.
"""

from __future__ import annotations

import logging
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any

from variants.hardware import cpu_facts, cpuinfo_text
from variants.record import VIEWS, Record, VariantEntry, as_record
from variants.record import load_records as _load_records
from variants.spec import ASSETS

log = logging.getLogger("variants.results")

RESULTS_DIR = ASSETS / "results"
# The table's columns (one row per entry of a record, for one accuracy view): the CSV, the app's table
# and its charts read these names; their values come from the fields of variants.record.
COLUMNS = [
    "variant",
    "label",
    "short_label",
    "view",
    "threshold",
    "f1",
    "exact",
    "has_ans_f1",
    "no_ans_f1",
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
    "latency_only",
    "backend",
    "has_ans_exact",
    "no_ans_exact",
    "has_ans_n",
    "no_ans_n",
    "has_ans_answered",
    "calibrated_threshold",
    "mean_ms",
    "std_ms",
    "peak_throughput_qps",
    "speedup_vs_peer",
    "speedup_vs_baseline_low",
    "speedup_vs_baseline_high",
    "speedup_vs_peer_low",
    "speedup_vs_peer_high",
    "latency_passes",
    "agreement_with_baseline",
    "load_seconds",
    "preset",
    "kind",
    "record",
    "error",
]


# --- hardware -----------------------------------------------------------------------------------


def _cpu_model() -> str:
    for line in cpuinfo_text().splitlines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return " ".join(line.split(":", 1)[1].split())
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
    ident = hardware.get("cpu_id") or {}
    details = [f"family {ident['family']} model {ident['model']}"] if "family" in ident and "model" in ident else []
    details += [f"{cores} cores"] if cores else []
    name = hardware.get("cpu", "unknown CPU")
    return f"{name} ({', '.join(details)})" if details else name


def same_hardware(record: Record | dict[str, Any], hardware: dict[str, Any]) -> bool:
    """Whether ``record`` was measured on hardware like ``hardware`` (same GPU, or same CPU and cores)."""
    record = as_record(record)
    theirs = record.hardware or {}
    if device_kind(record.device) == "cuda":
        return bool(theirs.get("gpu")) and theirs.get("gpu") == hardware.get("gpu")
    return (
        theirs.get("cpu") == hardware.get("cpu")
        and theirs.get("usable_cores") == hardware.get("usable_cores")
        and _same_cpu_generation(theirs, hardware)
    )


def _same_cpu_generation(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same vendor, family and model where both name them (steppings of one model run the same
    kernels); else the same recorded instruction set where both have one (records from before
    ``cpu_id``); else nothing tells them apart."""
    ids = [h.get("cpu_id") or {} for h in (a, b)]
    if all(ids):
        return all(ids[0].get(k) == ids[1].get(k) for k in ("vendor", "family", "model"))
    if a.get("cpu_isa") is not None and b.get("cpu_isa") is not None:
        return set(a["cpu_isa"]) == set(b["cpu_isa"])
    return True


# --- records ------------------------------------------------------------------------------------


def load_records(folder: str | Path | None = None) -> list[Record]:
    """Every readable record in ``folder`` (default assets/results), newest first."""
    return _load_records(folder or RESULTS_DIR)


def pick_record(records: list, device: str | None = None, hardware: dict[str, Any] | None = None):
    """The newest record for this hardware (and ``device`` kind if given), else the newest one.

    Preference: same device kind, hardware and INT8 weight format (one CPU model ships with and without
    VNNI, which changes the INT8 variant), then same device kind and hardware, then same device kind,
    then same hardware, then any;
    at each level full runs before quick ones (``kind`` "quick"), then the newest. ``records`` are
    :class:`~variants.record.Record` objects or their JSON dicts; the one picked is returned as given.
    ``hardware`` defaults to :func:`current_hardware`.
    """
    if not records:
        return None
    hardware = hardware if hardware is not None else current_hardware()
    typed = [(as_record(r), r) for r in records]
    newest = sorted(typed, key=lambda t: (not t[0].is_quick, t[0].created), reverse=True)

    def kind_ok(r: Record) -> bool:
        return device is None or device_kind(r.device) == device_kind(device)

    def int8_format(hw: dict[str, Any] | None) -> str | None:
        return ((hw or {}).get("int8") or {}).get("format")

    for test in (
        lambda r: kind_ok(r) and same_hardware(r, hardware) and int8_format(r.hardware) == int8_format(hardware),
        lambda r: kind_ok(r) and same_hardware(r, hardware),
        kind_ok,
        lambda r: same_hardware(r, hardware),
    ):
        found = [given for r, given in newest if test(r)]
        if found:
            return found[0]
    return newest[0][1]


def _range(name: str, bounds: list[float] | None) -> dict[str, float | None]:
    """``name``_low and ``name``_high: the lowest and highest per-pass value, None for a single pass."""
    low, high = bounds or (None, None)
    return {f"{name}_low": low, f"{name}_high": high}


def _row(record: Record, entry: VariantEntry, view: str) -> dict[str, Any]:
    acc = entry.view(view)
    lat = entry.latency_ms
    device = entry.device or record.device
    return {
        "variant": entry.variant,
        "label": entry.label,
        "short_label": entry.short_label,
        "view": view,
        "threshold": acc.threshold if acc else None,
        "f1": acc.f1 if acc else None,
        "exact": acc.exact if acc else None,
        "has_ans_f1": acc.has_ans_f1 if acc else None,
        "no_ans_f1": acc.no_ans_f1 if acc else None,
        "p50_ms": lat.p50 if lat else None,
        "p90_ms": lat.p90 if lat else None,
        "p99_ms": lat.p99 if lat else None,
        "throughput_qps": entry.throughput_qps,
        "size_mb": entry.size_mb,
        "parameters": entry.parameters,
        "speedup_vs_baseline": entry.speedup_vs_baseline,
        "device": device,
        "provider": entry.provider,
        "dtype": entry.dtype,
        "hardware": hardware_label(record.hardware or {}, record.device),
        "created": record.created,
        "n_questions": acc.n if acc and acc.n else record.n_questions,
        "n_latency": lat.n if lat else None,
        "is_peer": entry.is_peer,
        "headline": entry.headline,
        "latency_only": entry.latency_only,
        "backend": entry.backend,
        "has_ans_exact": acc.has_ans_exact if acc else None,
        "no_ans_exact": acc.no_ans_exact if acc else None,
        "has_ans_n": acc.has_ans_n if acc else None,
        "has_ans_answered": acc.has_ans_answered if acc else None,
        "no_ans_n": acc.no_ans_n if acc else None,
        "calibrated_threshold": entry.calibrated_threshold,
        "mean_ms": lat.mean if lat else None,
        "std_ms": lat.std if lat else None,
        "peak_throughput_qps": entry.peak_throughput_qps,
        "speedup_vs_peer": entry.speedup_vs_peer,
        **_range("speedup_vs_baseline", entry.speedup_vs_baseline_range),
        **_range("speedup_vs_peer", entry.speedup_vs_peer_range),
        "latency_passes": len(entry.latency_pass_p50_ms) or (1 if lat else None),
        "agreement_with_baseline": entry.agreement_with_baseline,
        "load_seconds": entry.load_seconds,
        "preset": record.preset,
        "kind": record.kind,
        "record": record.file,
        "error": entry.error,
    }


def records_to_frame(records: list | Record | dict[str, Any], view: str | None = "pipeline"):
    """A pandas DataFrame, one row per entry per record (the peer last, ``is_peer`` True), with the
    accuracy of view ``view`` (see :data:`variants.record.VIEWS`); ``view=None``: a row per view each.

    ``records`` are :class:`~variants.record.Record` objects or their JSON dicts (any schema).
    """
    import pandas as pd  # noqa: PLC0415

    if isinstance(records, (Record, dict)):
        records = [records]
    views = VIEWS if view is None else (view,)
    rows = [_row(record, entry, v) for record in map(as_record, records) for v in views for entry in record.entries]
    return pd.DataFrame(rows, columns=COLUMNS)
