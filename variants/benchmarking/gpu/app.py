"""The app on a GPU as a Space runs it: ``app.py`` started with ``VARIANTS_DEVICE`` and ``VARIANTS_NAMES``
(the card's three variants: baseline, pruned and the chain's last step), asked through ``gradio_client``
on loopback; every answer, the device, provider and precision each variant really ran on, the engine's
latency and the client's wall time go to one record.

    python -m variants gpu-app --preset embedded --device cuda:0        # on a GPU machine
    python -m variants gpu-app --preset bert-large-replica --device cuda:0 --questions 4
    python -m variants gpu-app --device cpu --questions 2               # anywhere (the last step is INT8)

Exit status 1 when a variant failed or ran on another device than the one asked for.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from variants.answering.timing import describe, summarize
from variants.benchmarking import chainbench
from variants.benchmarking.app_client import ROOT, free_port, launched, sample_pairs, versions
from variants.core import spec as specs
from variants.core.config import DEVICE_ENV, NAMES_ENV
from variants.records.results import GPU_DIR


def headline(preset: str, device: str) -> list[str]:
    """The card's three variants of ``preset`` on ``device``: baseline, pruned, and the chain's last step."""
    return [s.name for s in specs.preset(preset, device) if s.headline]


def summarize_variants(requests: list[dict[str, Any]], device: str) -> dict[str, dict[str, Any]]:
    """Per variant: the devices, providers, precisions and ways of running seen, errors, and its engine
    latency (p50...); ``on_device`` is whether every answer came from ``device``'s kind (cuda or cpu)."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    found: dict[str, dict[str, Any]] = {}
    for request in requests:
        for result in request.get("results", []):
            entry = found.setdefault(result["variant"], {"seen": set(), "latency_ms": [], "errors": []})
            how = (str(result.get("device")), str(result.get("provider")), str(result.get("dtype")))
            entry["seen"].add((*how, str(result.get("execution") or "")))
            if result.get("error"):
                entry["errors"].append(result["error"])
            elif result.get("latency_ms"):
                entry["latency_ms"].append(result["latency_ms"])
    summary = {}
    for name, entry in found.items():
        devices, providers, dtypes, executions = (sorted({seen[i] for seen in entry["seen"]}) for i in range(4))
        summary[name] = {
            "devices": devices,
            "providers": providers,
            "dtypes": dtypes,
            "executions": [e for e in executions if e],  # e.g. the FP16 variant's CUDA graphs, or IOBinding
            "errors": entry["errors"],
            "on_device": all(d.startswith(kind) for d in devices) and not entry["errors"],
            "engine_latency_ms": summarize(entry["latency_ms"]) if entry["latency_ms"] else None,
        }
    return summary


def ask_all(url: str, pairs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """Each (question, context) once through ``/answer``, one client, one request at a time."""
    from gradio_client import Client  # noqa: PLC0415 - gradio_client is needed only when an app is asked

    client = Client(url, verbose=False)
    requests = []
    for question, context in pairs:
        started = time.perf_counter()
        try:
            results = client.predict(context, question, api_name="/answer")
            request: dict[str, Any] = {"results": results}
        except Exception as exc:
            request = {"error": describe(exc)}
        request.update(question=question, client_ms=round((time.perf_counter() - started) * 1000, 2))
        requests.append(request)
    return requests


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m variants gpu-app", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="embedded", help="embedded (default) or bert-large-replica")
    parser.add_argument("--device", default="cuda:0", help="cuda:0 (default), cuda or cpu")
    parser.add_argument("--variants", default=None, help="comma-separated (default: the card's three)")
    parser.add_argument("--questions", type=int, default=8, help="SQuAD sample questions to ask (default 8)")
    parser.add_argument("--cache-dir", default=None, help="artifact cache (default: the shared one)")
    parser.add_argument("--startup-timeout-s", type=float, default=600)
    parser.add_argument("--out", type=Path, default=None, help=f"folder for the record (default {GPU_DIR})")
    args = parser.parse_args(argv)
    if not 1 <= args.questions <= 200:
        parser.error("--questions must be between 1 and 200")
    args.variants = args.variants or ",".join(headline(args.preset, args.device))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = [sys.executable, str(ROOT / "app.py"), "--host", "127.0.0.1", "--port", str(port), "--preset", args.preset]
    if args.cache_dir:
        cmd += ["--cache-dir", str(args.cache_dir)]
    # As a Space sets them: the device and the variants come from the environment, not the command line.
    os.environ[DEVICE_ENV], os.environ[NAMES_ENV] = args.device, args.variants
    log_file = Path(tempfile.gettempdir()) / f"gpu-app-{port}.log"
    record: dict[str, Any] = {"kind": "gpu-app", "preset": args.preset, "variants": args.variants.split(",")}
    record["environment"] = {DEVICE_ENV: args.device, NAMES_ENV: args.variants}
    record.update(chainbench.environment(args.device), command=cmd[1:], versions=versions())
    started = time.perf_counter()
    try:
        with launched(cmd, url, args.startup_timeout_s, log_file):
            record["startup_s"] = chainbench.elapsed(started)
            record["requests"] = ask_all(url, sample_pairs(args.questions))
    except Exception as exc:
        record["error"] = describe(exc)
        record["log_tail"] = log_file.read_text(errors="replace")[-3000:] if log_file.is_file() else None
    requests = record.get("requests", [])
    record["summary"] = summarize_variants(requests, args.device)
    client = [r["client_ms"] for r in requests if "error" not in r]
    record["client_ms"] = summarize(client) if client else None
    ok = (
        not record.get("error")
        and requests
        and all("error" not in r for r in requests)
        and set(record["summary"]) == set(record["variants"])
        and all(v["on_device"] for v in record["summary"].values())
    )
    record["ok"] = bool(ok)
    hardware = record["hardware"]
    slug = (hardware.get("gpu_slug") if args.device.startswith("cuda") else None) or hardware["cpu_slug"]
    path = chainbench.write_record(record, args.out or GPU_DIR, f"gpu-app-{args.preset}-{slug}")
    for name, entry in record["summary"].items():
        p50 = (entry["engine_latency_ms"] or {}).get("p50")
        ran = f"{entry['devices']} {entry['providers']} {entry['dtypes']} {entry['executions']}"
        print(f"{name}: {ran} p50 {p50} ms {entry['errors'][:1]}")
    print(f"{'ok' if ok else 'FAILED'}: {record.get('error', '')} client p50 {(record['client_ms'] or {}).get('p50')}")
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
