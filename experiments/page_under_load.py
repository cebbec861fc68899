"""Whether the page's own routes stay fast while clients flood ``POST /v1/answer`` (issue 69 A4).

    python app.py --preset embedded --port 7863 &                 # an app already running, on loopback
    python -m experiments.page_under_load --url http://127.0.0.1:7863 --clients 64 --seconds 30

``--clients`` threads each send 8,000-character passages to ``/v1/answer`` back to back for ``--seconds``
(bounded: at most 128 clients, 120 s), while one more thread asks for ``GET /``, ``GET /v1/variants`` and
``GET /gradio_api/info`` in turn, every 0.25 s. The record says, per page route, the p50, p95 and slowest reply,
and how the flood was answered (200, 429 with its Retry-After, anything else). The target: ``GET /`` under 1 s at
p95 with 64 clients. Loopback only: it refuses another host.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import urllib3

from experiments.common import RECORDS, save_probe_record

PAGE_ROUTES = ("/", "/v1/variants", "/gradio_api/info")
MAX_CLIENTS, MAX_SECONDS = 128, 120.0
PASSAGE_CHARS = 8_000
SENTENCE = "The committee met in Geneva in 1954 to agree on the rules for the new river crossing and its tolls. "
QUESTION = "Where did the committee meet?"


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def flood(url: str, clients: int, seconds: float) -> dict[str, Any]:
    """The measurement: ``clients`` flooding threads and one page reader, for ``seconds``."""
    http = urllib3.PoolManager(maxsize=clients + 4, retries=False, timeout=urllib3.Timeout(connect=5, read=120))
    passage = (SENTENCE * (PASSAGE_CHARS // len(SENTENCE) + 1))[:PASSAGE_CHARS]
    body = {"question": QUESTION, "context": passage}
    stop_at = time.monotonic() + seconds
    answers: collections.Counter[str] = collections.Counter()
    retry_after: list[int] = []
    answer_ms: list[float] = []
    page_ms: dict[str, list[float]] = {route: [] for route in PAGE_ROUTES}
    lock = threading.Lock()

    def client() -> None:
        while time.monotonic() < stop_at:
            started = time.perf_counter()
            try:
                reply = http.request("POST", url + "/v1/answer", json=body)
                status = str(reply.status)
            except urllib3.exceptions.HTTPError as exc:
                reply, status = None, type(exc).__name__
            took = (time.perf_counter() - started) * 1000
            with lock:
                answers[status] += 1
                if status == "200":
                    answer_ms.append(took)
                if reply is not None and reply.status == 429:
                    retry_after.append(int(reply.headers.get("Retry-After", "0")))
            if status == "429":  # a polite client waits a little; a hostile one would not, and is refused again
                time.sleep(0.05)

    def reader() -> None:
        turn = 0
        while time.monotonic() < stop_at:
            route = PAGE_ROUTES[turn % len(PAGE_ROUTES)]
            started = time.perf_counter()
            try:
                http.request("GET", url + route)
            except urllib3.exceptions.HTTPError:
                pass  # counted as its time to fail
            with lock:
                page_ms[route].append((time.perf_counter() - started) * 1000)
            turn += 1
            time.sleep(0.25)

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    threads.append(threading.Thread(target=reader, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 180)
    return {
        "page_ms": {
            route: {
                "n": len(times),
                "p50": percentile(times, 50),
                "p95": percentile(times, 95),
                "max": max(times, default=None),
            }
            for route, times in page_ms.items()
        },
        "answers": dict(answers),
        "answer_ms_p50": statistics.median(answer_ms) if answer_ms else None,
        "retry_after_s": sorted(set(retry_after)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:7860", help="a running app on this machine")
    parser.add_argument("--clients", type=int, default=64, help=f"flooding clients (at most {MAX_CLIENTS})")
    parser.add_argument("--seconds", type=float, default=30.0, help=f"how long they flood (at most {MAX_SECONDS:g})")
    parser.add_argument("--out", default=str(RECORDS / "load" / "page-under-load.json"), help="the record's path")
    args = parser.parse_args(argv)
    if urlparse(args.url).hostname not in ("127.0.0.1", "localhost", "::1"):
        parser.error("--url must be an app on this machine (loopback)")
    clients = max(1, min(args.clients, MAX_CLIENTS))
    seconds = max(1.0, min(args.seconds, MAX_SECONDS))
    started = time.time()
    result = flood(args.url.rstrip("/"), clients, seconds)
    record = {"kind": "page-under-load", "url": args.url, "clients": clients, "flood_s": seconds} | result
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_probe_record(record, started, args.out)
    for route, numbers in result["page_ms"].items():  # a route that never answered in time has no numbers
        times = "  ".join(f"{k} {v:.0f} ms" if v is not None else f"{k} -" for k, v in numbers.items() if k != "n")
        print(f"GET {route:<18} n={numbers['n']:>4}  {times}")
    print(f"POST /v1/answer: {result['answers']}, Retry-After {result['retry_after_s']} s; record: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
