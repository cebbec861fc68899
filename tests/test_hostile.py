"""The app against a hostile client (issue 69 A2-A5, B6-B8): every bad input a one-sentence 4xx, never a 500 and
never a traceback in the log; bounded bodies, lines and runs; runs bound to the session that started them.
/v1 through starlette's TestClient, /answer, /evaluate and the tabs through their handler closures; tiny models."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from app_helpers import CONTEXT, QUESTION, SlowRun, tiny_engine
from fastapi import FastAPI
from fastapi.testclient import TestClient

from ui import questions as tab
from ui.ask import make_answer_api, make_ask, make_validator
from variants.benchmarking.evaluate import Evaluation
from variants.core.question_files import MAX_JSON_DEPTH, QuestionFileError, json_depth, parse_questions
from variants.serving.edge import REMOTE_FILE, REMOTE_FILE_WORDS, app_kwargs
from variants.serving.guard import MAX_BODY_BYTES, ModelLine, Refused, RunBook, excerpt
from variants.serving.http import create_app, router

LONE = "\ud800"
ROWS = "context,question,answer\nParis is the capital of France.,What is the capital of France?,Paris\n"
HOSTILE_FILES = {  # what each bad file is told, in a few words of its one sentence
    "nested JSON": ('{"data": ' + "[" * 100_000, "nested more than"),
    "nested JSON Lines": ('{"context": "a", "question": "b"}\n' + '{"a": ' * 100_000, "nested more than"),
    "a 1 MB CSV cell": ('context,question\n"' + "x" * 1_000_000 + '",Why?\n', "a cell over"),
    "a 1 MB CSV header": ('"' + "x" * 1_000_000 + '",question\n', "a cell over"),
    "unclosed brackets": ("[" * 100_000, "is a JSON list"),
    "a lone surrogate": (f"context,question\nParis {LONE},Where?\n", "lone surrogate"),
    "an answers cell nested deep": ('context,question,answers\nParis,Where?,"' + "[" * 100_000 + '"\n', "nested"),
}


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def client(engine):
    with TestClient(create_app(engine)) as c:  # a 500 would raise here: starlette re-raises server errors
        yield c


def one_line_each(caplog: pytest.LogCaptureFixture, n: int) -> list[str]:
    """The refusals logged: ``n`` one-line records, none with a traceback."""
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == n, [r.getMessage()[:200] for r in records]
    assert not any(r.exc_info or r.exc_text for r in records)
    assert all("\n" not in r.getMessage() for r in records)
    return [r.getMessage() for r in records]


# --- B6: invalid text, named as such, wherever text comes in ---------------------------------------------


@pytest.mark.parametrize("field", ["question", "context"])
def test_a_lone_surrogate_on_v1_is_a_422_naming_it(client, field: str) -> None:
    body = {"question": QUESTION, "context": CONTEXT} | {field: f"what {LONE} is it?"}
    raw = json.dumps(body)  # ensure_ascii: the JSON escape \ud800, as a hostile client sends it
    response = client.post("/v1/answer", content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert f"The {field} is not valid text" in detail and "lone surrogate (U+D800)" in detail


def test_a_lone_surrogate_on_answer_and_ask_is_one_sentence_and_one_log_line(engine, caplog) -> None:
    caplog.set_level(logging.WARNING)
    with pytest.raises(gr.Error, match=r"The question is not valid text: character 6 is a lone surrogate"):
        make_answer_api(engine)(CONTEXT, f"what {LONE} is it?")
    with pytest.raises(gr.Error, match="The context is not valid text"):
        next(make_ask(engine)(f"{CONTEXT} {LONE}", QUESTION, [], last={}))
    # the Ask tab's validator puts it under the context box, before the queue
    checks = make_validator(engine)(f"{CONTEXT} {LONE}", QUESTION, [], "pipeline", 0.0, 2, [])
    assert checks[0]["is_valid"] is False and "lone surrogate" in checks[0]["message"]
    lines = one_line_each(caplog, 2)
    assert all(LONE not in line for line in lines)  # the character itself never reaches the log


# --- B7: files of questions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HOSTILE_FILES))
def test_a_hostile_file_on_evaluate_is_one_sentence(engine, caplog, name: str) -> None:
    caplog.set_level(logging.WARNING)
    data, words = HOSTILE_FILES[name]
    evaluate = tab.make_evaluate_api(engine, Evaluation, RunBook())
    with pytest.raises(gr.Error) as refused:
        evaluate(data, None, "", 0.0, SimpleNamespace(session_hash="s"))
    message = refused.value.message
    assert words in message and len(message) < 400 and "[[[[[" not in message and "xxxxx" not in message
    one_line_each(caplog, 1)


@pytest.mark.parametrize("data", [5, 3.5, ["context,question"], {"data": []}, True])
def test_data_of_the_wrong_type_on_evaluate_is_named(engine, caplog, data) -> None:
    caplog.set_level(logging.WARNING)
    evaluate = tab.make_evaluate_api(engine, Evaluation, RunBook())
    with pytest.raises(gr.Error, match="/evaluate's data should be the text of a file"):
        evaluate(data, None, "", 0.0, SimpleNamespace(session_hash="s"))
    with pytest.raises(gr.Error, match="max_seconds should be a number of seconds"):
        evaluate(ROWS, None, "", float("inf"), SimpleNamespace(session_hash="s"))
    one_line_each(caplog, 2)


def test_nesting_is_counted_without_parsing() -> None:
    assert json_depth('{"data": [{"paragraphs": [{"qas": [{"answers": [{"text": "]]]}"}]}]}]}]}') == 9  # SQuAD JSON
    assert json_depth("[" * 1_000_000) == MAX_JSON_DEPTH + 1  # it stops counting past the limit
    with pytest.raises(QuestionFileError, match="not int"):
        parse_questions(7)  # type: ignore[arg-type]


def test_an_unusable_file_says_so_as_soon_as_it_is_uploaded(engine, tmp_path: Path, caplog) -> None:
    caplog.set_level(logging.WARNING)
    check = tab.make_handlers(engine, Evaluation, RunBook())["check"]
    bad = tmp_path / "deep.json"
    bad.write_text('{"data": ' + "[" * 100_000, encoding="utf-8")
    status = check(str(bad))
    assert 'role="alert"' in status and "nested more than" in status
    good = tmp_path / "rows.csv"
    good.write_text(ROWS, encoding="utf-8")
    assert "1 questions (with answers), ready to run." in check(str(good))
    one_line_each(caplog, 1)


# --- B8: bodies, echoes and numbers on /v1 and /answer --------------------------------------------------------


def test_a_body_over_the_limit_is_413_before_it_is_read(client) -> None:
    big = json.dumps({"question": QUESTION, "context": CONTEXT, "junk": "x" * MAX_BODY_BYTES})
    response = client.post("/v1/answer", content=big, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "1 MB" in response.json()["detail"]

    def chunks():  # no Content-Length: refused while it streams in
        yield b'{"question": "q", "context": "'
        for _ in range(40):
            yield b"x" * 50_000
        yield b'"}'

    streamed = client.post("/v1/answer", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413


def test_a_422_quotes_an_excerpt_never_the_input(client) -> None:
    response = client.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "runs": "y" * 900_000})
    assert response.status_code == 422 and len(response.content) < 600
    assert "runs" in response.json()["detail"] and "900,000 characters" in response.json()["detail"]
    missing = client.post("/v1/answer", json={"context": "z" * 900_000})
    assert missing.status_code == 422 and len(missing.content) < 600 and "question" in missing.json()["detail"]
    not_json = client.post("/v1/answer", content=b"{" * 500_000, headers={"content-type": "application/json"})
    assert not_json.status_code == 422 and len(not_json.content) < 600


def test_an_unknown_variant_is_excerpted(client) -> None:
    response = client.post("/v1/answer", json={"question": QUESTION, "context": CONTEXT, "variant": "v" * 100_000})
    assert response.status_code == 404 and len(response.content) < 600 and "100,000 characters" in response.text


@pytest.mark.parametrize("raw", ["1e309", "-1e309", '"Infinity"', '"-inf"', "NaN"])
def test_a_non_finite_threshold_is_refused(client, engine, raw: str) -> None:
    body = f'{{"question": {json.dumps(QUESTION)}, "context": {json.dumps(CONTEXT)}, "null_threshold": {raw}}}'
    response = client.post("/v1/answer", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422 and "null_threshold" in response.json()["detail"]
    assert "Infinity" not in response.text.replace('"Infinity"', "") or raw == '"Infinity"'
    with pytest.raises(gr.Error, match="null threshold must be a"):
        make_answer_api(engine)(CONTEXT, QUESTION, json.loads(raw) if raw != "NaN" else float("nan"))


def test_answer_never_replies_with_bare_infinity(engine) -> None:
    with pytest.raises(gr.Error, match="budget_s must be a finite number"):
        make_answer_api(engine)(CONTEXT, QUESTION, None, 1, float("inf"))
    rows = make_answer_api(engine)(CONTEXT, QUESTION, "1e3", 1, 0)
    json.dumps(rows, allow_nan=False)  # raises on any inf or NaN


# --- A4, A5: bounded lines that say how long to wait ----------------------------------------------------------


@contextlib.contextmanager
def a_full_line(name: str = "request") -> Iterator[tuple[ModelLine, threading.Event]]:
    """A line of one slot, held by a question in another thread, with its one waiting place reserved: full. Yields
    the line and the event that lets the question end."""
    line = ModelLine(slots=1, max_waiting=1, name=name)
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with line.turn():
            entered.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(30)
    line.reserve()  # a question validated for the page's queue holds the one place
    try:
        yield line, release
    finally:
        release.set()
        holder.join(30)


def test_a_full_line_refuses_at_once_with_how_long_to_wait() -> None:
    with a_full_line("question") as (line, _release), pytest.raises(Refused) as refused:
        line.reserve()
    assert refused.value.status == 429 and refused.value.retry_after >= 1
    assert str(refused.value).startswith("The app is busy: 1 question is waiting for the models")
    assert "try again in about" in str(refused.value)


def test_v1_requests_past_the_line_get_429_with_retry_after(engine) -> None:
    line = ModelLine(slots=1, max_waiting=1)
    app = FastAPI()
    app.include_router(router(engine, line))
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:  # someone's request is on the models
        with line.turn():
            holding.set()
            release.wait(60)

    held = threading.Thread(target=hold)
    held.start()
    assert holding.wait(30)
    with TestClient(app) as c:
        statuses: list[int] = []
        body = {"question": QUESTION, "context": CONTEXT}
        first = threading.Thread(target=lambda: statuses.append(c.post("/v1/answer", json=body).status_code))
        first.start()
        deadline = time.monotonic() + 30
        while line.waiting < 1 and time.monotonic() < deadline:  # the first request is in the line
            time.sleep(0.01)
        refused = c.post("/v1/answer", json=body)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert "The app is busy" in refused.json()["detail"]
        assert c.get("/v1/variants").status_code == 200  # the other routes are served meanwhile
        release.set()
        first.join(60)
    held.join(30)
    assert statuses == [200] and line.waiting == 0


def test_answer_api_past_the_line_is_told_how_long_to_wait(engine, caplog) -> None:
    caplog.set_level(logging.WARNING)
    full = ModelLine(slots=1, max_waiting=0, name="question")
    with pytest.raises(gr.Error, match=r"The app is busy: 0 questions are waiting .* try again in about \d+ seconds"):
        asyncio.run(make_answer_api(engine, full)(CONTEXT, QUESTION))
    rows = asyncio.run(make_answer_api(engine, ModelLine())(CONTEXT, QUESTION, None, 1, 0))
    assert rows and all(r["answer"] is not None for r in rows)
    checks = make_validator(engine, full)(CONTEXT, QUESTION, [], "pipeline", 0.0, 2, [])
    assert checks[1]["is_valid"] is False and "try again in about" in checks[1]["message"]
    one_line_each(caplog, 2)


# --- A2, A3: one cap for the app, runs bound to their session, idle runs dropped --------------------------------


def test_runs_are_bound_to_the_session_that_started_them(engine, caplog) -> None:
    caplog.set_level(logging.WARNING)
    runs = RunBook(max_runs=2)
    evaluate = tab.make_evaluate_api(engine, SlowRun, runs)
    alice, mallory = SimpleNamespace(session_hash="alice"), SimpleNamespace(session_hash="mallory")
    started = evaluate(ROWS * 1, None, "", 0.0, alice)
    run = started["run"]
    before = started["answered"]
    with pytest.raises(gr.Error, match=r"No run .* is going in this session"):
        evaluate("", None, run, 60.0, mallory)  # reads nothing, advances nothing
    assert runs.get("api:alice", run).position == before
    out = evaluate("", None, run, 60.0, alice)
    while not out["done"]:
        out = evaluate("", None, run, 60.0, alice)
    assert out["answers"] and out["record"]  # the owner keeps its results
    one_line_each(caplog, 1)


def test_one_cap_for_the_tab_and_the_api_together(engine, tmp_path: Path) -> None:
    runs = RunBook(max_runs=2)
    evaluate = tab.make_evaluate_api(engine, SlowRun, runs)
    begin = tab.make_handlers(engine, SlowRun, runs)["begin"]
    many = tmp_path / "rows.csv"
    many.write_text(ROWS + "".join(f"Paris is in France {i}.,Where {i}?,France\n" for i in range(40)), "utf-8")
    status, *_ = begin(str(many), "", ["baseline"], 0, SimpleNamespace(session_hash="tab"))
    assert "0 of 6 questions" in status
    evaluate(many.read_text("utf-8"), ["baseline"], "", 0.0, SimpleNamespace(session_hash="api-1"))
    with pytest.raises(gr.Error, match="2 runs are going on this app already"):
        evaluate(ROWS, ["baseline"], "", 0.0, SimpleNamespace(session_hash="api-2"))
    status, *_ = begin(str(many), "", ["baseline"], 0, SimpleNamespace(session_hash="tab-2"))
    assert "2 runs are going on this app already" in status


def test_idle_and_old_runs_are_dropped() -> None:
    idle = RunBook(idle_s=0.0)
    idle.start("a", SimpleNamespace(finished=False))
    assert idle.get("a") is None and len(idle) == 0
    old = RunBook(life_s=0.0)  # kept alive by calls, it still ends at its wall-clock life
    run_id = old.start("a", SimpleNamespace(finished=False))
    assert old.get("a", run_id) is None
    book = RunBook(max_runs=1)
    book.start("a", SimpleNamespace(finished=False))
    with pytest.raises(Refused) as refused:
        book.start("b", SimpleNamespace(finished=False))
    assert refused.value.status == 429 and refused.value.retry_after


def test_an_excerpt_is_short_and_escaped() -> None:
    assert excerpt("abc") == "'abc'"
    long = excerpt("x" * 100_000 + LONE)
    assert len(long) < 100 and "100,001 characters" in long
    assert LONE not in excerpt(f"a{LONE}b") and "\\ud800" in excerpt(f"a{LONE}b")


def test_a_chunk_of_a_long_run_waits_for_a_question_in_the_line_and_is_never_refused() -> None:
    """A Your questions chunk or a quick-benchmark chunk takes a turn in the models' line (queued_turn): it does not
    run beside an Ask question or an /answer call, and a full line does not refuse it (its run was admitted)."""
    with a_full_line() as (line, release):
        assert line.full()  # another question would be refused
        chunk_ran = threading.Event()

        def chunk_turn() -> None:
            with line.queued_turn():
                chunk_ran.set()

        chunk = threading.Thread(target=chunk_turn)
        chunk.start()
        assert not chunk_ran.wait(0.3)  # it waits for the question's turn to end
        release.set()
        assert chunk_ran.wait(10)  # then it runs, never refused
        chunk.join(10)


def test_each_refused_v1_call_logs_one_line(client, caplog: pytest.LogCaptureFixture) -> None:
    """A 422 (a non-finite threshold), a 413 (a body over the limit) and a 404 (an unknown variant, excerpted): one
    line each in the log, no traceback."""
    caplog.set_level(logging.WARNING)
    ok = {"question": "Where is Paris?", "context": "Paris is in France."}
    assert client.post("/v1/answer", json={**ok, "null_threshold": "Infinity"}).status_code == 422
    big = b'{"question": "q", "context": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}'
    assert client.post("/v1/answer", content=big, headers={"content-type": "application/json"}).status_code == 413
    assert client.post("/v1/answer", json={**ok, "variant": "x" * 100_000}).status_code == 404
    lines = one_line_each(caplog, 3)
    assert [line.split(" refused (")[1][:3] for line in lines] == ["422", "413", "404"]
    assert all(len(line) < 400 for line in lines)  # an excerpt, never the input


REMOTE_FILES = [
    "/gradio_api/file=https://evil.example/phish",
    "/gradio_api/file/https://evil.example/phish",
    "/gradio_api/file=http://169.254.169.254/latest/meta-data/",
    "/gradio_api/file=//evil.example/phish",
    "/gradio_api/file=/HTTPS://evil.example/phish",
]


@pytest.mark.parametrize("path", REMOTE_FILES)
def test_a_file_route_naming_an_address_is_refused_never_redirected(path: str, caplog) -> None:
    """gradio 6.17 answers these with a 302 to the address (gradio issue 13608: an open redirect and client-side
    SSRF); the edge refuses them in one sentence, on the page's app as on an app of /v1 routes only (Ray Serve's)."""
    with gr.Blocks() as demo:
        gr.Textbox()
    page = gr.mount_gradio_app(FastAPI(**app_kwargs(demo)), demo, path="/")
    lean = FastAPI(**app_kwargs())
    for app in (page, lean):
        caplog.clear()
        with TestClient(app, follow_redirects=False) as c, caplog.at_level(logging.WARNING):
            r = c.get(path)
        assert r.status_code == 403, (path, r.status_code, r.headers.get("location"))
        assert "location" not in r.headers
        assert r.json() == {"detail": REMOTE_FILE_WORDS}
        assert len(one_line_each(caplog, 1)) == 1


def test_a_file_of_the_apps_own_is_not_taken_for_an_address() -> None:
    for path in ("/gradio_api/file=/tmp/gradio/abc/report.html", "/gradio_api/file=assets/x.png"):
        assert not REMOTE_FILE.search(path)
