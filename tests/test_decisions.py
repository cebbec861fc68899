"""When to say "no answer", on the shipped models: the pipeline rule by default, calibrated one choice away."""

from __future__ import annotations

import pytest

from variants.__main__ import main
from variants.building.storage import load_qa_model
from variants.core import spec as specs
from variants.core.squad import load_squad_json
from variants.serving.engine import load_engine

SHIPPED = specs.EMBEDDED_MODELS / "minilm-squad2"
SHIPPED_PRUNED = specs.EMBEDDED_MODELS / "minilm-squad2-pruned"
SAMPLE = specs.ASSETS / "data" / "squad_v2_dev_sample.json"
ULAN_BATOR = (
    "Ulan Bator is the capital of Mongolia. The city lies on the Tuul River, in the north of the country, "
    "and was founded in 1639 as a movable Buddhist monastery."
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (SHIPPED / "config.json").is_file() or not (SHIPPED_PRUNED / "config.json").is_file(),
        reason="the embedded demo models are not in assets/models",
    ),
]


def test_cli_answers_1639_from_every_embedded_variant(capsys):
    argv = ["ask", "--preset", "embedded", "--device", "cpu", "--repeats", "1"]
    assert main([*argv, "--context", ULAN_BATOR, "--question", "When was the city founded?"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(specs.preset("embedded", "cpu"))
    assert all("'1639' (confidence" in line for line in lines), lines
    # At each model's calibrated threshold they say "no answer", and the text still shows the best guess.
    assert main([*argv, "--null-threshold", "calibrated", "--context", ULAN_BATOR, "--question", "When?"]) == 0
    for line in capsys.readouterr().out.splitlines():
        assert "no answer (best guess" in line and "confidence" in line, line


@pytest.mark.skip(reason="needs the peers environment (issue-peers)")  # transformers 5: no QA pipeline
def test_default_decisions_are_the_pipelines_and_other_thresholds_change_them():
    from transformers import pipeline  # noqa: PLC0415

    examples = load_squad_json(SAMPLE)[:30]
    pairs = [(e.question, e.context) for e in examples]
    engine = load_engine("embedded", "cpu", names=["baseline", "pruned-dense"], fallback=False)
    for name, folder in (("baseline", SHIPPED), ("pruned-dense", SHIPPED_PRUNED)):
        model = load_qa_model(folder)  # the pruned model is stored compacted, embeddings in the baseline's folder
        pipe = pipeline("question-answering", model=model, tokenizer=str(folder), device="cpu")
        kwargs = {"handle_impossible_answer": True, "max_answer_len": engine.settings.max_answer_length}
        theirs = [pipe(question=q, context=c, **kwargs)["answer"] for q, c in pairs]
        ours = [engine.answer_one(name, q, c).answer for q, c in pairs]
        assert ours == theirs
        calibrated = [engine.answer_one(name, q, c, null_threshold="calibrated").answer for q, c in pairs]
        lenient = [engine.answer_one(name, q, c, null_threshold=5.0).answer for q, c in pairs]
        assert sum(not a for a in calibrated) > sum(not a for a in ours) > sum(not a for a in lenient)
