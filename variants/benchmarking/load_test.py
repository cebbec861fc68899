"""Load test of the app's /answer API: N concurrent gradio_client clients, on loopback only.

    python -m variants load-test                                 # launch app.py (embedded preset), without and
                                                                # with dynamic batching, 32 clients, 1,000 requests
    python -m variants load-test --baseline DIR --pruned DIR --batching on --clients 8 --requests 100
    python -m variants load-test --url http://127.0.0.1:7860 --pid 1234   # an app that is already running

Each (question, context) pair is first answered by a single client; then the clients send the requests
(bounded in count and time), and every answer must equal the single-client one (per variant: text and
offsets). Per-request latency (the client's wall time, queueing and batching included), throughput and
the server process's resident memory (sampled through the run) go to a JSON file in
``experiments/records/load/`` (or ``--out``). Exit status 1 when any request failed or answered differently.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from variants.benchmarking.app_client import (
    MAX_CLIENTS,
    MAX_REQUESTS,
    MAX_SECONDS,
    Pair,
    RssSampler,
    add_server_arguments,
    batching_modes,
    bounded,
    check_reachable,
    check_url,
    drive,
    launched_app,
    result_path,
    sample_pairs,
    server_pid,
    server_settings,
    versions,
)
from variants.core.hardware import current_hardware
from variants.records.results import LOAD_DIR

log = logging.getLogger("load_test")

OUT_DIR = LOAD_DIR


def answer_key(results: list[dict]) -> list[tuple]:
    """What must not change under load: per variant, the answer text, its offsets, and whether it failed."""
    return [(r["variant"], r["answer"], r["start"], r["end"], r["error"]) for r in results]


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation), or None without values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    lo = int(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


# --- one run --------------------------------------------------------------------------------------


def run_load(
    url: str, pid: int | None, pairs: list[Pair], clients: int, requests: int, timeout_s: float
) -> dict[str, Any]:
    """Reference answers from one client, then ``requests`` requests from ``clients`` concurrent clients."""
    from gradio_client import Client  # noqa: PLC0415

    single = Client(url, verbose=False)
    references = [
        single.predict(context, question, runs=1, budget_s=0, api_name="/answer") for question, context in pairs
    ]
    expected = [answer_key(r) for r in references]
    models = [
        {k: r.get(k) for k in ("variant", "label", "device", "provider", "dtype", "size_mb", "parameters")}
        for r in references[0]
    ]
    latencies: list[float] = []
    variant_ms: dict[str, list[float]] = {}
    errors: list[str] = []
    mismatches: list[dict] = []

    def handle(i: int, results: list[dict] | Exception, elapsed: float) -> None:
        if isinstance(results, Exception):
            errors.append(f"{type(results).__name__}: {results}"[:300])
            return
        latencies.append(elapsed)
        for r in results:
            if r.get("latency_ms") is not None:
                variant_ms.setdefault(r["variant"], []).append(r["latency_ms"])
        errors.extend(f"{r['variant']}: {r['error']}" for r in results if r["error"])
        if answer_key(results) != expected[i % len(pairs)]:
            question = pairs[i % len(pairs)][0]
            mismatches.append({"request": i, "question": question, "got": answer_key(results)})

    with RssSampler(pid) as rss:
        sent = drive(url, pairs, clients, requests, timeout_s, handle)
    completed, wall = len(latencies), sent["wall_s"]
    return {
        "clients": clients,
        "requests": requests,
        "sent": sent["sent"],
        "completed": completed,
        "errors": len(errors),
        "error_examples": errors[:5],
        "mismatches": len(mismatches),
        "mismatch_examples": mismatches[:3],
        "timed_out": sent["sent"] < requests,
        "wall_s": wall,
        "throughput_rps": round(completed / wall, 2) if wall else None,
        "latency_ms": {
            "p50": _round(percentile(latencies, 50)),
            "p95": _round(percentile(latencies, 95)),
            "mean": _round(sum(latencies) / completed if completed else None),
            "max": _round(max(latencies) if latencies else None),
        },
        "variant_latency_p50_ms": {k: _round(percentile(v, 50)) for k, v in variant_ms.items()},
        "rss_mb": rss.summary(),
        "server_pid": pid,
        "models": models,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# --- the command ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m variants load-test", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=bounded(1, MAX_CLIENTS), default=32, help="concurrent clients (32)")
    parser.add_argument("--requests", type=bounded(1, MAX_REQUESTS), default=1000, help="requests in all (1000)")
    parser.add_argument("--pairs", type=bounded(1, 500), default=16, help="distinct (question, context) pairs")
    parser.add_argument("--timeout-s", type=bounded(1, MAX_SECONDS), default=1800, help="stop sending after this")
    parser.add_argument("--note", default="", help="a note stored with the results (e.g. which models these are)")
    add_server_arguments(parser, OUT_DIR)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    pairs = sample_pairs(args.pairs)
    runs: list[dict[str, Any]] = []
    try:
        if args.url:
            url = check_reachable(check_url(args.url))
            pid = args.pid or server_pid(url)
            run = run_load(url, pid, pairs, args.clients, args.requests, args.timeout_s)
            runs.append({"server": {"url": url, "launched": False, "label": args.label}, **run})
            print(summary_line(runs[-1]), flush=True)
        else:
            for batching in batching_modes(args):
                with launched_app(args, batching, "load-test") as (url, proc, cmd):
                    run = run_load(url, proc.pid, pairs, args.clients, args.requests, args.timeout_s)
                server = server_settings(args, cmd, batching)
                runs.append({"server": server, **run})
                print(summary_line(runs[-1]), flush=True)
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    record = {
        "kind": "load-test",
        "created": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "hardware": current_hardware(),
        "versions": versions(),
        "settings": {
            "clients": args.clients,
            "requests": args.requests,
            "pairs": len(pairs),
            "timeout_s": args.timeout_s,
            "preset": None if args.url else args.preset,
            "baseline": args.baseline,
            "pruned": args.pruned,
            "device": args.device,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "variants_threads": os.environ.get("VARIANTS_THREADS"),
            "note": args.note,
        },
        "runs": runs,
    }
    path = result_path(args.out, OUT_DIR, f"load-{args.preset if not args.url else 'url'}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {path}")
    return 0 if all(r["errors"] == 0 and r["mismatches"] == 0 and not r["timed_out"] for r in runs) else 1


def summary_line(run: dict[str, Any]) -> str:
    server = run.get("server") or {}
    batching = server.get("batching")
    if batching:
        mode = f"batching {batching['max_wait_ms']:g} ms x {batching['max_batch_size']}"
    else:
        mode = "no batching" if server.get("launched") else f"{server.get('url')} {server.get('label', '')}".strip()
    lat, rss = run["latency_ms"], run["rss_mb"]
    return (
        f"{mode}: {run['completed']}/{run['requests']} requests from {run['clients']} clients, "
        f"{run['errors']} errors, {run['mismatches']} answers differing; p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
        f"{run['throughput_rps']} req/s; RSS {rss['start']} -> {rss['end']} MB (max {rss['max']})"
    )


if __name__ == "__main__":
    sys.exit(main())
