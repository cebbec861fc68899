"""The report that travels (ui.report, python -m variants report): one file, nothing fetched, the record's numbers;
and the link to the Ask tab's question (ui.share). The browser half is in test_browser_report.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, tiny_engine
from hypothesis import given, settings
from hypothesis import strategies as st

from ui import share
from ui.cards import card_html
from ui.report import benchmark_report, engine_examples, table_html
from variants.__main__ import main as variants_main
from variants.records.record import Record
from variants.records.results import RESULTS_DIR, load_records

# the newest shipped record of the embedded preset: the README's, with its F1 (the newest of all may be latency only)
SHIPPED = next(r for r in load_records(RESULTS_DIR) if r.preset == "embedded")


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


def outside_scripts(html: str) -> str:
    """The page less the contents of its <script> elements (plotly.js names map-tile hosts it never fetches here)."""
    return re.sub(r"<script[^>]*>.*?</script>", "<script></script>", html, flags=re.S)


def test_the_report_of_a_shipped_record_is_one_file_with_its_numbers() -> None:
    html = benchmark_report(SHIPPED)
    page = outside_scripts(html)
    # nothing fetched: no script, style sheet or image from elsewhere (a plain link to a source is not fetched)
    assert not re.search(r"""src\s*=\s*["']?(https?:)?//""", page, flags=re.I)
    assert not re.search(r"""<link[^>]*href\s*=\s*["']?(https?:)?//""", page, flags=re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", page) and "@import" not in page
    assert "<script src" not in html and html.count("Plotly.newPlot") == 1  # plotly.js inlined, one chart
    assert "In short:" in html and "Hardware:" in html  # the tab's headline sentence and header
    cells = set(re.findall(r'<td class="num">([^<]*)</td>', html))
    for entry in SHIPPED.variants:  # every number of the tab's table, as the record holds it
        view = entry.view("pipeline")
        for value in (view.has_ans_f1, entry.latency_ms.p50, entry.latency_ms.p90, entry.speedup_vs_baseline):
            assert f"{round(value, 2):g}" in cells, (entry.variant, value)
        assert entry.short_label in html
    hw = SHIPPED.hardware
    assert hw["cpu"] in html and ", ".join(hw["cpu_isa"]) in html and f"family {hw['cpu_id']['family']}" in html
    assert all(f"<dd>{v}</dd>" in html for v in SHIPPED.versions.values() if isinstance(v, str))
    assert f"<dd>{SHIPPED.data['n_questions']}</dd>" in html and "Report made 20" in html
    assert "No example answers" in html  # made without them, and it says so


def test_a_busy_record_says_so_in_its_report() -> None:
    busy = dataclasses.replace(SHIPPED, variants=[dataclasses.replace(e) for e in SHIPPED.variants])
    busy.variants[-1].stretch = 2.0
    html = benchmark_report(busy)
    assert "The machine was busy while this was timed" in html and "timed on a busy machine" in html


def test_tables_are_cut_into_groups_of_a_few_columns() -> None:
    import pandas as pd  # noqa: PLC0415

    columns = ["Variant", "F1", "× baseline", "median ms", "MB", "$ per million"]
    table = pd.DataFrame([["Baseline", 66.7, 1.0, 24.7, 90.3, 0.31]], columns=columns)
    html = table_html(table)
    groups = re.findall(r'data-group="([^"]+)"', html)
    assert groups == ["Accuracy", "Speed", "Size", "More"]  # a column no group names (a cost) still shows
    assert html.count("<th>Baseline</th>") == 4 and "0.31" in html


def test_examples_are_answered_by_every_variant_the_record_measured(engine, tmp_path: Path) -> None:
    record = Record(created="2026-01-01T00:00:00Z", device="cpu", preset=engine.preset, variants=[
        dataclasses.replace(e) for e in SHIPPED.variants if e.variant in engine.variants])  # fmt: skip
    examples = engine_examples(engine, record)
    assert len(examples.rows) >= 1 and "answered by the app's own variants" in examples.how
    for example in examples.rows:
        assert set(example.answers) | set(example.errors) == {e.short_label for e in record.variants}
    html = benchmark_report(record, examples=examples)
    assert examples.rows[0].question in html and "Given by" in html


def test_the_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "report.html"
    code = variants_main(["report", str(RESULTS_DIR / SHIPPED.file), "--no-examples", "--price", "0.03",
                          "--out", str(out)])  # fmt: skip
    assert code == 0 and out.stat().st_size > 1e6 and "nothing is fetched" in capsys.readouterr().out
    assert out.read_text(encoding="utf-8").count("Plotly.newPlot") == 1
    with pytest.raises(SystemExit):
        variants_main(["report", str(RESULTS_DIR / SHIPPED.file), "--price", "-1", "--out", str(out)])


# --- the link to the Ask tab's question -----------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    question=st.text(min_size=1, max_size=200),
    passage=st.text(max_size=3000),
    extra=st.lists(st.sampled_from(["pruned-onnx", "pruned-dense"]), unique=True),
    rule=st.sampled_from(share.RULES),
    margin=st.floats(-10, 10),
)
def test_a_link_carries_the_question_back(question, passage, extra, rule, margin) -> None:
    state = share.SharedAsk(question, passage, extra, [], rule, margin)
    fragment = share.encode(state)
    assert fragment.startswith("#ask=") and len(fragment) <= share.MAX_STATE_CHARS
    assert share.decode(fragment, 25_000) == state


def test_a_passage_too_long_for_a_link_stays_out_of_it() -> None:
    passage = " ".join(f"w{i * 7919 % 100003}" for i in range(6000))  # ~40,000 characters that barely compress
    fragment = share.encode(share.SharedAsk("Who?", passage))
    state = share.decode(fragment, 50_000)
    assert len(fragment) <= share.MAX_STATE_CHARS and state.passage == "" and state.passage_chars == len(passage)
    assert "too long for a link" in share.link_words(state, fragment)


def test_a_bad_link_is_refused_not_trusted() -> None:
    good = share.encode(share.SharedAsk("Who?", "Ann did.", rule="margin", margin=3.0))
    assert share.decode(good[:-6], 1000) is None  # cut short
    assert share.decode("#ask=%%%", 1000) is None and share.decode("#other=1", 1000) is None
    assert share.decode(share.encode(share.SharedAsk("Who?", "x" * 2000)), 1000) is None  # over the app's limit
    odd = share._pack({"q": "Who?", "r": "anything", "m": 1e9})
    assert share.decode(odd, 1000) == share.SharedAsk("Who?", rule="pipeline", margin=10.0)  # clamped, defaulted
    bomb = share._pack({"q": "Who?", "p": "a" * 5_000_000})  # deflates tiny, inflates past any passage
    assert len(bomb) < share.MAX_STATE_CHARS and share.decode(bomb, 1000) is None


# --- the card's confidence -------------------------------------------------------------------------------------


def test_same_answer_at_far_apart_confidences_says_they_are_not_comparable(engine) -> None:
    by_name = {r.variant: r for r in engine.ask(QUESTION, CONTEXT)}
    base = dataclasses.replace(by_name["baseline"], answer="the courts", score=0.089)
    int8 = dataclasses.replace(by_name["pruned-onnx-opt-int8"], answer="The courts ", score=0.41)
    card = card_html(engine.snapshot().view("pruned-onnx-opt-int8"), int8, CONTEXT, "done", base)
    assert "at 41% confidence against the baseline's 8.9%" in card and "own scale of confidence" in card
    assert "never exceeds 100%" in card  # the tooltip: a probability, within one window
    close = dataclasses.replace(int8, score=0.12)
    assert "qa-confidence-note" not in card_html(
        engine.snapshot().view("pruned-onnx-opt-int8"), close, CONTEXT, "done", base
    )
    other = dataclasses.replace(int8, answer="Paris")
    assert "qa-confidence-note" not in card_html(
        engine.snapshot().view("pruned-onnx-opt-int8"), other, CONTEXT, "done", base
    )
