"""Every route of the app, gradio's own included, answers a bad request in one sentence (issue 80): the allowlist at
the edge (variants.serving.allowed) lets through what the page, gradio_client and our APIs use, and refuses the rest
before gradio sees it. Checked on a real server: the thirteen requests a generated client found 500s with, requests
drawn by schemathesis from the app's whole /openapi.json (coverage and fuzzing phases), values drawn for each of the
page's own events, and the same app mounted as Ray Serve's demo replica and over a remote backend mounts it."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from app_helpers import CONTEXT, QUESTION, running, tiny_engine
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import app
from variants.serving import edge
from variants.serving import http as serve

THIRTEEN = [  # (method, path, JSON body): the requests the generated client got a 500 for, and their kin
    ("GET", "/?page=%C2%B7K%3E&deep_link=%C2%8D%11r", None),
    ("GET", "/gradio_api/proxy=%C2%8D%11r%FF%FE", None),
    ("GET", "/gradio_api/proxy=https://example.com/x", None),
    ("POST", "/gradio_api/call/0", {"data": []}),
    ("POST", "/gradio_api/api/0", {"data": []}),
    ("POST", "/gradio_api/run/0", {"data": []}),
    ("POST", "/gradio_api/stream/0", {"data": []}),
    ("POST", "/gradio_api/queue/join", {"fn_index": 0, "data": [None]}),
    ("POST", "/gradio_api/queue/join", {"fn_index": 0, "data": [None], "session_hash": "s"}),
    ("POST", "/gradio_api/queue/join", {"fn_index": 10_000, "data": [], "session_hash": "s"}),
    ("POST", "/gradio_api/stream/0/close", None),
    ("GET", "/gradio_api/queue/data?session_hash=never-joined", None),
    ("GET", "/gradio_api/call/0/abc", None),
    ("GET", "/config?deep_link=..%2F..%2Fetc", None),
    ("POST", "/gradio_api/cancel", {"session_hash": "s", "fn_index": 5, "event_id": "e"}),
    ("POST", "/gradio_api/reset", {"event_id": "e"}),
    ("GET", "/monitoring", None),
    ("GET", "/gradio_api/heartbeat/%0Abad%20session", None),
    ("GET", "/gradio_api/file=https://example.com/x", None),
    ("POST", "/gradio_api/component_server", {"data": 1, "component_id": 3, "fn_name": "x", "session_hash": "s"}),
]


def one_sentence(reply: httpx.Response) -> str:
    """The refusal's sentence: a 4xx whose JSON body is one short line."""
    assert 400 <= reply.status_code < 500, (reply.status_code, reply.text[:300])
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and len(detail) < 300, detail
    assert detail.rstrip(".").count(". ") == 0 and detail.endswith("."), detail
    return detail


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def url(engine, tmp_path_factory: pytest.TempPathFactory):
    demo = app.build_demo(engine, results_dir=tmp_path_factory.mktemp("none"), allow_custom_models=True)
    with running(demo, routes=serve.router(engine).routes) as address:
        yield address.rstrip("/")


@pytest.mark.parametrize(("method", "path", "body"), THIRTEEN, ids=[f"{m} {p[:40]}" for m, p, _ in THIRTEEN])
def test_each_request_that_got_a_500_is_a_4xx_in_one_sentence(url, method, path, body, caplog, capfd) -> None:
    caplog.set_level(logging.WARNING)
    reply = httpx.request(method, url + path, json=body, timeout=30)
    one_sentence(reply)
    refused = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(refused) == 1 and "\n" not in refused[0].getMessage() and not refused[0].exc_info
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in ASGI application" not in err


def test_the_routes_the_page_and_its_clients_use_still_answer(url) -> None:
    assert httpx.get(url + "/", timeout=30).status_code == 200
    config = httpx.get(url + "/config", timeout=30).json()
    assert httpx.get(url + "/gradio_api/info", timeout=30).json()["named_endpoints"].keys() == {"/answer", "/evaluate"}
    assert httpx.get(url + "/theme.css", timeout=30).status_code == 200
    assert httpx.get(url + "/openapi.json", timeout=30).status_code == 200
    upload = httpx.post(url + "/gradio_api/upload", files={"files": ("q.csv", b"question,context\n")}, timeout=30)
    assert upload.status_code == 200
    path = upload.json()[0]
    assert httpx.get(url + f"/gradio_api/file={path}", timeout=30).status_code == 200
    ask = next(d for d in config["dependencies"] if d.get("api_name") == "ask")
    assert ask["queue"]  # and its values pass as the page sends them (test_browser asks through the page)


def test_a_session_that_joined_reads_its_stream_and_a_file_not_uploaded_is_refused(url, capfd) -> None:
    config = httpx.get(url + "/config", timeout=30).json()
    check = next(d for d in config["dependencies"] if d.get("api_name") == "check")  # Your questions' upload
    route = "/gradio_api/queue/join" if check["queue"] else "/gradio_api/run/predict"
    not_uploaded = {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}
    body = {"fn_index": check["id"], "session_hash": "joined1", "data": [not_uploaded]}
    assert "uploaded to this app" in one_sentence(httpx.post(url + route, json=body, timeout=30))
    ask = next(d for d in config["dependencies"] if d.get("api_name") == "ask")
    components = {c["id"]: c for c in config["components"]}
    data = [components[i]["props"].get("value") for i in ask["inputs"]]
    data[0], data[1] = CONTEXT, QUESTION
    joined = httpx.post(url + "/gradio_api/queue/join", json={**body, "fn_index": ask["id"], "data": data}, timeout=60)
    assert joined.status_code == 200, joined.text
    stream = httpx.get(url + "/gradio_api/queue/data", params={"session_hash": "joined1"}, timeout=120).text
    assert "process_completed" in stream and '"success": true' in stream.replace('"success":true', '"success": true')
    assert "Traceback" not in capfd.readouterr().err


def test_a_choice_or_a_range_the_page_does_not_offer_is_one_sentence(url, capfd) -> None:
    """gradio's own preprocessing refuses these too, but prints each refusal as a traceback."""
    config = httpx.get(url + "/config", timeout=30).json()
    components = {c["id"]: c for c in config["components"]}
    ask = next(d for d in config["dependencies"] if d.get("api_name") == "ask")
    data = [components[i]["props"].get("value") for i in ask["inputs"]]
    kinds = [components[i]["type"] for i in ask["inputs"]]
    for kind, wrong, words in [("radio", "no-such-view", "not in the list of choices"), ("slider", 10**9, "maximum")]:
        sent = list(data)
        sent[kinds.index(kind)] = wrong
        body = {"fn_index": ask["id"], "session_hash": "s2", "data": sent}
        assert words in one_sentence(httpx.post(url + "/gradio_api/queue/join", json=body, timeout=30))
    assert "Traceback" not in capfd.readouterr().err


SCALARS = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False, allow_infinity=False)
JSON_VALUES = st.recursive(
    SCALARS | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def test_values_drawn_for_each_of_the_pages_events_never_get_a_5xx_or_a_traceback(url, capfd) -> None:
    """What a generic generator rarely reaches: the page's own events by their real fn_index and arity, each value
    drawn from any JSON (or the page's own value), sent where the page sends it."""
    config = httpx.get(url + "/config", timeout=30).json()
    components = {c["id"]: c for c in config["components"]}
    events = [d for d in config["dependencies"] if d["backend_fn"] and d["targets"]]
    assert len(events) > 20
    client = httpx.Client(base_url=url, timeout=60)

    @given(index=st.integers(0, len(events) - 1), data=st.data())
    @settings(
        max_examples=int(os.environ.get("ROUTES_EVENT_EXAMPLES", "100")),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def drawn(index: int, data: st.DataObject) -> None:
        event = events[index]
        own = [components.get(i, {}).get("props", {}).get("value") for i in event["inputs"]]
        values = [data.draw(st.just(v) | JSON_VALUES) for v in own]
        route = "/gradio_api/queue/join" if event["queue"] else "/gradio_api/run/predict"
        body = {"fn_index": event["id"], "session_hash": "drawn", "data": values, "trigger_id": None}
        reply = client.post(route, json=body)
        assert reply.status_code < 500, (event.get("api_name"), values, reply.text[:300])

    drawn()
    with client.stream("GET", "/gradio_api/queue/data", params={"session_hash": "drawn"}) as stream:
        for _line in stream.iter_lines():
            pass  # the queued events run to their end
    err = capfd.readouterr().err
    assert "Traceback" not in err, sorted(
        {line for line in err.splitlines() if re.match(r"\w[\w.]*(Error|Exception)", line)}
    )


def fixed_document(url: str, into: Path) -> Path:
    """The app's whole /openapi.json, with the path parameter gradio's own document forgets declaring
    (``api_name`` of ``GET /gradio_api/call/{api_name}/{event_id}``): schemathesis refuses an undeclared one."""
    document = httpx.get(url + "/openapi.json", timeout=30).json()
    for path, item in document["paths"].items():
        for operation in item.values():
            declared = {p["name"] for p in operation.get("parameters", []) if p.get("in") == "path"}
            for name in set(re.findall(r"{(\w+)}", path)) - declared:
                param = {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                operation.setdefault("parameters", []).append(param)
    into.write_text(json.dumps(document))
    return into


def run_schemathesis(url: str, folder: Path, max_examples: int, seconds: int | None = None) -> dict:
    """``st run`` over every operation of the app's document but the heartbeat (a stream that stays open by design,
    checked above), coverage and fuzzing phases, failing on any 5xx; its NDJSON record and summary."""
    document = fixed_document(url, folder / "openapi.json")
    st_cli = Path(sys.executable).with_name("st")
    command = [
        str(st_cli), "run", str(document), "--url", url, "--phases", "coverage,fuzzing", "-n", str(max_examples),
        "--checks", "not_a_server_error", "--request-timeout", "10", "--exclude-path-regex", "heartbeat",
        "--continue-on-failure", "--generation-deterministic", "--report", "ndjson",
        "--report-ndjson-path", str(folder / "events.ndjson"), "--no-color",
    ]  # fmt: skip
    if seconds:
        command += ["--max-time", str(seconds)]
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, cwd=folder, timeout=(seconds or 300) + 300
    )
    return {"returncode": done.returncode, "output": done.stdout + done.stderr}


def test_requests_drawn_from_the_whole_document_never_get_a_5xx_or_a_traceback(url, tmp_path: Path, capfd) -> None:
    """A bounded run for CI (a few examples per operation, both phases); experiments/fuzz_routes.py runs it for
    ten minutes and more and keeps a record."""
    schemathesis = pytest.importorskip("schemathesis", reason="a dev dependency: pip install -e .[dev]")
    assert schemathesis
    run = run_schemathesis(url, tmp_path, max_examples=int(os.environ.get("ROUTES_SCHEMA_EXAMPLES", "6")))
    summary = run["output"][-3000:]
    assert run["returncode"] == 0 and "not_a_server_error" not in summary.split("SUMMARY")[-1], summary
    assert "Tested: " in summary
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in ASGI application" not in err, err[:3000]


# --- the same app on Ray Serve's front and over a remote backend ------------------------------------------------


def test_the_v1_only_front_refuses_what_it_does_not_serve_in_one_sentence(engine, caplog) -> None:
    """Ray Serve's replicas and ``python -m variants serve`` serve /v1 only: the rest is one sentence too."""
    caplog.set_level(logging.WARNING)
    with TestClient(serve.create_app(engine)) as client:
        for method, path, body in THIRTEEN:
            reply = client.request(method, path, json=body)
            assert reply.status_code in (403, 404), (path, reply.status_code)
            assert "\n" not in reply.json()["detail"]
        assert client.get("/v1/variants").status_code == 200
    assert not [r for r in caplog.records if r.exc_info]


def test_the_page_mounted_under_a_route_prefix_is_held_the_same(engine, tmp_path: Path) -> None:
    """The demo replica (``app.backend_app``: the page mounted on FastAPI) served under Ray Serve's ``/demo`` prefix,
    which ASGI puts in ``root_path``: the allowlist judges the path within the app."""
    import gradio as gr  # noqa: PLC0415

    demo = app.build_demo(engine, results_dir=tmp_path)
    mounted = gr.mount_gradio_app(FastAPI(**edge.app_kwargs(demo)), demo, path="/")
    with TestClient(mounted, root_path="/demo") as client:
        assert client.get("/demo/config").status_code == 200
        assert client.get("/demo/gradio_api/info").status_code == 200
        for path in ("/demo/gradio_api/call/0", "/demo/monitoring", "/demo/gradio_api/proxy=x"):
            reply = client.post(path, json={"data": []}) if "call" in path else client.get(path)
            assert 400 <= reply.status_code < 500 and "\n" not in reply.json()["detail"], (path, reply.text)


def test_gradio_client_still_answers_and_evaluates(url) -> None:
    gradio_client = pytest.importorskip("gradio_client")
    client = gradio_client.Client(url + "/", verbose=False)
    answers = client.predict(CONTEXT, QUESTION, None, 1, 1, api_name="/answer")
    assert isinstance(answers, list) and answers and "answer" in answers[0]
    out = client.predict(f'context,question\n"{CONTEXT}",{QUESTION}\n', api_name="/evaluate")
    while not out["done"]:
        out = client.predict("", None, out["run"], api_name="/evaluate")
    assert out["questions"] == out["answered"] == 1


def test_a_refusal_of_an_unqueued_event_is_a_422_with_its_message(url, capfd) -> None:
    """gradio answers a gr.Error raised outside the queue with a 500; the page reads the same body from the 422."""
    config = httpx.get(url + "/config", timeout=30).json()
    made = next(d for d in config["dependencies"] if d.get("api_name") == "made")  # "Copy a link to this question"
    components = {c["id"]: c for c in config["components"]}
    data = [components[i]["props"].get("value") for i in made["inputs"]]
    data[1] = ""  # no question
    body = {"fn_index": made["id"], "session_hash": "m", "data": data}
    reply = httpx.post(url + "/gradio_api/run/predict", json=body, timeout=30)
    assert reply.status_code == 422 and reply.json()["error"].startswith("Type a question first")
    assert "Traceback" not in capfd.readouterr().err


def test_an_error_of_the_apps_own_is_logged_once_with_a_request_id(caplog, capfd) -> None:
    app_ = FastAPI(**edge.app_kwargs())

    @app_.get("/v1/broken")
    def broken() -> None:
        raise RuntimeError("a bug of ours")

    caplog.set_level(logging.WARNING)
    with TestClient(app_, raise_server_exceptions=False) as client:
        reply = client.get("/v1/broken")
    assert reply.status_code == 500
    request_id = re.search(r"request ([0-9a-f]{12})", reply.json()["detail"])[1]
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1 and request_id in logged[0].getMessage() and "a bug of ours" in str(logged[0].exc_info[1])
    assert "Exception in ASGI application" not in capfd.readouterr().err
