"""How long a question waits behind a long run (issue 75, "short turns"): the gradio ``/answer`` API asked alone,
then while an ``/evaluate`` run of 150 questions, a "Your questions" tab run of the same 150 and a quick benchmark go
on (the tabs driven in headless Chromium, as a visitor would). A long run takes the models one chunk (a fraction of
a second) at a time, so a question should wait about one chunk: the target is a median at most 1.5 times the idle
median, on a quiet machine.

    python app.py --port 7874 --trusted-proxy 127.0.0.1 &   # embedded preset, loopback; /evaluate: another visitor
    python -m experiments.ask_during_long_run --url http://127.0.0.1:7874

Each question is one ``/answer`` call with its defaults (every variant, five timed runs within 12 s), on a SQuAD v2
question, sent after a random pause of 0.2-0.6 s so that the questions land anywhere in a chunk; its time is the
client's, from the call to the reply. Each long run is stopped once its phase's questions are asked. The record
keeps every time, the medians, their ratio to the idle median, and the load average (1 minute) read before and
after each phase: on a busy machine the ratio says little. Loopback only.

The ``self`` phase (issue 78) asks while the app measures its own chain (``VARIANTS_SELF_BENCH``), which it does
once its build is over: start the app with a measurement long enough for the phase's questions and nothing kept for
it yet (a cache folder of the probe's own); the phase goes first, from the moment ``GET /v1/benchmark`` says it is
measuring, and the idle questions follow once it is done.

    VARIANTS_SELF_BENCH=200 VARIANTS_CACHE_DIR=/tmp/probe-cache python app.py --port 7874 &
    python -m experiments.ask_during_long_run --url http://127.0.0.1:7874 --only self
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from experiments.common import RECORDS, save_probe_record
from variants.core.squad import load_squad_json

SAMPLE = Path(__file__).resolve().parents[1] / "assets" / "data" / "squad_v2_dev_sample.json"
CHROMIUM = Path("/usr/bin/chromium")
LONG_RUN = 150  # questions in the /evaluate and the tab's run
QUICK_N = 150  # the quick benchmark's questions
ASK = "In what country is Normandy located?"
TARGET = 1.5  # the most a question's median may be, in idle medians


def questions_csv(n: int) -> str:
    """The first ``n`` questions of the SQuAD v2 sample as a CSV a visitor would give (id, context, question,
    answer)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "context", "question", "answer"])
    for e in load_squad_json(SAMPLE)[:n]:
        writer.writerow([e.id, e.context, e.question, e.answers[0] if e.answers else ""])
    return out.getvalue()


def ask_pair() -> tuple[str, str]:
    example = next(e for e in load_squad_json(SAMPLE) if e.question == ASK)
    return example.context, example.question


def asks(url: str, n: int, going: Callable[[], bool] = lambda: True, seed: int = 0) -> list[float]:
    """Up to ``n`` ``/answer`` calls one after another while ``going()``, each after a random pause; seconds each."""
    from gradio_client import Client  # noqa: PLC0415 - the probe's own client, not the app's

    client, (context, question), pause = Client(url, verbose=False), ask_pair(), random.Random(seed)
    times: list[float] = []
    while len(times) < n and going():
        time.sleep(pause.uniform(0.2, 0.6))
        if not going():
            break
        started = time.perf_counter()
        client.predict(context, question, api_name="/answer")
        times.append(time.perf_counter() - started)
    return times


def during(url: str, n: int, run: Callable[[threading.Event, threading.Event], Any]) -> dict[str, Any]:
    """Questions asked while ``run(started, stop)`` goes (it sets ``started`` once the run is going, and ends when
    its questions are done or ``stop`` is set); the questions stop when it ends, and it is stopped after them."""
    started, done, stop = threading.Event(), threading.Event(), threading.Event()
    load = os.getloadavg()[0]
    failure: list[BaseException] = []

    def go() -> None:
        try:
            run(started, stop)
        except BaseException as exc:  # said in the record, the probe goes on
            failure.append(exc)
        finally:
            started.set()
            done.set()

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    started.wait(600)
    times = asks(url, n, lambda: not done.is_set())
    stop.set()
    done.wait(600)
    thread.join(60)
    out = summary(times) | {"load_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}
    if failure:
        out["error"] = f"{type(failure[0]).__name__}: {failure[0]}"
    return out


def summary(times: list[float]) -> dict[str, Any]:
    return {"n": len(times), "median_s": round(statistics.median(times), 3) if times else None,
            "times_s": [round(t, 3) for t in times]}  # fmt: skip


def evaluate_run(url: str) -> Callable[[threading.Event, threading.Event], None]:
    """An ``/evaluate`` run of :data:`LONG_RUN` questions, called again until it is done (2 s of model time a call)."""

    def run(started: threading.Event, stop: threading.Event) -> None:
        from gradio_client import Client  # noqa: PLC0415

        # another visitor's run (one run per visitor): the app trusts this machine as its proxy (--trusted-proxy)
        client = Client(url, verbose=False, headers={"X-Forwarded-For": "198.51.100.7"})
        reply = client.predict(questions_csv(LONG_RUN), None, "", 2.0, api_name="/evaluate")
        started.set()
        while not reply["done"] and not stop.is_set():
            reply = client.predict("", None, reply["run"], 2.0, api_name="/evaluate")

    return run


def tab_run(url: str, tab: str) -> Callable[[threading.Event, threading.Event], None]:
    """The "Your questions" tab's run of :data:`LONG_RUN` pasted questions, or the Benchmark tab's quick benchmark
    of :data:`QUICK_N`, started and followed in headless Chromium."""

    def run(started: threading.Event, stop: threading.Event) -> None:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415

        with sync_playwright() as play:
            browser = play.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(120_000)
            page.goto(url)
            if tab == "questions":
                page.get_by_role("tab", name="Your questions").click()
                page.locator("#questions-paste textarea").fill(questions_csv(LONG_RUN))
                page.get_by_role("button", name="Run every variant on my questions").click()
                status, finished = "#questions-status", r"/^(Done|Stopped)/m"
            else:
                page.get_by_role("tab", name="Benchmark").click()
                page.locator("#bench-quick-n input[type=number]").fill(str(QUICK_N))
                page.locator("#bench-quick-n input[type=number]").press("Enter")
                page.get_by_role("button", name="Run quick benchmark").click()
                status, finished = "#bench-quick-status", "/Quick benchmark: /"
            page.wait_for_function(f"() => /of {QUICK_N if tab != 'questions' else LONG_RUN} questions/"
                                   f".test(document.querySelector('{status}').innerText)")  # fmt: skip
            started.set()
            ended = f"() => {finished}.test(document.querySelector('{status}').innerText)"
            while not stop.is_set() and not page.evaluate(ended):
                page.wait_for_timeout(500)
            if not page.evaluate(ended):  # the questions are done: the run is stopped, as a visitor would
                page.locator("#bench-stop" if tab != "questions" else "#questions-stop").click()
                page.wait_for_function(ended)
            browser.close()

    return run


def self_bench_state(url: str) -> dict[str, Any]:
    """``GET /v1/benchmark``: where the app's measurement of its own chain stands ("starting" while the app does)."""
    try:
        with urllib.request.urlopen(f"{url}/v1/benchmark", timeout=30) as reply:
            body = json.load(reply)
    except ConnectionError:  # not serving yet
        return {"state": "starting"}
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionError):
            return {"state": "starting"}
        raise
    return {k: body.get(k) for k in ("state", "done", "total", "file")}


def measuring(url: str, wait_s: float = 900) -> dict[str, Any]:
    """Wait until the app measures its own chain (it starts, builds, then measures); its state then."""
    deadline = time.monotonic() + wait_s
    while (state := self_bench_state(url))["state"] in ("starting", "waiting") and time.monotonic() < deadline:
        time.sleep(0.5)
    return state


def self_bench_run(url: str, seen: list[dict[str, Any]]) -> Callable[[threading.Event, threading.Event], None]:
    """The app's own measurement, already under way or about to be: waits until it measures (``started``), then
    until it is over or ``stop``; each state read is kept in ``seen``."""

    def run(started: threading.Event, stop: threading.Event) -> None:
        state = measuring(url)
        seen.append(state)
        if state["state"] != "measuring":
            raise RuntimeError(f"the app is not measuring its chain (GET /v1/benchmark: {state})")
        started.set()
        while not stop.is_set() and (state := self_bench_state(url))["state"] == "measuring":
            time.sleep(0.5)
        seen.append(state)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:7860", help="a running app on this machine")
    parser.add_argument("--asks", type=int, default=12, help="questions per phase (at most this many)")
    parser.add_argument("--preset", default="embedded", help="the app's preset, for the record")
    parser.add_argument("--only", nargs="*", default=["evaluate", "questions", "quick"],
                        help="the long runs: evaluate, questions, quick, self (the app's own measurement)")  # fmt: skip
    parser.add_argument("--out", default=None, help="the record's path (default: experiments/records/)")
    args = parser.parse_args(argv)
    if urlparse(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--url must be an app on this machine (loopback)")
    url, begun = args.url.rstrip("/"), time.time()
    phases, seen = {}, []
    if "self" in args.only:  # the app measures itself at its start: asked first, idle once it is done
        measuring(url)
        asks(url, 2)  # warm, as before the idle questions
        phases["self"] = during(url, args.asks, self_bench_run(url, seen)) | {"self_bench": seen}
        while self_bench_state(url)["state"] == "measuring":
            time.sleep(1)
        print(f"self: median {phases['self']['median_s']} s over {phases['self']['n']} ({seen})", flush=True)
    asks(url, 2)  # warm: the first answers after a start are not what is measured
    load = os.getloadavg()[0]
    idle = summary(asks(url, args.asks)) | {"load_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}
    print(f"idle: median {idle['median_s']} s over {idle['n']} (load {idle['load_1min']})", flush=True)
    runs = {"evaluate": evaluate_run(url), "questions": tab_run(url, "questions"), "quick": tab_run(url, "quick")}
    if "self" in phases and phases["self"]["median_s"] and idle["median_s"]:
        phases["self"]["ratio_to_idle"] = round(phases["self"]["median_s"] / idle["median_s"], 2)
    for name in (n for n in args.only if n != "self"):
        phase = during(url, args.asks, runs[name])
        if phase["median_s"] and idle["median_s"]:
            phase["ratio_to_idle"] = round(phase["median_s"] / idle["median_s"], 2)
        phases[name] = phase
        print(f"{name}: median {phase['median_s']} s over {phase['n']}, {phase.get('ratio_to_idle')}x idle "
              f"(load {phase['load_1min']}){' ' + phase['error'] if 'error' in phase else ''}", flush=True)  # fmt: skip
    record = {
        "kind": "ask-during-long-run",
        "url": url,
        "preset": args.preset,
        "method": __doc__.split("\n\n", 2)[2].strip(),
        "long_run_questions": LONG_RUN,
        "quick_questions": QUICK_N,
        "target_ratio": TARGET,
        "idle": idle,
        "during": phases,
    }
    stamp = time.strftime("%Y%m%dT%H%MZ", time.gmtime())
    out = Path(args.out) if args.out else RECORDS / f"ask-during-long-run-{args.preset}-{stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    save_probe_record(record, begun, out)
    print(f"record: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
