"""The /v1 API described (issue 75): every response a schema-driven test draws (schemathesis, valid and invalid
requests generated from the OpenAPI document itself) matches that document: its status is one the document lists,
its body that status's schema, its content type and its headers (429's Retry-After) what the document says. The
refusals the generator does not reach by itself (a body over the limit, a full line, a wrong method) are checked
against the same document by hand."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, tiny_engine
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings

from variants.serving.guard import MAX_BODY_BYTES, ModelLine
from variants.serving.http import create_app, router

schemathesis = pytest.importorskip("schemathesis", reason="a dev dependency: pip install -e .[dev]")
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_every_drawn_response_matches_the_document(engine, mode: str) -> None:
    """Valid requests (positive) and requests the document forbids (negative: wrong types, missing fields, a
    question over 1,000 characters...) to every /v1 operation."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(engine))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} == {"/v1/answer", "/v1/variants", "/v1/benchmark"}
    for operation in operations:
        if mode == "negative" and operation.method.upper() != "POST":
            continue  # GET /v1/variants takes nothing: there is nothing to draw wrong

        @given(case=operation.as_strategy(generation_mode=GenerationMode(mode)))
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def drawn(case) -> None:
            case.call_and_validate(checks=CHECKS)

        drawn()


@pytest.fixture(scope="module")
def document(engine) -> dict:
    return create_app(engine).openapi()


def matches(document: dict, path: str, method: str, response) -> None:
    """``response`` is one the document lists for ``method path``: its status, and a Refusal's one-sentence body."""
    listed = document["paths"][path][method]["responses"]
    assert str(response.status_code) in listed, (response.status_code, sorted(listed))
    schema_ref = listed[str(response.status_code)]["content"]["application/json"]["schema"]["$ref"]
    assert schema_ref.endswith("/Refusal")
    assert set(response.json()) == {"detail"} and isinstance(response.json()["detail"], str)
    for header in listed[str(response.status_code)].get("headers", {}):
        assert header.lower() in response.headers


def test_the_document_states_the_limits_and_the_refusals(document) -> None:
    request = document["components"]["schemas"]["AnswerRequest"]["properties"]
    assert request["question"]["maxLength"] == 1_000 and request["context"]["maxLength"] == 25_000
    answer = document["paths"]["/v1/answer"]["post"]["responses"]
    assert {"200", "404", "405", "408", "413", "422", "429", "500", "503"} <= set(answer)
    assert "Retry-After" in answer["429"]["headers"]
    assert "HTTPValidationError" not in document["components"]["schemas"]  # FastAPI's 422 shape is never sent


def test_the_refusals_the_generator_does_not_reach_match_the_document(engine, document) -> None:
    with TestClient(create_app(engine)) as client:
        big = b'{"question": "q", "context": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}'
        too_big = client.post("/v1/answer", content=big, headers={"content-type": "application/json"})
        assert too_big.status_code == 413
        matches(document, "/v1/answer", "post", too_big)
        wrong_method = client.get("/v1/answer")
        assert wrong_method.status_code == 405
        matches(document, "/v1/answer", "post", wrong_method)
        matches(document, "/v1/variants", "get", client.post("/v1/variants"))
        long = client.post("/v1/answer", json={"question": "q" * 1_001, "context": CONTEXT})
        assert long.status_code == 422 and "question" in long.json()["detail"]
        matches(document, "/v1/answer", "post", long)


def test_a_full_line_is_a_429_as_documented(engine, document) -> None:
    line = ModelLine(slots=1, max_waiting=0)
    app = FastAPI()
    app.include_router(router(engine, line))
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with line.queued_turn():  # a chunk of a long run holds the models; no place is left
            holding.set()
            release.wait(60)

    held = threading.Thread(target=hold)
    held.start()
    assert holding.wait(30)
    try:
        with TestClient(app) as client:
            busy = client.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT})
            assert busy.status_code == 429
            matches(document, "/v1/answer", "post", busy)
    finally:
        release.set()
        held.join(30)
