"""What the probes share: their model options, an engine of the named variants, and the common header
of their records (kind, schema version, seconds, hardware, versions)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from variants.core.hardware import current_hardware
from variants.core.versions import record_versions
from variants.records.results import load_records, pick_record
from variants.serving.engine import load_engine


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    """The model options every probe script shares (``experiments/``)."""
    parser.add_argument("--preset", default="embedded")
    parser.add_argument("--baseline", help="the preset's baseline model instead (a Hub id or folder)")
    parser.add_argument("--pruned", help="the preset's pruned model instead (a Hub id or folder)")


def probe_engine(
    preset: str, names: list[str], baseline: str | None = None, pruned: str | None = None, settings: Any = None
) -> Any:
    """The CPU engine a probe script measures: only the variants ``names`` of ``preset`` (its baseline or pruned
    model replaced where given), no fallback, decoding with ``settings`` (a ``DecodeSettings``; None: the
    defaults). Exits naming each variant that did not load."""

    overrides = {k: v for k, v in (("baseline", baseline), ("pruned", pruned)) if v}
    engine = load_engine(preset, "cpu", overrides, names=names, fallback=False, settings=settings)
    failed = [f"{name}: {engine.variants[name].error}" for name in names if not engine.variants[name].ok]
    if failed:
        engine.close()
        raise SystemExit("; ".join(failed))
    return engine


RECORDS = Path(__file__).resolve().parent / "records"  # where the probes' records are kept
BENCH_RECORDS = Path(__file__).resolve().parents[1] / "assets" / "results"  # the bench's records
SCHEMA_VERSION = 1  # of the shared header below; a probe's own fields are described by its module


def save_probe_record(record: dict[str, Any], started: float, out: str | Path | None) -> dict[str, Any]:
    """A probe's JSON record with the shared header: its ``kind`` (which the probe sets), the header's
    schema version, the seconds since ``started``, this machine and the library versions; written to
    ``out`` when given."""
    if not record.get("kind"):
        raise ValueError("a probe record names its kind")
    record |= {"schema_version": SCHEMA_VERSION, "seconds": round(time.time() - started, 1)}
    record |= {"hardware": current_hardware(), "versions": record_versions()}
    if out:
        Path(out).write_text(json.dumps(record, indent=2) + "\n")
    return record


def this_cpu_bench():
    """The newest bench record of this CPU (``pick_record``'s preference), or None where there is none."""
    return pick_record(load_records(BENCH_RECORDS), "cpu", current_hardware())
