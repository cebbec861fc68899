"""The API says what is coming (issue 75): while the variants build, the gradio ``/answer`` API lists every variant
of the preset, those not ready with ``pending``, their build state and step; ``POST /v1/answer`` lists them in
``pending``, and a variant of the preset not built yet is a 503 that says so, not the 404 of a name that is not in
the preset. And short turns: the models' line hands out turns in order, so a long run's next chunk waits behind a
question that came while its last chunk ran."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from app_helpers import CONTEXT, QUESTION, TINY_SETTINGS
from fastapi.testclient import TestClient

from ui.ask import make_answer_api
from variants.core import spec as specs
from variants.serving.build_status import BUILDING, QUEUED
from variants.serving.engine import prepare_engine
from variants.serving.guard import FairTurns, ModelLine
from variants.serving.http import create_app

CHAIN = ["baseline", "pruned", "pruned-onnx-opt-int8"]


def wait_for(condition, timeout: float = 120.0, what: str = "the condition") -> None:
    """Poll ``condition`` until it holds (no fixed sleep: the suite runs under load)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout:.0f} s"
        time.sleep(0.02)


def test_while_the_variants_build_the_apis_list_the_ones_not_ready_as_pending(
    tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path
) -> None:
    chain = specs.preset("embedded", "cpu", {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)})
    engine = prepare_engine(
        variant_specs=specs.named(chain, CHAIN), device="cpu", cache_dir=artifacts_dir, settings=TINY_SETTINGS
    )
    answer_api, v1 = make_answer_api(engine, ModelLine()), TestClient(create_app(engine))

    rows = asyncio.run(answer_api(CONTEXT, QUESTION, None, 1, 1))  # before anything is built: every one pending
    assert [(r["variant"], r["pending"], r["state"]) for r in rows] == [(n, True, QUEUED) for n in CHAIN]
    reply = v1.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT})
    assert reply.status_code == 503 and "No variant is ready yet: 3 still building" in reply.json()["detail"]

    gate, build = threading.Event(), engine._builder.build

    def slow_build(spec, *args, **kwargs):  # the pruned variant's build waits for the gate
        if spec.name == "pruned":
            assert gate.wait(120), "the test never opened the gate"
        return build(spec, *args, **kwargs)

    engine._builder.build = slow_build
    thread = engine.build_in_background()
    wait_for(lambda: engine.status.snapshot().state("pruned").state == BUILDING, what="the pruned build")
    try:
        rows = {r["variant"]: r for r in asyncio.run(answer_api(CONTEXT, QUESTION, None, 1, 1))}
        assert list(rows) == CHAIN  # every variant of the preset, the ready ones first
        assert rows["baseline"]["state"] == "ready" and not rows["baseline"]["pending"] and rows["baseline"]["answer"]
        assert rows["pruned"]["pending"] and rows["pruned"]["state"] == BUILDING and rows["pruned"]["step"]
        assert rows["pruned"]["answer"] == "" and rows["pruned"]["error"] is None
        int8 = rows["pruned-onnx-opt-int8"]
        assert int8["pending"] and int8["state"] == QUEUED and int8["step"] == ""

        reply = v1.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "baseline"})
        assert reply.status_code == 200
        pending = reply.json()["pending"]
        assert [(p["variant"], p["state"]) for p in pending] == [("pruned", BUILDING), ("pruned-onnx-opt-int8", QUEUED)]
        building = v1.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "pruned"})
        assert building.status_code == 503 and "pruned is not built yet" in building.json()["detail"]
        unknown = v1.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "nope"})
        assert unknown.status_code == 404  # not in this preset: another answer than "not built yet"
        listed = {v["name"]: v["state"] for v in v1.get("/v1/variants").json()}
        assert listed == {"baseline": "ready", "pruned": BUILDING, "pruned-onnx-opt-int8": QUEUED}
    finally:
        gate.set()
        thread.join(120)
    rows = asyncio.run(answer_api(CONTEXT, QUESTION, None, 1, 1))
    assert [r["variant"] for r in rows] == CHAIN and not any(r["pending"] for r in rows)
    assert v1.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT}).json()["pending"] == []


def test_turns_go_in_the_order_asked_so_a_long_runs_next_chunk_waits_behind_a_question() -> None:
    """A semaphore would let the long run take its next turn back at once; the line lets the question go first."""
    line, order = ModelLine(slots=1), []

    def question() -> None:
        with line.turn():
            order.append("question")

    with line.queued_turn():  # a chunk of a long run holds the models
        asker = threading.Thread(target=question)
        asker.start()
        wait_for(lambda: line._turns.waiting == 1, what="the question waiting")
    with line.queued_turn():  # the run's next chunk, asked for at once
        order.append("next chunk")
    asker.join(30)
    assert order == ["question", "next chunk"]


def test_fair_turns_with_more_slots_let_as_many_in() -> None:
    turns = FairTurns(2)
    turns.acquire()
    turns.acquire()  # both slots, no wait
    assert turns.waiting == 0
    turns.release()
    turns.release()
