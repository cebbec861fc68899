"""The lean HTTP route (variants.serving.http) through FastAPI's TestClient, on the tiny fixture model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from variants.core.spec import VariantSpec
from variants.serving.engine import load_engine
from variants.serving.http import create_app

QUESTION, CONTEXT = "what is the capital of france?", "paris is the capital of france."


@pytest.fixture(scope="module")
def client(tiny_qa_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    chain = [
        VariantSpec("baseline", "Baseline", str(tiny_qa_dir), (), True),
        VariantSpec("baseline-onnx", "Baseline + ONNX", str(tiny_qa_dir), ("onnx",), True),
    ]
    cache = tmp_path_factory.mktemp("serve-cache")
    with load_engine(variant_specs=chain, device="cpu", cache_dir=cache) as engine:
        with TestClient(create_app(engine)) as c:
            yield c, engine


def test_answer_matches_the_engine(client) -> None:
    c, engine = client
    response = c.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "baseline"})
    assert response.status_code == 200, response.text
    body = response.json()
    direct = engine.answer_one("baseline", QUESTION, CONTEXT)
    assert (body["answer"], body["start"], body["end"]) == (direct.answer, direct.start, direct.end)
    assert body["provider"] == "PyTorch" and body["device"] == "cpu" and body["latency_only"] is False


def test_default_variant_is_the_last_headline_one(client) -> None:
    c, _ = client
    body = c.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT}).json()
    assert body["variant"] == "baseline-onnx" and body["provider"] == "CPUExecutionProvider"
    assert [v["name"] for v in c.get("/v1/variants").json()] == ["baseline", "baseline-onnx"]


def test_errors_are_http_statuses(client) -> None:
    c, _ = client
    assert c.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "nope"}).status_code == 404
    bad = c.post("/v1/answer", json={"question": " ", "context": CONTEXT})
    assert bad.status_code == 422 and "question" in bad.json()["detail"]
    assert c.post("/v1/answer", json={"context": CONTEXT}).status_code == 422  # missing field
    # found only while tokenizing: a question that leaves the context no room in a window
    long = c.post("/v1/answer", json={"question": "? " * 499, "context": CONTEXT})
    assert long.status_code == 422 and "too long" in long.json()["detail"]
    body = json.dumps({"question": QUESTION, "context": CONTEXT, "null_threshold": float("nan")})  # Python writes NaN
    nan = c.post("/v1/answer", content=body, headers={"content-type": "application/json"})
    assert nan.status_code == 422 and "NaN" in nan.json()["detail"]  # a number, not only the text "nan"


def test_route_rides_beside_a_gradio_app(client) -> None:
    """The wiring app.py uses: ``demo.launch(app_kwargs={"routes": router(engine).routes})`` (Gradio passes
    app_kwargs to its FastAPI app); checked on Gradio's own app factory, without a server."""
    import gradio as gr  # noqa: PLC0415

    from variants.serving.http import router  # noqa: PLC0415

    _, engine = client
    with gr.Blocks() as demo:
        gr.Markdown("demo")
    app = gr.routes.App.create_app(demo, app_kwargs={"routes": router(engine).routes})
    with TestClient(app) as c:
        body = c.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "baseline"}).json()
        assert body["variant"] == "baseline" and body["answer"]
    paths = {getattr(r, "path", "") for r in app.routes}
    assert "/v1/answer" in paths and "/config" in paths  # beside Gradio's own routes
