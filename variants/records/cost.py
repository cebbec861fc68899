"""What a million answers cost: a record's measured throughput priced at dollars per hour of the machine.

One definition, :func:`cost_per_million`, which the Benchmark tab, the Your questions tab, ``python -m variants
bench`` and the report all call, so their figures agree to the cent. The throughput is the record's own:

- **batch 1** (``throughput_qps``): one process answering one question at a time, the next as soon as the last
  is done, with the whole machine to itself; 1,000 / the mean milliseconds per question of the timed runs. The
  mean, not the median: a million questions one after another take a million times the mean.
- **best batch** (``peak_throughput_qps``): the best point of the record's batch sweep, questions sent N at a
  time; what a server that gathers requests into batches could reach. Records without a sweep have none.

A price applies only to the hardware the record was measured on (:func:`prices_for`): a CPU record is priced
on CPU machines, a GPU record on machines with its GPU; the published prices are in
:mod:`variants.records.prices`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from variants.core.hardware import device_kind
from variants.records.prices import SPACES_PRICES, HourlyPrice
from variants.records.record import Record, VariantEntry

SECONDS_PER_HOUR = 3600
MILLION = 1_000_000

BATCH1_WORDS = (
    "At batch 1: one process answers one question at a time, the next as soon as the last is done, with the whole "
    "machine to itself. Answers per second = 1,000 / the mean milliseconds per question over the timed runs (the "
    "mean, not the median: a million answers one after another take a million times the mean). Cost per million "
    "answers = price per hour / (answers per second × 3,600) × 1,000,000."
)
BEST_BATCH_WORDS = (
    "At the best batch: the fastest point of the record's batch sweep, questions sent N at a time, as a server "
    "that gathers requests into batches could run them."
)


def cost_per_million(throughput_qps: float | None, usd_per_hour: float | None) -> float | None:
    """Dollars per million answers at ``throughput_qps`` answers per second on a machine of ``usd_per_hour``:
    usd_per_hour / (throughput_qps * 3600) * 1e6. None where either is unknown or the throughput is not positive;
    a negative or non-finite price is refused (ValueError)."""
    if usd_per_hour is None or throughput_qps is None:
        return None
    usd_per_hour, throughput_qps = float(usd_per_hour), float(throughput_qps)
    if not math.isfinite(usd_per_hour) or usd_per_hour < 0:
        raise ValueError(f"a price per hour is a number of dollars, 0 or more (got {usd_per_hour})")
    if not math.isfinite(throughput_qps) or throughput_qps <= 0:
        return None
    return usd_per_hour / (throughput_qps * SECONDS_PER_HOUR) * MILLION


def saving(cost: float | None, baseline_cost: float | None) -> float | None:
    """The share saved against the baseline's cost (0.74: 74% less; negative: dearer); None without both."""
    if cost is None or baseline_cost is None or baseline_cost <= 0:
        return None
    return 1 - cost / baseline_cost


def price_applies(price: HourlyPrice, record: Record) -> bool:
    """Whether ``price`` is for the hardware ``record`` ran on: a CPU machine for a CPU record; for a GPU
    record, a machine whose GPU the record's GPU is (its name holds the price's GPU word, e.g. "T4")."""
    kind = device_kind(record.device)
    if price.kind != kind:
        return False
    if kind == "cpu":
        return True
    gpu = str((record.hardware or {}).get("gpu") or "").upper().replace("-", " ").split()
    return bool(price.gpu) and price.gpu.upper() in gpu


def prices_for(record: Record | None) -> list[HourlyPrice]:
    """The published prices that apply to ``record``'s hardware (none for a GPU the table does not sell)."""
    return [p for p in SPACES_PRICES if record is not None and price_applies(p, record)]


def find_price(key: str) -> HourlyPrice:
    """The published price named ``key`` (e.g. "cpu-upgrade"); ValueError naming the known keys."""
    for price in SPACES_PRICES:
        if price.key == key:
            return price
    raise ValueError(f"unknown machine {key!r}: choose one of {', '.join(p.key for p in SPACES_PRICES)}")


def check_price(price: HourlyPrice, record: Record) -> None:
    """Refuse (ValueError) to price ``record`` at a machine it did not run on."""
    if not price_applies(price, record):
        ran_on = (record.hardware or {}).get("gpu") if device_kind(record.device) == "cuda" else "a CPU"
        raise ValueError(
            f"{price.name} is not the hardware this record was measured on ({ran_on or record.device}): "
            "its throughput says nothing of that machine's"
        )


@dataclass(frozen=True)
class VariantCost:
    """One entry's cost per million answers at one price: at batch 1 and at its sweep's best batch."""

    variant: str
    label: str
    batch1_qps: float | None
    batch1_usd: float | None
    batch1_saving: float | None  # against the baseline at batch 1
    best_batch: int | None = None
    best_qps: float | None = None
    best_usd: float | None = None
    best_saving: float | None = None  # against the baseline's own best batch


def best_batch(entry: VariantEntry) -> tuple[int | None, float | None]:
    """The batch size and answers per second of the best point of ``entry``'s batch sweep (None, None without)."""
    rows = [r for r in entry.batch_sweep if r.get("throughput_qps")]
    if not rows:
        return None, entry.peak_throughput_qps
    top = max(rows, key=lambda r: r["throughput_qps"])
    return top.get("batch_size"), entry.peak_throughput_qps or top["throughput_qps"]


def record_costs(record: Record, usd_per_hour: float) -> list[VariantCost]:
    """Every entry's :class:`VariantCost` at ``usd_per_hour``, in the record's order (variants, then peers)."""
    base = record.entry("baseline")
    base_b1 = cost_per_million(base.throughput_qps, usd_per_hour) if base else None
    base_best = cost_per_million(best_batch(base)[1], usd_per_hour) if base else None
    out = []
    for entry in record.entries:
        ok = entry.error is None
        b1 = cost_per_million(entry.throughput_qps, usd_per_hour) if ok else None
        batch, qps = best_batch(entry) if ok else (None, None)
        best = cost_per_million(qps, usd_per_hour)
        out.append(
            VariantCost(
                entry.variant,
                entry.short_label,
                entry.throughput_qps if ok else None,
                b1,
                saving(b1, base_b1),
                batch,
                qps,
                best,
                saving(best, base_best),
            )
        )
    return out


def usd(value: float | None) -> str:
    """Dollars to the cent ("$0.31", "$1,204.50"); a tenth of a cent under ten cents ("$0.083"); "–" for None."""
    if value is None:
        return "–"
    return f"${value:,.3f}" if 0 < value < 0.1 else f"${value:,.2f}"


def saving_words(share: float | None, variant: str = "") -> str:
    """ "74% less than the baseline", "12% more than the baseline"; "" for the baseline itself or without one."""
    if share is None or variant == "baseline":
        return ""
    percent = round(100 * share)
    if percent == 0:
        return "the same as the baseline"
    return f"{abs(percent)}% {'less' if percent > 0 else 'more'} than the baseline"


def cost_sentence(cost: VariantCost, best: bool = False) -> str:
    """E.g. "INT8: $0.31 per million, 74% less than the baseline" (``best``: at its best batch)."""
    value, share = (cost.best_usd, cost.best_saving) if best else (cost.batch1_usd, cost.batch1_saving)
    words = saving_words(share, cost.variant)
    return f"{cost.label}: {usd(value)} per million" + (f", {words}" if words else "")
