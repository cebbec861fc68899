"""Where an ONNX variant's model time goes, by operator type: ONNX Runtime's own profiler. A JSON record.

    python -m experiments.ort_op_profile --model assets/models/minilm-squad2-pruned \\
        --out assets/results/ort-op-profile-cpu-<cpu>-<date>.json

Builds the ORT-optimized FP32 graph and its INT8 build the way the engine does, then runs each on the
same questions at batch 1 (the engine's session, with ORT's profiler on, after 3 untimed runs) and
adds up the profiler's kernel times by operator type: ms per question (mean over the questions, so
long inputs weigh more than in a median; ``run_ms_mean`` is the total to hold them against), share of
the kernels' sum, and nodes per question. The profiler itself costs time, so the totals run higher than
the bench's; read the shares, not the milliseconds. A question's windows run in the engine's passes
(:func:`variants.answering.qa.run_windows`: on the CPU at most ``CPU_PASS_TOKENS`` tokens a pass), and
``run_ms_*`` add up a question's passes; records before 2026-11-28 ran each question in one pass.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

from experiments.common import save_probe_record
from variants.answering.qa import DecodeSettings, model_passes, run_windows, tokenize
from variants.answering.runtime import OrtQAModel, cpu_threads
from variants.benchmarking.bench import load_data
from variants.benchmarking.options import DEFAULT_DATA
from variants.building.export import build_onnx_chain
from variants.building.storage import load_qa_model
from variants.core.hardware import int8_settings

BUILDS = {"ORT-optimized FP32": ["optimize"], "INT8": ["optimize", "int8"]}


def op_times(graph: Path, windows: list, threads: int, prefix: str, warmup: int = 3) -> dict:
    """Run ``windows`` (one entry a question) through ``graph`` in the engine's passes (the engine's session,
    ORT's profiler on) after ``warmup`` untimed questions; per operator type, kernel ms per question (mean),
    share and nodes per question, and each question's run time (its passes added up)."""
    model = OrtQAModel(graph, threads=threads, profile_prefix=prefix)
    batch = DecodeSettings().batch_size
    for w in windows[:warmup]:
        run_windows(model, w, batch)
    for w in windows:
        run_windows(model, w, batch)
    events = json.loads(Path(model.session.end_profiling()).read_text())
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    passes = [len(model_passes(model, w, batch)) for w in windows]
    untimed = sum(passes[:warmup])
    if len(runs) != untimed + sum(passes):
        raise RuntimeError(f"ONNX Runtime's profile of {graph} holds {len(runs)} runs, not {untimed + sum(passes)}")
    timed_from = runs[untimed - 1]["ts"] + runs[untimed - 1]["dur"] if untimed else 0
    ends = np.cumsum(passes)
    run_us = [e["dur"] for e in runs[untimed:]]
    runs = [sum(run_us[end - k : end]) / 1000 for end, k in zip(ends, passes, strict=True)]
    kernel_us, nodes = defaultdict(float), defaultdict(int)
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] >= timed_from:
            kernel_us[e["args"]["op_name"]] += e["dur"]
            nodes[e["args"]["op_name"]] += 1
    total, n = sum(kernel_us.values()), len(windows)
    if not runs or not total:
        raise RuntimeError(f"ONNX Runtime's profile of {graph} holds no timed runs")
    return {
        "run_ms_median": round(float(np.median(runs)), 3),
        "run_ms_mean": round(float(np.mean(runs)), 3),
        "kernels_ms_per_question": round(total / n / 1000, 3),  # a mean, like each operator's below
        "by_operator": {
            op: {"ms_per_question": round(us / n / 1000, 3), "share": round(us / total, 3), "nodes": nodes[op] // n}
            for op, us in sorted(kernel_us.items(), key=lambda kv: -kv[1])
        },
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="a QA model folder (a pruned one is compacted first)")
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="SQuAD v2 JSON file (default: the bench's sample)")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--threads", type=int, default=0, help="0: VARIANTS_THREADS, else all cores")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    examples, data = load_data(args.data, limit=args.questions)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    windows = [tokenize(tokenizer, [(e.question, e.context)], DecodeSettings()) for e in examples]
    tokens = int(np.median([w.context_mask.shape[1] for w in windows]))
    threads = args.threads or cpu_threads()
    started = time.time()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        model = load_qa_model(args.model, compacted=True)
        for i, (name, steps) in enumerate(BUILDS.items()):
            graph = build_onnx_chain(model, tokenizer, steps, Path(tmp) / f"g{i}", for_gpu=False)
            results[name] = op_times(graph, windows, threads, str(Path(tmp) / f"profile{i}"))
    record = {
        "kind": "ort-op-profile",  # not a benchmark record: the app's record list skips it by this key
        "what": __doc__.split("\n")[0],
        "model": args.model,
        "data": {**data, "tokens_median": tokens},
        "int8": int8_settings().as_dict(),
        "settings": {"batch": 1, "threads": threads or f"all cores ({os.cpu_count()})", "warmup_runs": 3},
        "results": results,
    }
    save_probe_record(record, started, args.out)
    for name, result in results.items():
        top = list(result["by_operator"].items())[:3]
        print(name, result["kernels_ms_per_question"], "ms;", ", ".join(f"{op} {r['share']:.0%}" for op, r in top))
    return record


if __name__ == "__main__":
    main()
