"""The /v1 client and the app's remote engine (``app.py --backend URL``), without Ray: real HTTP on loopback
to the lean route mounted per variant at ``/NAME``, the layout of the Ray Serve routes (tests/test_ray_serve.py
runs the same engine against a real Ray cluster)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fastapi import FastAPI, HTTPException

from ui.cards import cards_html
from variants.answering.qa import CALIBRATED_THRESHOLD
from variants.benchmarking.options import DEFAULT_DATA
from variants.benchmarking.quick import quick_benchmark
from variants.benchmarking.served_latency import LoopbackServer
from variants.core.spec import VariantSpec
from variants.core.squad import load_squad_json
from variants.serving.engine import load_engine
from variants.serving.http import router
from variants.serving.remote import AnswerClient, RemoteError, variant_route
from variants.serving.remote_engine import remote_engine

QUESTION, CONTEXT = "what is the capital of france?", "paris is the capital of france."


@pytest.fixture(scope="module")
def backend(tiny_qa_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny model served as variant "baseline" at /baseline/v1/..., as Ray Serve mounts a variant, with a
    calibrated null threshold of its own."""
    folder = tmp_path_factory.mktemp("calibrated") / "model"
    shutil.copytree(tiny_qa_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, CALIBRATED_THRESHOLD: -3.25}))
    spec = VariantSpec("baseline", "Baseline", str(folder), (), True)
    with load_engine(variant_specs=[spec], device="cpu", cache_dir=tmp_path_factory.mktemp("remote")) as engine:
        app = FastAPI()
        app.include_router(router(engine), prefix=variant_route("baseline"))
        with LoopbackServer(app) as server:
            yield f"http://127.0.0.1:{server.port}", engine


def test_remote_engine_answers_as_the_engine_with_the_requests_threshold(backend) -> None:
    url, local = backend
    remote = remote_engine(url, "embedded", "cpu", names=["baseline", "pruned"])
    for threshold in (None, -1e9, 1e9):
        got = remote.answer_one("baseline", QUESTION, CONTEXT, repeats=2, null_threshold=threshold)
        want = local.answer_one("baseline", QUESTION, CONTEXT, null_threshold=threshold)
        assert (got.answer, got.start, got.end, got.score) == (want.answer, want.start, want.end, want.score)
        assert got.error is None and len(got.latency_runs) == 2 and got.provider == "PyTorch"
        # the model ran elsewhere: this process's CPU time would say nothing about the machine it ran on
        assert got.cpu_runs == [] and got.stretch is None and not got.busy
    assert remote.answer_one("baseline", QUESTION, CONTEXT, null_threshold=-1e9).answer == ""  # always "no answer"
    # "calibrated": the replica decides with its model's threshold, and the card shows that one
    calibrated = remote.answer_one("baseline", QUESTION, CONTEXT, null_threshold="calibrated")
    assert (
        calibrated.null_threshold
        == local.answer_one("baseline", QUESTION, CONTEXT, null_threshold="calibrated").null_threshold
    )
    assert calibrated.null_threshold == -3.25
    pruned = remote.answer_one("pruned", QUESTION, CONTEXT)
    assert pruned.error == f"Not served at {url}/pruned: start it with python -m variants serve --ray --variants pruned"
    results = {r.variant: r for r in remote.ask(QUESTION, CONTEXT)}
    html = cards_html(remote.snapshot(results), ["baseline", "pruned"], CONTEXT)
    assert f"Answered by Ray Serve at {url}/baseline" in html and "This variant failed" in html
    with pytest.raises(RuntimeError, match="runs models in this process"):
        remote.answer_pairs("baseline", [(QUESTION, CONTEXT)])
    with pytest.raises(ValueError, match="The quick benchmark runs models in this process; baseline answer"):
        quick_benchmark(remote, load_squad_json(DEFAULT_DATA), 2)


def test_client_refuses_bad_input_without_retrying(backend) -> None:
    url, _ = backend
    with AnswerClient(url + variant_route("baseline")) as client:
        with pytest.raises(RemoteError, match="null_threshold") as bad:
            client.answer(QUESTION, CONTEXT, null_threshold="banana")
        assert bad.value.status == 422
        with pytest.raises(RemoteError) as missing:
            AnswerClient(url + "/nope").variants()
        assert missing.value.status == 404


def test_client_retries_a_failed_request_until_it_is_answered() -> None:
    """As when a replica dies under a request: the proxy answers 5xx, the client sends it again."""
    calls: list[int] = []
    app = FastAPI()

    @app.post("/v1/answer")
    def flaky(body: dict) -> dict:
        calls.append(1)
        if len(calls) <= 2:
            raise HTTPException(503, "replica gone")
        return {"answer": body["question"], "latency_ms": 1.0}

    with LoopbackServer(app) as server:
        with AnswerClient(f"http://127.0.0.1:{server.port}", backoff_s=0.01) as client:
            reply = client.answer("q", "c")
        assert (reply["answer"], reply["retried"], len(calls)) == ("q", 2, 3)
        calls.clear()
        with AnswerClient(f"http://127.0.0.1:{server.port}", retries=1, backoff_s=0.01) as client:
            with pytest.raises(RemoteError, match="replica gone") as failed:
                client.answer("q", "c")
        assert failed.value.status == 503 and len(calls) == 2


def test_app_demo_replicas_need_a_backend(capsys: pytest.CaptureFixture) -> None:
    import app  # noqa: PLC0415

    assert app.main(["--demo-replicas", "2"]) == 2
    assert "--demo-replicas needs --backend" in capsys.readouterr().err


def test_the_page_over_a_backend_is_held_by_the_same_allowlist(backend, tmp_path: Path, capfd) -> None:
    """``app.py --backend URL``: the page over remote variants has its own events (no build, no visitor's model);
    the allowlist, derived from them, lets the page's calls and gradio_client through and refuses the rest."""
    import httpx  # noqa: PLC0415
    from app_helpers import running  # noqa: PLC0415
    from gradio_client import Client  # noqa: PLC0415

    import app  # noqa: PLC0415

    url, _local = backend
    remote = remote_engine(url, "embedded", "cpu", names=["baseline"])
    with running(app.build_demo(remote, results_dir=tmp_path)) as address:
        page = address.rstrip("/")
        for path, body in [("/gradio_api/call/0", {"data": []}), ("/gradio_api/run/0", {"data": []})]:
            reply = httpx.post(page + path, json=body, timeout=30)
            assert reply.status_code == 404 and "\n" not in reply.json()["detail"]
        joined = httpx.post(page + "/gradio_api/queue/join", json={"fn_index": 10_000, "session_hash": "s", "data": []})
        assert joined.status_code == 422 and "fn_index" in joined.json()["detail"]
        answers = Client(page + "/", verbose=False).predict(CONTEXT, QUESTION, None, 1, 1, api_name="/answer")
        assert [a["variant"] for a in answers] == ["baseline"] and answers[0]["answer"]
    assert "Traceback" not in capfd.readouterr().err
