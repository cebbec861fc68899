"""The whole chain on the BERT-large replica, on this CPU: measured speedups beside the operation counts.

    nice -n 0 python -m variants replica-bench                     # 384 tokens, 9 runs per variant
    python -m variants replica-bench --lengths 128,384 --runs 7
    python -m variants replica-bench --scaled --out /tmp/r         # the scaled-down replica (seconds)

Builds (or reuses from the artifact cache) every variant of the ``bert-large-replica`` preset,
times one batch-1 window per sequence length (the variants take turns, a few runs each, so load
from other processes falls on all of them), and writes ``replica-cpu-<cpu>-<time>.json`` with the
hardware, ISA, versions, load averages, sample sizes, the parameter and FLOP counts computed from
the published structure, and per variant: p50/p90/min/max, measured speedup, promised speedup
(FLOP ratio) and the share of the promise kept. Random weights: latency only.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from variants.answering.timing import seq_len_sweep
from variants.benchmarking import chainbench
from variants.building.replica import Structure, write_model
from variants.core import spec as specs
from variants.records.results import REPLICA_DIR
from variants.serving.engine import load_engine

ROOT = Path(__file__).resolve().parents[2]

SCALED = {"num_layers": 4, "hidden_size": 64, "num_heads": 4, "intermediate_size": 256}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", default="384", help="comma-separated sequence lengths (default 384)")
    parser.add_argument("--runs", type=int, default=9, help="timed runs per variant and length (default 9)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--round-size", type=int, default=3, help="runs per turn (default 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="CPU threads for PyTorch and ONNX Runtime (default: all cores); 1 keeps ratios steady on a shared CPU",
    )
    parser.add_argument("--scaled", action="store_true", help=f"the scaled-down replica {SCALED} (for tests)")
    parser.add_argument("--out", type=Path, default=REPLICA_DIR, help="folder for the record")
    parser.add_argument("--cache-dir", type=Path, default=None, help="artifact cache (default: the shared one)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> Path:
    args = parse(argv)
    lengths = tuple(int(n) for n in args.lengths.split(","))
    if args.threads:
        import torch  # noqa: PLC0415

        torch.set_num_threads(args.threads)
        os.environ["VARIANTS_THREADS"] = str(args.threads)  # read by the engine's ONNX Runtime sessions
    pruned = Structure.published()
    started = time.perf_counter()
    env = chainbench.environment("cpu")
    with tempfile.TemporaryDirectory() as tmp:
        overrides = None
        if args.scaled:
            pruned = pruned.scaled(**SCALED)
            write_model(pruned.dense(), Path(tmp) / "dense")
            write_model(pruned, Path(tmp) / "pruned")
            overrides = {"baseline": str(Path(tmp) / "dense"), "pruned": str(Path(tmp) / "pruned")}
        chain = specs.preset("bert-large-replica", "cpu", overrides)
        with load_engine(variant_specs=chain, device="cpu", cache_dir=args.cache_dir) as engine:
            load_s = chainbench.elapsed(started)
            models = {v.spec.name: (v.model, v.tokenizer) for v in engine.loaded if v.ok}
            sweep = seq_len_sweep(
                models, lengths, args.runs, args.warmup, args.round_size, thread_cpu=args.threads == 1
            )
            variants = [
                {
                    "variant": v.spec.name,
                    "label": v.spec.label,
                    "steps": list(v.spec.steps),
                    "error": v.error,
                    **(v.model.describe() if v.ok else {}),
                    "load_seconds": round(v.load_seconds, 1),
                    "seq_len_sweep": sweep.get(v.spec.name, []),
                }
                for v in engine.loaded
            ]
    record = {
        "kind": "replica-chain",
        "preset": "bert-large-replica" + (" (scaled)" if args.scaled else ""),
        "latency_only": True,
        "note": chainbench.latency_only_note(),
        **env,
        "load_average_after": chainbench.environment("cpu")["load_average"],
        "settings": {"batch": 1, "lengths": list(lengths), "runs": args.runs, "warmup": args.warmup},
        "structure": chainbench.structure_summary(pruned, max(lengths)),
        "chain": {n: chainbench.chain_rows(sweep, pruned, n) for n in lengths},
        "variants": variants,
        "build_and_load_seconds": load_s,
        "total_seconds": chainbench.elapsed(started),
    }
    slug = env["hardware"]["cpu_slug"] + ("-scaled" if args.scaled else "")
    path = chainbench.write_record(record, args.out, f"replica-cpu-{slug}")
    for n in lengths:
        for row in record["chain"][n]:
            print(
                f"{n:4d} {row['variant']:<22} {row['p50_ms'] or float('nan'):9.1f} ms  "
                f"x{row.get('measured_speedup', float('nan')):5.2f} of x{row['promised_speedup']:5.2f} promised "
                f"({100 * row.get('share_of_promise', float('nan')):3.0f}%; fastest runs "
                f"x{row.get('speedup_of_fastest_runs', float('nan')):5.2f}; CPU time "
                f"x{row.get('speedup_in_cpu_time', float('nan')):5.2f})"
            )
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()
