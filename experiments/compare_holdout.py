"""Whether one trained model really reads the held-out training articles better than another: a JSON record.

    python -m experiments.compare_holdout --data train.json \\
        --a runs/minilm-squad2-pruned-even-frozen --b runs/minilm-squad2-pruned-even-frozen-ffn65 \\
        --out assets/results/training/holdout-even-frozen-vs-ffn65.json

Both models answer the same held-out questions (the articles ``--a`` was calibrated on, which must
be ``--b``'s too), decided at threshold 0 as the pipeline decides. The record keeps each model's F1,
the mean of the per-question differences (b - a) and its paired bootstrap interval: the models are
chosen by F1 on these few hundred questions, and a difference inside the interval is a tie. Its
``views`` say what the difference is made of (answerable against unanswerable questions, best-span F1).
``answer_sentence`` asks the answerable ones again about the sentence that holds the answer alone
(``short_context_copies``), as people who paste a sentence into the demo do, with the same paired
interval: the choosing rule's guard for short contexts (README, **Training**).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from experiments.common import save_probe_record
from variants.answering.qa import with_null_decision
from variants.core.squad import QAExample, paired_bootstrap, question_f1
from variants.training.augment import short_context_copies
from variants.training.evaluation import held_out_questions, predict_spans, views_at_zero


def per_question_f1(examples: list[QAExample], spans: list, threshold: float = 0.0) -> np.ndarray:
    """Each question's F1 in percent, the model's answers decided at ``threshold``."""
    pairs = zip(examples, spans, strict=True)
    return np.array([100 * question_f1(e, with_null_decision(a, threshold).text) for e, a in pairs])


def paired(diffs: np.ndarray, rounds: int, seed: int) -> dict:
    """The mean per-question difference and its paired bootstrap 95% interval, rounded for the record."""
    low, high = paired_bootstrap(diffs, rounds, seed)
    return {"difference": round(float(diffs.mean()), 2), "interval": [round(low, 2), round(high, 2)]}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="the training SQuAD v2 JSON file")
    parser.add_argument("--a", required=True, help="the model folder to compare against (train_config.json beside)")
    parser.add_argument("--b", required=True, help="the model folder compared")
    parser.add_argument("--rounds", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    titles, examples = held_out_questions(args.data, [args.a, args.b])
    torch.set_num_threads(args.threads)
    started = time.time()
    folders = {"a": args.a, "b": args.b}
    spans = {name: predict_spans(folder, examples) for name, folder in folders.items()}
    a, b = (per_question_f1(examples, spans[name]) for name in ("a", "b"))
    diffs = b - a
    answerable = [i for i, e in enumerate(examples) if not e.is_impossible]
    best_spans = {n: per_question_f1([examples[i] for i in answerable], [spans[n][i] for i in answerable], math.inf)
                  for n in ("a", "b")}  # fmt: skip  # no threshold says "no answer": each question's best span
    reading = best_spans["b"] - best_spans["a"]
    # every answerable question again, its context cut to the answer's sentence (one-sentence paragraphs give none)
    sentences = short_context_copies(examples, 1.0, args.seed)
    on_sentence = None
    if sentences:
        f1 = {n: per_question_f1(sentences, predict_spans(folder, sentences)) for n, folder in folders.items()}
        on_sentence = {
            "questions": len(sentences),
            "a_f1": round(float(f1["a"].mean()), 2),
            "b_f1": round(float(f1["b"].mean()), 2),
            **paired(f1["b"] - f1["a"], args.rounds, args.seed),
        }
    record = {
        "kind": "holdout-comparison",
        "what": "F1 at threshold 0 on the held-out training articles, model b against model a, the same questions; "
        "interval: paired bootstrap of the mean per-question difference (b - a), 95%",
        "data": Path(args.data).name,
        "titles": titles,
        "questions": len(examples),
        "unanswerable": sum(e.is_impossible for e in examples),
        "a": {"model": args.a, "f1": round(float(a.mean()), 2)},
        "b": {"model": args.b, "f1": round(float(b.mean()), 2)},
        # what the F1 difference is made of: answerable and unanswerable questions at 0, best F1 over thresholds,
        # and span_f1, the answerable questions' best span whatever the null decision (reading, apart from answering)
        "views": {name: views_at_zero(examples, spans[name]) for name in ("a", "b")},
        **paired(diffs, args.rounds, args.seed),
        "questions_that_differ": int((diffs != 0).sum()),
        # reading alone: the answerable questions' best spans, b - a, the same bootstrap
        "span_f1_difference": {"questions": len(answerable), **paired(reading, args.rounds, args.seed)},
        "answer_sentence": on_sentence,  # the answerable questions about their answer's sentence alone, at 0
        "bootstrap": {"rounds": args.rounds, "seed": args.seed},
    }
    save_probe_record(record, started, args.out)
    print(json.dumps({k: record[k] for k in ("a", "b", "difference", "interval", "answer_sentence")}))
    return record


if __name__ == "__main__":
    main()
