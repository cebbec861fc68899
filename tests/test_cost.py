"""Cost per million answers and the best trade-offs: one definition each (variants.records.cost, .frontier) that
the Benchmark tab, its headline, the chart and `bench`'s summary share."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from ui.benchmark import benchmark_outputs
from ui.charts import FRONTIER_NAME, accuracy_figure
from ui.cost_view import price_choices
from ui.headline import headline_html
from variants.benchmarking.cli import price_argument, summary_table
from variants.records.cost import (
    check_price,
    cost_per_million,
    cost_sentence,
    find_price,
    prices_for,
    record_costs,
    usd,
)
from variants.records.frontier import frontier, frontier_sentence
from variants.records.record import Record
from variants.records.results import records_to_frame

SHIPPED = Path(__file__).resolve().parents[1] / "assets/results/embedded-cpu-intel-xeon-20261128T122209Z.json"


@pytest.fixture(scope="module")
def shipped() -> Record:
    return Record.load(SHIPPED)


def test_the_cost_is_the_price_over_the_answers_an_hour_to_the_cent() -> None:
    assert cost_per_million(100.0, 3.6) == pytest.approx(10.0)  # 360,000 answers an hour at $3.60: $10 a million
    assert cost_per_million(1.0, 0.036) == pytest.approx(10.0)
    assert cost_per_million(50.0, 0.0) == 0.0  # a free machine
    assert cost_per_million(None, 1.0) is None and cost_per_million(0.0, 1.0) is None
    assert cost_per_million(10.0, None) is None
    with pytest.raises(ValueError):
        cost_per_million(10.0, -1.0)
    assert usd(0.31) == "$0.31" and usd(0.0833) == "$0.083" and usd(1204.5) == "$1,204.50" and usd(None) == "–"


def test_the_record_s_figures_agree_with_its_throughput_to_the_cent(shipped: Record) -> None:
    costs = {c.variant: c for c in record_costs(shipped, 1.0)}
    for entry in shipped.entries:
        expected = 1.0 / (entry.throughput_qps * 3600) * 1e6
        assert round(costs[entry.variant].batch1_usd, 2) == round(expected, 2)
    int8 = costs["pruned-onnx-opt-int8"]
    assert int8.batch1_saving == pytest.approx(1 - 29.7 / 100.59)  # the baseline's throughput over INT8's
    assert int8.best_batch == 8 and int8.best_qps == 135.02  # the sweep's best, said as such
    assert round(int8.best_usd, 2) == round(1e6 / (135.02 * 3600), 2)
    assert costs["peer"].best_usd is None  # no sweep: no best-batch figure
    assert cost_sentence(int8) == "Pruned + ONNX + INT8: $2.76 per million, 70% less than the baseline"


def test_a_price_applies_only_to_the_hardware_the_record_ran_on(shipped: Record) -> None:
    assert [p.key for p in prices_for(shipped)] == ["cpu-basic", "cpu-upgrade"]  # a CPU record: CPU prices only
    with pytest.raises(ValueError, match="not the hardware"):
        check_price(find_price("t4-small"), shipped)
    gpu = copy.deepcopy(shipped)
    gpu.device, gpu.hardware = "cuda:0", {**shipped.hardware, "gpu": "Tesla T4"}
    assert [p.key for p in prices_for(gpu)] == ["t4-small", "t4-medium"]
    gpu.hardware["gpu"] = "NVIDIA H200"  # a GPU the table does not sell: no published price applies
    assert prices_for(gpu) == []
    with pytest.raises(ValueError):
        check_price(find_price("cpu-upgrade"), gpu)


def test_the_summary_says_the_cost_refuses_other_hardware_and_says_free(shipped: Record) -> None:
    text = summary_table(shipped, price="cpu-upgrade")
    assert "cost per million answers at $0.03/hour (CPU Upgrade)" in text
    assert "Pruned + ONNX + INT8: $0.083 per million, 70% less than the baseline" in text
    assert "at its best batch (8): $0.062 per million" in text
    assert "not shown: Nvidia T4 - small is not the hardware" in summary_table(shipped, price="t4-small")
    assert "CPU Basic is free" in summary_table(shipped, price="cpu-basic")
    assert "cost" not in summary_table(shipped).split("\n", 2)[-1].split("best trade-offs")[-1]
    assert price_argument("0.5") == 0.5 and price_argument("l4") == "l4"


def test_the_frontier_counts_peers_and_ties() -> None:
    points = {"base": (30.0, 66.0), "a": (10.0, 63.0), "b": (12.0, 63.0), "peer": (11.0, 64.0), "c": (5.0, 61.0)}
    found = frontier(points)
    assert found.best == ["c", "a", "peer", "base"]  # fastest first
    assert found.beaten == {"b": ["a", "peer"]}  # a peer beats one of ours too
    tie = frontier({"x": (10.0, 60.0), "y": (10.0, 60.0), "z": (11.0, 59.0)})
    assert tie.best == ["x", "y"] and tie.beaten == {"z": ["x", "y"]}  # equal on both: neither beats the other


def test_the_frontier_sentence_names_a_peer_that_beats_ours(shipped: Record) -> None:
    text = frontier_sentence(shipped)
    assert text.startswith("On this machine the best trade-offs are Pruned + ONNX + INT8")
    assert "optimum ORT dynamic INT8 (avx512_vnni) beats Pruned, stored dense on both" in text


def test_the_chart_joins_the_frontier_and_sizes_the_markers_by_model_size(shipped: Record) -> None:
    fig = accuracy_figure(records_to_frame(shipped, "pipeline"), None, "v", y="has_ans_f1")
    line = [t for t in fig.data if t.name == FRONTIER_NAME]
    assert len(line) == 1 and line[0].mode == "lines"
    assert list(line[0].x) == sorted(line[0].x) and len(line[0].x) == 5  # the five best, fastest first
    markers = {t.name: t for t in fig.data if t.mode == "markers"}
    int8, base = markers["Pruned + ONNX + INT8"], markers["Baseline"]
    assert int8.marker.size < base.marker.size  # 52 MB against 90 MB: smaller is seen
    assert (int8.marker.size / base.marker.size) ** 2 == pytest.approx(51.7 / 90.3)  # area in proportion
    assert markers["Pruned + ONNX"].opacity < 1 == int8.opacity  # beaten on both: fainter
    drawn = [t.name for t in fig.data if t.mode == "markers"]
    assert drawn.index("Pruned + ONNX + INT8") > drawn.index("Pruned"), "INT8's star hidden behind a larger marker"


def test_the_headline_gains_the_cost_when_a_price_is_set(shipped: Record) -> None:
    frame = records_to_frame(shipped, "pipeline")
    plain = headline_html(shipped, frame, "has_ans_f1", "answerable questions")
    assert "$" not in plain and "best trade-offs are INT8" in plain
    priced = headline_html(shipped, frame, "has_ans_f1", "answerable questions", 0.03, "CPU Upgrade")
    assert "At $0.03 an hour (CPU Upgrade)" in priced and "<b>$0.083</b>" in priced
    assert "70% less than the baseline's $0.28" in priced
    free = headline_html(shipped, frame, "has_ans_f1", "answerable questions", 0.0, "CPU Basic")
    assert "On CPU Basic, which is free, answers cost nothing" in free


def test_the_tab_shows_the_cost_per_variant_and_says_free(shipped: Record) -> None:
    header, _scatter, table, every, *_ = benchmark_outputs(shipped, "", "answerable", 0.03, "cpu-upgrade")
    row = table[table["Variant"] == "Pruned + ONNX + INT8"].iloc[0]
    assert row["$ per million answers"] == "$0.083 · 70% less"
    assert row["$ per million, best batch"] == "$0.062 · 69% less (batch 8)"
    assert "(CPU Upgrade)" in header and "answers per hour this record measured" in header
    assert "$ per million answers" in every.columns
    header, _scatter, table, *_ = benchmark_outputs(shipped, "", "answerable", 0.0, "cpu-basic")
    assert "CPU Basic is free" in header and set(table["$ per million answers"]) == {"free"}
    header, _scatter, table, *_ = benchmark_outputs(shipped, "")
    assert "$ per million answers" not in table.columns and "Pick a machine or type a price" in header
    assert [key for _label, key in price_choices(shipped)] == ["cpu-basic", "cpu-upgrade", ""]  # CPU machines only


def test_a_disturbed_run_names_no_best_trade_offs(shipped: Record) -> None:
    busy = copy.deepcopy(shipped)
    busy.variants[0].stretch = 2.0  # the timing rule's busy-machine flag: no winner from it
    frame = records_to_frame(busy, "pipeline")
    assert "best trade-off" not in headline_html(busy, frame, "has_ans_f1", "answerable questions")
    assert "best trade-off" not in summary_table(busy) and summary_table(busy).endswith("run it again.")
