"""What glibc's malloc thresholds cost a variant's latency: old settings against new. A JSON record.

    python -m experiments.malloc_probe --out assets/results/malloc-probe-cpu-<cpu>-<date>.json

``variants.answering.runtime.limit_native_memory`` fixes glibc's mmap and trim thresholds for the whole process
(they bound the app's memory under load: ```python -m variants soak```). They cannot be changed back inside one
process, so each setting runs in its own child process, the settings taking turns over ``--rounds``
rounds. Each child loads one variant as the engine does and answers the first ``--questions`` of the
bench's held-out sample at batch 1, end to end (tokenize, run, decode), after a warm-up; it reports
the median, mean and p90 latency and the CPU seconds the process spent in user and kernel mode
(page faults of freshly mmapped buffers show up as kernel time).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from variants.answering import runtime
from variants.answering.qa import answer
from variants.benchmarking.bench import load_data

SETTINGS = {  # name -> (mmap threshold, trim threshold), bytes
    "mmap 1 MiB, trim 4 MiB (until 2026-11-26)": (1 << 20, 4 << 20),
    "mmap 16 MiB, trim 32 MiB": (16 << 20, 32 << 20),
}
ROOT = Path(__file__).resolve().parents[1]  # the repository: the child runs as ``python -m experiments.malloc_probe``
SAMPLE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
CHECK_BLOCK = 4 << 20  # a block between the two mmap thresholds: mmapped under the old one only
MALLINFO2_FIELDS = (
    "arena",
    "ordblks",
    "smblks",
    "hblks",
    "hblkhd",
    "usmblks",
    "fsmblks",
    "uordblks",
    "fordblks",
    "keepcost",
)


class _Mallinfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (malloc.h, glibc 2.33+)."""

    _fields_ = [(name, ctypes.c_size_t) for name in MALLINFO2_FIELDS]


def block_is_mmapped(size: int) -> bool | None:
    """Whether glibc serves a block of ``size`` bytes by mmap under this process's settings (None: no glibc
    2.33+ to ask): the count of mmapped blocks before and after one malloc."""
    libc = ctypes.CDLL(None)  # the C library this process runs on
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _Mallinfo2
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = libc.mallinfo2().hblks
    block = libc.malloc(size)
    after = libc.mallinfo2().hblks
    libc.free(block)
    return after > before


def child(spec: dict) -> dict:
    """Time one variant under one setting (this process's own allocator settings)."""

    runtime.MMAP_THRESHOLD, runtime.TRIM_THRESHOLD = spec["mmap"], spec["trim"]
    applied = runtime.limit_native_memory()  # load_engine calls it again, with the same values
    facts = {"pid": os.getpid(), "applied": applied, "mmap_threshold": runtime.MMAP_THRESHOLD}
    facts |= {"trim_threshold": runtime.TRIM_THRESHOLD, "mmaps_4mib_block": block_is_mmapped(CHECK_BLOCK)}
    from experiments.common import probe_engine  # noqa: PLC0415 - after MALLOC_ARENA_MAX is set, in the child

    engine = probe_engine(spec["preset"], [spec["variant"]], spec.get("baseline"), spec.get("pruned"))
    loaded = engine.variants[spec["variant"]]
    examples, _ = load_data(SAMPLE, limit=spec["questions"])
    settings = engine.settings_for(loaded)
    for e in examples[: spec["warmup"]]:
        answer(loaded.model, loaded.tokenizer, e.question, e.context, settings)
    before = resource.getrusage(resource.RUSAGE_SELF)
    times = []
    for e in examples:
        started = time.perf_counter()
        answer(loaded.model, loaded.tokenizer, e.question, e.context, settings)
        times.append((time.perf_counter() - started) * 1000)
    after = resource.getrusage(resource.RUSAGE_SELF)
    engine.close()
    return facts | {
        "p50_ms": round(float(np.median(times)), 3),
        "mean_ms": round(float(np.mean(times)), 3),
        "p90_ms": round(float(np.percentile(times, 90)), 3),
        "user_s": round(after.ru_utime - before.ru_utime, 2),
        "kernel_s": round(after.ru_stime - before.ru_stime, 2),
        "n": len(times),
    }


def main(argv: list[str] | None = None) -> dict:
    from experiments.common import add_probe_arguments  # noqa: PLC0415 - the parent only parses and spawns

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_probe_arguments(parser)
    parser.add_argument("--variant", default="pruned-onnx-opt-int8")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=900, help="seconds one child may take")
    parser.add_argument("--out", help="where to write the record (default: print only)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return {}
    from experiments.common import save_probe_record  # noqa: PLC0415 - the parent loads no model

    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    started = time.time()
    for r in range(args.rounds):
        order = list(SETTINGS.items()) if r % 2 == 0 else list(reversed(SETTINGS.items()))
        for name, (mmap, trim) in order:
            spec = {"mmap": mmap, "trim": trim, "preset": args.preset, "variant": args.variant}
            spec |= {"baseline": args.baseline, "pruned": args.pruned}
            spec |= {"questions": args.questions, "warmup": args.warmup}
            command = [sys.executable, "-m", "experiments.malloc_probe", "--child", json.dumps(spec)]
            try:
                out = subprocess.run(
                    command, capture_output=True, text=True, check=True, timeout=args.timeout, cwd=ROOT
                )
            except subprocess.CalledProcessError as exc:
                raise SystemExit(f"{name}: the child failed:\n{exc.stderr}") from exc
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(name, runs[name][-1], flush=True)
    keys = ("p50_ms", "mean_ms", "p90_ms", "kernel_s")
    summary = {name: {k: round(float(np.median([r[k] for r in rs])), 3) for k in keys} for name, rs in runs.items()}
    record = {
        "kind": "malloc-probe",  # not a benchmark record: the app's record list skips it by this key
        "what": "one variant's batch-1 latency under glibc malloc settings, each in its own process, in turns",
        "preset": args.preset,
        "variant": args.variant,
        "data": {"file": f"assets/data/{SAMPLE.name}", "questions": args.questions, "warmup": args.warmup},
        "settings": {
            n: {"mmap_threshold": m, "trim_threshold": t, "arena_max": runtime.ARENA_MAX}
            for n, (m, t) in SETTINGS.items()
        },
        "rounds": args.rounds,
        "runs": runs,
        "median_of_rounds": summary,
    }
    print(json.dumps(summary, indent=1))
    return save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
