"""How far each pruned model's answers are from its teacher's on the held-out training articles: a JSON record.

    python -m experiments.teacher_gap --data train.json --teacher assets/models/minilm-squad2 \\
        --models assets/models/minilm-squad2-pruned runs/minilm-squad2-pruned-h40-f75 \\
        --out assets/results/training/teacher-gap.json

F1 at threshold 0 on two held-out articles is a coarse choosing measure: each question scores 0 or
100 on its null decision, and the paired intervals are about ±2 F1 wide, wider than the differences
between recipes. The student is trained to match its teacher's start and end distributions, so this
record measures that on questions none of them trained on: per question, the KL divergence from the
teacher's start and end distributions to the student's (temperature 1, the mean of the two, averaged
over the question's windows), and how often the student's answer at threshold 0 is the teacher's.
Each model after the first is compared with the first, question by question (paired bootstrap).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from transformers import AutoTokenizer

from experiments.common import save_probe_record
from variants.answering.qa import with_null_decision
from variants.building.storage import load_qa_model
from variants.core.squad import QAExample, paired_bootstrap
from variants.training.evaluation import held_out_questions, predict_spans, training_record
from variants.training.features import build_train_features, collate
from variants.training.loop import masked_logits


def question_windows(tokenizer, examples: list[QAExample], max_length: int = 384, stride: int = 128) -> list[dict]:
    """Each question's windows as one padded batch, cut as training and decoding cut them."""
    batches = []
    for ex in examples:
        features = build_train_features(tokenizer, [ex], max_length, stride)
        batches.append(collate(features, list(range(len(features)))))
    return batches


@torch.no_grad()
def log_probs(model, batches: list[dict]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per question, the log-softmax of the start and end logits of its windows (padding masked)."""
    result = []
    for batch in batches:
        out = model(**{k: v for k, v in batch.items() if "positions" not in k})
        start, end = masked_logits(out, batch)
        result.append((start.log_softmax(-1), end.log_softmax(-1)))
    return result


def kl_per_question(teacher: list, student: list) -> np.ndarray:
    """KL(teacher || student) of the start and end distributions, their mean, averaged over each question's windows."""

    def kl(t: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return (t.exp() * (t - s)).sum(-1)

    pairs = zip(teacher, student, strict=True)
    return np.array([float(((kl(ts, ss) + kl(te, se)) / 2).mean()) for (ts, te), (ss, se) in pairs])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="the training SQuAD v2 JSON file")
    parser.add_argument("--teacher", required=True, help="the fine-tuned model the students were distilled from")
    parser.add_argument("--models", nargs="+", required=True, help="pruned model folders; the first is the reference")
    parser.add_argument("--rounds", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    titles, examples = held_out_questions(args.data, args.models)
    torch.set_num_threads(args.threads)
    started = time.time()
    batches = question_windows(AutoTokenizer.from_pretrained(args.teacher), examples)
    teacher = log_probs(load_qa_model(args.teacher), batches)
    teacher_answers = [with_null_decision(a, 0.0).text for a in predict_spans(args.teacher, examples)]
    kls, agree = {}, {}
    for folder in args.models:
        model = load_qa_model(folder, compacted="heads_removed" in training_record(folder))
        kls[folder] = kl_per_question(teacher, log_probs(model, batches))
        answers = [with_null_decision(a, 0.0).text for a in predict_spans(folder, examples)]
        agree[folder] = np.array([100.0 * (a == t) for a, t in zip(answers, teacher_answers, strict=True)])
    reference = args.models[0]
    models = {}
    for folder in args.models:
        models[folder] = {
            "kl": round(float(kls[folder].mean()), 4),
            "same_answer_pct": round(float(agree[folder].mean()), 2),
        }
        if folder != reference:
            for key, values in (("kl", kls), ("same_answer_pct", agree)):
                diffs = values[folder] - values[reference]
                low, high = paired_bootstrap(diffs, args.rounds)
                models[folder][f"{key}_vs_first"] = {"difference": round(float(diffs.mean()), 4),
                                                     "interval": [round(low, 4), round(high, 4)]}  # fmt: skip
    record = {
        "kind": "teacher-gap",
        "what": "distance of each model from its teacher on the held-out training articles: per question, "
        "KL(teacher || model) of the start and end distributions (temperature 1, mean of the two, averaged over "
        "the question's windows; lower is closer) and whether the answer at threshold 0 is the teacher's; "
        "differences against the first model with a paired bootstrap 95% interval",
        "data": Path(args.data).name,
        "titles": titles,
        "questions": len(examples),
        "teacher": args.teacher,
        "models": models,
        "bootstrap": {"rounds": args.rounds, "seed": 0},
    }
    save_probe_record(record, started, args.out)
    print(json.dumps(models, indent=1))
    return record


if __name__ == "__main__":
    main()
