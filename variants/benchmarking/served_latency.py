"""Served latency: one variant behind the lean HTTP route (:mod:`variants.serving.http`), timed from a client.

The published chain measured its GPU model behind FastAPI (1.43 ms at 32 tokens). This starts the
route's app with uvicorn on loopback, in a thread of the process that already holds the engine, and
sends one request at a time from a keep-alive HTTP client (the standard library's ``http.client``),
with contexts cut to exactly each sequence length. Per length: the client's p50/p90/p99 (request,
JSON, tokenize, run, decode, response) beside the engine's own time for the same requests, whose
difference is what HTTP and FastAPI add.
"""

from __future__ import annotations

import argparse
import http.client
import json
import threading
import time
from pathlib import Path
from typing import Any

from variants.answering.timing import summarize
from variants.benchmarking import chainbench
from variants.cli import add_model_arguments, engine_from_args
from variants.records.results import SERVED_DIR
from variants.serving.http import PREFIX, create_app, default_variant

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

    tokenizer = engine.variants[variant].tokenizer
    rows = []
    with LoopbackServer(create_app(engine)) as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
        try:
            for length in lengths:
                context = context_of_length(tokenizer, QUESTION, length)
                body = json.dumps({"question": QUESTION, "context": context, "variant": variant}).encode()
                client_ms, engine_ms, hop_ms, reply = [], [], [], {}
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
                        hop_ms.append(elapsed - reply["latency_ms"])
                client, inner, hop = summarize(client_ms), summarize(engine_ms), summarize(hop_ms)
                rows.append(
                    {
                        "seq_len": length,
                        "client_p50_ms": client["p50"],
                        "client_p90_ms": client["p90"],
                        "client_p99_ms": client["p99"],
                        "client_max_ms": client["max"],
                        "engine_p50_ms": inner["p50"],
                        # what HTTP, FastAPI and JSON add: per request, the client's time less the engine's
                        "hop_p50_ms": hop["p50"],
                        "engine_share": round(inner["p50"] / client["p50"], 3) if client["p50"] else None,
                        "n": client["n"],
                        "device": reply.get("device"),
                        "provider": reply.get("provider"),
                        "dtype": reply.get("dtype"),
                        "execution": reply.get("execution", ""),
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


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--variant", default=None, help="the variant to serve (default: the chain's last headline)")
    parser.add_argument("--lengths", default="32,64,128,256,384", help="comma-separated sequence lengths")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per length (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests first (default 5)")
    parser.add_argument("--out", type=Path, default=SERVED_DIR, help="folder for the record")
    args = parser.parse_args(argv)
    args.preset = args.preset or "embedded"
    if args.variant and not args.variants:
        args.variants = args.variant
    with engine_from_args(args) as engine:
        variant = args.variant or default_variant(engine)
        lengths = tuple(int(n) for n in args.lengths.split(","))
        env = chainbench.environment(engine.device)
        result = measure(engine, variant, lengths, args.requests, args.warmup)
        spec = engine.variants[variant].spec
    record = {
        "kind": "served-latency",
        "preset": engine.preset,
        "latency_only": spec.latency_only,
        **env,
        "settings": {"batch": 1, "lengths": list(lengths), "requests": args.requests, "concurrency": 1},
        **result,
    }
    kind = "cuda" if engine.device.startswith("cuda") else "cpu"
    slug = (env["hardware"].get("gpu_slug") if kind == "cuda" else None) or env["hardware"]["cpu_slug"]
    path = chainbench.write_record(record, args.out, f"served-{kind}-{slug}")
    for row in result["rows"]:
        print(
            f"{row['seq_len']:4d} tokens  p50 {row['client_p50_ms']:8.2f} ms  p99 {row['client_p99_ms']:8.2f} ms  "
            f"(engine p50 {row['engine_p50_ms']:.2f} ms, n={row['n']})  {row['provider']}/{row['dtype']}"
        )
    print(f"wrote {path}")
    return path
