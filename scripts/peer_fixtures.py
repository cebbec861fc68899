"""Regenerate tests/data/pipeline_answers.json: transformers' question-answering pipeline's answers on the shipped
baseline, the reference our decoding is checked against (tests/test_qa.py, tests/test_decisions.py), so that the
main suite needs no transformers 4.

Run it in the peers' environment (``bash scripts/setup.sh peers`` makes it), from the repository root:

    .venv-peers/bin/python -I scripts/peer_fixtures.py

It answers through the bench's own peer worker (variants/benchmarking/peer_worker.py: the same pipeline, options and
answer), and writes down the versions, the settings and the model files' digests it answered with. Run it again
when the shipped baseline, the pins of requirements-peers.txt or the cases change; the tests refuse a fixture whose
digests are not the shipped model's.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "assets" / "models" / "minilm-squad2"
SAMPLE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
OUT = ROOT / "tests" / "data" / "pipeline_answers.json"
DIGESTED = ("model.safetensors", "config.json", "tokenizer.json")  # what decides the answers
SAMPLE_QUESTIONS = 30
THREADS = 1

FILLER = "the city of rome was founded in the year one and it is the capital of italy . "
# Short passages read through 64-token windows with a 16-token stride: one passage spans many windows, and the
# longest answers are cut by the answer-length limit.
WINDOW_CASES = [
    ("what is the capital of france ?", "paris is the capital of france and the largest city ."),
    ("who founded rome ?", "rome was founded by the people of italy in the first year ."),
    ("which river ?", FILLER * 8 + "the longest river in spain is in madrid ."),
    ("what year ?", "it was built in 1889 , named after its people ."),
    ("When was the tower built?", "The Eiffel Tower, in Paris, was built between 1887 and 1889 for the World's Fair."),
    ("When was the Eiffel Tower built?", FILLER * 6 + "The Eiffel Tower was built in 1889 . " + FILLER * 2),
    ("Who wrote the novel?", "The weather in the valley is mild in spring and the river is calm."),  # no answer in it
    ("O\u00f9 est la tour ?", "Ünïcödé 🙂 text — مرحبا بالعالم — the tower is in paris ."),
]


def worker():
    """The bench's peer worker, loaded from its file (it imports nothing of the product)."""
    path = ROOT / "variants" / "benchmarking" / "peer_worker.py"
    spec = importlib.util.spec_from_file_location("peer_worker", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digests(folder: Path) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in DIGESTED}


def sample_questions(n: int) -> list[dict[str, str]]:
    """The first ``n`` questions of the shipped SQuAD v2 sample, in file order."""
    raw = json.loads(SAMPLE.read_text(encoding="utf-8"))
    found = []
    for article in raw["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                found.append({"id": qa["id"], "question": qa["question"], "context": paragraph["context"]})
    return found[:n]


def answer_set(peer, pipe, pairs: list[tuple[str, str]], max_length: int, stride: int, max_answer: int) -> dict:
    kwargs = peer.pipeline_kwargs(max_length, stride, max_answer)
    answers = [peer.answer(pipe, [[q, c]], 1, kwargs)[0] for q, c in pairs]
    return {"settings": {**kwargs, "dtype": "float32", "device": "cpu", "threads": THREADS}, "answers": answers}


def main() -> int:
    peer = worker()
    pipe, loaded = peer.load_pipeline(str(BASELINE), "cpu", THREADS)
    sample = sample_questions(SAMPLE_QUESTIONS)
    out = {
        "made_by": "scripts/peer_fixtures.py (transformers' pipeline through variants/benchmarking/peer_worker.py)",
        "environment": peer.versions() | {"executable": None},  # the path says nothing to another machine
        "model": {"folder": str(BASELINE.relative_to(ROOT)), "sha256": digests(BASELINE), "dtype": loaded["dtype"]},
        "windows": {
            "cases": [{"question": q, "context": c} for q, c in WINDOW_CASES],
            **{
                str(n): answer_set(peer, pipe, WINDOW_CASES, 64, 16, n)
                for n in (3, 15)  # max_answer_len: one limit that cuts answers, one that rarely does
            },
        },
        "sample": {
            "file": str(SAMPLE.relative_to(ROOT)),
            "ids": [q["id"] for q in sample],
            **answer_set(peer, pipe, [(q["question"], q["context"]) for q in sample], 384, 128, 30),
        },
    }
    OUT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(WINDOW_CASES)} x 2 window cases, {len(sample)} sample questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
