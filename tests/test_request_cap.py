"""One request's model time capped, first runs included (issue 75): the passage is tokenized before any model runs,
and a variant whose first run would end past the cap, by its pace (ms per full window) or, before it answered
anything, by a guess from its size, is skipped before it starts, saying so and what brings it in. Tiny models and a
fake pace: no timing is asserted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, tiny_engine
from fastapi.testclient import TestClient

from ui.ask import make_answer_api
from ui.cards import card_html
from variants.answering.timing import SERVED, TimingRule
from variants.serving import asking
from variants.serving.asking import Pace, skip_words
from variants.serving.guard import MAX_BUDGET_S, ModelLine, request_rule
from variants.serving.http import create_app

CAP = TimingRule(runs=1, budget_s=1.0, cap_s=MAX_BUDGET_S)
SLOW = 1e9  # a fake pace: ms per full window no request could wait for
TRUSTED = 1.0  # a pace measured on a whole window


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


def model_calls(engine, monkeypatch: pytest.MonkeyPatch, names: list[str]) -> list[str]:
    """Which variants' models ran (one entry per forward pass)."""
    calls: list[str] = []
    for name in names:
        model = engine.variants[name].model
        monkeypatch.setattr(model, "run", lambda inputs, name=name, run=model.run: calls.append(name) or run(inputs))
    return calls


def test_every_request_rule_caps_the_whole_call_first_runs_included() -> None:
    assert request_rule(5, 12.0).cap_s == MAX_BUDGET_S and request_rule(1, 0, warmup=False).cap_s == MAX_BUDGET_S
    assert SERVED.cap_s is None and TimingRule().cap_s is None  # the bench's and the CLI's own calls: no cap
    assert CAP.within_cap(10.0, 20.0) and not CAP.within_cap(10.0, 20.5) and SERVED.within_cap(1e6, 1e6)


def test_a_variant_whose_first_run_would_end_past_the_cap_is_skipped_before_it_starts(engine, monkeypatch) -> None:
    monkeypatch.setattr(engine, "_paces", {"baseline": Pace(SLOW, TRUSTED), "pruned": Pace(1.0, TRUSTED)})
    calls = model_calls(engine, monkeypatch, ["baseline", "pruned"])
    base, pruned = engine.ask(QUESTION, CONTEXT, ["baseline", "pruned"], rule=CAP)
    assert base.skipped and base.pending is False and not base.answer and "baseline" not in calls  # never ran
    assert base.error.startswith("Skipped: its answer would take about") and "at its pace" in base.error
    assert "shorter passage" in base.error  # it would not fit even alone: leaving the others out cannot help
    assert not pruned.skipped and pruned.error is None and pruned.answer and "pruned" in calls
    assert engine._paces["pruned"].ms_per_window > 0  # its pace from this question's first run, for the next prediction
    card = card_html(engine.snapshot().view("baseline"), base, CONTEXT, "done")
    assert "Skipped: its answer" in card and "This variant failed" not in card


def test_without_a_cap_nothing_is_skipped(engine, monkeypatch) -> None:
    monkeypatch.setattr(engine, "_paces", {"baseline": Pace(SLOW, TRUSTED)})
    (base,) = engine.ask(QUESTION, CONTEXT, ["baseline"], rule=SERVED)
    assert not base.skipped and base.answer


def test_before_any_pace_a_guess_from_the_models_size_decides(engine, monkeypatch) -> None:
    monkeypatch.setattr(engine, "_paces", {})
    monkeypatch.setattr(asking, "GUESS_MS_PER_WINDOW_MB", SLOW)  # a size guess no request could wait for
    calls = model_calls(engine, monkeypatch, ["baseline", "pruned"])
    results = engine.ask(QUESTION, CONTEXT, ["baseline", "pruned"], rule=CAP)
    assert all(r.skipped and "guessed from its size" in r.error for r in results) and calls == []
    assert all("a short question first" in r.error for r in results)
    monkeypatch.setattr(asking, "GUESS_MS_PER_WINDOW_MB", 0.0)  # a small model's guess fits: it runs
    assert not any(r.skipped for r in engine.ask(QUESTION, CONTEXT, ["baseline", "pruned"], rule=CAP))


def test_where_its_size_would_skip_it_a_variant_first_answers_the_passages_start(engine, monkeypatch) -> None:
    """Its pace from one window of the passage then decides: a tiny model is fast, so it answers the whole."""
    monkeypatch.setattr(engine, "_paces", {})
    long = CONTEXT * 30  # several windows
    windows = engine.window_counts(["baseline"], QUESTION, long)["baseline"].count
    mb = engine.variants["baseline"].model.size_bytes / 1e6
    half_cap_a_window = 1000 * MAX_BUDGET_S / 2 / mb  # ms per window per MB: one window fits, the passage does not
    monkeypatch.setattr(asking, "GUESS_MS_PER_WINDOW_MB", half_cap_a_window)
    calls = model_calls(engine, monkeypatch, ["baseline"])
    (base,) = engine.ask(QUESTION, long, ["baseline"], rule=CAP)
    assert windows > 2 and not base.skipped and base.answer and engine._paces["baseline"].ms_per_window > 0
    assert len(calls) >= 2  # the passage's start, then the passage


def test_a_pace_from_a_question_shorter_than_a_window_is_measured_again_on_the_passages_start(
    engine, monkeypatch
) -> None:
    """Fixed costs make a short question's pace per window look far slower than a long passage's: a pace from under
    one window that would skip a long passage is measured again on its first window, and that pace decides."""
    monkeypatch.setattr(engine, "_paces", {"baseline": Pace(SLOW, 0.05)})
    mb = engine.variants["baseline"].model.size_bytes / 1e6
    monkeypatch.setattr(asking, "GUESS_MS_PER_WINDOW_MB", 1000 * MAX_BUDGET_S / 2 / mb)  # one window fits by size
    (base,) = engine.ask(QUESTION, CONTEXT * 30, ["baseline"], rule=CAP)
    assert not base.skipped and base.answer and engine._paces["baseline"].windows > 1  # the passage's own pace now


def test_the_windows_are_counted_once_per_tokenizer_before_any_model_runs(engine, monkeypatch) -> None:
    calls = model_calls(engine, monkeypatch, [v.spec.name for v in engine.loaded])
    counts = engine.window_counts([v.spec.name for v in engine.loaded], QUESTION, CONTEXT * 20)
    assert calls == [] and len(set(counts.values())) == 1  # one chain, one tokenizer and window
    windows, full, first_end = next(iter(counts.values()))
    assert windows > 1 and 0 < full <= windows and 0 < first_end < len(CONTEXT * 20)


def test_the_skip_says_what_brings_the_variant_in() -> None:
    alone = skip_words(20.0, True, 30.0, True, "x" * 25_000)
    assert "Leave out the others" in alone and "shorter" not in alone
    too_long = skip_words(60.0, True, 30.0, False, "x" * 25_000)
    assert "about 12,500 characters would fit" in too_long and "Leave out" not in too_long


def test_the_apis_say_a_variant_was_skipped(engine, monkeypatch) -> None:
    monkeypatch.setattr(engine, "_paces", {n: Pace(SLOW, TRUSTED) for n in engine.variants})
    rows = asyncio.run(make_answer_api(engine, ModelLine())(CONTEXT, QUESTION, None, 1, 1))
    assert rows and all(r["skipped"] and r["error"].startswith("Skipped") for r in rows)
    reply = TestClient(create_app(engine)).post("/v1/answer", json={"question": QUESTION, "context": CONTEXT})
    assert reply.status_code == 422 and reply.json()["detail"].startswith("Skipped")
