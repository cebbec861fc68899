"""Benchmark records on disk: find them, flatten them into a table, pick the one for this machine.

A record is one JSON file written by ``python -m variants bench`` (see :mod:`variants.benchmarking.bench`): the
hardware, library versions, data and settings of one run, with one entry per variant under
``variants`` and the transformers pipeline measured alongside under ``peer``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from variants.core import safe_csv
from variants.core.hardware import current_hardware, device_kind, hardware_label, same_cpu_generation
from variants.core.spec import ASSETS
from variants.records.record import OPTIMUM_INT8, VIEWS, Record, VariantEntry, as_record
from variants.records.record import load_records as _load_records

log = logging.getLogger("variants.records.results")


RESULTS_DIR = ASSETS / "results"  # what the app and the README show: the Benchmark tab's records, the GPU section's
GPU_DIR = RESULTS_DIR / "gpu"
# The other tools' records (load, soak, served latency, Ray Serve, the replica bench) are measurements the docs
# cite, not shown by the app: they live with the experiments, a folder per tool.
TOOL_RECORDS_DIR = ASSETS.parent / "experiments" / "records"
LOAD_DIR, SOAK_DIR, SERVED_DIR = TOOL_RECORDS_DIR / "load", TOOL_RECORDS_DIR / "soak", TOOL_RECORDS_DIR / "served"
REPLICA_DIR, RAY_DIR = TOOL_RECORDS_DIR / "replica", TOOL_RECORDS_DIR / "ray"


# The table's columns (one row per entry of a record, for one accuracy view): the CSV, the app's table
# and its charts read these names; their values come from the fields of variants.records.record.
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
    "any_peer",
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
    "speedup_vs_optimum_int8",
    "speedup_vs_optimum_int8_low",
    "speedup_vs_optimum_int8_high",
    "latency_passes",
    "agreement_with_baseline",
    "load_seconds",
    "peak_rss_mb",
    "preset",
    "kind",
    "record",
    "error",
]


def other_weights(record: Record, weights: dict[str, str]) -> list[VariantEntry]:
    """The variants of ``record`` that measured other weights than ``weights`` ({variant: identity}, as
    ``Engine.weights`` gives) names for them; a variant either side does not identify is not compared."""
    return [e for e in record.variants if e.weights and weights.get(e.variant) not in (None, e.weights)]


def same_hardware(record: Record | dict[str, Any], hardware: dict[str, Any]) -> bool:
    """Whether ``record`` was measured on hardware like ``hardware`` (same GPU, or same CPU and cores)."""
    record = as_record(record)
    theirs = record.hardware or {}
    if device_kind(record.device) == "cuda":
        return bool(theirs.get("gpu")) and theirs.get("gpu") == hardware.get("gpu")
    return (
        theirs.get("cpu") == hardware.get("cpu")
        and theirs.get("usable_cores") == hardware.get("usable_cores")
        and same_cpu_generation(theirs, hardware)
    )


def load_records(folder: str | Path | None = None) -> list[Record]:
    """Every readable record in ``folder`` (default assets/results), newest first."""
    return _load_records(folder or RESULTS_DIR)


def pick_record(records: list, device: str | None = None, hardware: dict[str, Any] | None = None):
    """The newest record for this hardware (and ``device`` kind if given), else the newest one.

    Preference: same device kind, hardware and INT8 weight format (one CPU model ships with and without
    VNNI, which changes the INT8 variant), then same device kind and hardware, then same device kind,
    then same hardware, then any;
    at each level full runs before quick ones (``kind`` "quick"), then the newest. ``records`` are
    :class:`~variants.records.record.Record` objects or their JSON dicts; the one picked is returned as given.
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


def _against(entry: VariantEntry, peer: str) -> dict[str, float | None]:
    """``entry``'s speedup over another peer of its record (its median per-pass ratio, lowest and highest);
    1 for that peer itself, None where the record did not measure it."""
    name = "speedup_vs_" + peer.replace("-", "_")
    ratios = entry.speedup_vs_peers.get(peer) or ([1.0, 1.0, 1.0] if entry.variant == peer else [])
    ratios = [*ratios, None, None, None][:3]
    return {name: ratios[0], f"{name}_low": ratios[1], f"{name}_high": ratios[2]}


def _row(record: Record, entry: VariantEntry, view: str) -> dict[str, Any]:
    """One entry's row; ``is_peer``: the reference peer (transformers' pipeline), ``any_peer``: it or another
    peer of the record (optimum's INT8), none of them ours."""
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
        "any_peer": entry.is_peer or any(entry is p for p in record.peers),
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
        **_against(entry, OPTIMUM_INT8),
        "latency_passes": len(entry.latency_pass_p50_ms) or (1 if lat else None),
        "agreement_with_baseline": entry.agreement_with_baseline,
        "load_seconds": entry.load_seconds,
        # the whole process's peak while this entry was measured, every variant loaded: not this variant's own
        "peak_rss_mb": (entry.memory or {}).get("peak_rss_mb"),
        "preset": record.preset,
        "kind": record.kind,
        "record": record.file,
        "error": entry.error,
    }


def records_to_frame(records: list | Record | dict[str, Any], view: str | None = "pipeline"):
    """A pandas DataFrame, one row per entry per record (the peer last, ``is_peer`` True), with the
    accuracy of view ``view`` (see :data:`variants.records.record.VIEWS`); ``view=None``: a row per view each.

    ``records`` are :class:`~variants.records.record.Record` objects or their JSON dicts (any schema).
    """
    import pandas as pd  # noqa: PLC0415

    if isinstance(records, (Record, dict)):
        records = [records]
    views = VIEWS if view is None else (view,)
    rows = [_row(record, entry, v) for record in map(as_record, records) for v in views for entry in record.entries]
    return pd.DataFrame(rows, columns=COLUMNS)


def save_record(record: Record, folder: str | Path) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.csv`` (one row per entry and view) into ``folder``."""
    json_path = record.save(folder)
    csv_path = json_path.with_suffix(".csv")
    safe_csv.write_frame(records_to_frame([record], view=None), csv_path)  # a model id or name is a visitor's text
    return json_path, csv_path
