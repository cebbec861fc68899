"""The export (``torch.onnx.export``, ours since transformers 5) on every family the chain accepts: BERT,
DistilBERT, RoBERTa, ELECTRA and XLM-RoBERTa, each a tiny random model built here from its config class.

For each: the exported file passes the ONNX checker's full check; ONNX Runtime answers as PyTorch does (logits
within a tolerance, the same spans through the one decoding path); ONNX Runtime's optimizer (the chain's own
call) fuses what it fuses for that family, in counts docs/architecture.md lists; the manifest names the opset
and the exporter. Then the shipped pruned MiniLM's optimized and INT8 graphs, counted against the export by
optimum-onnx that they replaced (experiments/records/upgrade-fused-before.json).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from tiny_shapes import _byte_level_bpe, _wordpiece
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertTokenizerFast,
    DistilBertConfig,
    DistilBertForQuestionAnswering,
    DistilBertTokenizerFast,
    ElectraConfig,
    ElectraForQuestionAnswering,
    ElectraTokenizerFast,
    RobertaForQuestionAnswering,
    XLMRobertaConfig,
    XLMRobertaForQuestionAnswering,
)
from transformers import RobertaConfig as _RobertaConfig

from variants.answering.qa import DecodeSettings, answer_pairs
from variants.answering.runtime import OrtQAModel, TorchQAModel
from variants.building import export
from variants.core.spec import EMBEDDED_MODELS

QUESTIONS = ["what is the capital of france?", "who built rome?", "when was the city founded?"]
CONTEXTS = [
    "paris is the capital of france and its largest city, with a population of two million people.",
    "rome was built by people from the river country.",
    "the city was founded in 1871 by the people of the river country and named after it.",
]
SIZE = {"num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64, "initializer_range": 0.2}
ROBERTA_LIKE = {"max_position_embeddings": 130, "type_vocab_size": 1, "pad_token_id": 1, "hidden_size": 32}


def _bert(folder: Path):
    tokenizer = _wordpiece(folder, BertTokenizerFast)
    return BertForQuestionAnswering(BertConfig(vocab_size=len(tokenizer), hidden_size=32, **SIZE)), tokenizer


def _distilbert(folder: Path):
    tokenizer = _wordpiece(folder, DistilBertTokenizerFast)
    config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=4, hidden_dim=64)
    return DistilBertForQuestionAnswering(config), tokenizer


def _roberta(folder: Path):
    tokenizer = _byte_level_bpe(folder)  # position ids start after the padding index (1)
    return RobertaForQuestionAnswering(_RobertaConfig(vocab_size=len(tokenizer), **ROBERTA_LIKE, **SIZE)), tokenizer


def _electra(folder: Path):  # embeddings narrower than the encoder, projected up (ELECTRA's own part)
    tokenizer = _wordpiece(folder, ElectraTokenizerFast)
    config = ElectraConfig(vocab_size=len(tokenizer), embedding_size=16, hidden_size=32, **SIZE)
    return ElectraForQuestionAnswering(config), tokenizer


def _xlm_roberta(folder: Path):
    # XLM-R's own tokenizer is a SentencePiece model; the byte-level BPE one has the same special ids (<pad> 1),
    # which is all the export and the position ids depend on.
    tokenizer = _byte_level_bpe(folder)
    config = XLMRobertaConfig(vocab_size=len(tokenizer), **ROBERTA_LIKE, **SIZE)
    return XLMRobertaForQuestionAnswering(config), tokenizer


FAMILIES = {
    "bert": _bert,
    "distilbert": _distilbert,
    "roberta": _roberta,
    "electra": _electra,
    "xlm-roberta": _xlm_roberta,
}
# What ONNX Runtime's optimizer fuses in each family's exported graph (model_type "bert" for all five, as
# optimum maps them), CPU options (no SkipLayerNormalization), 2 layers. RoBERTa and XLM-R keep their embeddings
# unfused: ORT's EmbedLayerNormalization does not take position ids that start after the padding index.
FUSED = {
    "bert": {"EmbedLayerNormalization": 1, "Attention": 2, "BiasGelu": 2},
    "distilbert": {"EmbedLayerNormalization": 1, "Attention": 2, "BiasGelu": 2},
    "roberta": {"EmbedLayerNormalization": 0, "Attention": 2, "BiasGelu": 2},
    "electra": {"EmbedLayerNormalization": 1, "Attention": 2, "BiasGelu": 2},
    "xlm-roberta": {"EmbedLayerNormalization": 0, "Attention": 2, "BiasGelu": 2},
}


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def family(request, tmp_path_factory: pytest.TempPathFactory):
    """(name, torch model, tokenizer, exported graph, optimized graph) of one family's tiny random model."""
    folder = tmp_path_factory.mktemp(request.param)
    torch.manual_seed(0)
    model, tokenizer = FAMILIES[request.param](folder)
    model.eval()
    onnx_path = export.export_onnx(model, tokenizer, folder / "onnx")
    optimized = export.optimize_onnx(onnx_path, folder / "opt", for_gpu=False)
    return request.param, model, tokenizer, onnx_path, optimized


def test_the_exported_file_passes_the_full_onnx_check(family) -> None:
    *_, onnx_path, _ = family
    onnx.checker.check_model(str(onnx_path), full_check=True)  # a path: external data is read beside it
    manifest = json.loads((onnx_path.parent / export.EXPORT_MANIFEST).read_text())
    assert manifest["opset"] == export.DEFAULT_OPSET
    assert manifest["exporter"] == f"torch.onnx {torch.__version__}"
    opsets = {o.domain: o.version for o in onnx.load(str(onnx_path), load_external_data=False).opset_import}
    assert opsets[""] == export.DEFAULT_OPSET


def spans(answer) -> tuple:
    """An answer's span and, where "no answer" won (random weights often say so), the best span it beat."""
    return answer.text, answer.start, answer.end, answer.guess, answer.guess_start, answer.guess_end


def test_onnx_runtime_answers_as_pytorch_does(family) -> None:
    """Logits within 1e-4 on the real tokens of a right-padded batch, before and after the fusions; the same
    spans, offsets and no-answer decisions through the one decoding path."""
    name, model, tokenizer, onnx_path, optimized = family
    pairs = list(zip(QUESTIONS, CONTEXTS, strict=True))
    feed = dict(tokenizer(QUESTIONS, CONTEXTS, padding=True, return_tensors="np"))
    reference = TorchQAModel(model)
    expected = reference.run({k: v for k, v in feed.items() if k in reference.input_names})
    real = feed["attention_mask"].astype(bool)
    settings = DecodeSettings()
    wanted = [spans(a) for a in answer_pairs(reference, tokenizer, pairs, settings)]
    assert any(text for answer in wanted for text in answer[::3]), "no span to compare"
    for path in (onnx_path, optimized):
        graph = OrtQAModel(path)
        got = graph.run({k: v for k, v in feed.items() if k in graph.input_names})
        assert max(float(np.abs((a - b)[real]).max()) for a, b in zip(expected, got, strict=True)) < 1e-4, name
        assert [spans(a) for a in answer_pairs(graph, tokenizer, pairs, settings)] == wanted


def test_onnx_runtime_fuses_each_family(family) -> None:
    name, *_, optimized = family
    fused = json.loads((optimized.parent / "optimization.json").read_text())["fused_operators"]
    assert {op: fused.get(op, 0) for op in FUSED[name]} == FUSED[name]
    assert json.loads((optimized.parent / "optimization.json").read_text())["attention_heads"] == [4, 4]


def test_a_large_models_export_builds_the_same_graph_in_each_family(family, tmp_path: Path) -> None:
    """The export a large model's build makes (unfolded, its weights written from the model into a file beside the
    graph, the head counts written after ONNX Runtime's basic pass: variants.building.outside) fuses as the one-file
    export does, and answers the same."""
    from variants.building import outside  # noqa: PLC0415

    name, model, tokenizer, onnx_path, optimized = family
    apart = export.export_onnx(model, tokenizer, tmp_path / "onnx", weights_outside=True)
    fused = export.optimize_onnx(apart, tmp_path / "opt", for_gpu=False)
    assert outside.has_outside_weights(apart) and outside.has_outside_weights(fused)
    assert op_counts(fused) == op_counts(optimized), name
    feed = export.dummy_inputs(onnx_path)
    for mine, theirs in ((apart, onnx_path), (fused, optimized)):
        assert export.max_abs_diff(export.run_cpu(theirs, feed), export.run_cpu(mine, feed)) < 1e-5, name


def op_counts(path: Path) -> Counter:
    return Counter(node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node)


SHIPPED_PRUNED = EMBEDDED_MODELS / "minilm-squad2-pruned"
# experiments/records/upgrade-fused-before.json: the same chain on the export by optimum-onnx 0.1.0 (transformers
# 4.57.6), ONNX Runtime 1.31.1. The INT8 graph keeps the QA head FP32 (the one MatMul left).
OPTIMIZED_BEFORE = {"nodes": 75, "EmbedLayerNormalization": 1, "Attention": 6, "BiasGelu": 6, "MatMul": 19}
INT8_BEFORE = {"nodes": 153, "QAttention": 6, "MatMulInteger": 18, "DynamicQuantizeLinear": 24, "MatMul": 1}


@pytest.mark.slow
@pytest.mark.skipif(not (SHIPPED_PRUNED / "config.json").is_file(), reason="no shipped pruned model")
@pytest.mark.parametrize("weights_outside", [False, True], ids=["one-file", "weights-outside"])
def test_the_shipped_pruned_model_fuses_as_the_optimum_export_did(tmp_path: Path, weights_outside: bool) -> None:
    """The same fusions whether the graph holds its weights or a large model's build keeps them in a file beside it
    (:mod:`variants.building.outside`), and then the same logits."""
    from transformers import AutoTokenizer  # noqa: PLC0415

    from variants.building import outside  # noqa: PLC0415
    from variants.building.storage import load_qa_model  # noqa: PLC0415

    model = load_qa_model(SHIPPED_PRUNED, compacted=True)
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_PRUNED)
    onnx_path = export.export_onnx(model, tokenizer, tmp_path / "onnx", weights_outside=weights_outside)
    optimized = export.optimize_onnx(onnx_path, tmp_path / "opt", for_gpu=False)
    int8 = export.apply_step("int8", optimized, tmp_path / "int8", for_gpu=False)
    assert [outside.has_outside_weights(p) for p in (onnx_path, optimized)] == [weights_outside] * 2
    if weights_outside:  # the one-file chain of the same model, built in memory: the same logits
        feed = export.dummy_inputs(onnx_path)
        whole = export.export_onnx(model, tokenizer, tmp_path / "whole")
        for path, step in ((onnx_path, whole), (optimized, export.optimize_onnx(whole, tmp_path / "w-opt", False))):
            assert export.max_abs_diff(export.run_cpu(step, feed), export.run_cpu(path, feed)) < 1e-5
    ops, quantized = op_counts(optimized), op_counts(int8)
    assert {k: sum(ops.values()) if k == "nodes" else ops[k] for k in OPTIMIZED_BEFORE} == OPTIMIZED_BEFORE
    assert {k: sum(quantized.values()) if k == "nodes" else quantized[k] for k in INT8_BEFORE} == INT8_BEFORE
    assert ops["SkipLayerNormalization"] == 0 and ops["Gelu"] == 0  # CPU options; GELU fused with its bias
    assert export.attention_heads(optimized) == [9, 5, 9, 9, 9, 9]  # each compacted layer its own count
