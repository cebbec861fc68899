"""Issue 41's timing rule, the same in every interface: every variant warmed up before any is timed, the
variants timed in turns, rounds under a time budget, the median of k runs with k reported, one speedup
ratio, sizes that say "same size", and a summary that crowns only a variant that answered. Tiny models."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import gradio as gr
import pytest
from app_helpers import CONTEXT, QUESTION, tiny_engine
from fastapi.testclient import TestClient

from ui.ask import make_answer_api, make_ask
from ui.cards import card_html, size_words, speed_words, summary_html
from ui.charts import latency_figure
from variants.answering.timing import MAX_REQUEST_RUNS, SERVED, TimingRule, same_size, size_ratio, speedup, spread
from variants.cli import ask_main
from variants.serving.http import create_app
from variants.serving.outcome import VariantResult, busy_words

HEADLINE = ["baseline", "pruned", "pruned-onnx-opt-int8"]


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


def record_calls(engine, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> list[str]:
    """The order in which the variants' models run (one entry per model call)."""
    calls: list[str] = []
    for name in names:
        model = engine.variants[name].model
        original = model.run

        def run(inputs, name=name, original=original):
            calls.append(name)
            return original(inputs)

        monkeypatch.setattr(model, "run", run)
    return calls


# --- the rule on its own ------------------------------------------------------------------------------


def test_rounds_at_least_one_at_most_runs_and_only_while_the_next_fits_the_budget() -> None:
    rule = TimingRule(runs=5, budget_s=10.0)
    assert rule.another_round(0, elapsed_s=60.0, last_round_s=30.0)  # one timed round always
    assert rule.another_round(2, elapsed_s=6.0, last_round_s=4.0)  # ends at 10 s: fits
    assert not rule.another_round(2, elapsed_s=6.1, last_round_s=4.0)
    assert not rule.another_round(5, elapsed_s=0.1, last_round_s=0.01)  # k never above runs
    assert TimingRule(runs=5, budget_s=None).another_round(4, 1e6, 1e6)
    assert rule.settle(10.0) and not rule.settle(500.0) and not rule.settle(None)
    with pytest.raises(ValueError, match="repeats"):
        TimingRule(runs=0)
    with pytest.raises(ValueError, match="budget"):
        TimingRule(budget_s=0)


def test_the_rule_says_what_was_done() -> None:
    assert TimingRule(runs=5, budget_s=10).describe(5) == "5 timed runs, after one untimed warm-up run each"
    cut = TimingRule(runs=5, budget_s=10).describe(3)
    assert cut.startswith("3 timed runs (5 asked; the 10 s time budget allowed 3)")
    assert SERVED.describe(1) == "1 timed run"


def test_one_ratio_and_plain_sizes() -> None:
    assert speedup(30.0, 10.0) == pytest.approx(3.0) and speedup(None, 10.0) is None and speedup(30.0, 0) is None
    assert speed_words(3.0) == ("3.00×", "faster than baseline")
    assert speed_words(1 / 1.05)[0] == "0.95×"  # the chart's number, not "1.05× slower"
    assert same_size(size_ratio(100.0, 99.0)) and not same_size(size_ratio(100.0, 90.0))
    base = VariantResult("baseline", "B", size_mb=100.0)
    assert size_words(base, VariantResult("pruned-onnx", "P", size_mb=99.0)) == "same size"
    assert size_words(base, VariantResult("int8", "I", size_mb=25.0)) == "4.0× smaller"
    assert size_words(base, VariantResult("big", "X", size_mb=130.0)) == "1.3× larger"
    assert spread([3.0, 1.0, 2.0, 10.0]) == (2.5, 1.0, 10.0) and spread([]) == (None, None, None)


# --- the engine ----------------------------------------------------------------------------------------


def test_every_variant_is_warmed_up_before_any_is_timed_then_they_take_turns(engine, monkeypatch) -> None:
    calls = record_calls(engine, monkeypatch, HEADLINE)
    rule = TimingRule(runs=3, budget_s=None, settle_below_ms=0)  # no settle runs: one call per turn
    results = engine.ask(QUESTION, CONTEXT, HEADLINE, rule=rule)
    assert calls == HEADLINE * 4  # one untimed round, then three timed ones in turns
    for r in results:
        assert r.timed_runs == len(r.latency_runs) == 3 and r.runs_asked == 3 and not r.pending
        assert (r.latency_ms, r.latency_min_ms, r.latency_max_ms) == spread(r.latency_runs)
        assert r.speedup == pytest.approx(speedup(results[0].latency_ms, r.latency_ms))
        assert r.timing == "3 timed runs, after one untimed warm-up run each"


def test_short_runs_settle_at_the_start_of_each_turn(engine, monkeypatch) -> None:
    calls = record_calls(engine, monkeypatch, HEADLINE)
    engine.ask(QUESTION, CONTEXT, HEADLINE, rule=TimingRule(runs=2, budget_s=None, settle_below_ms=1e9))
    turn = [name for name in HEADLINE for _ in range(2)]  # an untimed run, then the timed one
    assert calls == HEADLINE + turn * 2


def test_a_tight_budget_gives_every_variant_the_same_fewer_runs(engine) -> None:
    results = engine.ask(QUESTION, CONTEXT, HEADLINE, rule=TimingRule(runs=5, budget_s=1e-6))
    assert {r.timed_runs for r in results} == {1}
    assert all(r.timing.startswith("1 timed run (5 asked; the 1e-06 s time budget allowed 1)") for r in results)
    loaded = engine.variants["pruned"]
    card = card_html(loaded, results[1], CONTEXT, "done", results[0])
    assert "1 timed run, not 5: what fitted in the time limit of 1e-06 s" in card and "one run" in card


def test_the_stream_shows_answers_first_then_rounds(engine) -> None:
    steps = list(engine.ask_stream(QUESTION, CONTEXT, HEADLINE, rule=TimingRule(runs=2, budget_s=None)))
    assert [p.phase for p in steps] == ["answering"] * 3 + ["timing"] * 2 + ["done"]
    first = steps[0].results
    assert list(first) == ["baseline"] and first["baseline"].pending and first["baseline"].latency_ms is None
    assert first["baseline"].answer == CONTEXT[first["baseline"].start : first["baseline"].end]
    final = steps[-1].results
    assert not any(r.pending for r in final.values()) and all(r.timed_runs == 2 for r in final.values())


def test_served_rule_is_one_run_without_warm_up(engine, monkeypatch) -> None:
    calls = record_calls(engine, monkeypatch, ["pruned"])
    result = engine.answer_one("pruned", QUESTION, CONTEXT)
    assert calls == ["pruned"] and result.timed_runs == 1 and result.answer == CONTEXT[result.start : result.end]


# --- every interface -------------------------------------------------------------------------------


def test_cli_reports_k_and_takes_a_budget(engine, tiny_qa_dir, tiny_pruned_dir, artifacts_dir, capsys) -> None:
    argv = ["--preset", "embedded", "--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir)]
    argv += ["--variants", "baseline,pruned", "--cache-dir", str(artifacts_dir), "--context", CONTEXT]
    assert ask_main([*argv, "--question", QUESTION, "--json", "--repeats", "2", "--budget", "0"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["timed_runs"] for r in rows] == [2, 2] and {r["budget_s"] for r in rows} == {None}
    assert {"variant", "answer", "score", "latency_ms", "speedup", "latency_min_ms", "timing"} <= set(rows[0])
    assert ask_main([*argv, "--question", QUESTION, "--repeats", "2"]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2 and all("over 2 runs" in line for line in out.splitlines())
    assert "latency: 2 timed runs, after one untimed warm-up run each" in err
    with pytest.raises(SystemExit):
        ask_main([*argv, "--question", QUESTION, "--budget", "-1"])
    assert "must be 0 or more" in capsys.readouterr().err


def test_answer_api_and_v1_route_follow_the_rule(engine) -> None:
    rows = make_answer_api(engine)(CONTEXT, QUESTION, None, 2, 0)
    assert len(rows) == len(engine.loaded) and {r["timed_runs"] for r in rows} == {2}
    assert rows[0]["speedup"] == pytest.approx(1.0)
    client = TestClient(create_app(engine))
    body = client.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "pruned"}).json()
    assert body["timed_runs"] == 1 and body["timing"] == "1 timed run"  # the request as served
    asked = {"question": QUESTION, "context": CONTEXT, "variant": "pruned", "runs": 3, "warmup": True}
    body = client.post("/v1/answer", json=asked).json()
    assert body["timed_runs"] == 3 and body["latency_min_ms"] <= body["latency_ms"] <= body["latency_max_ms"]
    assert client.post("/v1/answer", json={**asked, "runs": 0}).status_code == 422
    # one cap on the runs a request may ask for, in both APIs: no call holds every variant for long
    assert client.post("/v1/answer", json={**asked, "runs": MAX_REQUEST_RUNS + 1}).status_code == 422
    with pytest.raises(gr.Error, match=f"at most {MAX_REQUEST_RUNS}"):
        make_answer_api(engine)(CONTEXT, QUESTION, None, MAX_REQUEST_RUNS + 1, 0)


def test_ask_tab_leaves_out_what_is_ticked(engine) -> None:
    *_, (cards, summary, chart, last) = make_ask(engine)(CONTEXT, QUESTION, [], "pipeline", 0.0, 2, ["baseline"])
    assert re.findall(r'data-variant="([^"]+)"', cards) == ["pruned", "pruned-onnx-opt-int8"]
    assert set(last["results"]) == {"pruned", "pruned-onnx-opt-int8"}
    assert all(r.speedup is None for r in last["results"].values())
    assert ("Fastest" in summary) != bool(busy_words(last["results"].values()))  # crowned unless the machine was busy
    assert len(chart.data[0].y) == 2


# --- card, chart and summary agree ---------------------------------------------------------------


def result(name: str, ms: float, answer: str = "paris", base_ms: float = 10.0, mb: float = 100.0) -> VariantResult:
    return VariantResult(name, name, answer=answer, latency_ms=ms, size_mb=mb, speedup=speedup(base_ms, ms))


def test_card_and_chart_show_the_same_ratio(engine) -> None:
    results = {"baseline": result("baseline", 10.0), "pruned": result("pruned", 10.5)}
    card = card_html(engine.variants["pruned"], results["pruned"], CONTEXT, "done", results["baseline"])
    bars = latency_figure(engine, ["baseline", "pruned"], results).data[0].y
    assert "<b>0.95×</b><span>the baseline&#x27;s speed: slower</span>" in card and "0.95×" in bars[1]
    assert "slower than baseline" not in card and "model size · same size" in card and "1.0× smaller" not in card


def test_summary_crowns_only_a_variant_that_answered_and_says_when_the_baseline_refused(engine) -> None:
    results = {
        "baseline": result("baseline", 10.0, answer=""),
        "pruned": result("pruned", 5.0),
        "pruned-onnx-opt-int8": result("pruned-onnx-opt-int8", 2.0, answer=""),
    }
    text = html.unescape(summary_html(engine, HEADLINE, results, running=False))
    assert "Fastest of the variants that answered: <b>Pruned</b>" in text and "2.00× faster" in text
    assert "INT8" not in text.split("<br>")[0]  # it said "no answer": not crowned, though faster
    assert "(the baseline said “no answer” to this question)" in text
    silent = {name: result(name, ms, answer="") for name, ms in (("baseline", 10.0), ("pruned", 5.0))}
    text = html.unescape(summary_html(engine, HEADLINE, silent, running=False))
    assert "Fastest to say “no answer”: <b>Pruned</b>" in text and "No variant answered" in text


def test_summary_while_timing_and_with_k(engine) -> None:
    pending = {n: VariantResult(n, n, answer="paris", pending=True, runs_asked=5) for n in HEADLINE}
    assert "round 1 of at most 5" in summary_html(engine, HEADLINE, pending, running=True)
    done = {n: result(n, ms) for n, ms in zip(HEADLINE, (10.0, 5.0, 2.0), strict=True)}
    for r in done.values():
        r.timing = "3 timed runs (5 asked; the 10 s time budget allowed 3), after one untimed warm-up run each"
    text = html.unescape(summary_html(engine, HEADLINE, done, running=False))
    assert "Latency: 3 timed runs (5 asked; the 10 s time budget allowed 3)" in text and "in turns" in text
