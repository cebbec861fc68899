"""Ray Serve against the in-process app, on the same requests: the cost of the hop, at 1 and 2 replicas.

``python -m variants ray-bench`` loads one variant in this process and serves it on the app's own lean route
(:mod:`variants.serving.http`, uvicorn on loopback), then starts a local Ray cluster and serves the same
variant as a Ray Serve deployment (:mod:`variants.serving.ray_serve`) with 1, then 2, replicas. Each
server gets the same requests (SQuAD sample questions of mixed context lengths, so one to several windows
each) from the same client (:class:`~variants.serving.remote.AnswerClient`) with the same concurrency; per
server it records throughput (answered requests per second of wall time), the client's p50/p99, the
replicas' own p50 (tokenize, run, decode) and whether every answer equals the in-process one. With a GPU, a
replica count with a GPU fraction per replica (``--num-gpus 0.25``) puts several replicas on one GPU.

Threads: the in-process app runs its one model at a time with all cores; a Serve replica's inference
threads are its CPU share (1 replica: every core, 2 replicas on 2 cores: one each), so each setting uses
the whole machine.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from variants.answering.timing import summarize
from variants.benchmarking.options import DEFAULT_DATA
from variants.benchmarking.served_latency import LoopbackServer
from variants.core import spec as specs
from variants.core.hardware import current_hardware
from variants.core.squad import QAExample, load_squad_json
from variants.core.versions import dist_version, record_versions
from variants.records.results import RAY_DIR, RESULTS_DIR
from variants.serving.engine import load_engine
from variants.serving.http import create_app
from variants.serving.remote import AnswerClient

INT8 = "pruned-onnx-opt-int8"
ANSWER_FIELDS = ("answer", "start", "end")


def mixed_requests(examples: list[QAExample], n: int) -> list[tuple[str, str]]:
    """``n`` (question, context) pairs spread over the context lengths (shortest to longest, evenly spaced),
    in a fixed shuffled order so long and short ones arrive mixed."""
    ordered = sorted(examples, key=lambda e: (len(e.context), e.id))
    step = max(1, len(ordered) // n)
    chosen = [ordered[(i * step) % len(ordered)] for i in range(n)]
    order = sorted(range(n), key=lambda i: (i * 37) % n)  # 37 is coprime with common n: a fixed permutation
    return [(chosen[i].question, chosen[i].context) for i in order]


def sample_requests(n: int, data: Path = DEFAULT_DATA) -> list[tuple[str, str]]:
    return mixed_requests(load_squad_json(data), n)


def run_load(
    client: AnswerClient, requests: list[tuple[str, str]], concurrency: int, after: Any = None
) -> dict[str, Any]:
    """Every request through ``client`` from ``concurrency`` threads; ``after(i)`` is called as request i is
    answered (e.g. to kill a replica mid-load). Replies (in request order), client times and wall time."""
    replies: list[dict | None] = [None] * len(requests)
    times: list[float] = [0.0] * len(requests)
    errors: list[str] = []

    def one(i: int) -> None:
        started = time.perf_counter()
        try:
            replies[i] = client.answer(*requests[i])
        except Exception as exc:  # counted, never raised: a lost request is a result here
            errors.append(f"{type(exc).__name__}: {exc}")
        times[i] = (time.perf_counter() - started) * 1000
        if after is not None:
            after(i)

    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(len(requests))))
    return {"replies": replies, "times_ms": times, "wall_s": time.perf_counter() - started, "errors": errors}


def run_rounds(
    client: AnswerClient, requests: list[tuple[str, str]], concurrency: int, rounds: int
) -> list[dict[str, Any]]:
    """:func:`run_load` ``rounds`` times in a row (the same requests), after an untimed warm-up of 16."""
    run_load(client, requests[: min(16, len(requests))], concurrency)
    return [run_load(client, requests, concurrency) for _ in range(rounds)]


def pooled(loads: list[dict[str, Any]]) -> dict[str, Any]:
    """Several rounds as one load (replies and times joined, walls summed) for :func:`summary`."""
    return {
        "replies": [r for load in loads for r in load["replies"]],
        "times_ms": [t for load in loads for t in load["times_ms"]],
        "wall_s": sum(load["wall_s"] for load in loads),
        "errors": [e for load in loads for e in load["errors"]],
    }


def summary_of_rounds(loads: list[dict[str, Any]], reference: list[dict] | None = None) -> dict[str, Any]:
    """:func:`summary` over every round, with each round's throughput beside it (the spread a shared machine gives)."""
    row = summary(pooled(loads), reference * len(loads) if reference is not None else None)
    row["rounds"] = len(loads)
    row["throughput_rps_by_round"] = [round(len(load["replies"]) / load["wall_s"], 2) for load in loads]
    return row


def summary(load: dict[str, Any], reference: list[dict] | None = None) -> dict[str, Any]:
    """Throughput and percentiles of one load run; with ``reference`` replies, how many answers differ."""
    replies = [r for r in load["replies"] if r is not None]
    client, engine = summarize(load["times_ms"]), summarize([r["latency_ms"] for r in replies if r.get("latency_ms")])
    row = {
        "requests": len(load["replies"]),
        "answered": len(replies),
        "errors": len(load["errors"]),
        "first_error": load["errors"][0] if load["errors"] else None,
        "wall_s": round(load["wall_s"], 3),
        "throughput_rps": round(len(replies) / load["wall_s"], 2),
        "client_p50_ms": client.get("p50"),
        "client_p99_ms": client.get("p99"),
        "engine_p50_ms": engine.get("p50"),
        "retried": sum(r.get("retried", 0) for r in replies),
    }
    if reference is not None:
        row["answers_differ"] = sum(
            r is None or any(r[k] != ref[k] for k in ANSWER_FIELDS)
            for r, ref in zip(load["replies"], reference, strict=True)
        )
        row["max_score_diff"] = max(
            (abs(r["score"] - ref["score"]) for r, ref in zip(load["replies"], reference, strict=True) if r),
            default=None,
        )
    return row


def measure_in_process(
    variant: str,
    requests: list[tuple[str, str]],
    concurrency: int,
    cache_dir: Path | None,
    device: str = "cpu",
    rounds: int = 1,
) -> tuple[dict, list[dict]]:
    engine = load_engine(variant_specs=[_spec(variant, device)], device=device, fallback=False, cache_dir=cache_dir)
    if not engine.variants[variant].ok:
        raise RuntimeError(f"{variant} failed to load: {engine.variants[variant].error}")
    with LoopbackServer(create_app(engine)) as server, AnswerClient(f"http://127.0.0.1:{server.port}") as client:
        loads = run_rounds(client, requests, concurrency, rounds)
    return summary_of_rounds(loads), loads[0]["replies"]


def measure_ray(
    variant: str,
    requests: list[tuple[str, str]],
    concurrency: int,
    replicas: int,
    num_cpus: float,
    num_gpus: float,
    port: int,
    cache_dir: Path | None,
    reference: list[dict],
    device: str = "cpu",
    rounds: int = 1,
) -> dict[str, Any]:
    from variants.serving import ray_serve  # noqa: PLC0415 - Ray is an optional extra, imported only here

    options = ray_serve.VariantOptions(variant=variant, device=device, cache_dir=str(cache_dir) if cache_dir else None)
    started = time.perf_counter()
    ray_serve.deploy([options], replicas=replicas, num_cpus=num_cpus, num_gpus=num_gpus)
    ready_s = time.perf_counter() - started
    base = f"http://127.0.0.1:{port}{ray_serve.route(variant)}"
    try:
        with AnswerClient(base) as client:
            loads = run_rounds(client, requests, concurrency, rounds)
    finally:
        ray_serve.serve.delete(variant)
    shape = {"replicas": replicas, "num_cpus": num_cpus, "num_gpus": num_gpus, "ready_s": round(ready_s, 1)}
    return shape | summary_of_rounds(loads, reference)


def _spec(variant: str, device: str) -> specs.VariantSpec:
    found = [s for s in specs.preset(specs.FALLBACK_PRESET, device) if s.name == variant]
    if not found:
        raise ValueError(f"no variant {variant!r} in the {specs.FALLBACK_PRESET} preset")
    return found[0]


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(prog="python -m variants ray-bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default=INT8, help=f"a variant of the embedded preset (default {INT8})")
    parser.add_argument("--replicas", default="1,2", help="comma-separated replica counts (default 1,2)")
    parser.add_argument("--requests", type=int, default=200, help="requests per server (default 200)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds of every request per server (default 3)")
    parser.add_argument("--concurrency", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--num-gpus", type=float, default=0.0, help="GPU share per replica (e.g. 0.25; default 0)")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs the local Ray cluster offers")
    parser.add_argument("--port", type=int, default=8000, help="Ray Serve's HTTP port (default 8000)")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--notes", default="", help="what else a reader should know (e.g. a shared machine)")
    parser.add_argument("--out", type=Path, default=RAY_DIR, help="folder for the record")
    args = parser.parse_args(argv)
    requests = sample_requests(args.requests)
    in_process, reference = measure_in_process(
        args.variant, requests, args.concurrency, args.cache_dir, args.device, args.rounds
    )
    print(f"in-process: {json.dumps(in_process)}", flush=True)

    from variants.serving import ray_serve  # noqa: PLC0415 - Ray is an optional extra, imported only here

    ray_serve.start(num_cpus=args.cpus, port=args.port)
    rows = []
    try:
        for replicas in (int(r) for r in args.replicas.split(",")):
            num_cpus = max(1, args.cpus // replicas)
            row = measure_ray(
                args.variant,
                requests,
                args.concurrency,
                replicas,
                num_cpus,
                args.num_gpus,
                args.port,
                args.cache_dir,
                reference,
                args.device,
                args.rounds,
            )
            print(f"ray serve: {json.dumps(row)}", flush=True)
            rows.append(row)
    finally:
        ray_serve.stop()
    hardware = current_hardware()
    record = {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "kind": "ray-serve",
        "variant": args.variant,
        "device": args.device,
        "hardware": hardware,
        "versions": {**record_versions(), "ray": dist_version("ray"), "fastapi": dist_version("fastapi")},
        "load_average": list(os.getloadavg()),
        "settings": {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "data": str(DEFAULT_DATA.relative_to(RESULTS_DIR.parents[1])),
            "request_mix": "SQuAD v2 sample questions spread evenly over context length, in a fixed mixed order",
            "rounds": args.rounds,
            "warmup": "16 requests per server, untimed",
            "cluster_cpus": args.cpus,
        },
        "method": (
            "The same requests, from the same urllib3 client with the same number of threads, to (1) the app's "
            "lean route POST /v1/answer served in-process by uvicorn (one request at a time in the model, all "
            "cores) and (2) the variant's Ray Serve application POST /<variant>/v1/answer on a local Ray cluster, "
            "at each replica count (each replica's inference threads = its CPU share). throughput_rps: answered "
            "requests / wall time over every round (each round's beside it); client p50/p99: request to parsed "
            "reply; engine_p50_ms: the server's own "
            "tokenize+run+decode time; answers_differ: replies whose answer text or character span differ from "
            "the in-process engine's."
        ),
        "in_process": in_process,
        "ray_serve": rows,
        "notes": args.notes,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    slug = hardware.get("gpu_slug") or hardware.get("cpu_slug") or "cpu"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"ray-serve-{args.variant}-{slug}-{stamp}.json"
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}")
    return path
