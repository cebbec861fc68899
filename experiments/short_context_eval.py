"""How the variants read a short context: the answerable questions of a SQuAD v2 file asked twice,
about their whole paragraph and about the one sentence that holds the answer. A JSON record.

    python -m experiments.short_context_eval --out assets/results/short-context-cpu-<cpu>-<date>.json

People who type into the demo paste a sentence or two, not a SQuAD paragraph. Each variant answers
at threshold 0 (the app's default), one question at a time; the record keeps F1, the share answered
"no answer", and each variant's mean per-question F1 difference to the baseline with its paired
bootstrap interval, for both contexts. The sentence is cut by rule (``answer_sentence``) around
the first gold answer, so an abbreviation can cut it short; every gold answer is scored as a text,
as the SQuAD metric does, including ones that the cut left out.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from experiments.common import add_probe_arguments, probe_engine, save_probe_record
from variants.answering.qa import answer
from variants.benchmarking.bench import load_data
from variants.benchmarking.options import DEFAULT_DATA
from variants.core.squad import paired_bootstrap, question_f1
from variants.training.augment import answer_sentence

VARIANTS = ("baseline", "pruned", "pruned-onnx-opt-int8")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_probe_arguments(parser)
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, the baseline first")
    parser.add_argument("--data", help="SQuAD v2 JSON file (default: the bench's sample)")
    parser.add_argument("--rounds", type=int, default=5000, help="bootstrap rounds")
    parser.add_argument("--out", help="where to write the record (default: print only)")
    args = parser.parse_args(argv)

    names = args.variants.split(",")
    engine = probe_engine(args.preset, names, args.baseline, args.pruned)
    examples, data = load_data(args.data or DEFAULT_DATA)
    examples = [e for e in examples if not e.is_impossible]
    contexts = {
        "paragraph": [e.context for e in examples],
        "answer sentence": [
            answer_sentence(e.context, e.answer_starts[0], e.answer_starts[0] + len(e.answers[0])) for e in examples
        ],
    }
    started = time.time()
    f1: dict[str, dict[str, np.ndarray]] = {}
    no_answer: dict[str, dict[str, float]] = {}
    for name in names:
        loaded = engine.variants[name]
        settings = engine.settings_for(loaded)
        f1[name], no_answer[name] = {}, {}
        for kind, texts in contexts.items():
            pairs = zip(examples, texts, strict=True)
            got = [answer(loaded.model, loaded.tokenizer, e.question, c, settings) for e, c in pairs]
            f1[name][kind] = np.array([100 * question_f1(e, a.text) for e, a in zip(examples, got, strict=True)])
            no_answer[name][kind] = round(float(np.mean([a.is_null for a in got])), 4)
    engine.close()

    baseline = names[0]
    results = {}
    for name in names:
        results[name] = {}
        for kind in contexts:
            entry = {"f1": round(float(f1[name][kind].mean()), 2), "no_answer_share": no_answer[name][kind]}
            if name != baseline:
                diffs = f1[name][kind] - f1[baseline][kind]
                low, high = paired_bootstrap(diffs, args.rounds)
                entry["f1_minus_baseline"] = round(float(diffs.mean()), 2)
                entry["interval"] = [round(low, 2), round(high, 2)]
            results[name][kind] = entry
    lengths = {kind: int(np.median([len(c) for c in texts])) for kind, texts in contexts.items()}
    record = {
        "kind": "short-context-eval",  # not a benchmark record: the app's record list skips it by this key
        "what": "answerable questions asked about their paragraph and about the sentence holding the answer; "
        "threshold 0, one question at a time; interval: paired bootstrap of the mean F1 difference to the "
        "baseline, 95%",
        "preset": args.preset,
        "data": {**data, "answerable_asked": len(examples), "median_context_chars": lengths},
        "results": results,
        "bootstrap": {"rounds": args.rounds, "seed": 0},
    }
    print(json.dumps(results, indent=1))
    return save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
