"""Served latency of one variant over HTTP (the lean route beside the app), p50/p99 per sequence length.

    python scripts/served_latency.py                                   # embedded preset, its INT8 variant, CPU
    python scripts/served_latency.py --preset bert-large-replica --device cuda --variant pruned-onnx-opt-fp16
    python scripts/served_latency.py --lengths 32,128 --requests 50 --out /tmp/r

Loads only that variant, serves ``POST /v1/answer`` with uvicorn on loopback and times sequential
requests from a keep-alive client (see :mod:`variants.served_latency`); writes
``served-<device>-<hardware>-<time>.json`` (hardware, ISA, versions, sample sizes) to assets/results.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from variants import chainbench  # noqa: E402
from variants.__main__ import add_model_arguments, engine_from_args  # noqa: E402
from variants.results import RESULTS_DIR  # noqa: E402
from variants.serve import default_variant  # noqa: E402
from variants.served_latency import measure  # noqa: E402


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_model_arguments(parser)
    parser.add_argument("--variant", default=None, help="the variant to serve (default: the chain's last headline)")
    parser.add_argument("--lengths", default="32,64,128,256,384", help="comma-separated sequence lengths")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per length (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests first (default 5)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the record")
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


if __name__ == "__main__":
    main()
