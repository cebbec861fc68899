"""Compaction of dense-with-zeros checkpoints, and the pruning helpers that make them."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from conftest import PRUNED_HEADS, PRUNED_NEURONS, zero_out
from variants.building import prune


def logits(model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    return out.start_logits, out.end_logits


@pytest.fixture
def ids() -> torch.Tensor:
    return torch.randint(5, 60, (3, 40), generator=torch.Generator().manual_seed(0))


def test_compaction_removes_zeroed_structure_and_keeps_outputs(tiny_pruned_dir, ids):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_pruned_dir).eval()
    before = logits(model, ids)
    report = prune.compact(model)
    after = logits(model, ids)

    assert report.heads_removed == PRUNED_HEADS
    layers = prune.encoder_layers(model)
    for idx, dead in PRUNED_NEURONS.items():
        assert layers[idx].intermediate.dense.out_features == 64 - len(dead)
        assert layers[idx].output.dense.in_features == 64 - len(dead)
    assert [prune.head_count(layer) for layer in layers] == [2, 3]  # uneven head counts
    assert report.params_after < report.params_before
    for a, b in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_compaction_of_an_unpruned_model_changes_nothing(tiny_qa_dir, ids):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    report = prune.compact(model)
    assert report.num_heads_removed == 0
    assert report.params_after == report.params_before


def test_constant_contributions_are_folded_into_the_bias(tiny_qa_dir, ids):
    """A zero weight row with a non-zero bias still adds a constant: compaction must keep it."""
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    layer = prune.encoder_layers(model)[0]
    size = layer.attention.self.attention_head_size
    with torch.no_grad():
        layer.attention.self.value.weight[:size] = 0  # head 0: value rows zero, bias kept
        layer.intermediate.dense.weight[:10] = 0  # neurons 0-9: rows zero, bias kept
        layer.intermediate.dense.bias[:10] = 0.5
    before = logits(model, ids)
    report = prune.compact(model)
    after = logits(model, ids)
    assert report.heads_removed == {0: [0]}
    assert report.ffn_kept[0] == 54
    for a, b in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_a_layer_with_every_head_zeroed_loses_them_all(tiny_qa_dir, ids):
    """Its attention output is then the output projection's bias (through the residual LayerNorm)."""
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    with torch.no_grad():
        zero_out(model, {1: [0, 1, 2, 3]}, {1: list(range(64))})
        prune.encoder_layers(model)[1].attention.self.value.bias.fill_(0.3)  # a constant to fold in
    before = logits(model, ids)
    report = prune.compact(model)
    layer = prune.encoder_layers(model)[1]
    assert report.heads_removed[1] == [0, 1, 2, 3]
    assert isinstance(layer.attention.self, prune.NoHeads)
    assert layer.attention.output.dense.in_features == 0
    assert layer.intermediate.dense.out_features == 1
    for a, b in zip(before, logits(model, ids), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_a_compacted_model_with_a_headless_layer_exports_to_onnx(tiny_qa_dir, tmp_path):
    """Uneven heads (3, 0) and FFN compaction: the ONNX graph, and its ORT-optimized form, give the same logits."""
    from variants.building import export  # noqa: PLC0415

    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    with torch.no_grad():
        zero_out(model, {0: [2], 1: [0, 1, 2, 3]}, {0: list(range(0, 64, 3)), 1: list(range(10, 64))})
    prune.compact(model)
    assert [prune.head_count(layer) for layer in prune.encoder_layers(model)] == [3, 0]
    exported = export.export_onnx(model, AutoTokenizer.from_pretrained(tiny_qa_dir), tmp_path / "export")
    optimized = export.optimize_onnx(exported, tmp_path / "optimize", for_gpu=False)
    feed = export.dummy_inputs(exported)
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feed.items()})
    expected = [out.start_logits.numpy(), out.end_logits.numpy()]
    assert export.max_abs_diff(expected, export.run_cpu(exported, feed)) < 1e-5
    assert export.max_abs_diff(expected, export.run_cpu(optimized, feed)) < 1e-4


def test_pruned_model_expands_to_dense_and_compacts_back(tiny_qa_dir, ids):
    dense = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    small = copy.deepcopy(dense)
    keep = {0: torch.arange(0, 64, 2), 1: torch.arange(20, 64)}
    for idx, k in keep.items():
        prune.prune_ffn(prune.encoder_layers(small)[idx], k)
    prune.prune_heads(small, {0: [1, 2], 1: [0, 1, 2, 3]})  # layer 1 loses every head
    expected = logits(small, ids)

    stored = prune.expand_to_dense(small, dense, keep)
    assert not getattr(stored.config, "pruned_heads", None)
    assert prune.count_parameters(stored) == prune.count_parameters(dense)
    for a, b in zip(expected, logits(stored, ids), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    report = prune.compact(stored)
    assert report.heads_removed == {0: [1, 2], 1: [0, 1, 2, 3]}
    assert prune.count_parameters(stored) == prune.count_parameters(small)


def test_prune_heads_takes_current_indices_repeatedly(tiny_qa_dir):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)
    prune.prune_heads(model, {0: [0]})
    prune.prune_heads(model, {0: [0]})  # now the original head 1
    layer = prune.encoder_layers(model)[0]
    assert prune.removed_heads(layer) == {0, 1}
    assert prune.head_count(layer) == 2
    assert layer.attention.self.query.out_features == 2 * layer.attention.self.attention_head_size


def test_importance_scores_and_selection(tiny_qa_dir):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)  # any attention implementation
    gen = torch.Generator().manual_seed(0)
    batches = [
        {
            "input_ids": torch.randint(5, 60, (4, 24), generator=gen),
            "attention_mask": torch.ones(4, 24, dtype=torch.long),
            "start_positions": torch.randint(0, 24, (4,), generator=gen),
            "end_positions": torch.randint(0, 24, (4,), generator=gen),
        }
        for _ in range(2)
    ]
    with torch.no_grad():
        zero_out(model, {1: [2]}, {})  # a head that contributes nothing scores zero
    imp = prune.score_importance(model, batches)
    assert imp.heads.shape == (2, 4)
    assert imp.heads[1, 2] == 0 and torch.all(imp.heads[0] > 0)
    assert [len(n) for n in imp.neurons] == [64, 64]
    assert torch.all(imp.heads >= 0)

    heads = prune.select_heads(imp.heads, share=0.5)
    assert sum(len(v) for v in heads.values()) == 4
    scores = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.01, 0.02, 0.03, 0.9]])
    assert prune.select_heads(scores, share=0.75) == {0: [0, 1, 2], 1: [0, 1, 2]}  # one head kept per layer

    neurons = prune.select_neurons(imp.neurons, share=0.5, min_per_layer=8)
    assert sum(len(k) for k in neurons.values()) == 64
    assert all(len(k) >= 8 for k in neurons.values())


def test_non_bert_models_get_a_clear_error():
    with pytest.raises(TypeError, match="not a BERT-family encoder"):
        prune.encoder_layers(torch.nn.Linear(2, 2))


def test_head_scores_equal_the_head_mask_gradient_where_transformers_still_has_it(tiny_qa_dir):
    """The gate on each head's context has the gradient transformers 4.x's head mask had (it scaled the
    attention probabilities, so the context too): the same scores as the old code, without it."""
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, attn_implementation="eager").eval()
    if "head_mask" not in inspect.signature(model.forward).parameters:
        pytest.skip("this transformers has no head mask to compare with")
    gen = torch.Generator().manual_seed(1)
    batch = {
        "input_ids": torch.randint(5, 60, (3, 20), generator=gen),
        "attention_mask": torch.ones(3, 20, dtype=torch.long),
        "start_positions": torch.randint(0, 20, (3,), generator=gen),
        "end_positions": torch.randint(0, 20, (3,), generator=gen),
    }
    mask = torch.ones(2, 4, requires_grad=True)
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], head_mask=mask)
    prune._qa_loss(out, batch).backward()
    expected = mask.grad.abs()
    expected = expected / expected.norm(dim=1, keepdim=True)
    model.zero_grad()
    torch.testing.assert_close(prune.score_importance(model, [batch]).heads, expected, atol=1e-6, rtol=1e-4)
