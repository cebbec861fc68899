"""Small SQuAD v2 files in the tiny models' vocabulary, for tests here and in experiments/tests/."""

from __future__ import annotations

import json
from pathlib import Path

CONTEXTS = [
    "paris is the capital of france and its largest city .",
    "berlin is the capital of germany . it was founded in the year 1237 .",
    "the longest river in italy is the po . rome is the capital of italy .",
]
QUESTIONS = [
    ("what is the capital of france ?", 0, "paris"),
    ("what is the largest city of france ?", 0, "paris"),
    ("when was berlin founded ?", 1, "1237"),
    ("what is the capital of spain ?", 1, None),
    ("what is the longest river in italy ?", 2, "po"),
    ("who built the city of madrid ?", 2, None),
]


CONTEXT = "the capital of france is paris and the largest city of italy is rome ."


def write_squad(path, n: int = 8, articles: int = 1, context: str = CONTEXT):
    """A small SQuAD v2 file: answerable questions about paris/rome and unanswerable ones, in
    ``articles`` articles (titles t0, t1, ...) that each hold all ``n`` questions."""
    paragraphs = [[{"context": context, "qas": qas(n, a, context)}] for a in range(articles)]
    data = {"version": "v2.0", "data": [{"title": f"t{a}", "paragraphs": p} for a, p in enumerate(paragraphs)]}
    path.write_text(json.dumps(data))
    return path


def qas(n: int, article: int, context: str = CONTEXT) -> list[dict]:
    qas = []
    for i in range(n):
        if i % 4 == 3:
            qas.append({"id": f"a{article}q{i}", "question": "who built it ?", "answers": [], "is_impossible": True})
        else:
            word = "paris" if i % 2 else "rome"
            qas.append({"id": f"a{article}q{i}", "question": f"what is {word} ?", "is_impossible": False,
                        "answers": [{"text": word, "answer_start": context.index(word)}]})  # fmt: skip
    return qas


def write_tiny_squad(folder: Path) -> Path:
    """A SQuAD v2 file of six questions (two unanswerable) on short contexts in the fixture vocabulary."""
    paragraphs = [{"context": c, "qas": []} for c in CONTEXTS]
    for i, (question, ctx, answer) in enumerate(QUESTIONS):
        answers = [] if answer is None else [{"text": answer, "answer_start": CONTEXTS[ctx].index(answer)}]
        paragraphs[ctx]["qas"].append(
            {"id": f"q{i}", "question": question, "answers": answers, "is_impossible": answer is None}
        )
    path = folder / "tiny_squad.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "T", "paragraphs": paragraphs}]}))
    return path
