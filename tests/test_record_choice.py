"""The Benchmark tab's record list and its headline sentence, on the shipped records: the current record per
machine first, older ones one choice away saying what differs, and the README's ratios on the page."""

from __future__ import annotations

import dataclasses
import html
import subprocess
from pathlib import Path

import pytest

from ui.benchmark import benchmark_outputs
from ui.record_choice import (
    choices_for,
    current_records,
    differences,
    older_info,
    older_note,
    record_key,
    stored_records,
)
from variants.core.versions import code_version, record_versions
from variants.records.results import RESULTS_DIR

CURRENT = "embedded-cpu-intel-xeon-20261128T122209Z.json"  # the README's record


@pytest.fixture(scope="module")
def stored():
    records = [r for r in stored_records(RESULTS_DIR) if r.preset == "embedded"]  # one machine's, one preset's
    assert len(records) >= 3, "the shipped records"
    return records


def by_file(stored, name: str):
    return next(r for r in stored if r.file == name)


def test_the_list_shows_the_current_record_of_each_machine_and_hides_older_ones_one_choice_away(stored) -> None:
    current = current_records(stored)
    assert [r.file for r in current.values()] == [CURRENT]  # three records, one machine: the newest is current
    shown = choices_for(stored, [])
    assert [key for _label, key in shown] == [record_key(by_file(stored, CURRENT))]
    every = choices_for(stored, [], older=True)
    assert [key for _label, key in every] == [record_key(r) for r in stored]  # newest first, nothing lost
    for label, _key in every[1:]:
        assert label.startswith("older: ") and "no weights hash" in label and "baseline median" in label, label
    assert older_info(stored) == f"{len(stored) - 1} older records, each saying what differs"


def test_an_older_record_says_what_differs_from_its_machines_current_one(stored) -> None:
    current = by_file(stored, CURRENT)
    older = by_file(stored, "embedded-cpu-intel-xeon-20261128T103538Z.json")
    said = differences(older, current)
    assert said == [
        "no weights hash (recorded before it was kept)",
        "code version not recorded",
        "baseline median 30.6 ms (current 24.7)",
    ]
    note = older_note(older, stored)
    assert "current one for this machine is from 2026-11-28 12:22 UTC" in note and "30.6 ms" in note
    assert older_note(current, stored) == ""  # the current record needs no word
    again = next(r for r in stored_records(RESULTS_DIR) if r.file == CURRENT)  # loaded apart, as the tab does
    assert again is not current and older_note(again, stored) == ""
    # Same weights, another commit: said as such.
    hashed = dataclasses.replace(
        older,
        variants=[dataclasses.replace(e, weights=current.entry(e.variant).weights) for e in older.variants],
        versions={**older.versions, "code": "abc123def456"},
    )
    assert differences(hashed, current)[:2] == ["same weights", "code abc123def456"]
    other = dataclasses.replace(hashed, variants=[dataclasses.replace(e, weights="sha256:0") for e in hashed.variants])
    assert differences(other, current)[0].startswith("other weights: Baseline, Pruned, stored dense")


def test_the_page_says_the_readmes_ratios_beside_x_baseline(stored) -> None:
    record = by_file(stored, CURRENT)
    header, _scatter, table, *_ = benchmark_outputs(record, "")
    assert list(table.columns[:6]) == ["Variant", "F1", "% answered", "× baseline", "× pipeline", "× optimum INT8"]
    int8 = table[table["Variant"] == record.entry("pruned-onnx-opt-int8").short_label].iloc[0]
    assert (int8["× pipeline"], int8["× optimum INT8"]) == (3.76, 2.08)  # the README's table, from the same record
    assert table[table["Variant"] == "transformers pipeline"].iloc[0]["× pipeline"] == 1.0
    text = html.unescape(header)
    assert "In short: <b>Pruned + ONNX + INT8</b> answers a question in 6.7 ms (median)" in text
    assert "<b>3.8×</b> as fast as" in text and "<b>2.1×</b> as fast as" in text
    assert "<b>5.7 points</b> of" in text and "on answerable questions" in text
    assert header.count('class="qa-term" title="') == 4  # ×, the two peers and F1 explained on hover


def test_a_record_without_peers_leaves_their_columns_out(stored) -> None:
    record = dataclasses.replace(by_file(stored, CURRENT), peer=None, peers=[])
    record.variants = [dataclasses.replace(e, speedup_vs_peer=None, speedup_vs_peers={}) for e in record.variants]
    header, _scatter, table, *_ = benchmark_outputs(record, "")
    assert "× pipeline" not in table.columns and "× optimum INT8" not in table.columns
    assert "as fast as the baseline" in html.unescape(header) and "pipeline" not in html.unescape(header)


def test_records_name_the_code_they_ran(tmp_path: Path) -> None:
    here = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], check=False, capture_output=True, text=True)
    if here.returncode:
        pytest.skip("not a git checkout")
    assert record_versions()["code"].startswith(here.stdout.strip())
    assert code_version(tmp_path) is None  # a copy without git: said as unknown, never a guess
