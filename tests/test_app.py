"""The Gradio app: its /answer API through gradio_client, the streaming Ask handler, escaping, the
benchmark tab's helpers and start-up options; all on the tiny fixture models. The shipped models
get one slow test (skipped when they are not in assets/models)."""

from __future__ import annotations

import dataclasses
import functools
import html
import inspect
import re
import socket
import warnings
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from app_helpers import CONTEXT, QUESTION, TINY_SETTINGS, running, tiny_engine, write_fake_record
from gradio_client import Client
from test_tables import read_table

import app
from ui import SAMPLE_FILE
from ui.about import about_html, page_intro
from ui.ask import (
    ULAN_BATOR,
    load_examples,
    make_answer_api,
    make_ask,
    make_reselect,
    make_validator,
    null_threshold,
)
from ui.benchmark import QUICK_SHOWN, benchmark_outputs, make_quick_handlers
from ui.cards import card_html, summary_html
from ui.questions import Runs
from ui.record_choice import find_record, record_key, stored_record, stored_records, weights_note
from ui.record_table import (
    ANSWERABLE_HEADERS,
    PEER_RATIOS,
    SHORT_COLUMNS,
    TABLE_COLUMNS,
    VIEW_COLUMNS,
    record_frame,
    record_header,
    table_frame,
)
from ui.tables import EMPTY
from ui.text import SNIPPET_RADIUS, fmt_confidence, highlight, notice_html
from variants.answering.timing import cpu_clock
from variants.benchmarking.quick import QuickRun
from variants.building import custom
from variants.core import spec as specs
from variants.core.spec import VariantSpec
from variants.serving.engine import load_engine
from variants.serving.guard import MAX_LONG_RUNS
from variants.serving.outcome import VariantResult, busy_words
from variants.serving.snapshot import VariantView

FIELDS = {f.name for f in dataclasses.fields(VariantResult)}
SHIPPED = specs.EMBEDDED_MODELS / "minilm-squad2"
SHIPPED_PRUNED = specs.EMBEDDED_MODELS / "minilm-squad2-pruned"


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def results_dir(engine, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("results")
    write_fake_record(folder, engine)
    return folder


@pytest.fixture(scope="module")
def client(engine, results_dir: Path):
    with running(app.build_demo(engine, results_dir=results_dir)) as url:
        yield Client(url, verbose=False)


# --- the API ----------------------------------------------------------------------------------------


def test_every_variant_loaded(engine) -> None:
    assert [v.spec.name for v in engine.loaded] == [s.name for s in specs.chain(specs.FAMILIES["embedded"], "cpu")]
    assert all(v.ok for v in engine.loaded), [v.error for v in engine.loaded]


def test_answer_endpoint_returns_every_variant(client: Client, engine) -> None:
    results = client.predict(CONTEXT, QUESTION, api_name="/answer")
    assert [r["variant"] for r in results] == [v.spec.name for v in engine.loaded]  # baseline first
    for r in results:
        assert set(r) == FIELDS
        assert r["error"] is None
        assert r["latency_ms"] > 0 and r["size_mb"] > 0 and r["parameters"] > 0
        assert r["device"] == "cpu" and r["provider"] and r["dtype"] in {"fp32", "int8"}
        assert r["speedup"] > 0
        assert r["answer"] == CONTEXT[r["start"] : r["end"]] if r["answer"] else r["start"] == r["end"] == 0
    assert results[0]["speedup"] == pytest.approx(1.0)
    by_name = {r["variant"]: r for r in results}
    assert by_name["pruned-onnx-opt-int8"]["provider"] == "CPUExecutionProvider"
    assert by_name["pruned-onnx-opt-int8"]["dtype"] == "int8"
    assert by_name["pruned"]["parameters"] < by_name["pruned-dense"]["parameters"]


def test_requests_print_no_deprecation_warnings(engine, results_dir: Path) -> None:
    """No deprecation warning per request (gradio 6.17 read a deprecated starlette name on each; 6.31 does not)."""
    with warnings.catch_warnings(record=True) as caught:  # also resets the once-per-place registry
        with running(app.build_demo(engine, results_dir=results_dir)) as url:
            client = Client(url, verbose=False)
            for _ in range(2):
                client.predict(CONTEXT, QUESTION, api_name="/answer")
    assert not [str(w.message) for w in caught if "deprecated" in str(w.message)]


def test_answer_keyword_arguments(client: Client) -> None:
    results = client.predict(context=CONTEXT, question=QUESTION, api_name="/answer")
    assert len(results) == 6


@pytest.mark.parametrize(
    ("context", "question", "message"),
    [
        (CONTEXT, "   ", "Please type a question."),
        ("", QUESTION, "Please paste a context"),
        ("word " * 6000, QUESTION, "The context is too long"),
        (CONTEXT, "why " * 300, "The question is too long"),
    ],
)
def test_bad_input_gives_a_clear_error_and_breaks_nothing(client: Client, context, question, message) -> None:
    with pytest.raises(Exception, match=re.escape(message)):
        client.predict(context, question, api_name="/answer")
    assert len(client.predict(CONTEXT, QUESTION, api_name="/answer")) == 6  # still answering


def test_api_surface(client: Client) -> None:
    """Only /answer and /evaluate are documented; the UI's handlers are private."""
    api = client.view_api(print_info=False, return_format="dict")
    assert set(api["named_endpoints"]) == {"/answer", "/evaluate"}
    params = [p["parameter_name"] for p in api["named_endpoints"]["/answer"]["parameters"]]
    assert params == ["context", "question", "null_threshold", "runs", "budget_s"]


def test_model_handlers_share_one_concurrency_group(engine) -> None:
    demo = app.build_demo(engine, concurrency_limit=2, max_queue=5)
    model_fns = [fn for fn in demo.fns.values() if fn.concurrency_id == app.CONCURRENCY_GROUP]
    # Ask, quick benchmark, a chunk of a "Your questions" run, a report (its examples answered)
    assert len(model_fns) == 4
    assert {fn.concurrency_limit for fn in model_fns} == {2}
    # /answer waits in the app's model line (with the Ask tab's questions), which says how long to wait when full
    answer = next(fn for fn in demo.fns.values() if fn.api_name == "answer")
    assert answer.concurrency_limit is None and answer.concurrency_id != app.CONCURRENCY_GROUP
    # /evaluate's calls take a turn in that line per chunk, in a group of their own: a question waits for one chunk,
    # not for a call's two seconds in the page's group
    evaluate = next(fn for fn in demo.fns.values() if fn.api_name == "evaluate")
    assert evaluate.concurrency_id != app.CONCURRENCY_GROUP and evaluate.concurrency_limit == MAX_LONG_RUNS
    assert demo._queue.max_size == 10 + app.BACKSTOP  # a backstop: the line of 5 refuses first, saying how long to wait


# --- the Ask handler --------------------------------------------------------------------------------


def test_ask_streams_a_card_per_variant(engine) -> None:
    steps = [v.spec.name for v in engine.loaded if not v.spec.headline]
    outputs = list(make_ask(engine)(CONTEXT, QUESTION, steps, last={}))
    n = len(engine.loaded)
    assert len(outputs) == 1 + n + 5 + 1  # all running, one per answered variant, one per timed round, final
    answered = [cards.count('data-state="timing"') for cards, *_ in outputs[: n + 1]]
    assert answered == list(range(n + 1))  # each card shows its answer as soon as its variant answered
    done = [cards.count('data-state="done"') for cards, *_ in outputs]
    assert done == [0] * (n + 6) + [n]
    assert outputs[0][0].count('data-state="running"') == n
    cards, summary, chart, last = outputs[-1]
    busy = busy_words(last["results"].values())  # a busy machine: no winner is crowned, and the summary says why
    assert (
        (busy and busy in html.unescape(summary)) or "than the baseline" in summary or "baseline was fastest" in summary
    )
    assert len(chart.data[0].y) == n  # one latency bar per variant
    assert set(last["results"]) == {v.spec.name for v in engine.loaded}
    for name in last["results"]:
        assert f'data-variant="{name}"' in cards
    assert cards.count(" ms</b>") == n


def test_ask_shows_headline_variants_by_default(engine) -> None:
    *_, (cards, _summary, chart, _last) = make_ask(engine)(CONTEXT, QUESTION, [], last={})
    headline = [v.spec.name for v in engine.loaded if v.spec.headline]
    assert re.findall(r'data-variant="([^"]+)"', cards) == headline
    assert len(chart.data[0].y) == 3


def test_ask_rejects_bad_input_with_gr_error(engine) -> None:
    with pytest.raises(gr.Error, match="Please type a question"):
        next(make_ask(engine)(CONTEXT, "", [], last={}))


def test_summary_names_the_trade_off(engine) -> None:
    def result(name: str, ms: float, mb: float, answer: str = "paris", base_ms: float = 10.0) -> VariantResult:
        return VariantResult(name, name.title(), answer=answer, latency_ms=ms, size_mb=mb, speedup=base_ms / ms)

    names = ["baseline", "pruned", "pruned-onnx-opt-int8"]
    fast = {"baseline": result("baseline", 10, 400), "pruned": result("pruned", 5, 200)}
    fast["pruned-onnx-opt-int8"] = result("pruned-onnx-opt-int8", 2.5, 100, answer="france")
    text = summary_html(engine.snapshot(fast), names, running=False)
    assert "Pruned + ONNX + INT8" in text and "4.00× faster" in text and "4.0× smaller" in text and "median" in text
    assert "3 of 3 variants answered; 1 of the 2 other answers match the baseline's" in html.unescape(text)
    slow = {"baseline": result("baseline", 1, 400, base_ms=1), "pruned": result("pruned", 2, 400, " Paris ", 1)}
    text = summary_html(engine.snapshot(slow), names, running=False)
    assert "The baseline was fastest" in text and "smaller" not in text
    assert "2 of 2 variants answered; 1 of the 1 other answers match the baseline's" in html.unescape(text)
    assert "Running 2 of 3" in summary_html(engine.snapshot({"baseline": slow["baseline"]}), names, running=True)


def test_no_answer_everywhere_is_not_agreement(engine) -> None:
    def result(name: str, answer: str) -> VariantResult:
        return VariantResult(name, name, answer=answer, latency_ms=5.0, speedup=1.0)

    names = ["baseline", "pruned", "pruned-onnx-opt-int8"]
    silent = {n: result(n, "") for n in names}
    text = html.unescape(summary_html(engine.snapshot(silent), names, running=False))
    assert "No variant answered (3 said “no answer”" in text and "match" not in text
    base_silent = {**silent, "pruned": result("pruned", "1639")}
    text = html.unescape(summary_html(engine.snapshot(base_silent), names, running=False))
    assert "1 of 3 variants answered, and the baseline said “no answer”" in text


def test_reselect_shows_steps_without_rerunning(engine) -> None:
    *_, (_cards, _summary, _chart, last) = make_ask(engine)(CONTEXT, QUESTION, [], last={})
    cards, _summary, chart = make_reselect(engine)(["pruned-onnx"], last)
    assert 'data-variant="pruned-onnx" data-state="stale"' in cards
    assert cards.count('data-state="done"') == 3
    assert len(chart.data[0].y) == 3


# --- escaping and cards -----------------------------------------------------------------------------

EVIL = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def view(loaded) -> VariantView:
    return VariantView.of(loaded.spec, loaded)


def test_highlight_escapes_and_marks() -> None:
    context = f"{EVIL} The answer is Paris & more."
    start = context.index("Paris")
    snippet = highlight(context, start, start + 5)
    assert "<mark>Paris</mark>" in snippet
    assert "<img" not in snippet and "<script" not in snippet
    assert html.escape(EVIL) in snippet and "&amp; more" in snippet
    assert highlight(context, 0, 0) == ""


def test_highlight_long_context_shows_a_window() -> None:
    context = "word " * 500 + "Paris" + " word" * 500
    start = context.index("Paris")
    snippet = highlight(context, start, start + 5)
    assert snippet.startswith("…") and snippet.endswith("…")
    assert len(snippet) < 2 * SNIPPET_RADIUS + 40


def test_cards_escape_answers_errors_and_labels(engine) -> None:
    loaded = engine.loaded[0]
    context = f"{EVIL} tail"
    result = VariantResult("baseline", EVIL, answer=EVIL, score=0.5, latency_ms=3.0, start=0, end=len(EVIL))
    card = card_html(view(loaded), result, context, "done")
    assert "<img" not in card and "<script" not in card
    assert "<mark>" + html.escape(EVIL) + "</mark>" in card
    failed = card_html(view(loaded), VariantResult("baseline", "x", error=EVIL), context, "done")
    assert 'data-state="error"' in failed and "<script" not in failed and html.escape(EVIL) in failed
    broken = dataclasses.replace(loaded, model=None, error=EVIL)
    assert "<script" not in card_html(view(broken))
    assert "<script" not in summary_html(engine.snapshot({"baseline": result}), ["baseline"], running=False)


def test_card_shows_metrics_and_runtime(engine) -> None:
    by_name = {r.variant: r for r in engine.ask(QUESTION, CONTEXT)}
    loaded = engine.variants["pruned-onnx-opt-int8"]
    # The speedup is set, not measured: which variant was faster on this run is the bench's business.
    faster = dataclasses.replace(by_name[loaded.spec.name], speedup=2.5)
    card = card_html(view(loaded), faster, CONTEXT, "done", by_name["baseline"])
    assert 'title="cpu · CPUExecutionProvider · INT8">CPU · ONNX Runtime · 8-bit integers<' in card  # jargon: tooltip
    assert 'title="An intermediate step' not in card and ">optimized</span>" in card
    assert "faster than baseline" in card and "model size" in card and "parameters" in card and " ms</b>" in card
    slower = dataclasses.replace(faster, speedup=0.8)
    slow_card = card_html(view(loaded), slower, CONTEXT, "done", by_name["baseline"])
    assert html.escape("the baseline's speed: slower") in slow_card
    no_answer = dataclasses.replace(by_name["pruned"], answer="", start=0, end=0)
    assert "no answer" in card_html(view(engine.variants["pruned"]), no_answer, CONTEXT, "done")
    assert by_name[loaded.spec.name].execution == ""  # on the CPU there is no choice to name
    # On CUDA the FP16 variant's result names how it ran: in words on the card, the shapes in the tooltip.
    graphs = dataclasses.replace(
        by_name[loaded.spec.name], device="cuda:0", provider="CUDAExecutionProvider", dtype="fp16",
        execution="CUDA graphs (24: 64/128/256/384 tokens)",
    )  # fmt: skip
    card = card_html(view(loaded), graphs, CONTEXT, "done", by_name["baseline"])
    assert ">GPU · ONNX Runtime (CUDA) · 16-bit floats · CUDA graphs<" in card
    assert 'title="cuda:0 · CUDAExecutionProvider · FP16 · CUDA graphs (24: 64/128/256/384 tokens)"' in card


def test_a_no_answer_card_shows_the_best_guess_it_beat(engine) -> None:
    loaded = engine.variants["baseline"]
    # A threshold far below any score: "no answer" always wins, and the span it beat is the guess.
    result = engine.answer_one("baseline", QUESTION, CONTEXT, null_threshold=-1e9)
    assert result.answer == "" and result.guess and CONTEXT[result.guess_start : result.guess_end] == result.guess
    card = card_html(view(loaded), result, CONTEXT, "done")
    assert "no answer" in card and f"<mark>{html.escape(result.guess)}</mark>" in card
    assert f"Best guess: <b>{html.escape(result.guess)}</b> (confidence {fmt_confidence(result.guess_score)})" in card
    assert result.guess_score > 0 and f"{fmt_confidence(result.guess_score)}</b>" in card
    assert "best guess confidence" in card and "no-answer score" not in card


def test_card_latency_is_a_median_with_its_spread(engine) -> None:
    loaded = engine.variants["pruned"]
    runs = [12.0, 10.0, 11.0, 14.0, 11.5]
    result = VariantResult("pruned", "Pruned", answer="paris", latency_ms=11.5, latency_runs=runs, speedup=2.0)
    result.latency_min_ms, result.latency_max_ms = min(runs), max(runs)
    card = card_html(view(loaded), result, CONTEXT, "done")
    assert "<b>11.5 ms</b><span>median of 5 runs · 10.0–14.0 ms</span>" in card
    assert 'title="Median of 5 timed runs; the range is the fastest and the slowest run' in card
    assert (
        "the fastest first" in card and "within a time budget they share" in card and "Speedups compare medians" in card
    )


def test_threshold_control_changes_the_decisions(engine) -> None:
    assert null_threshold("pipeline", 3.0) is None and null_threshold("calibrated", 3.0) == "calibrated"
    assert null_threshold("margin", -2.5) == -2.5
    *_, (never, _s, _c, _l) = make_ask(engine)(CONTEXT, QUESTION, [], "margin", -50.0, 2, last={})
    *_, (always, _s, _c, last) = make_ask(engine)(CONTEXT, QUESTION, [], "margin", 50.0, 2, last={})
    assert never.count('qa-answer qa-none">no answer') == 3
    assert "qa-none" not in always
    assert all(len(r.latency_runs) == 2 for r in last["results"].values())


def test_failed_variant_is_isolated_on_its_card(tiny_qa_dir: Path, tmp_path: Path) -> None:
    good = VariantSpec("baseline", "Baseline", str(tiny_qa_dir), (), True)
    bad = VariantSpec("broken", "Broken <b>variant</b>", str(tmp_path / "missing"), ("compact",), True)
    engine = load_engine(variant_specs=[good, bad], device="cpu", settings=TINY_SETTINGS, cache_dir=tmp_path)
    assert engine.variants["broken"].error
    *_, (cards, _summary, _chart, _last) = make_ask(engine)(CONTEXT, QUESTION, [], last={})
    assert 'data-variant="baseline" data-state="done"' in cards
    assert 'data-variant="broken" data-state="error"' in cards
    assert "Broken &lt;b&gt;variant&lt;/b&gt;" in cards
    results = make_answer_api(engine)(CONTEXT, QUESTION)
    assert results[0]["error"] is None and results[1]["error"]


def test_the_answer_api_leaves_out_a_model_a_visitor_loaded(tiny_qa_dir: Path, tmp_path: Path) -> None:
    """A visitor's Hub model is theirs: API callers keep getting the preset's variants, whoever loaded what."""
    good = VariantSpec("baseline", "Baseline", str(tiny_qa_dir), (), True)
    engine = load_engine(variant_specs=[good], device="cpu", settings=TINY_SETTINGS, cache_dir=tmp_path)
    engine.add_variant(VariantSpec(custom.CUSTOM_NAME, "Your model: someone/else", str(tiny_qa_dir)))
    assert engine.variants[custom.CUSTOM_NAME].ok
    assert [r["variant"] for r in make_answer_api(engine)(CONTEXT, QUESTION, runs=1)] == ["baseline"]


def test_the_validator_puts_each_message_under_its_own_box_before_anything_runs(engine) -> None:
    validate = make_validator(engine)
    controls = ([], "pipeline", 0.0, 5, [], None)  # extra, rule, margin, runs, leave_out, last
    assert all(d["is_valid"] for d in validate(CONTEXT, QUESTION, *controls))
    # short in characters, too long in tokens for a window: refused here, not half-way through the run
    context, question, *rest = validate(CONTEXT, "? " * 499, *controls)  # in the inputs order
    assert not question["is_valid"] and "too long" in question["message"] and context["is_valid"]
    assert all(d["is_valid"] for d in rest)
    everything = [v.spec.name for v in engine.loaded]
    checks = validate(CONTEXT, QUESTION, [], "pipeline", 0.0, 5, everything, None)
    assert [d["is_valid"] for d in checks] == [True] * 6 + [False, True] and "left out" in checks[6]["message"]


# --- benchmark tab ----------------------------------------------------------------------------------


def test_benchmark_tab_reads_the_record_for_this_machine(engine, results_dir: Path) -> None:
    record, note = stored_record(engine, results_dir)
    assert record is not None and note == ""
    header, scatter, short, table, sweep, profile_note, profile, _long_note, _long, csv = benchmark_outputs(
        record, note
    )
    assert "Stored benchmark record" in header and "20" in header and "30 timed runs" in header
    assert "in 3 passes one after another" in header
    assert len(profile) == len(engine.loaded) and "200.0 GFLOP/s in FP32" in profile_note
    int8 = next(v.spec.name for v in engine.loaded if "int8" in v.spec.name)
    row = profile.iloc[[v.spec.name for v in engine.loaded].index(int8)]
    assert row["% of peak"] == pytest.approx(100 * row["GFLOP/s"] / 800.0, abs=0.1)  # the INT8 peak
    assert len([t for t in scatter.data if t.mode == "markers"]) == len(engine.loaded)  # and the best trade-offs' line
    assert len(sweep.data) == len(engine.loaded)
    headers = {**TABLE_COLUMNS, **ANSWERABLE_HEADERS}
    shown = [headers[c] for c in VIEW_COLUMNS["answerable"] if c not in PEER_RATIOS]  # no peer in this record
    assert list(table.columns) == shown  # the default view, every column (one click away on the page)
    assert list(short.columns) == [headers[c] for c in SHORT_COLUMNS["answerable"] if c not in PEER_RATIOS]
    assert len(table) == len(engine.loaded)
    assert list(table["× baseline, range over passes"])[:2] == ["0.90–1.10", "1.90–2.10"]
    single_pass = table_frame(record_frame(record).assign(speedup_vs_baseline_low=None))
    assert "× baseline, range over passes" not in single_pass.columns and "× baseline" in single_pass.columns
    assert "f1" in Path(csv).read_text(encoding="utf-8").splitlines()[0]


def test_benchmark_tab_says_when_a_record_measured_other_weights(engine, results_dir: Path) -> None:
    record, _ = stored_record(engine, results_dir)
    weights = engine.weights()
    assert set(weights) == {v.spec.name for v in engine.loaded}
    assert all(w.startswith("sha256:") for w in weights.values())
    assert weights_note(record, weights) == ""  # a record from before weights were kept: nothing to compare

    def with_weights(pick) -> object:
        return dataclasses.replace(record, variants=[dataclasses.replace(e, weights=pick(e)) for e in record.variants])

    same = with_weights(lambda e: weights[e.variant])
    assert weights_note(same, weights) == ""
    int8 = next(e.variant for e in record.variants if "int8" in e.variant)
    other = with_weights(lambda e: "sha256:0" if e.variant == int8 else weights[e.variant])
    note = weights_note(other, weights)
    assert "other model weights" in note and "INT8" in note and "Baseline" not in note
    assert "other model weights" in benchmark_outputs(other, note)[0]


def test_benchmark_tab_without_records(engine, tmp_path: Path) -> None:
    record, note = stored_record(engine, tmp_path)
    assert record is None and "No benchmark records" in note
    header, scatter, table, _every, sweep, _note, profile, _long_note, _long, csv = benchmark_outputs(record, note)
    assert "python -m variants bench" in header and csv is None and len(table) == 0 and len(profile) == 0
    assert scatter.layout.annotations and sweep.layout.annotations


def run_quick_tab(handlers: dict, n: int, request, view: str = "pipeline", stop_after: int | None = None) -> tuple:
    """Press Run, then let the counter's changes run chunk after chunk, as the page does; (chunks, the last outputs)."""
    status, tick = handlers["begin"](n, 0, request)
    assert tick == 1 and f"0 of {n} questions" in status
    for chunks in range(1, 500):
        if chunks == stop_after:
            handlers["stop"](request)
        outputs = handlers["step"](tick, view, [], False, request)
        if outputs[-1] != tick + 1:  # the last chunk leaves the counter as it was: the loop ends
            return chunks, outputs
        assert all(isinstance(o, type(gr.skip())) for o in outputs[: QUICK_SHOWN + 2])  # nothing redrawn meanwhile
        assert "questions" in outputs[-2] and "Stop keeps what is done" in outputs[-2]  # the progress, per chunk
        tick = outputs[-1]
    raise AssertionError("the quick benchmark never ended")


def test_quick_benchmark_is_added_beside_the_stored_records(engine, results_dir: Path) -> None:
    stored = stored_records(results_dir)
    handlers = make_quick_handlers(engine, SAMPLE_FILE, QuickRun, Runs(), stored)
    _, outputs = run_quick_tab(handlers, 3, SimpleNamespace(session_hash="visitor"))
    header, scatter, table, _every, _sweep, _why, _profile, _long_note, _long, download, runs, chooser, status, _ = (
        outputs
    )
    assert "Done: 3 of 3 questions" in status and "the numbers above are theirs" in status
    assert "Quick benchmark" in header and "noisy at this size" in header and "(None)" not in header
    assert table.count("<col ") == table.count('scope="col"')  # a width for every column
    table = read_table(table)  # the page's table, as a reader sees it
    assert len(table) == len(engine.loaded) and (table["F1"] != EMPTY).all()
    markers = [t for t in scatter.data if t.mode == "markers"]
    assert len(markers) == len(engine.loaded) and "always “no answer”" in scatter.data[-1].name  # SQuAD v2 views
    assert download.value
    assert len(runs) == 1 and chooser.value == record_key(runs[0])
    keys = [key for _label, key in chooser.choices]
    assert keys == [record_key(runs[0]), *(record_key(r) for r in stored)]  # the stored ones stay selectable
    assert find_record(keys[-1], stored, runs) is stored[-1]
    if cpu_clock()[1] is not None:  # the kernel gives each thread's wait for a CPU: the busy-machine measure
        assert all(e.stretch >= 1.0 for e in runs[0].variants if not e.error)
    # A busy run says so above its numbers (set readings: whether this machine was busy is not asserted).
    runs[0].variants[0].stretch = 2.0
    assert "The machine was busy while this was timed" in record_header(runs[0], "")
    assert f"{runs[0].variants[0].short_label} 2.0×" in record_header(runs[0], "")
    assert "In short, timed on a busy machine (the speeds are unreliable): " in record_header(runs[0], "")
    for entry in runs[0].entries:
        entry.stretch = 1.0
    assert "busy" not in record_header(runs[0], "")


def test_a_quick_benchmark_goes_in_chunks_of_the_model_queue_and_stops(engine) -> None:
    handlers = make_quick_handlers(engine, SAMPLE_FILE, functools.partial(QuickRun, chunk_s=0), Runs())
    visitor = SimpleNamespace(session_hash="stopper")
    turns = len(engine.loaded) + 1  # a chunk is one variant's turn here: every variant answers one question, and more
    chunks, outputs = run_quick_tab(handlers, 10, visitor, stop_after=turns)
    header, *_, runs, _chooser, status, _ = outputs
    assert chunks == turns and "Stopped:" in status and "of 10 questions" in status  # Stop ends it at the next chunk
    assert len(runs) == 1 and runs[0].data["stopped"] == "stopped" and runs[0].n_questions < 10
    assert f"Stopped after {runs[0].n_questions} of 10 questions" in header
    _, outputs = run_quick_tab(handlers, 10, visitor, stop_after=1)  # stopped before any question: no record
    assert "nothing to show" in outputs[-2] and all(isinstance(o, type(gr.skip())) for o in outputs[:-2])
    demo = app.build_demo(engine)
    step = next(f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "quick_step")
    assert step.concurrency_id == app.CONCURRENCY_GROUP  # each chunk waits its turn with the Ask tab's questions
    assert not inspect.isgeneratorfunction(step.fn)  # and ends its event: what came meanwhile goes next


# --- examples and start-up --------------------------------------------------------------------------


def test_confidences_are_never_shown_as_zero() -> None:
    assert fmt_confidence(0.00001) == "under 0.1%" and fmt_confidence(0.0) == "0.0%" and fmt_confidence(0.004) == "0.4%"
    assert fmt_confidence(0.5) == "50%" and fmt_confidence(None) == "–"


def test_examples() -> None:
    rows, labels = load_examples()
    assert len(rows) == len(labels) == 4
    ulan_bator, normans, unanswerable, long = rows
    assert "founded in 1639" in ulan_bator[0]
    assert normans[0].startswith("The Normans") and normans[1] == "In what country is Normandy located?"
    assert "1,307,204" in unanswerable[1] and "1,307,204" not in unanswerable[0]
    assert len(long[0]) > 2500 and "Lawrence Roberts" in long[0]
    assert load_examples(Path("/nonexistent.json")) == ([ulan_bator], ["Ulan Bator: a short passage"])


def test_parse_args_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("VARIANTS_PRESET", "VARIANTS_BASELINE", "VARIANTS_PRUNED", "SPACE_ID", "VARIANTS_NAMES", "SYSTEM"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    args = app.parse_args([])
    assert args.preset is None and args.port == 7860 and args.concurrency == 1
    assert app.serve_address(args) == ("127.0.0.1", 7860)
    monkeypatch.setenv("VARIANTS_PRESET", "embedded")
    monkeypatch.setenv("VARIANTS_BASELINE", "/b")
    monkeypatch.setenv("VARIANTS_PRUNED", "/p")
    args = app.parse_args(["--port", "9000", "--variants", "baseline,pruned"])
    assert (args.preset, args.baseline, args.pruned, args.port) == ("embedded", "/b", "/p", 9000)
    assert app.parse_args(["--preset", "bert-large"]).preset == "bert-large"  # flags win over env
    monkeypatch.setenv("SPACE_ID", "someone/qa-variants")
    assert app.serve_address(args) == ("0.0.0.0", 7860)
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7871")  # gradio's own variable moves a stand-in Space
    assert app.serve_address(args) == ("0.0.0.0", 7871)


def test_a_busy_port_is_named_before_any_model_loads(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("SPACE_ID", raising=False)

    def prepare_models(_args):
        raise AssertionError("the models were loaded before the port was checked")

    monkeypatch.setattr(app, "prepare_models", prepare_models)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert app.port_in_use("127.0.0.1", port)
        assert app.main(["--preset", "embedded", "--port", str(port)]) == 2
    message = capsys.readouterr().err.strip()
    assert len(message.splitlines()) == 1 and f"port {port}" in message and "--port" in message, message
    assert "GRADIO_SERVER_PORT" not in message
    assert not app.port_in_use("127.0.0.1", port)  # closed again: free


def test_a_host_that_cannot_be_bound_is_not_called_a_busy_port(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.delenv("SPACE_ID", raising=False)
    never = lambda _args: pytest.fail("the models loaded before the host was checked")  # noqa: E731
    monkeypatch.setattr(app, "prepare_models", never)
    assert app.main(["--preset", "embedded", "--host", "no-such-host.invalid", "--port", "7891"]) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("error: cannot serve on no-such-host.invalid port 7891") and "in use" not in message


@pytest.mark.parametrize("flags", [["--port", "70000"], ["--port", "0"], ["--concurrency", "0"], ["--max-queue", "0"]])
def test_serving_numbers_out_of_range_are_refused_before_anything_loads(flags: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        app.parse_args(flags)
    assert stop.value.code == 2 and flags[0] in capsys.readouterr().err


@pytest.mark.parametrize("variable", ["VARIANTS_CONCURRENCY", "VARIANTS_MAX_QUEUE"])
def test_a_queue_setting_of_zero_from_the_environment_is_refused(variable: str, monkeypatch) -> None:
    monkeypatch.setenv(variable, "0")
    assert app.main(["--preset", "embedded"]) == 2


def test_the_title_counts_the_variants_shown(engine) -> None:
    intro = page_intro(engine)
    assert intro.startswith("# One QA model, six variants\n") and len(engine.loaded) == 6
    assert "Three answer side by side; the other three (the build steps between them) are one tick away" in intro
    assert "three ways" not in intro and "8-bit integers" in intro
    two = SimpleNamespace(specs=engine.specs[:2])  # the specs, known before anything builds
    assert page_intro(two).startswith("# One QA model, two variants")


def test_console_progress(capsys: pytest.CaptureFixture) -> None:
    app.console_progress(0.0, "Loading Baseline")
    app.console_progress(0.0, "Pruned + ONNX: onnx")
    app.console_progress(0.5, "Loading Pruned")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("[  0%]") and lines[1].startswith("      ") and lines[2].startswith("[ 50%]")


def test_about_tab_and_notice(engine) -> None:
    about = about_html(engine)
    for v in engine.loaded:
        assert html.escape(v.spec.label) in about
    assert "CPUExecutionProvider" in about and "compact → onnx → optimize → int8" in about
    noticed = dataclasses.replace(engine, notice="The bert-large models could not be loaded <x>.")
    assert "could not be loaded" not in about_html(noticed)  # the page's banner says it, once


def test_notice_is_plain_with_the_reason_one_click_away() -> None:
    banner = notice_html("The big models could not be loaded, so small ones are shown. Hub <unreachable>: try x.y", "F")
    plain, _, details = banner.partition("<details>")
    assert "so small ones are shown." in plain and "unreachable" not in plain
    assert "Hub &lt;unreachable&gt;: try x.y" in details
    assert "<details>" not in notice_html("One sentence only.")


# --- the shipped models -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(
    not (SHIPPED / "config.json").is_file() or not (SHIPPED_PRUNED / "config.json").is_file(),
    reason="the embedded demo models are not in assets/models yet (python -m variants train)",
)
def test_shipped_models_answer_the_normans_question(tmp_path_factory: pytest.TempPathFactory) -> None:
    engine = load_engine("embedded", "cpu", fallback=False)
    assert all(v.ok for v in engine.loaded), [v.error for v in engine.loaded]
    (context, question), *_ = load_examples()[0][1:]
    with running(app.build_demo(engine, results_dir=tmp_path_factory.mktemp("none"))) as url:
        client = Client(url, verbose=False)
        results = client.predict(context, question, api_name="/answer")
        ulan_bator = client.predict(*ULAN_BATOR, api_name="/answer")
        refused = client.predict(*ULAN_BATOR, null_threshold="calibrated", api_name="/answer")
    # The pipeline's rule by default: every variant answers the easy question (the example) ...
    assert [r["answer"] for r in ulan_bator] == ["1639"] * len(engine.loaded), ulan_bator
    # ... and the calibrated thresholds, one choice away, refuse it, keeping 1639 as the best guess.
    assert all(r["guess"] == "1639" or r["answer"] == "1639" for r in refused)
    assert any(r["answer"] == "" for r in refused)
    assert len(results) == len(engine.loaded)
    by_name = {r["variant"]: r for r in results}
    assert by_name["baseline"]["answer"] == "France", by_name["baseline"]
    for r in results:
        # Each model's calibrated threshold decides whether it answers; the span it found is France either way.
        assert r["error"] is None and (r["answer"] or r["guess"]) == "France", r


def test_the_start_up_lines_name_this_apps_share_flag(monkeypatch) -> None:
    monkeypatch.delenv("SPACE_ID", raising=False)
    text = app.launch_message("http://127.0.0.1:7860/", None)
    assert "http://127.0.0.1:7860/" in text and "--share" in text and "share=True" not in text
    assert "public URL: https://x.gradio.live" in app.launch_message("http://127.0.0.1:7860/", "https://x.gradio.live")
    monkeypatch.setenv("SPACE_ID", "someone/space")
    assert "--share" not in app.launch_message("http://0.0.0.0:7860/", None)  # a Space has its own address
