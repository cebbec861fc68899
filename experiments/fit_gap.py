"""How well each model reads the articles it trained on against the held-out ones: a JSON record.

    python -m experiments.fit_gap --data train.json --dev dev.json \\
        --models assets/models/minilm-squad2 assets/models/minilm-squad2-pruned \\
        --out assets/results/training/fit-gap.json

For every model: SQuAD v2 scores at threshold 0 on a seeded sample of its training questions (the
articles it was calibrated on left out) and of ``--dev``, and "span F1", the F1 of its best span on the
answerable questions whatever its null decision (what it reads, apart from when it answers). A teacher
far better on its training articles than on held-out ones has memorized them, and its soft labels on
them say little more than the gold labels do.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

from experiments.common import save_probe_record
from variants.core.squad import QAExample, load_squad
from variants.training.evaluation import predict_spans, training_record, views_at_zero


def sample(examples: list[QAExample], n: int, seed: int) -> list[QAExample]:
    """A seeded sample of ``n`` questions (all of them when there are fewer)."""
    return random.Random(seed).sample(examples, min(n, len(examples)))


def scores_on(folder: str, examples: list[QAExample]) -> dict:
    """Scores at threshold 0 and the answerable questions' best-span F1 of one model."""
    return views_at_zero(examples, predict_spans(folder, examples))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="the training SQuAD v2 JSON file")
    parser.add_argument("--dev", required=True, help="the evaluation SQuAD v2 JSON file")
    parser.add_argument("--models", nargs="+", required=True, help="model folders (train_config.json beside)")
    parser.add_argument("--questions", type=int, default=1200, help="questions sampled from each file")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    records = [training_record(folder) for folder in args.models]
    held = sorted({title for r in records for title in r.get("holdout_titles") or []})  # every model's calibration
    trained = [e for e in load_squad(args.data, split="train") if e.title not in held]
    sets = {"training articles": sample(trained, args.questions, args.seed),
            "dev": sample(load_squad(args.dev), args.questions, args.seed)}  # fmt: skip
    started = time.time()
    models = {}
    for folder in args.models:
        models[folder] = {name: scores_on(folder, examples) for name, examples in sets.items()}
        print(folder, json.dumps(models[folder]), flush=True)
    record = {
        "kind": "fit-gap",
        "what": "SQuAD v2 at threshold 0 on questions of the training articles against held-out ones; span_f1: "
        "the best span's F1 on the answerable questions, whatever the null decision (the two samples mix answerable "
        "and unanswerable questions differently, so span_f1 is the fair comparison between them)",
        "data": {
            "training articles": Path(args.data).name,
            "dev": Path(args.dev).name,
            "left out of the training sample": held,
        },
        "questions": {name: len(examples) for name, examples in sets.items()},
        "seed": args.seed,
        "models": models,
    }
    save_probe_record(record, started, args.out)
    print(f"wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
