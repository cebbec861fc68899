"""``python -m variants plot``: the README's chart, drawn from a committed record in the Benchmark tab's views."""

import json
import re
from pathlib import Path

import pytest

from variants.benchmarking.plot import main, plot_record
from variants.records.record import Record
from variants.records.results import records_to_frame

RECORD = Path(__file__).resolve().parents[1] / "assets/results/embedded-cpu-intel-xeon-20261128T122209Z.json"


def _plotted_y(html: Path) -> list[float]:
    """The y values of the chart's markers, read back from plotly's HTML."""
    data = json.loads(re.search(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*(\[.*?\]),\s*\{", html.read_text(), re.S).group(1))
    return sorted(trace["y"][0] for trace in data if trace.get("mode") == "markers")


def test_the_default_view_is_the_answerable_questions_as_in_the_tab(tmp_path: Path) -> None:
    record = Record.load(RECORD)
    frame = records_to_frame([record], view="pipeline")
    out = plot_record(record, tmp_path / "chart.html")
    assert _plotted_y(out) == pytest.approx(sorted(frame["has_ans_f1"].dropna()))
    html = out.read_text()
    assert "251 answerable questions of 501" in html
    assert "always “no answer”" not in html  # 0 on answerable questions: the line belongs to the SQuAD v2 views


def test_the_squad_v2_view_keeps_the_no_answer_line(tmp_path: Path) -> None:
    record = Record.load(RECORD)
    frame = records_to_frame([record], view="pipeline")
    out = plot_record(record, tmp_path / "chart.html", view="pipeline")
    assert _plotted_y(out) == pytest.approx(sorted(frame["f1"].dropna()))
    assert "always “no answer”: 49.9" in out.read_text()


def test_cli_writes_a_png_and_refuses_an_unknown_view(tmp_path: Path, capsys) -> None:
    assert main([str(RECORD), "--out", str(tmp_path / "chart.png")]) == 0
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="unknown view"):
        plot_record(Record.load(RECORD), tmp_path / "x.png", view="answered")


def test_the_chart_is_fitted_and_labelled_as_the_tab(tmp_path: Path) -> None:
    """The README's chart tells the trade-off without the table: the F1 axis fitted (its title says where it
    starts) and each point labelled with its speedup and the F1 it loses against the baseline."""
    html = plot_record(Record.load(RECORD), tmp_path / "chart.html").read_text()
    html = html.replace("\\u003c", "<").replace("\\u003e", ">")  # plotly's JSON escapes the tags
    assert "F1, answerable questions (%), from 60" in html
    assert "INT8 · 52 MB<br>3.7× · \u22125.7 F1" in html and "Baseline · 90 MB<br>1× · F1 66.7" in html
