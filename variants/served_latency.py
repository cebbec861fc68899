"""Served latency: one variant behind the lean HTTP route (:mod:`variants.serve`), timed from a client.

The published chain measured its GPU model behind FastAPI (1.43 ms at 32 tokens). This starts the
route's app with uvicorn on loopback, in a thread of the process that already holds the engine, and
sends one request at a time from a keep-alive HTTP client (the standard library's ``http.client``),
with contexts cut to exactly each sequence length. Per length: the client's p50/p90/p99 (request,
JSON, tokenize, run, decode, response) beside the engine's own time for the same requests, whose
difference is what HTTP and FastAPI add.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

from variants.measure import summarize

WORDS = "paris is the capital and largest city of france on the seine in the north of the country".split()
QUESTION = "What is the capital of France?"


def context_of_length(tokenizer: Any, question: str, length: int) -> str:
    """The longest context of repeated words whose (question, context) window is at most ``length`` tokens."""

    def size(n: int) -> int:
        text = " ".join(WORDS[i % len(WORDS)] for i in range(n))
        return len(tokenizer(question, text)["input_ids"])

    lo, hi = 1, length
    while lo < hi:  # largest n with size(n) <= length
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if size(mid) <= length else (lo, mid - 1)
    return " ".join(WORDS[i % len(WORDS)] for i in range(lo))


class LoopbackServer:
    """uvicorn serving ``app`` on 127.0.0.1 (a free port) in a daemon thread, for as long as the ``with`` lasts."""

    def __init__(self, app: Any) -> None:
        import uvicorn  # noqa: PLC0415

        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.port = 0

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the HTTP server did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def measure(engine: Any, variant: str, lengths: tuple[int, ...], requests: int, warmup: int = 5) -> dict[str, Any]:
    """Client-side latency of ``requests`` sequential calls per length to ``POST /v1/answer`` for ``variant``."""
    from variants.serve import PREFIX, create_app  # noqa: PLC0415

    tokenizer = engine.variants[variant].tokenizer
    rows = []
    with LoopbackServer(create_app(engine)) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        try:
            for length in lengths:
                context = context_of_length(tokenizer, QUESTION, length)
                body = json.dumps({"question": QUESTION, "context": context, "variant": variant}).encode()
                client_ms, engine_ms, reply = [], [], {}
                for i in range(warmup + requests):
                    started = time.perf_counter()
                    conn.request("POST", f"{PREFIX}/answer", body, {"Content-Type": "application/json"})
                    response = conn.getresponse()
                    payload = response.read()
                    elapsed = (time.perf_counter() - started) * 1000
                    if response.status != 200:
                        raise RuntimeError(f"HTTP {response.status}: {payload[:200]!r}")
                    reply = json.loads(payload)
                    if i >= warmup:
                        client_ms.append(elapsed)
                        engine_ms.append(reply["latency_ms"])
                client, inner = summarize(client_ms), summarize(engine_ms)
                rows.append(
                    {
                        "seq_len": length,
                        "client_p50_ms": client["p50"],
                        "client_p90_ms": client["p90"],
                        "client_p99_ms": client["p99"],
                        "client_max_ms": client["max"],
                        "engine_p50_ms": inner["p50"],
                        "n": client["n"],
                        "device": reply.get("device"),
                        "provider": reply.get("provider"),
                        "dtype": reply.get("dtype"),
                    }
                )
        finally:
            conn.close()
    return {
        "variant": variant,
        "route": f"POST {PREFIX}/answer",
        "client": "http.client, one keep-alive connection",
        "server": "uvicorn (loopback)",
        "warmup": warmup,
        "rows": rows,
    }
