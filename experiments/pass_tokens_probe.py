"""How many tokens one forward pass should hold on this CPU: the engine's ``CPU_PASS_TOKENS``
(``variants.answering.runtime``). A JSON record.

    python -m experiments.pass_tokens_probe --out experiments/records/pass-tokens-probe-cpu-<cpu>-<date>.json

1. **A long passage, whole answers.** The Ask-timing probe's 16,000-character passage (14 windows of 384 tokens at
   the defaults: ``experiments.ask_timing_probe.long_passage``) answered by each variant under each cap on the
   tokens of a pass (``--caps``; 0: no cap, every window in one pass of up to ``batch_size``), ``--runs``
   timed answers each after one untimed one: the caps' order rotates from run to run, and the variants take
   turns under each cap, so a machine drifting faster or slower falls on every cap alike.
   The answers are kept: INT8's dynamic scales are taken per pass, so its scores may move a little.
2. **Window shapes, model time only.** ``model.run`` on random token ids, ``batch`` windows of ``width``
   tokens, per window; variants take turns.

Exploratory timing on a quiet machine: each median is of a few runs, so read differences under about
10% as noise. The record's load averages say whether the machine was quiet.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from experiments.ask_timing_probe import long_passage
from experiments.common import add_probe_arguments, probe_engine, save_probe_record
from variants.answering.qa import answer, tokenize

NAMES = ["pruned", "pruned-onnx-opt", "pruned-onnx-opt-int8"]


def long_passage_times(engine, names: list[str], caps: list[int], runs: int, title: str, chars: int) -> dict:
    """Median ms of a whole answer to the long passage, per cap and variant, and what each answered."""
    passage, question, gold = long_passage(title, chars)
    settings = engine.settings_for(engine.variants[names[0]])
    windows = len(tokenize(engine.variants[names[0]].tokenizer, [(question, passage)], settings).owner)
    own = {n: engine.variants[n].model.pass_tokens for n in names}
    times: dict[int, dict[str, list[float]]] = {cap: {n: [] for n in names} for cap in caps}
    said: dict[int, dict] = {cap: {} for cap in caps}

    def use(cap: int) -> None:
        for n in names:
            engine.variants[n].model.pass_tokens = cap or None

    try:
        for cap in caps:  # one untimed answer each
            use(cap)
            for n in names:
                v = engine.variants[n]
                answer(v.model, v.tokenizer, question, passage, engine.settings_for(v))
        for turn in range(runs):  # caps rotate from run to run, variants take turns within each
            for cap in caps[turn % len(caps) :] + caps[: turn % len(caps)]:
                use(cap)
                for n in names:
                    v = engine.variants[n]
                    started = time.perf_counter()
                    a = answer(v.model, v.tokenizer, question, passage, engine.settings_for(v))
                    times[cap][n].append((time.perf_counter() - started) * 1000)
                    said[cap][n] = {"text": a.text, "score": round(a.score, 4)}
    finally:
        for n in names:
            engine.variants[n].model.pass_tokens = own[n]
    rows = [{"cap_tokens": cap or None, "median_ms": {n: round(statistics.median(t), 1) for n, t in times[cap].items()},
             "runs": runs, "answers": said[cap]} for cap in caps]  # fmt: skip
    for row in rows:
        print(row["cap_tokens"], row["median_ms"], flush=True)
    return {"characters": len(passage), "question": question, "gold": sorted(set(gold)), "windows": windows,
            "batch_size": settings.batch_size, "rows": rows}  # fmt: skip


def shape_times(engine, names: list[str], widths: list[int], batches: list[int]) -> list[dict]:
    """Median ms per window of ``model.run`` for each width and batch (no cap: the pass as given)."""
    rng = np.random.default_rng(0)
    vocab = min(len(engine.variants[n].tokenizer) for n in names)
    rows = []
    for width in widths:
        for batch in batches:
            ids = rng.integers(min(1000, vocab // 2), min(20000, vocab), size=(batch, width)).astype(np.int64)
            feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
            times: dict[str, list[float]] = {n: [] for n in names}
            for n in names:
                engine.variants[n].model.run(feed)
            for _ in range(max(3, 16 // batch)):
                for n in names:
                    started = time.perf_counter()
                    engine.variants[n].model.run(feed)
                    times[n].append((time.perf_counter() - started) * 1000 / batch)
            rows.append({"width": width, "batch": batch, "tokens": width * batch,
                         "ms_per_window": {n: round(statistics.median(t), 2) for n, t in times.items()}})  # fmt: skip
            print(width, batch, rows[-1]["ms_per_window"], flush=True)
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_probe_arguments(parser)
    parser.add_argument("--variants", default=",".join(NAMES))
    parser.add_argument("--caps", default="0,384,768,1152,1536", help="tokens a pass holds at most; 0: no cap")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--widths", default="128,192,384")
    parser.add_argument("--batches", default="1,2,4,8")
    parser.add_argument("--title", default="French_and_Indian_War")
    parser.add_argument("--chars", type=int, default=16_000)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    started = time.time()
    names = args.variants.split(",")
    engine = probe_engine(args.preset, names, args.baseline, args.pruned)
    load_before = os.getloadavg()
    try:
        caps = [int(c) for c in args.caps.split(",")]
        passage = long_passage_times(engine, names, caps, args.runs, args.title, args.chars)
        shapes = shape_times(engine, names, [int(w) for w in args.widths.split(",")],
                             [int(b) for b in args.batches.split(",")])  # fmt: skip
    finally:
        engine.close()
    record = {
        "kind": "pass-tokens-probe",
        "method": __doc__,
        "variants": names,
        "engine_pass_tokens": {n: engine.variants[n].model.pass_tokens for n in names},
        "long_passage": passage,
        "shapes": shapes,
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    return save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
