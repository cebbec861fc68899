"""Every variant's answers to the first N sample questions, saved on one stack and compared on another: the
check that the move to transformers 5 and the export by torch.onnx changed no answer.

    python experiments/upgrade/answers_snapshot.py --out old.json                # on the old stack
    python experiments/upgrade/answers_snapshot.py --out new.json --compare old.json

The engine is the preset's (each variant built in a fresh cache, so the ONNX graphs are this stack's own), on the
CPU; each variant answers the questions through the one decoding path (``answer_pairs``) with its own settings.
The comparison counts the answers whose text and offsets are equal, and gives the largest score difference.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"


def snapshot(preset: str, count: int) -> dict:
    import transformers  # noqa: PLC0415

    from variants.answering.qa import answer_pairs  # noqa: PLC0415
    from variants.core.squad import load_squad_json  # noqa: PLC0415
    from variants.serving.engine import load_engine  # noqa: PLC0415

    examples = load_squad_json(SAMPLE)[:count]
    pairs = [(e.question, e.context) for e in examples]
    answers: dict[str, list[dict]] = {}
    with (
        tempfile.TemporaryDirectory() as cache,
        load_engine(preset, "cpu", fallback=False, cache_dir=Path(cache)) as engine,
    ):
        for name, loaded in engine.variants.items():
            if not loaded.ok:
                answers[name] = [{"error": loaded.error}]
                continue
            found = answer_pairs(loaded.model, loaded.tokenizer, pairs, engine.settings_for(loaded))
            answers[name] = [
                {"id": e.id, "text": a.text, "start": a.start, "end": a.end, "score": a.score}
                for e, a in zip(examples, found, strict=True)
            ]
    return {"transformers": transformers.__version__, "preset": preset, "questions": count, "answers": answers}


def compare(new: dict, old: dict) -> dict:
    report = {}
    for name, old_answers in old["answers"].items():
        new_answers = new["answers"].get(name, [])
        same = sum(
            (a.get("text"), a.get("start"), a.get("end")) == (b.get("text"), b.get("start"), b.get("end"))
            for a, b in zip(old_answers, new_answers, strict=False)
        )
        diff = max(
            (abs(a["score"] - b["score"]) for a, b in zip(old_answers, new_answers, strict=False) if "score" in a),
            default=None,
        )
        report[name] = {"identical": same, "of": len(old_answers), "max_score_diff": diff}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="embedded")
    parser.add_argument("--questions", type=int, default=80)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--compare", type=Path, help="a snapshot from the other stack")
    args = parser.parse_args()
    record = snapshot(args.preset, args.questions)
    if args.compare:
        old = json.loads(args.compare.read_text(encoding="utf-8"))
        record["compared_with"] = {"file": args.compare.name, "transformers": old["transformers"]}
        record["comparison"] = compare(record, old)
        print(json.dumps(record["comparison"], indent=1))
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
