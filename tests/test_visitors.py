"""One visitor, one share (issue 75): behind a proxy the host names (on a Space, its own), the visitor is the forwarded
client address; one /evaluate run and a few places in the models' line per visitor; without a named proxy the
forwarded header changes nothing. Real servers and gradio clients for the address, handler closures for the rest."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from app_helpers import CONTEXT, QUESTION, SlowRun, free_port, running, tiny_engine
from gradio_client import Client

import app
from ui import questions as tab
from ui.ask import make_validator
from variants.answering.qa import parse_null_threshold
from variants.core import config
from variants.serving.guard import MAX_WAITING_PER_VISITOR, ModelLine, Refused, RunBook, visitor

ROWS = "context,question,answer\n" + "".join(f"Paris is in France {i}.,Where {i}?,France\n" for i in range(8))
SPACE = {"SYSTEM": "spaces", "SPACE_ID": "someone/qa-variants"}


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@contextlib.contextmanager
def served(demo, engine, how: str, trusted: str) -> Iterator[str]:
    """The page served as app.py serves it: on a Space through its own uvicorn (``serve_mounted``; the server
    thread is a daemon, left to end with the tests), elsewhere through gradio's launch."""
    if how == "launch":
        with running(demo, trusted_proxies=trusted) as url:
            yield url
        return
    port = free_port()
    app.serve_mounted(demo, engine, "127.0.0.1", port, trusted)
    yield f"http://127.0.0.1:{port}/"


def as_visitor(url: str, address: str | None) -> Client:
    """A gradio client whose requests carry ``X-Forwarded-For: address`` (none: no header)."""
    headers = {"X-Forwarded-For": address} if address else None
    return Client(url, verbose=False, headers=headers)


def start_run(client: Client) -> str:
    """Start an /evaluate run (a slow one: it stays going); its run id, or the sentence that refused it."""
    try:
        return client.predict(ROWS, None, "", 0.0, api_name="/evaluate")["run"]
    except Exception as exc:  # gradio_client's AppError carries the refusal's sentence
        return f"refused: {exc}"


# --- who the visitor is ----------------------------------------------------------------------------------------


def test_the_trusted_proxies_come_from_the_option_the_variable_or_the_space() -> None:
    assert config.trusted_proxies(environ={}) == ""  # none named: the header changes nothing
    assert config.trusted_proxies(environ=SPACE) == config.SPACE_PROXIES
    assert config.trusted_proxies(environ={"SYSTEM": "spaces"}) == config.SPACE_PROXIES
    assert config.trusted_proxies(environ={config.TRUSTED_PROXIES_ENV: "10.1.2.3"}) == "10.1.2.3"
    assert config.trusted_proxies(environ=SPACE | {config.TRUSTED_PROXIES_ENV: "none"}) == ""
    assert (
        config.trusted_proxies("192.168.0.0/16", environ={config.TRUSTED_PROXIES_ENV: "10.1.2.3"}) == "192.168.0.0/16"
    )
    assert visitor(SimpleNamespace(client=SimpleNamespace(host="203.0.113.9"))) == "203.0.113.9"
    assert visitor(None) == ""


@pytest.mark.parametrize("how", ["mounted", "launch"])
def test_on_a_space_one_forwarded_address_gets_one_run_and_another_address_its_own(
    engine, monkeypatch, tmp_path, how: str
) -> None:
    """Two gradio clients sending the same X-Forwarded-For cannot both start an /evaluate run; a third with another
    address can. A client that writes an address of its own on the left of the header is still itself. As a Space
    serves it (its own uvicorn), and through gradio's launch with the Space's proxies named."""
    monkeypatch.setattr(app, "Evaluation", SlowRun)
    demo = app.build_demo(engine, results_dir=tmp_path)
    with served(demo, engine, how, config.trusted_proxies(environ=SPACE)) as url:
        first = start_run(as_visitor(url, "203.0.113.7"))
        assert not first.startswith("refused"), first
        second = start_run(as_visitor(url, "203.0.113.7"))
        assert second.startswith("refused") and "Your other run is still going, in another tab" in second
        spoofed = start_run(as_visitor(url, "198.51.100.1, 203.0.113.7"))  # the proxy appends what it saw
        assert spoofed.startswith("refused") and "Your other run is still going" in spoofed
        other = start_run(as_visitor(url, "203.0.113.8"))
        assert not other.startswith("refused"), other


def test_without_a_named_proxy_the_forwarded_header_changes_nothing(engine, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(app, "Evaluation", SlowRun)
    demo = app.build_demo(engine, results_dir=tmp_path)
    with running(demo, trusted_proxies=config.trusted_proxies(environ={})) as url:
        first = start_run(as_visitor(url, "203.0.113.7"))
        assert not first.startswith("refused"), first
        pretending = start_run(as_visitor(url, "203.0.113.8"))  # the same connection's address: the same visitor
        assert pretending.startswith("refused") and "Your other run is still going" in pretending
        assert start_run(as_visitor(url, None)).startswith("refused")


# --- one run per visitor, a few places in the line ------------------------------------------------------------


def test_one_run_per_visitor_across_the_tab_and_the_api(engine, tmp_path: Path) -> None:
    runs = RunBook(max_runs=3)
    evaluate = tab.make_evaluate_api(engine, SlowRun, runs)
    begin = tab.make_handlers(engine, SlowRun, runs)["begin"]
    rows = tmp_path / "rows.csv"
    rows.write_text(ROWS, "utf-8")
    tab_one = SimpleNamespace(session_hash="tab-1", client=SimpleNamespace(host="203.0.113.7"))
    status, *_ = begin(str(rows), "", ["baseline"], 0, tab_one)
    assert "0 of 6 questions" in status
    tab_two = SimpleNamespace(session_hash="tab-2", client=SimpleNamespace(host="203.0.113.7"))
    status, *_ = begin(str(rows), "", ["baseline"], 0, tab_two)
    assert "Your other run is still going, in another tab or another API session: stop it there" in status
    with pytest.raises(gr.Error, match="Your other run is still going"):
        evaluate(ROWS, ["baseline"], "", 0.0, SimpleNamespace(session_hash="api", client=tab_two.client))
    elsewhere = SimpleNamespace(session_hash="api-2", client=SimpleNamespace(host="203.0.113.8"))
    assert evaluate(ROWS, ["baseline"], "", 0.0, elsewhere)["run"]


def test_a_visitor_holds_a_few_places_in_the_line_and_is_told_so() -> None:
    line = ModelLine(slots=1, max_waiting=32, name="question")
    for _ in range(MAX_WAITING_PER_VISITOR):
        line.reserve("203.0.113.7")
    with pytest.raises(Refused) as refused:
        line.reserve("203.0.113.7")
    assert refused.value.status == 429 and refused.value.retry_after >= 1
    assert f"You have {MAX_WAITING_PER_VISITOR} questions in the line for the models already" in str(refused.value)
    line.reserve("203.0.113.8")  # another visitor still gets a place
    with line.turn(claim=True, visitor="203.0.113.7"):  # a reserved place taken, then given back
        assert line.holds("203.0.113.7") == MAX_WAITING_PER_VISITOR
    assert line.holds("203.0.113.7") == MAX_WAITING_PER_VISITOR - 1
    line.reserve("203.0.113.7")


def test_the_ask_validator_refuses_a_visitor_past_their_share(engine) -> None:
    line = ModelLine(slots=1, max_waiting=32, name="question", per_visitor=1)
    me = SimpleNamespace(client=SimpleNamespace(host="203.0.113.7"))
    validate = make_validator(engine, line)
    controls = ([], "pipeline", 0.0, 2, [], None)
    assert all(d["is_valid"] for d in validate(CONTEXT, QUESTION, *controls, request=me))
    checks = validate(CONTEXT, QUESTION, *controls, request=me)
    assert checks[1]["is_valid"] is False and "as many as one visitor may" in checks[1]["message"]


def test_an_answer_api_call_gives_its_place_back_when_refused_or_done(engine) -> None:
    line = ModelLine(slots=1, max_waiting=4, name="question", per_visitor=1)
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        with line.turn(visitor="203.0.113.7"):
            entered.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    assert entered.wait(30)
    with pytest.raises(Refused, match="as many as one visitor may"):
        line.reserve("203.0.113.7")
    release.set()
    holder.join(30)
    assert line.holds("203.0.113.7") == 0 and line.waiting == 0


@pytest.mark.parametrize("value", [{}, [], [1], True, None])
def test_a_threshold_of_the_wrong_type_is_one_sentence(value) -> None:
    with pytest.raises(ValueError, match="null threshold must be a number or 'calibrated', not"):
        parse_null_threshold(value)  # type: ignore[arg-type]
