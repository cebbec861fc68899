"""Every route held like /v1 (issue 75): a real server with the page, its gradio routes and /v1 behind the edge
(variants.serving.edge), sent what a hostile client sends by raw socket and by HTTP: a 100 MB body to any route is
refused at once with a short reply, never read; a stalled body is timed out; no malformed call leaves a traceback
in the log, each one sentence and one log line."""

from __future__ import annotations

import json
import logging
import select
import socket
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest
from app_helpers import CONTEXT, QUESTION, running, tiny_engine

import app
from variants.serving import edge
from variants.serving import http as serve
from variants.serving.guard import MAX_BODY_BYTES, MAX_FILE_BODY_BYTES

HUNDRED_MB = 100_000_000
ROUTES = [  # the page's own, gradio's API and upload, /v1, and a route that is not there
    "/",
    "/config",
    "/gradio_api/call/answer",
    "/gradio_api/call/evaluate",
    "/gradio_api/run/answer",
    "/gradio_api/queue/join",
    "/gradio_api/upload",
    "/v1/answer",
    "/no/such/route",
]
MALFORMED = {  # the body sent to /gradio_api/call/answer, and a few words of the one sentence it gets back
    "a data list too short": ({"data": ["x"]}, "takes 5 values in data"),
    "a data list too long": ({"data": [CONTEXT, QUESTION, None, 1, 1, 7]}, "takes 5 values in data"),
    "an extra session_hash": ({"data": [CONTEXT, QUESTION, None, 1, 1], "session_hash": "abc"}, "takes only data"),
    "a threshold that is an object": ({"data": [CONTEXT, QUESTION, {}, 1, 1]}, "null_threshold"),
    "a threshold that is a list": ({"data": [CONTEXT, QUESTION, [1], 1, 1]}, "null_threshold"),
    "a context that is a number": ({"data": [5, QUESTION, None, 1, 1]}, "context"),
    "runs as a 900 KB string": ({"data": [CONTEXT, QUESTION, None, "y" * 900_000, 1]}, "900,000 characters"),
    "data that is not a list": ({"data": "x"}, "a list of values"),
    "a body that is a list": ([1, 2], "a JSON object"),
}


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def url(engine, tmp_path_factory: pytest.TempPathFactory):
    demo = app.build_demo(engine, results_dir=tmp_path_factory.mktemp("none"))
    with running(demo, routes=serve.router(engine).routes) as address:
        yield address.rstrip("/")


def read_reply(sock: socket.socket, timeout: float = 60.0) -> tuple[int, bytes]:
    """The status and the bytes of one reply (up to the server closing or its Content-Length)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (int(v) for k, _, v in (h.partition(b":") for h in head.split(b"\r\n")) if k.lower() == b"content-length"), None
    )
    while length is not None and len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split(b" ")[1]), body


def send_head(url: str, path: str, headers: dict[str, str]) -> socket.socket:
    where = urlparse(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=60)
    lines = [f"POST {path} HTTP/1.1", f"Host: {where.netloc}", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


@pytest.mark.parametrize("path", ROUTES)
def test_a_100_mb_body_to_any_route_is_refused_at_once_and_never_read(url, path: str) -> None:
    """Its headers and 64 KB of it are sent, not the rest: the reply comes without waiting for the other 99.9 MB."""
    with send_head(url, path, {"Content-Length": str(HUNDRED_MB), "Content-Type": "application/json"}) as sock:
        sock.sendall(b"x" * 65_536)
        status, body = read_reply(sock)
    assert status == 413 and len(body) < 200
    assert "this route's limit" in json.loads(body)["detail"]


@pytest.mark.parametrize("path", ["/gradio_api/queue/join", "/v1/answer"])
def test_a_streamed_body_without_a_length_is_cut_off_at_the_limit(url, path: str) -> None:
    """Chunked, with no Content-Length: refused once past the route's limit, long before 100 MB are sent."""
    sent, reply = 0, None
    with send_head(url, path, {"Transfer-Encoding": "chunked", "Content-Type": "application/json"}) as sock:
        chunk = b"x" * 1_000_000
        while sent < HUNDRED_MB:
            if select.select([sock], [], [], 0)[0]:  # the server has answered
                reply = read_reply(sock)
                break
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:  # it closed the connection: its reply is waiting
                reply = read_reply(sock)
                break
            sent += len(chunk)
    assert reply is not None and reply[0] == 413 and len(reply[1]) < 200
    assert sent < MAX_FILE_BODY_BYTES + 10_000_000  # cut off near the limit (the sockets' buffers hold a few MB)


def test_a_stalled_body_is_timed_out(url, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(edge, "BODY_TIMEOUT_S", 1.0)
    with send_head(url, "/gradio_api/call/answer", {"Content-Length": "100", "Content-Type": "application/json"}) as s:
        s.sendall(b'{"data": [')  # and then nothing
        status, body = read_reply(s)
    assert status == 408 and "did not arrive within 1 s" in json.loads(body)["detail"]


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_call_to_gradio_is_one_sentence_and_one_log_line(url, name, caplog, capfd) -> None:
    caplog.set_level(logging.WARNING)
    body, words = MALFORMED[name]
    sent = 1  # the join below
    for path in ("/gradio_api/call/answer", "/gradio_api/call/v2/answer"):
        reply = httpx.post(url + path, json=body, timeout=60)
        sent += 1
        assert reply.status_code == 422 and len(reply.content) < 600, reply.text[:300]
        assert words in reply.json()["detail"]
    joined = httpx.post(url + "/gradio_api/queue/join", json={"fn_index": "x", "session_hash": "s", "data": []})
    assert joined.status_code == 422 and "fn_index should be" in joined.json()["detail"]
    refused = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(refused) == sent and all("\n" not in r.getMessage() and not r.exc_info for r in refused)
    assert "Traceback" not in capfd.readouterr().err


def test_a_body_nested_thousands_deep_is_one_sentence_not_a_500(url, capfd) -> None:
    deep = '{"data":' + "[" * 5000 + "]" * 5000 + "}"  # past the JSON parser's recursion limit
    reply = httpx.post(url + "/gradio_api/call/answer", content=deep, headers={"Content-Type": "application/json"})
    assert reply.status_code == 422 and "nested too deep" in reply.json()["detail"]
    assert "Traceback" not in capfd.readouterr().err


def test_a_short_list_to_an_event_of_the_page_is_refused_before_gradio_prints_a_traceback(url, capfd) -> None:
    config = httpx.get(url + "/config", timeout=60).json()
    ask = next(d for d in config["dependencies"] if d.get("api_name") == "ask")
    reply = httpx.post(
        url + "/gradio_api/queue/join", json={"fn_index": ask["id"], "session_hash": "s", "data": [CONTEXT]}
    )
    assert reply.status_code == 422 and "/ask takes 8 values in data" in reply.json()["detail"]
    assert "Traceback" not in capfd.readouterr().err


def test_a_wrong_kind_of_value_to_an_event_of_the_page_is_refused(url, capfd, caplog) -> None:
    """The examples' event takes an index (an integer) within the examples: a text there, or an index past them,
    made gradio print a 40-line traceback. The page calls it outside the queue (/run/predict)."""
    caplog.set_level(logging.WARNING)
    config = httpx.get(url + "/config", timeout=60).json()
    example = next(d for d in config["dependencies"] if d.get("api_name") == "load_example")
    route = "/gradio_api/queue/join" if example["queue"] else "/gradio_api/run/predict"
    for value, words in [
        ("x", "should be a JSON integer"),
        ({"a": 1}, "should be a JSON integer"),
        (True, "should be a JSON integer"),
        (99_999, "an example's number, 0 to"),
        (-1, "an example's number, 0 to"),
        (1.0, "an example's number, 0 to"),
    ]:
        body = {"fn_index": example["id"], "session_hash": "s", "data": [value]}
        reply = httpx.post(url + route, json=body, timeout=60)
        assert reply.status_code == 422 and words in reply.json()["detail"], (value, reply.text)
    assert len([r for r in caplog.records if "refused (422)" in r.getMessage()]) == 6
    assert "Traceback" not in capfd.readouterr().err


def test_an_unknown_event_stream_ends_without_a_traceback(url, capfd, caplog) -> None:
    caplog.set_level(logging.WARNING)
    reply = httpx.get(url + "/gradio_api/call/answer/no-such-event", timeout=60)
    assert "event: error" in reply.text
    time.sleep(0.5)  # the server logs after the stream ends
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception in ASGI application" not in err


def test_a_well_formed_call_still_answers(url) -> None:
    posted = httpx.post(url + "/gradio_api/call/answer", json={"data": [CONTEXT, QUESTION, None, 1, 1]}, timeout=60)
    assert posted.status_code == 200
    stream = httpx.get(url + f"/gradio_api/call/answer/{posted.json()['event_id']}", timeout=120).text
    assert "event: complete" in stream and '"answer"' in stream
    lean = httpx.post(url + "/v1/answer", json={"question": QUESTION, "context": CONTEXT}, timeout=120)
    assert lean.status_code == 200 and lean.json()["answer"]


def test_a_validation_error_on_gradio_routes_quotes_an_excerpt(url) -> None:
    """FastAPI's own handler echoed the whole input back (a 100 MB body came back whole from /gradio_api/call)."""
    config = httpx.get(url + "/config", timeout=60).json()
    direct = next(d for d in config["dependencies"] if d["backend_fn"] and not d["queue"] and not d["inputs"])
    body = {"fn_index": direct["id"], "session_hash": "s", "data": [], "batched": "e" * (MAX_BODY_BYTES // 2)}
    reply = httpx.post(url + "/gradio_api/run/predict", json=body, timeout=60)
    assert reply.status_code == 422 and "batched" in reply.json()["detail"] and len(reply.content) < 600


@pytest.mark.parametrize(
    "path",
    [
        "/gradio_api/file=https://evil.example/phish",
        "/gradio_api/file/https://evil.example/phish",
        "/gradio_api/file=http://169.254.169.254/latest/meta-data/",
    ],
)
def test_a_file_route_naming_an_address_is_a_403_in_one_sentence_never_a_redirect(url, path: str, capfd) -> None:
    """The app as served: gradio 6.17 redirected these (gradio issue 13608), the edge refuses them first."""
    reply = httpx.get(url + path, follow_redirects=False, timeout=30)
    assert reply.status_code == 403 and "location" not in reply.headers
    assert reply.json() == {"detail": edge.REMOTE_FILE_WORDS}
    assert "Traceback" not in capfd.readouterr().err
