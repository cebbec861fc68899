"""The chain rule: a baseline with a pruned partner gets the published chain, a baseline alone its no-training one."""

from __future__ import annotations

import pytest

from variants.answering.qa import DecodeSettings
from variants.core import spec as specs
from variants.serving.engine import load_engine

SETTINGS = DecodeSettings(max_length=64, stride=16)
CONTEXT = "paris is the capital of france and the largest city of the country ."
QUESTION = "what is the capital of france ?"
MINILM = str(specs.EMBEDDED_MODELS / "minilm-squad2")


def names(chain: list[specs.VariantSpec]) -> list[str]:
    return [s.name for s in chain]


def test_a_baseline_alone_gets_its_no_training_chain():
    cpu = specs.preset("bert-large-replica", "cpu", {"baseline": MINILM})
    assert names(cpu) == ["baseline", "baseline-onnx", "baseline-onnx-opt", "baseline-onnx-opt-int8"]
    assert [s.label for s in cpu] == ["Baseline", "Baseline + ONNX", "Baseline + ONNX, optimized",
                                      "Baseline + ONNX + INT8"]  # fmt: skip
    assert {s.source for s in cpu} == {MINILM}, "the preset's pruned replica is no partner of a MiniLM"
    assert [s.steps for s in cpu] == [(), ("onnx",), ("onnx", "optimize"), ("onnx", "optimize", "int8")]
    assert [s.name for s in cpu if s.headline] == ["baseline", "baseline-onnx-opt-int8"]
    assert not any(s.latency_only for s in cpu), "a trained baseline on the replica preset is not random weights"
    gpu = specs.preset("bert-large-replica", "cuda", {"baseline": MINILM})
    assert gpu[-1].name == "baseline-onnx-opt-fp16" and gpu[-1].label == "Baseline + ONNX + FP16"
    assert all(s.description for s in cpu + gpu)


def test_a_pruned_partner_gets_the_whole_chain_and_none_drops_it():
    full = specs.preset("embedded", "cpu")
    assert names(full) == ["baseline", "pruned-dense", "pruned", "pruned-onnx", "pruned-onnx-opt",
                           "pruned-onnx-opt-int8"]  # fmt: skip
    assert [s.label for s in full][-3:] == ["Pruned + ONNX", "Pruned + ONNX, optimized", "Pruned + ONNX + INT8"]
    both = specs.preset("bert-large-replica", "cpu", {"baseline": MINILM, "pruned": "/p"})
    assert [s.source for s in both][:2] == [MINILM, "/p"] and len(both) == 6
    alone = specs.preset("bert-large-replica", "cpu", {"pruned": "none"})
    assert names(alone)[-1] == "baseline-onnx-opt-int8" and {s.source for s in alone} == {"replica:bert-large"}
    assert all(s.latency_only for s in alone), "the replica's baseline alone is still random weights"
    assert specs.family_for("embedded", {"pruned": " None "}).pruned is None
    assert specs.family_for("embedded", {"baseline": "", "pruned": ""}) == specs.FAMILIES["embedded"]


def test_short_labels_are_the_chains_own():
    for device in ("cpu", "cuda"):
        for overrides in ({}, {"pruned": "none"}):
            for spec in specs.preset("embedded", device, overrides):
                assert specs.short_label(spec.name) == spec.label
    assert specs.short_label("baseline-onnx-opt-int8") == "Baseline + ONNX + INT8"


def test_the_no_training_chain_builds_from_an_unpruned_source(tiny_qa_dir, tmp_path):
    engine = load_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir), "pruned": "none"},
                         cache_dir=tmp_path, settings=SETTINGS)  # fmt: skip
    results = {r.variant: r for r in engine.ask(QUESTION, CONTEXT)}
    assert list(results) == ["baseline", "baseline-onnx", "baseline-onnx-opt", "baseline-onnx-opt-int8"]
    for r in results.values():
        assert r.error is None, r
    assert results["baseline-onnx-opt-int8"].dtype == "int8"
    # ONNX and graph optimization change the runtime, not the answer; every graph is the baseline's own size
    # (the export leaves out the unused pooler; INT8 adds a scale and a zero point per quantized weight).
    for name in ("baseline-onnx", "baseline-onnx-opt"):
        assert results[name].answer == results["baseline"].answer
    base = results["baseline"].parameters
    assert all(0.95 * base < r.parameters < 1.05 * base for r in results.values())


@pytest.mark.parametrize("key", ["baseline", "pruned"])
def test_an_unknown_override_key_or_preset_is_refused(key):
    with pytest.raises(ValueError, match="overrides take"):
        specs.preset("embedded", "cpu", {key: "x", "teacher": "y"})
    with pytest.raises(ValueError, match="unknown preset"):
        specs.preset("nope", "cpu", {key: "x"})
