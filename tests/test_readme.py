"""The README's results table says what the record it names says: every row's numbers, in the record's order."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _results_section(text: str) -> str:
    return text.split("\n## Results", 1)[1].split("\n## ", 1)[0]


def _results_table(section: str) -> list[list[str]]:
    """The rows of the section's table (its only one), each a list of cells, header and rule left out."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _ratio(value: float, spread: list[float] | None) -> str:
    text = f"{value:.2f}"
    return text if spread is None else f"{text} ({spread[0]:.2f}–{spread[1]:.2f})"


def _expected(entry: dict, optimum: str) -> list[str]:
    """A row as the README writes it: F1 and answerable F1 at threshold 0, p50, × pipeline, × optimum INT8, and
    dollars per million answers at CPU Upgrade's published price (the one cost function, to the cent)."""
    from variants.records.cost import cost_per_million, find_price, usd  # noqa: PLC0415

    accuracy, p50 = entry["accuracy"]["pipeline"], entry["latency_ms"]["p50"]
    if entry["variant"] == "peer":
        vs_pipeline = "1.00"
    else:
        vs_pipeline = _ratio(entry["speedup_vs_peer"], entry["speedup_vs_peer_range"])
    if entry["variant"] == optimum:
        vs_optimum = "1.00"
    else:
        median, low, high = entry["speedup_vs_peers"][optimum]
        vs_optimum = _ratio(median, [low, high])
    cost = usd(cost_per_million(entry["throughput_qps"], find_price("cpu-upgrade").usd_per_hour)).removeprefix("$")
    return [f"{accuracy['f1']:.2f}", f"{accuracy['has_ans_f1']:.2f}", f"{p50:.1f} ms", vs_pipeline, vs_optimum, cost]


def test_the_readme_table_is_the_record_it_names() -> None:
    text = _results_section((ROOT / "README.md").read_text(encoding="utf-8"))
    named = re.search(r"Record: `(assets/results/[^`]+\.json)`", text)
    assert named, "the README names the record its table comes from"
    record = json.loads((ROOT / named.group(1)).read_text(encoding="utf-8"))
    (optimum,) = [p["variant"] for p in record["peers"]]
    entries = [record["peer"], *record["peers"], *record["variants"]]
    rows = _results_table(text)
    assert len(rows) == len(entries)
    for row, entry in zip(rows, entries, strict=True):
        cells = [re.sub(r"\*\*", "", cell) for cell in row[1:]]
        assert cells == _expected(entry, optimum), (row[0], entry["variant"])


def test_the_readme_record_measured_the_shipped_models() -> None:
    """Its entries name the weights they ran (records since 2026-11-28): those of assets/models, as the app loads
    them, so that the Benchmark tab shows it without an "other model weights" note."""
    from variants.building.sources import resolve, weights_identity  # noqa: PLC0415
    from variants.core.spec import FAMILIES  # noqa: PLC0415

    text = _results_section((ROOT / "README.md").read_text(encoding="utf-8"))
    record = json.loads((ROOT / re.search(r"Record: `(assets/results/[^`]+\.json)`", text).group(1)).read_text())
    family = FAMILIES[record["preset"]]
    shipped = {"baseline": family.baseline, "pruned": family.pruned}
    for entry in record["variants"]:
        source = shipped["baseline" if entry["variant"] == "baseline" else "pruned"]
        assert entry["weights"] == weights_identity(resolve(str(ROOT / source))), entry["variant"]
