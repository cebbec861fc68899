"""Compaction of dense-with-zeros checkpoints, and the pruning helpers that make them."""

from __future__ import annotations

import copy

import pytest
import torch
from conftest import PRUNED_HEADS, PRUNED_NEURONS, zero_out
from transformers import AutoModelForQuestionAnswering

from variants import prune


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
    assert layers[0].attention.self.num_attention_heads == 2
    assert report.params_after < report.params_before
    for a, b in zip(before, after, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=0)


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
        torch.testing.assert_close(a, b, atol=1e-4, rtol=0)


def test_a_layer_with_every_head_zeroed_keeps_one(tiny_qa_dir, ids):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    zero_out(model, {1: [0, 1, 2, 3]}, {1: list(range(64))})
    before = logits(model, ids)
    prune.compact(model)
    layer = prune.encoder_layers(model)[1]
    assert layer.attention.self.num_attention_heads == 1
    assert layer.intermediate.dense.out_features == 1
    for a, b in zip(before, logits(model, ids), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=0)


def test_pruned_model_expands_to_dense_and_compacts_back(tiny_qa_dir, ids):
    dense = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    small = copy.deepcopy(dense)
    keep = {0: torch.arange(0, 64, 2), 1: torch.arange(20, 64)}
    for idx, k in keep.items():
        prune.prune_ffn(prune.encoder_layers(small)[idx], k)
    prune.prune_heads(small, {0: [1, 2], 1: [3]})
    expected = logits(small, ids)

    stored = prune.expand_to_dense(small, dense, keep)
    assert stored.config.pruned_heads == {}
    assert prune.count_parameters(stored) == prune.count_parameters(dense)
    for a, b in zip(expected, logits(stored, ids), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=0)
    report = prune.compact(stored)
    assert report.heads_removed == {0: [1, 2], 1: [3]}
    assert prune.count_parameters(stored) == prune.count_parameters(small)


def test_prune_heads_takes_current_indices_repeatedly(tiny_qa_dir):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)
    prune.prune_heads(model, {0: [0]})
    prune.prune_heads(model, {0: [0]})  # now the original head 1
    assert model.config.pruned_heads == {0: [0, 1]}
    assert prune.encoder_layers(model)[0].attention.self.num_attention_heads == 2


def test_importance_scores_and_selection(tiny_qa_dir):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, attn_implementation="eager")
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
    imp = prune.score_importance(model, batches)
    assert imp.heads.shape == (2, 4)
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
