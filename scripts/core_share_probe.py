"""Whether this machine gives the process all its cores, and what a variant's lead over the pipeline is
when it does and when it does not. A JSON record.

    python scripts/core_share_probe.py --seconds 300 --out assets/results/core-share-probe-cpu-<cpu>-<date>.json

On a shared VM the latency records move from pass to pass, the fastest variant most. One process
times four runners in turns, in blocks of ``--block`` questions of the bench's held-out sample,
each block after one untimed question, for ``--seconds``: an ONNX variant as the app runs it (all
cores), the same graph on one thread, and transformers' pipeline on the baseline (the bench's peer)
with torch's threads and on one thread. Each is timed end to end (tokenize, run, decode) at batch 1.

The one-thread time does not depend on a second core, so a block's ``core_gain`` (one-thread median
over all-cores median) says how much of the second core the variant got in that block, and
``pipeline_core_gain`` the same for the pipeline: whether a slow spell takes the core from every
runtime or only from the variant's. Each block
also keeps what the guest kernel saw meanwhile (``guest``, from /proc/stat and this process's CPU
times): the CPU seconds other processes of the guest used, and the steal time the hypervisor
reported. A low gain with neither means the core went somewhere the guest cannot see. The summary
splits the blocks at ``--gain-split`` and gives each group's medians and the pipeline's ratio to the
variant.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from variants import bench

ALL_CORES, ONE_THREAD, PIPELINE = "variant, all cores", "variant, one thread", "pipeline"
PIPELINE_ONE_THREAD = "pipeline, one thread"
RUNNERS = (ALL_CORES, ONE_THREAD, PIPELINE, PIPELINE_ONE_THREAD)


def guest_cpu_seconds() -> dict[str, float]:
    """Busy and steal CPU seconds of the whole guest so far (/proc/stat; zeros where there is none), and
    this process's own (user + system, every thread)."""
    ticks = os.sysconf("SC_CLK_TCK")
    busy = steal = 0.0
    stat = Path("/proc/stat")
    if stat.exists():
        fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal_ticks = (fields + [0] * 8)[:8]
        busy, steal = (user + nice + system + irq + softirq) / ticks, steal_ticks / ticks
    own = os.times()
    return {"busy": busy, "steal": steal, "own": own.user + own.system}


def guest_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds between two :func:`guest_cpu_seconds` readings: other processes' and stolen."""
    others = (after["busy"] - before["busy"]) - (after["own"] - before["own"])
    return {"others_cpu_s": round(max(0.0, others), 3), "steal_s": round(after["steal"] - before["steal"], 3)}


def group_summary(blocks: list[dict], gain_split: float) -> dict[str, dict]:
    """Medians of the blocks where the variant gained at least ``gain_split`` from its other threads, of
    the rest, and of all blocks; with the pipeline's ratio to the variant (all cores) in each."""
    groups = {
        f"core_gain >= {gain_split}": [b for b in blocks if b["core_gain"] >= gain_split],
        f"core_gain < {gain_split}": [b for b in blocks if b["core_gain"] < gain_split],
        "all blocks": blocks,
    }
    summary = {}
    for name, members in groups.items():
        if not members:
            summary[name] = {"blocks": 0}
            continue
        medians = {r: round(float(np.median([b["p50_ms"][r] for b in members])), 3) for r in RUNNERS}
        pipeline_gains = [b["pipeline_core_gain"] for b in members]
        ratios = [b["p50_ms"][PIPELINE] / b["p50_ms"][ALL_CORES] for b in members]
        summary[name] = {
            "blocks": len(members),
            "p50_ms": medians,
            "pipeline_over_variant": round(float(np.median(ratios)), 3),
            "pipeline_over_variant_range": [round(min(ratios), 3), round(max(ratios), 3)],
            "core_gain": round(float(np.median([b["core_gain"] for b in members])), 3),
            "pipeline_core_gain": round(float(np.median(pipeline_gains)), 3),
            "others_cpu_s_per_block": round(float(np.median([b["guest"]["others_cpu_s"] for b in members])), 3),
            "steal_s_total": round(sum(b["guest"]["steal_s"] for b in members), 3),
        }
    return summary


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    bench.add_probe_arguments(parser)
    parser.add_argument("--variant", default="pruned-onnx-opt-int8", help="an ONNX Runtime variant of the preset")
    parser.add_argument("--data", help="SQuAD v2 JSON file (default: the bench's sample)")
    parser.add_argument("--seconds", type=float, default=300, help="how long the blocks go on")
    parser.add_argument("--block", type=int, default=20, help="timed questions per runner per block")
    parser.add_argument("--gain-split", type=float, default=1.25, help="core_gain that separates the two groups")
    parser.add_argument("--out", help="where to write the record (default: print only)")
    args = parser.parse_args(argv)

    import torch  # noqa: PLC0415

    from variants import runtime  # noqa: PLC0415
    from variants.qa import answer  # noqa: PLC0415

    engine = bench.probe_engine(args.preset, [args.variant], args.baseline, args.pruned)
    loaded = engine.variants[args.variant]
    if not isinstance(loaded.model, runtime.OrtQAModel):
        raise SystemExit(f"{args.variant} is not an ONNX Runtime variant: its thread count is not its own to set")
    one_thread = runtime.OrtQAModel(loaded.model.path, threads=1)
    peer = bench.peer_runner(engine, args)
    if not isinstance(peer, bench.Runner):
        raise SystemExit(f"pipeline: {peer.error}")
    settings = engine.settings_for(loaded)

    def run_with(model):
        return lambda q, c: answer(model, loaded.tokenizer, q, c, settings)

    torch_threads = torch.get_num_threads()

    def pipeline_on(threads: int):
        def run(q: str, c: str):
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)  # before the block's untimed question, which absorbs the change
            return peer.answer([(q, c)], 1)

        return run

    runners = {ALL_CORES: run_with(loaded.model), ONE_THREAD: run_with(one_thread)}
    runners[PIPELINE], runners[PIPELINE_ONE_THREAD] = pipeline_on(torch_threads), pipeline_on(1)
    examples, data = bench.load_data(args.data or bench.DEFAULT_DATA)
    for runner in runners.values():
        for e in examples[:5]:
            runner(e.question, e.context)

    blocks, started, at = [], time.time(), 0
    while time.time() - started < args.seconds:
        chunk = [examples[(at + i) % len(examples)] for i in range(args.block)]
        at += args.block
        block = {"t_s": round(time.time() - started, 1), "p50_ms": {}}
        before = guest_cpu_seconds()
        for name, runner in runners.items():
            runner(chunk[0].question, chunk[0].context)  # settle, untimed
            times = []
            for e in chunk:
                t = time.perf_counter()
                runner(e.question, e.context)
                times.append((time.perf_counter() - t) * 1000)
            block["p50_ms"][name] = round(float(np.median(times)), 3)
        block["core_gain"] = round(block["p50_ms"][ONE_THREAD] / block["p50_ms"][ALL_CORES], 3)
        block["pipeline_core_gain"] = round(block["p50_ms"][PIPELINE_ONE_THREAD] / block["p50_ms"][PIPELINE], 3)
        block["guest"] = guest_between(before, guest_cpu_seconds())
        blocks.append(block)
        print(block, flush=True)
    engine.close()
    torch.set_num_threads(torch_threads)

    record = {
        "kind": "core-share-probe",  # not a benchmark record: the app's record list skips it by this key
        "what": "an ONNX variant and the pipeline, each on all cores and on one thread, in turns in blocks over time",
        "preset": args.preset,
        "variant": args.variant,
        "threads": {
            ALL_CORES: runtime.cpu_threads() or "all",
            ONE_THREAD: 1,
            PIPELINE: torch_threads,
            PIPELINE_ONE_THREAD: 1,
        },
        "data": {**data, "questions_per_block": args.block},
        "blocks": blocks,
        "summary": group_summary(blocks, args.gain_split),
    }
    print(json.dumps(record["summary"], indent=1))
    return bench.save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
