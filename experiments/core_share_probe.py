"""Whether a variant gets the machine's second core as the pipeline does, and what its lead over the
pipeline is when it does and when it does not. A JSON record.

    python -m experiments.core_share_probe --seconds 300 --out assets/results/core-share-probe-cpu-<cpu>-<date>.json

On a shared VM the latency records move from pass to pass, the fastest variant most. One process
times four runners in turns, in blocks of ``--block`` questions of the bench's held-out sample,
each turn after one untimed question, for ``--seconds``: an ONNX variant as the app runs it (all
cores), the same graph on one thread, and transformers' pipeline on the baseline (the bench's peer)
with torch's threads and on one thread. Each is timed end to end (tokenize, run, decode) at batch 1,
every question kept; the runners' order rotates from block to block.

A block's ``core_gain`` (the one-thread median over the all-cores median) says how much the variant
gained from its other threads in that block, ``pipeline_core_gain`` the same for the pipeline. A
turn's median hides a slow moment shorter than half the turn, and the pipeline's turns last about
five times the variant's, so the record also gives ``slow_share``: per runner, the share of its
questions that took more than 1.25x that question's median on that runner over the whole run. A
core that the VM takes away for a while slows whichever multi-threaded runner is running, in
proportion to its time; a runtime that stops using the core slows alone. Each block also keeps what
the guest kernel saw meanwhile (``guest``, from /proc/stat and this process's CPU times): the CPU
seconds other processes of the guest used, and the steal time the hypervisor reported. The summary
splits the blocks at ``--gain-split`` and gives each group's medians and the pipeline's ratio to the
variant.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments import common
from variants.answering import runtime
from variants.answering.qa import answer
from variants.benchmarking import bench
from variants.benchmarking import options as bench_options
from variants.benchmarking import peer as bench_peer

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
        pipeline_gains = [b["pipeline_core_gain"] for b in members if "pipeline_core_gain" in b]  # not in old records
        ratios = [b["p50_ms"][PIPELINE] / b["p50_ms"][ALL_CORES] for b in members]
        summary[name] = {
            "blocks": len(members),
            "p50_ms": medians,
            "pipeline_over_variant": round(float(np.median(ratios)), 3),
            "pipeline_over_variant_range": [round(min(ratios), 3), round(max(ratios), 3)],
            "core_gain": round(float(np.median([b["core_gain"] for b in members])), 3),
            "pipeline_core_gain": round(float(np.median(pipeline_gains)), 3) if pipeline_gains else None,
            "others_cpu_s_per_block": round(float(np.median([b["guest"]["others_cpu_s"] for b in members])), 3),
            "steal_s_total": round(sum(b["guest"]["steal_s"] for b in members), 3),
        }
    return summary


def slow_share(blocks: list[dict], factor: float = 1.25) -> dict[str, float]:
    """Per runner, the share of its timed questions that took more than ``factor`` x that question's
    median on that runner over all blocks: slow moments, whatever a turn's length or place in its block."""
    shares = {}
    for name in RUNNERS:
        by_question: dict[int, list[float]] = defaultdict(list)
        for b in blocks:
            for question, ms in zip(b["questions"], b["ms"][name], strict=True):
                by_question[question].append(ms)
        slow = sum(int((np.array(times) > factor * np.median(times)).sum()) for times in by_question.values())
        total = sum(len(times) for times in by_question.values())
        shares[name] = round(float(slow / total), 4) if total else None
    return shares


def time_blocks(runners: dict, examples: list, seconds: float, block: int) -> list[dict]:
    """Blocks of ``block`` questions, each runner's turn in an order that rotates from block to block,
    every question's milliseconds kept, for ``seconds``."""
    blocks, started, at = [], time.time(), 0
    while time.time() - started < seconds:
        questions = [(at + i) % len(examples) for i in range(block)]
        at += block
        turn = len(blocks) % len(RUNNERS)
        order = RUNNERS[turn:] + RUNNERS[:turn]
        entry = {"t_s": round(time.time() - started, 1), "order": list(order), "questions": questions}
        entry["ms"], entry["p50_ms"] = {}, {}
        before = guest_cpu_seconds()
        for name in order:
            runner = runners[name]
            runner(examples[questions[0]].question, examples[questions[0]].context)  # settle, untimed
            times = []
            for q in questions:
                t = time.perf_counter()
                runner(examples[q].question, examples[q].context)
                times.append(round((time.perf_counter() - t) * 1000, 3))
            entry["ms"][name], entry["p50_ms"][name] = times, round(float(np.median(times)), 3)
        entry["core_gain"] = round(entry["p50_ms"][ONE_THREAD] / entry["p50_ms"][ALL_CORES], 3)
        entry["pipeline_core_gain"] = round(entry["p50_ms"][PIPELINE_ONE_THREAD] / entry["p50_ms"][PIPELINE], 3)
        entry["guest"] = guest_between(before, guest_cpu_seconds())
        blocks.append(entry)
        print({k: v for k, v in entry.items() if k not in ("ms", "questions")}, flush=True)
    return blocks


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    common.add_probe_arguments(parser)
    parser.add_argument("--variant", default="pruned-onnx-opt-int8", help="an ONNX Runtime variant of the preset")
    parser.add_argument("--data", help="SQuAD v2 JSON file (default: the bench's sample)")
    parser.add_argument("--seconds", type=float, default=300, help="how long the blocks go on")
    parser.add_argument("--block", type=int, default=20, help="timed questions per runner per block")
    parser.add_argument("--gain-split", type=float, default=1.25, help="core_gain that separates the two groups")
    parser.add_argument("--out", help="where to write the record (default: print only)")
    args = parser.parse_args(argv)

    import torch  # noqa: PLC0415

    engine = common.probe_engine(args.preset, [args.variant], args.baseline, args.pruned)
    loaded = engine.variants[args.variant]
    if not isinstance(loaded.model, runtime.OrtQAModel):
        raise SystemExit(f"{args.variant} is not an ONNX Runtime variant: its thread count is not its own to set")
    one_thread = runtime.OrtQAModel(loaded.model.path, threads=1)
    peer = bench_peer.peer_runner(engine, args)
    if not isinstance(peer, bench_options.Runner):
        raise SystemExit(f"pipeline: {peer.error}")
    settings = engine.settings_for(loaded)

    def run_with(model):
        return lambda q, c: answer(model, loaded.tokenizer, q, c, settings)

    torch_threads = torch.get_num_threads()
    threads_seen: dict[str, int] = {}

    def pipeline_on(name: str, threads: int):
        def run(q: str, c: str):
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)  # before the turn's untimed question, which absorbs the change
            threads_seen[name] = torch.get_num_threads()
            return peer.answer([(q, c)], 1)

        return run

    runners = {ALL_CORES: run_with(loaded.model), ONE_THREAD: run_with(one_thread)}
    runners[PIPELINE] = pipeline_on(PIPELINE, torch_threads)
    runners[PIPELINE_ONE_THREAD] = pipeline_on(PIPELINE_ONE_THREAD, 1)
    examples, data = bench.load_data(args.data or bench_options.DEFAULT_DATA)
    try:
        for runner in runners.values():
            for e in examples[:5]:
                runner(e.question, e.context)
        started = time.time()
        blocks = time_blocks(runners, examples, args.seconds, args.block)
    finally:
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
        "threads_seen": threads_seen,  # torch's threads while each pipeline runner answered
        "data": {**data, "questions_per_block": args.block},
        "blocks": blocks,
        "summary": group_summary(blocks, args.gain_split),
        "slow_share": slow_share(blocks),
    }
    print(json.dumps({"summary": record["summary"], "slow_share": record["slow_share"]}, indent=1))
    return common.save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
