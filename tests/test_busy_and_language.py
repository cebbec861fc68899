"""Issue 63: timings that know when the machine was busy, and a notice for questions and passages that are not
English, on every interface. The busy flag is tested with synthetic runs (what the clock said is given, never
measured here); no test says which variant is faster."""

from __future__ import annotations

import html
import json
import time
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, tiny_engine
from fastapi.testclient import TestClient

from ui.ask import make_answer_api, make_ask
from ui.cards import card_html, summary_html
from variants.answering import timing
from variants.answering.language import language_notice, other_language
from variants.answering.timing import BUSY_ABOVE, TimingRule, busy, cpu_clock, cpu_since, stretch
from variants.cli import ask_main
from variants.serving.http import create_app
from variants.serving.outcome import VariantResult, busy_words, fill_timing

HEADLINE = ["baseline", "pruned", "pruned-onnx-opt-int8"]
GERMAN = (
    "Die Lindqvist-Brücke überquert den Fluss am Rand der Altstadt. Sie wurde von dem Ingenieur Arne Lindqvist "
    "entworfen und 1887 fertiggestellt; damals war sie die längste Brücke des Landes.",
    "Wer hat die Lindqvist-Brücke entworfen?",
)
FRENCH = (
    "Le pont Lindqvist traverse la rivière au bord de la vieille ville. Il a été conçu par l'ingénieur Arne "
    "Lindqvist et achevé en 1887 ; c'était alors le plus long pont du pays.",
    "Qui a conçu le pont Lindqvist ?",
)
ENGLISH = (
    "The Lindqvist Bridge crosses the river at the edge of the old town. It was designed by the engineer Arne "
    "Lindqvist and finished in 1887; at the time it was the longest bridge in the country.",
    "Who designed the Lindqvist Bridge?",
)


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


# --- how busy the machine was: the flag from given CPU and wait times ---------------------------------------


def timed(name: str, ms: float, cpu: list[float], wait: list[float | None]) -> VariantResult:
    result = VariantResult(name, name, answer="paris", latency_runs=[ms] * len(cpu), size_mb=100.0)
    result.cpu_runs, result.wait_runs = cpu, wait
    return result


def test_stretch_is_the_median_runs_cpu_plus_wait_over_cpu() -> None:
    assert stretch([10.0, 10.0, 10.0], [0.0, 1.0, 30.0]) == pytest.approx(1.1)  # one disturbed run of three
    assert stretch([10.0, 20.0], [10.0, 20.0]) == pytest.approx(2.0)
    assert stretch([10.0], [None]) is None and stretch([], []) is None  # no wait measure: nothing said
    assert stretch([0.0], [5.0]) is None  # no CPU time to compare with
    assert not busy(None) and not busy(BUSY_ABOVE) and busy(BUSY_ABOVE + 0.01)


def test_the_clock_counts_this_process_and_never_goes_back() -> None:
    start = cpu_clock()
    deadline = time.process_time() + 0.02
    while time.process_time() < deadline:  # 20 ms of work on this thread
        pass
    cpu_ms, wait_ms = cpu_since(start)
    assert cpu_ms >= 15.0 and (wait_ms is None or wait_ms >= 0.0)
    assert cpu_since((start[0] + 1e6, start[1]))[0] == 0.0  # a thread that ended takes its time with it


def test_quiet_runs_crown_a_winner_and_busy_runs_do_not(engine) -> None:
    rule = TimingRule(runs=3)
    quiet = {n: timed(n, ms, [ms] * 3, [0.0] * 3) for n, ms in zip(HEADLINE, (10.0, 5.0, 2.0), strict=True)}
    fill_timing(quiet, rule, done=True)
    assert not any(r.busy for r in quiet.values()) and busy_words(quiet.values()) == ""
    text = html.unescape(summary_html(engine.snapshot(quiet), HEADLINE, running=False))
    assert "Fastest" in text and "busy" not in text
    assert "busy" not in card_html(
        engine.snapshot().view("pruned"), quiet["pruned"], CONTEXT, "done", quiet["baseline"]
    )

    disturbed = {n: timed(n, ms, [ms] * 3, [0.0] * 3) for n, ms in zip(HEADLINE, (10.0, 5.0, 2.0), strict=True)}
    disturbed["pruned"].wait_runs = [6.5, 6.5, 0.0]  # the median run waited 1.3x its CPU time
    fill_timing(disturbed, rule, done=True)
    assert disturbed["pruned"].busy and disturbed["pruned"].stretch == pytest.approx(2.3)
    words = busy_words(disturbed.values())
    assert words.startswith("The machine was busy: waiting for a CPU, runs took up to 2.3× their computing time")
    assert "unreliable" in words
    text = html.unescape(summary_html(engine.snapshot(disturbed), HEADLINE, running=False))
    assert words in text and "Fastest" not in text and "faster than" not in text  # no winner from disturbed runs
    card = html.unescape(card_html(engine.snapshot().view("pruned"), disturbed["pruned"], CONTEXT, "done"))
    assert "The machine was busy: waiting for a CPU, these runs took 2.3× their computing time" in card
    other = html.unescape(card_html(engine.snapshot().view("baseline"), disturbed["baseline"], CONTEXT, "done"))
    assert "The machine was busy" not in other  # each card speaks for its own runs


def test_every_interface_carries_the_measure(engine, tiny_qa_dir, tiny_pruned_dir, artifacts_dir, capsys) -> None:
    rows = make_answer_api(engine)(CONTEXT, QUESTION, None, 2, 0)
    for row in rows:
        assert len(row["cpu_runs"]) == len(row["wait_runs"]) == row["timed_runs"] == 2
        assert all(c >= 0 for c in row["cpu_runs"]) and isinstance(row["busy"], bool)
    client = TestClient(create_app(engine))
    body = client.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "pruned"}).json()
    assert {"stretch", "busy", "notice"} <= set(body)
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--cache-dir", str(artifacts_dir)]
    ask_main([*args, "--device", "cpu", "--no-fallback", "--context", CONTEXT, "--question", QUESTION, "--json"])
    out = capsys.readouterr()
    results = json.loads(out.out)
    words = busy_words(VariantResult(**r) for r in results)
    assert (words in out.err) if words else "The machine was busy" not in out.err


def test_a_busy_clock_flags_the_runs_the_engine_times(engine, monkeypatch) -> None:
    """The engine reads the clock around each timed run: a clock that says every run waited twice its CPU time
    makes every variant busy, one that says nothing (no schedstat) makes none."""
    now = [0.0]

    def waiting_clock() -> tuple[float, float]:
        now[0] += 0.001  # each reading: 1 ms more on a CPU and 2 ms more waiting for one
        return now[0], 2 * now[0]

    monkeypatch.setattr("variants.serving.asking.cpu_clock", waiting_clock)
    monkeypatch.setattr(timing, "cpu_clock", waiting_clock)
    results = engine.ask(QUESTION, CONTEXT, rule=TimingRule(runs=2, budget_s=None))
    assert all(r.busy and r.stretch == pytest.approx(3.0) for r in results)
    monkeypatch.setattr("variants.serving.asking.cpu_clock", lambda: (time.process_time(), None))
    monkeypatch.setattr(timing, "cpu_clock", lambda: (time.process_time(), None))
    results = engine.ask(QUESTION, CONTEXT, rule=TimingRule(runs=2, budget_s=None))
    assert not any(r.busy for r in results) and all(r.stretch is None for r in results)


# --- not English ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "code"),
    [(GERMAN[0], "de"), (GERMAN[1], "de"), (FRENCH[0], "fr"), ("Le pont a été conçu par Arne Lindqvist.", "fr")],
)
def test_german_and_french_are_recognised(text: str, code: str) -> None:
    assert other_language(text) == code


@pytest.mark.parametrize(
    "text",
    [
        *ENGLISH,
        "Who?",
        "Paris",
        "What is CERN?",
        "How many?",
        "Who won in 1887?",
        "When was the city founded?",
        "Where is Normandy?",
        "Kafka",
        "Ulan Bator is the capital of Mongolia.",
        "What did Roger Scantlebury say?",
        "",
    ],
)
def test_short_or_ambiguous_english_is_not_flagged(text: str) -> None:
    assert other_language(text) is None


def test_the_notice_names_what_is_not_english() -> None:
    assert language_notice(*reversed(ENGLISH)) == ""
    both = language_notice(GERMAN[1], GERMAN[0])
    assert both.startswith("The question and the passage look German, not English") and "\n" not in both
    assert language_notice(ENGLISH[1], FRENCH[0]).startswith("The passage looks French, not English")
    assert language_notice(GERMAN[1], ENGLISH[0]).startswith("The question looks German, not English")


def test_other_languages_are_answered_with_a_notice_everywhere(
    engine, tiny_qa_dir, tiny_pruned_dir, artifacts_dir, capsys
) -> None:
    context, question = GERMAN
    notice = language_notice(question, context)
    *_, (_cards, summary, _chart, last) = make_ask(engine)(context, question, [], last={})
    assert html.escape(notice, quote=False) in summary.replace("&#x27;", "'")
    assert all(not r.error and r.notice == notice for r in last["results"].values())  # answered all the same
    rows = make_answer_api(engine)(context, question, None, 1, 0)
    assert {r["notice"] for r in rows} == {notice}
    body = TestClient(create_app(engine)).post("/v1/answer", json={"question": question, "context": context}).json()
    assert body["notice"] == notice and body["answer"] is not None
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--cache-dir", str(artifacts_dir)]
    ask_main([*args, "--device", "cpu", "--no-fallback", "--context", context, "--question", question])
    out = capsys.readouterr()
    assert notice in out.err and len(out.out.strip().splitlines()) == len(engine.loaded)
    rows = make_answer_api(engine)(CONTEXT, QUESTION, None, 1, 0)
    assert {r["notice"] for r in rows} == {""}


# --- one OpenMP spin for every entry point ---------------------------------------------------------------


def test_openmp_spin_is_set_once_for_every_entry_point_unless_the_environment_says() -> None:
    from variants.core.config import OPENMP_SPIN_COUNT, openmp_spin  # noqa: PLC0415

    env: dict[str, str] = {}
    openmp_spin(env)
    assert env == {"GOMP_SPINCOUNT": OPENMP_SPIN_COUNT}
    mine = {"GOMP_SPINCOUNT": "300000"}
    openmp_spin(mine)
    assert mine == {"GOMP_SPINCOUNT": "300000"}
    passive = {"OMP_WAIT_POLICY": "PASSIVE"}
    openmp_spin(passive)
    assert passive == {"OMP_WAIT_POLICY": "PASSIVE"}  # its own policy: no spin count forced on it


def test_importing_variants_sets_the_spin_before_torch_loads() -> None:
    import os  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    code = "import sys, os, variants.cli; print('torch' in sys.modules, os.environ.get('GOMP_SPINCOUNT'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split()[-1] == "1000"


# --- refused calls: one line in the log, no traceback ---------------------------------------------------


def test_a_refused_call_logs_one_line_and_no_traceback(engine, caplog) -> None:
    import logging  # noqa: PLC0415

    import gradio as gr  # noqa: PLC0415

    caplog.set_level(logging.WARNING, logger="app")
    for context in ("", "\x00\x01\x02" * 20):
        with pytest.raises(gr.Error) as refused:
            make_answer_api(engine)(context, QUESTION)
        assert refused.value.print_exception is False  # gradio prints no traceback for it
    lines = [r for r in caplog.records if r.name == "app"]
    assert len(lines) == 2 and all(r.getMessage().startswith("/answer refused: ") for r in lines)
    assert all("\n" not in r.getMessage() and r.exc_info is None for r in lines)
    with pytest.raises(gr.Error):
        next(make_ask(engine)("", QUESTION, []))
    assert caplog.records[-1].getMessage().startswith("Ask refused: Please paste a context")
