"""The charts as pure functions of results and records: one style per variant everywhere, an honest F1
axis with the always-"no answer" floor marked, plain names, every accuracy view plottable."""

from __future__ import annotations

import copy
import dataclasses
import html
import re
from pathlib import Path

import pytest
from app_helpers import tiny_engine, write_fake_record

from ui.bench_details import LONG_COLUMNS
from ui.benchmark import benchmark_outputs
from ui.charts import (
    LABEL_PX,
    accuracy_figure,
    axis_note,
    best_trade_offs,
    draw_order,
    label_order,
    latency_figure,
    marker_sizes,
    no_answer_floor,
    point_labels,
    scatter_plot_size,
    seq_len_figure,
)
from ui.palette import PEER, STYLES, variant_style
from ui.point_labels import Box, fitted_range, place_labels, text_size
from ui.record_choice import record_choices, stored_record
from ui.record_table import (
    ANSWERABLE_HEADERS,
    PEER_RATIOS,
    SHORT_COLUMNS,
    TABLE_COLUMNS,
    VIEW_CHOICES,
    VIEW_COLUMNS,
    record_frame,
    table_widths,
)
from ui.text import fmt_params
from variants.building.replica import LATENCY_ONLY
from variants.core import spec as specs
from variants.records.record import Record
from variants.serving.outcome import VariantResult

SHIPPED_RECORD = Path(__file__).resolve().parents[1] / "assets/results/embedded-cpu-intel-xeon-20261128T122209Z.json"


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def record(engine, tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("results")
    write_fake_record(folder, engine)
    found, _note = stored_record(engine, folder)
    return found


def test_every_chain_variant_has_its_own_look() -> None:
    for device in ("cpu", "cuda"):
        names = [s.name for s in specs.chain(specs.FAMILIES["embedded"], device)] + [PEER]
        assert all(name in STYLES for name in names)
        looks = {(variant_style(n).colour, variant_style(n).marker) for n in names}
        assert len(looks) == len(names), "two variants of one chain look alike"
    assert variant_style("someone-else") == variant_style("someone-else")  # stable for names outside the chains


def test_a_variant_keeps_its_colour_and_marker_in_every_plot(engine, record) -> None:
    results = {
        v.spec.name: VariantResult(v.spec.name, v.spec.label, answer="x", latency_ms=10.0 + i, speedup=1.0)
        for i, v in enumerate(engine.loaded)
    }
    names = list(results)
    bars = latency_figure(engine.snapshot(results), names).data[0]
    scatter = [t for t in accuracy_figure(record_frame(record), no_answer_floor(record), "view").data if t.name]
    sweep = seq_len_figure(record).data
    labels = {v.variant: v for v in record.variants}
    for i, name in enumerate(names):
        style = variant_style(name)
        assert bars.marker.color[i] == style.colour
        point = next(t for t in scatter if t.name == labels[name].short_label)
        assert (point.marker.color, point.marker.symbol) == (style.colour, style.marker)
        line = next(t for t in sweep if t.name == labels[name].short_label)
        assert (line.line.color, line.marker.symbol) == (style.colour, style.marker)


def with_answered_share(record, share: float = 80.0):
    """``record`` with the share of answerable questions answered, which the fake record leaves out."""
    full = copy.deepcopy(record)
    for entry in full.variants:
        for view in entry.accuracy.values():
            view.has_ans_answered = share
    return full


def test_the_f1_axis_is_fitted_to_the_points_says_where_it_starts_and_marks_the_no_answer_floor(record) -> None:
    fig = accuracy_figure(record_frame(record, "pipeline"), no_answer_floor(record), "at threshold 0")
    markers = [t for t in fig.data if t.mode == "markers"]
    low, high = fig.layout.yaxis.range
    plotted = [t.y[0] for t in markers] + [50.0]
    assert low <= min(plotted) - 1 and max(plotted) + 1 <= high  # every point and the floor, with room
    assert high - low <= max(plotted) - min(plotted) + 6, "the axis is not fitted to the points"
    assert fig.layout.yaxis.title.text == f"F1 on SQuAD v2 (%), from {low:g}"
    assert no_answer_floor(record) == pytest.approx(50.0)  # 10 of the fake record's 20 questions have no answer
    floor = [t for t in fig.data if t.name == "always “no answer”: 50.0"]
    assert len(floor) == 1 and list(floor[0].y) == [50.0, 50.0] and floor[0].line.dash == "dot"
    assert any(a.text == "always “no answer”: 50.0" for a in fig.layout.annotations)  # named on the plot
    assert tuple(floor[0].x) == tuple(fig.layout.xaxis.range) and fig.layout.xaxis.range[0] == 0
    assert "at threshold 0" in fig.layout.title.text
    assert not any("-" in t.name and t.name == t.name.lower() for t in fig.data), "internal ids as names"


def test_an_axis_from_zero_says_nothing_more() -> None:
    assert fitted_range([0.5, 3.0]) == (0.0, 4.0) and axis_note(0.0) == ""
    assert fitted_range([61.05, 67.12]) == (60.0, 70.0) and axis_note(60.0) == ", from 60"


def label_texts(fig) -> dict[str, str]:
    """Each point's label (its lines joined by " / "), by the short name it begins with."""
    texts = [html.unescape(a.text).replace("<br>", " / ") for a in fig.layout.annotations if a.showarrow]
    return {t.split(" / ")[0].split(" · ")[0]: t for t in texts}


def test_every_point_says_its_speedup_and_the_f1_it_loses_against_the_baseline() -> None:
    """On the shipped record: each label is the point's short name, its speedup and its F1 against the
    baseline's, computed from the record's own numbers."""
    shipped = Record.load(SHIPPED_RECORD)
    frame = record_frame(shipped, "answerable")
    fig = accuracy_figure(frame, None, "view", y="has_ans_f1")
    labels = label_texts(fig)
    assert len(labels) == len(frame) == len([t for t in fig.data if t.mode == "markers"])
    rows = {r.variant: r for r in frame.itertuples()}
    base = rows["baseline"].has_ans_f1
    assert labels["Baseline"] == f"Baseline · 90 MB / 1× · F1 {base:.1f}"
    for variant, tag in (("pruned-onnx-opt-int8", "INT8"), ("peer", "pipeline"), ("optimum-int8", "optimum INT8")):
        row = rows[variant]
        lost = row.has_ans_f1 - base
        sign = "+" if lost > 0 else "\u2212"
        size = f"{row.size_mb:.0f} MB"
        assert labels[tag] == f"{tag} · {size} / {row.speedup_vs_baseline:.1f}× · {sign}{abs(lost):.1f} F1"
    assert labels["INT8"] == "INT8 · 52 MB / 3.7× · \u22125.7 F1"  # the README's "3.7× faster for 5.7 F1"
    # off the best trade-offs (beaten on both by another): one short line, name and speed
    assert labels["+ ONNX 2.1×"] == "+ ONNX 2.1×" and labels["Pruned 1.8×"] == "Pruned 1.8×"


def test_labels_clear_of_each_other_and_inside_a_phones_plot() -> None:
    """The shipped record's labels, placed for a phone's plot: no two overlap, none leaves the plot, and the
    baseline, whose marker sits beside the pipeline's, is its own point with its own label."""
    shipped = Record.load(SHIPPED_RECORD)
    for view in ("answerable", "pipeline"):
        column = "has_ans_f1" if view == "answerable" else "f1"
        frame = record_frame(shipped, view)
        fig = accuracy_figure(frame, no_answer_floor(shipped) if view == "pipeline" else None, "v", y=column)
        rows = draw_order(frame)
        x_range, y_range = tuple(fig.layout.xaxis.range), tuple(fig.layout.yaxis.range)
        best = best_trade_offs(rows, column)
        labels, order = point_labels(rows, column, best=best), label_order(rows, best)
        points = [(r.p50_ms, getattr(r, column)) for r in rows.itertuples()]
        size = scatter_plot_size(view=True)
        sizes = marker_sizes(rows)
        placed = place_labels(
            [points[i] for i in order], [labels[i] for i in order], x_range, y_range, size, LABEL_PX,
            [sizes[i] for i in order],
        )  # fmt: skip
        boxes = []
        for i, where in zip(order, placed, strict=True):
            px = (points[i][0] - x_range[0]) / (x_range[1] - x_range[0]) * size[0]
            py = (y_range[1] - points[i][1]) / (y_range[1] - y_range[0]) * size[1]
            w, h = text_size(labels[i], LABEL_PX)
            left = px + where.dx - (w if where.anchor == "right" else 0)
            boxes.append(Box(left, py + where.dy - h / 2, left + w, py + where.dy + h / 2))
        assert all(b.inside(*size) for b in boxes), view
        assert not any(a.hits(b, gap=0) for k, a in enumerate(boxes) for b in boxes[k + 1 :]), view
    styles = {t.name: t.marker for t in fig.data if t.mode == "markers"}
    assert styles["transformers pipeline"].symbol.endswith("-open") and not styles["Baseline"].symbol.endswith("-open")
    spread = [t.error_x for t in fig.data if t.mode == "markers"]
    assert all(e.thickness <= 1 and "rgba" in e.color for e in spread)  # the p90 bar thin and translucent


def test_the_tab_leads_with_the_answerable_questions(record) -> None:
    """The default view: F1 on the answerable questions at threshold 0 and the share answered, read from the
    record's threshold-0 view; no always-"no answer" line (refusing scores 0 there)."""
    assert VIEW_CHOICES[0][1] == "answerable"
    full = with_answered_share(record)
    header, scatter, table, *_ = benchmark_outputs(full, "")
    plotted = {t.name: t.y[0] for t in scatter.data if t.mode == "markers"}
    assert plotted == {e.short_label: e.accuracy["pipeline"].has_ans_f1 for e in full.variants}
    assert scatter.layout.yaxis.title.text.startswith("F1, answerable questions (%)")
    assert "answerable questions, threshold 0" in scatter.layout.title.text
    headers = {**TABLE_COLUMNS, **ANSWERABLE_HEADERS}  # short: the table's label says which questions
    peers = PEER_RATIOS  # the fake record measured no peer: their columns are left out
    shown = [headers[c] for c in SHORT_COLUMNS["answerable"] if c not in peers]
    assert list(table.columns) == shown  # every column: one click away
    every = benchmark_outputs(full, "")[3]
    assert list(every.columns) == [headers[c] for c in VIEW_COLUMNS["answerable"] if c not in peers]
    assert list(table.columns[:4]) == ["Variant", "F1", "% answered", "× baseline"]  # what a phone shows
    assert list(table["% answered"]) == [80.0] * len(full.variants)
    assert "F1 on the 10 questions whose passage holds the answer" in header and "±31 points" in header
    assert "qa-notice" not in header and "always" not in header


def test_a_number_the_record_lacks_is_said_not_invented(record) -> None:
    header, scatter, table, *_ = benchmark_outputs(record, "")  # the fake record keeps no share answered
    assert "does not hold the share of answerable questions answered" in header
    assert table["% answered"].isna().all() and table["F1"].notna().all()
    older = copy.deepcopy(record)
    for entry in older.variants:
        entry.accuracy["pipeline"].has_ans_f1 = None  # a record that kept one score over all of SQuAD v2
    header, scatter, table, *_ = benchmark_outputs(older, "")
    assert "does not hold F1 on the answerable questions alone" in header and "choose a SQuAD v2 view" in header
    assert not scatter.data and "no F1" in scatter.layout.annotations[0].text
    header, scatter, *_ = benchmark_outputs(older, "", "pipeline")  # the SQuAD v2 view still has all it needs
    markers = [t for t in scatter.data if t.mode == "markers"]
    assert "qa-notice" not in header and len(markers) == len(record.variants)


@pytest.mark.parametrize("view", ["answerable", "pipeline", "best", "calibrated"])
def test_every_accuracy_view_is_plotted(record, view: str) -> None:
    header, scatter, table, *_ = benchmark_outputs(with_answered_share(record), "", view)
    squad = view != "answerable"
    markers = [t for t in scatter.data if t.mode == "markers"]
    assert len(markers) == len(record.variants) and len(scatter.data) - len(markers) <= 1 + squad  # + the lines
    assert table["F1"].notna().all()  # on all of SQuAD v2, or on its answerable questions
    assert ("threshold" in table.columns) == (view in ("best", "calibrated"))  # 0 for all in the pipeline view
    assert "Accuracy shown" in header
    # One plain sentence on what the always-"no answer" line means, with the SQuAD v2 views only.
    assert ("answering “no answer” to every one already scores 50.0" in header) == squad
    assert len(table_widths(table)) == len(table.columns)


def test_a_record_is_named_by_when_and_how_many_first(record) -> None:
    """A phone's chooser shows about 30 characters: the date and the number of questions come first."""
    (label, _key), *_ = record_choices([record], [])
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC · 20 questions · embedded · cpu", label), label


def test_latency_bars_show_the_spread(engine) -> None:
    base = VariantResult("baseline", "Baseline", answer="x", latency_ms=10.0, latency_min_ms=9.0, latency_max_ms=13.0)
    fig = latency_figure(engine.snapshot({"baseline": base}), ["baseline"])
    assert list(fig.data[0].error_x.array) == [3.0] and list(fig.data[0].error_x.arrayminus) == [1.0]


def test_a_random_weight_variant_beside_real_ones_gets_no_f1(record) -> None:
    mixed = copy.deepcopy(record)
    odd = mixed.variants[1]
    odd.latency_only = True
    header, scatter, table, *_ = benchmark_outputs(mixed, "")
    markers = [t for t in scatter.data if t.mode == "markers"]
    assert len(markers) == len(mixed.variants) - 1 and odd.short_label not in {t.name for t in scatter.data}
    assert f"{LATENCY_ONLY}</span>: {odd.short_label}" in header and "Accuracy on" in header
    row = table[table["Variant"] == f"{odd.short_label} ({LATENCY_ONLY})"]
    assert len(row) == 1 and row["F1"].isna().all() and row["median ms"].notna().all()
    assert table["F1"].notna().sum() == len(mixed.variants) - 1


def test_the_chart_titles_fit_a_phone(engine, record) -> None:
    """Plotly does not wrap titles: on a phone (~320 px of plot) a title or axis line longer than about
    40 characters at full size is cut off. Lines in <sup> (the accuracy view) are drawn smaller."""
    figures = (
        accuracy_figure(record_frame(record), no_answer_floor(record), "view"),
        accuracy_figure(record_frame(record), None, "view", y="has_ans_f1"),
        seq_len_figure(record),
        latency_figure(engine.snapshot(), []),  # the Ask tab's
    )
    for fig in figures:
        lines = [*fig.layout.title.text.split("<br>"), fig.layout.xaxis.title.text, fig.layout.yaxis.title.text]
        full_size = [line for line in lines if line and not line.startswith("<sup>")]
        assert full_size and all(len(line) <= 40 for line in full_size), full_size
    for view in VIEW_COLUMNS:  # the smaller lines naming each view, as the tab draws them: 50 characters at most
        title = benchmark_outputs(record, "", view)[1].layout.title.text
        small = [html.unescape(line.removesuffix("</sup>")) for line in title.split("<br><sup>")[1:]]
        assert small and all(len(line) <= 50 for line in small), small


def test_a_record_without_a_sweep_says_why_in_lines_that_fit_a_phone(record) -> None:
    """A stored record whose run skipped the sweep names the flag; a quick run says it is quick. Plotly does
    not wrap annotations either: each line stays within a phone's plot width."""
    for kind, why in (("full", "--skip-sweeps"), ("quick", "quick runs skip it")):
        bare = dataclasses.replace(record, kind=kind, variants=[dataclasses.replace(v, seq_len_sweep=[])
                                                                for v in record.variants])  # fmt: skip
        text = seq_len_figure(bare).layout.annotations[0].text
        assert why in text and all(len(line) <= 32 for line in text.split("<br>")), text


def test_parameter_counts_read_as_a_dash_where_a_record_has_none():
    assert [fmt_params(n) for n in (None, 0, float("nan"), 22_566_146)] == ["–", "–", "–", "22.6 M"]


def test_the_long_passage_view_shows_what_a_whole_article_costs_under_the_records_rule(record) -> None:
    *_, note, table, _csv = benchmark_outputs(record, "")
    assert "no long-passage view" in note and table.empty
    paragraph = {"near": {"has_ans_f1": 66.72}, "focus": {"has_ans_f1": 1.0}}  # only the record's rule is shown
    article = {"near": {"has_ans_f1": 61.5, "answered_share": 89.24}, "focus": {"has_ans_f1": 0.0}}
    measured = {"paragraph": paragraph, "article": article}
    long = dataclasses.replace(
        record,
        settings={**record.settings, "windows": {"rule": "near", "near": 1.0}},
        long_inputs={"n_answerable": 251, "article_chars": [8488, 49669], "variants": {"baseline": measured}},
    )
    *_, note, table, _csv = benchmark_outputs(long, "")
    assert "251 answerable questions" in note and "8,488 to 49,669 characters" in note and "`near`" in note
    assert list(table.columns) == LONG_COLUMNS
    assert table.iloc[0].tolist() == [long.entry("baseline").short_label, 66.72, 61.5, 5.22, 89.24]


def test_a_record_that_cannot_be_shown_says_so_and_the_page_still_builds(record) -> None:
    broken = dataclasses.replace(record, variants=[dataclasses.replace(e) for e in record.variants])
    broken.variants[0].seq_len_sweep = [{"p50_ms": 3.0}]  # a sweep point cut short: no length
    header, _scatter, table, *_rest, csv = benchmark_outputs(broken, "")
    assert "cannot be shown" in header and (broken.file or broken.created) in header
    assert csv is None and not len(table)


def test_a_variant_that_failed_in_the_run_is_named_with_its_reason(record) -> None:
    failed = dataclasses.replace(record, variants=[dataclasses.replace(e) for e in record.variants])
    failed.variants[-1].error = "RuntimeError: out of memory"
    header = benchmark_outputs(failed, "")[0]
    assert "Not measured" in header and "out of memory" in header
    assert "Not measured" not in benchmark_outputs(record, "")[0]


def test_a_records_folder_that_does_not_exist_is_named(engine, tmp_path) -> None:
    record, note = stored_record(engine, tmp_path / "typo")
    assert record is None and note == f"The benchmark records folder {tmp_path / 'typo'} does not exist."
    assert stored_record(engine, tmp_path)[1].startswith("No benchmark records")  # there, but empty
