"""The Ask tab on a long passage, and the CLI's speedups against the bench's: issue 41's checks of the
one timing rule (``variants.answering.timing.TimingRule``). A JSON record.

    python -m experiments.ask_timing_probe --out experiments/records/ask-timing-cpu-<cpu>-<date>.json

1. **A 16,000-character passage in the Ask tab.** The first paragraphs of one article of the bench's
   sample (``--title``), joined until they reach ``--chars`` characters, and a question about the last
   of them; the Ask tab's own handler (``ui.ask.make_ask``) answers it with the three default variants
   ``--asks`` times, as a person pressing Ask would. The record keeps, per ask, the seconds until each
   card showed its answer, the seconds until the last card had its latency, the timed runs k (the time
   budget decides it) and each variant's median.
2. **The CLI against the bench.** ``python -m variants ask --json`` for one short question (``--question-id``,
   from the sample), ``--cli-calls`` times, each a fresh process as a person would run it; each variant's
   speedup beside the bench record's for this machine (``variants.records.results.pick_record``) and their
   ratio. One question's ratio is not the bench's median over 200 questions in 5 passes: the record
   says how far apart they are, not that either is wrong.

The machine's load average is recorded before and after: the 2-core VM this was written on was shared
with a training run, so its seconds are upper bounds for an idle machine of the same kind.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from experiments.common import save_probe_record, this_cpu_bench
from variants.answering.timing import DEFAULT_BUDGET_S, DEFAULT_RUNS
from variants.core.squad import load_squad_json
from variants.serving.engine import load_engine

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
HEADLINE = ["baseline", "pruned", "pruned-onnx-opt-int8"]
NORMANS = "56ddde6b9a695914005b9629"  # "When were the Normans in Normandy?": its paragraph is one window


def long_passage(title: str, chars: int) -> tuple[str, str, list[str]]:
    """The article's first paragraphs joined (blank lines between) until ``chars`` characters, and the
    first answerable question of the last paragraph that has one, with its gold answers."""
    sample = load_squad_json(SAMPLE)
    paragraphs = list(dict.fromkeys(e.context for e in sample if e.title == title))
    taken: list[str] = []
    while paragraphs and len("\n\n".join(taken)) < chars:
        taken.append(paragraphs.pop(0))
    question = next(e for p in reversed(taken) for e in sample if e.context == p and e.answers)
    return "\n\n".join(taken), question.question, list(question.answers)


def ask_tab_once(engine, passage: str, question: str) -> dict:
    """One press of Ask through the tab's own handler (``make_ask``) with the default variants: the seconds
    until each card showed its answer (read from the cards' states), until each timed round ended, and
    until the last yield; what the cards showed."""
    from ui.ask import make_ask  # noqa: PLC0415 - gradio, for this part only

    started = time.perf_counter()
    answered_at: dict[str, float] = {}
    yields_at: list[float] = []
    output: tuple = ()
    for output in make_ask(engine)(passage, question, [], last={}):
        now = round(time.perf_counter() - started, 2)
        yields_at.append(now)
        for name, card_state in re.findall(r'data-variant="([^"]+)" data-state="([^"]+)"', output[0]):
            if card_state in ("timing", "done", "error"):
                answered_at.setdefault(name, now)
    return {
        "seconds": round(time.perf_counter() - started, 2),
        "card_answer_at_s": answered_at,
        "yields_at_s": yields_at,
        "variants": _variants(output[3]["results"]),
    }


def _variants(results: dict) -> dict:
    return {
        name: {
            "answer": r.answer,
            "score": r.score,
            "error": r.error,
            "timed_runs": r.timed_runs,
            "median_ms": r.latency_ms,
            "min_ms": r.latency_min_ms,
            "max_ms": r.latency_max_ms,
            "speedup": None if r.speedup is None else round(r.speedup, 3),
            "timing": r.timing,
        }
        for name, r in results.items()
    }


def cli_once(context: str, question: str) -> tuple[list[dict], float]:
    """``python -m variants ask --json`` in a fresh process, as a person runs it; its rows and seconds."""
    cmd = [sys.executable, "-m", "variants", "ask", "--preset", "embedded", "--device", "cpu", "--json"]
    started = time.perf_counter()
    out = subprocess.run(
        [*cmd, "--context", context, "--question", question], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout), round(time.perf_counter() - started, 1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--title", default="French_and_Indian_War", help="the sample's article for the passage")
    parser.add_argument("--chars", type=int, default=16_000, help="the passage's length at least, in characters")
    parser.add_argument("--asks", type=int, default=3, help="how many times the long passage is asked")
    parser.add_argument("--question-id", default=NORMANS, help="the sample's question for the CLI check")
    parser.add_argument("--cli-calls", type=int, default=3, help="fresh CLI processes for the check")
    parser.add_argument("--out", help="where to write the record (default: print only)")
    args = parser.parse_args(argv)
    started = time.time()
    load_before = os.getloadavg()

    passage, question, gold = long_passage(args.title, args.chars)
    engine = load_engine("embedded", "cpu", names=HEADLINE, fallback=False)
    asks = []
    for i in range(args.asks):
        asks.append(ask := ask_tab_once(engine, passage, question))
        print(f"ask {i + 1}: {ask['seconds']} s, k = {[v['timed_runs'] for v in ask['variants'].values()]}")
    engine.close()

    example = next(e for e in load_squad_json(SAMPLE) if e.id == args.question_id)
    bench = this_cpu_bench()
    bench_speedups = {v.variant: v.speedup_vs_baseline for v in bench.variants} if bench else {}
    calls = []
    for _ in range(args.cli_calls):
        rows, seconds = cli_once(example.context, example.question)
        calls.append({"seconds": seconds, "speedups": {r["variant"]: r["speedup"] for r in rows}, "rows": rows})
        print(f"cli: {seconds} s, " + ", ".join(f"{k} {v:.2f}" for k, v in calls[-1]["speedups"].items() if v))
    comparison = {}
    for name, theirs in bench_speedups.items():
        ours = sorted(c["speedups"].get(name) or 0 for c in calls)
        median = ours[len(ours) // 2] if ours else None
        comparison[name] = {
            "cli_speedups": ours,
            "cli_median": median,
            "bench": theirs,
            "cli_over_bench": round(median / theirs, 3) if median and theirs else None,
        }
    record = {
        "kind": "ask-timing-probe",
        "method": __doc__,
        "rule": {"runs": DEFAULT_RUNS, "budget_s": DEFAULT_BUDGET_S},
        "long_passage": {
            "title": args.title,
            "chars": len(passage),
            "question": question,
            "gold": gold,
            "variants": HEADLINE,
            "asks": asks,
        },
        "cli_check": {
            "question_id": example.id,
            "question": example.question,
            "context_chars": len(example.context),
            "bench_record": getattr(bench, "file", None),
            "calls": calls,
            "comparison": comparison,
        },
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    return save_probe_record(record, started, args.out)


if __name__ == "__main__":
    result = main()
    print(json.dumps({k: result[k] for k in ("long_passage", "load_average_before", "load_average_after")}, indent=1))
    print(json.dumps(result["cli_check"]["comparison"], indent=1))
