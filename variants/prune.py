"""Structured pruning of BERT-family encoders: importance scores, removal, and compaction.

Block-pruned checkpoints (such as madlag's nn_pruning models, or this project's own pruned demo
model) are stored dense, with removed attention heads and FFN neurons left as zeros. They run no
faster than the original until the zeros are cut out. :func:`compact` finds them and removes them
(what nn_pruning's ``optimize_model(model, "dense")`` did): heads through transformers'
``prune_heads``, FFN neurons by slicing the two Linear layers around them. Constant contributions
(a zeroed weight row with a non-zero bias) are folded into the next bias, so outputs are unchanged.

Written here because no maintained library does this for Hugging Face BERT models: nn_pruning is
unmaintained and pins old transformers, and torch.nn.utils.prune only masks weights.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import nn


@dataclass
class CompactionReport:
    """What :func:`compact` removed: heads per layer and FFN neurons kept per layer."""

    heads_removed: dict[int, list[int]] = field(default_factory=dict)
    ffn_kept: dict[int, int] = field(default_factory=dict)
    ffn_total: dict[int, int] = field(default_factory=dict)
    params_before: int = 0
    params_after: int = 0

    @property
    def num_heads_removed(self) -> int:
        return sum(len(v) for v in self.heads_removed.values())

    def summary(self) -> str:
        kept = sum(self.ffn_kept.values())
        total = sum(self.ffn_total.values()) or 1
        return (
            f"removed {self.num_heads_removed} heads, kept {kept}/{total} FFN neurons "
            f"({100 * kept / total:.0f}%), parameters {self.params_before:,} -> {self.params_after:,}"
        )


def encoder_layers(model: nn.Module) -> list[nn.Module]:
    """The transformer layers of a BERT-family model (BERT, RoBERTa, ELECTRA, MiniLM...)."""
    base = getattr(model, "base_model", model)
    encoder = getattr(base, "encoder", None)
    layers = getattr(encoder, "layer", None)
    if layers is None or not hasattr(layers[0], "attention") or not hasattr(layers[0], "intermediate"):
        raise TypeError(
            f"{type(model).__name__} is not a BERT-family encoder (encoder.layer[i].attention / "
            ".intermediate / .output); structured pruning supports BERT, RoBERTa, ELECTRA and similar."
        )
    return list(layers)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _head_slices(layer: nn.Module) -> tuple[int, int]:
    attn = layer.attention.self
    return attn.num_attention_heads, attn.attention_head_size


@torch.no_grad()
def _zero_heads(layer: nn.Module) -> tuple[list[int], torch.Tensor]:
    """Heads whose contribution is constant, and that constant (to fold into the output bias).

    A head contributes ``W_o[:, h] @ softmax(QK^T) (X W_v[h] + b_v[h])``. It is zero when the
    output columns are zero; it is the constant ``W_o[:, h] @ b_v[h]`` when the value rows are zero
    (attention rows sum to one).
    """
    n_heads, size = _head_slices(layer)
    value = layer.attention.self.value
    out = layer.attention.output.dense
    dead: list[int] = []
    constant = torch.zeros_like(out.bias)
    for h in range(n_heads):
        cols = slice(h * size, (h + 1) * size)
        out_cols = out.weight[:, cols]
        if not out_cols.any():
            dead.append(h)
        elif not value.weight[cols].any():
            dead.append(h)
            if value.bias is not None:
                constant += out_cols @ value.bias[cols]
    return dead, constant


@torch.no_grad()
def _zero_neurons(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices of FFN neurons to keep, and the constant contribution of the dead ones."""
    inter = layer.intermediate.dense
    out = layer.output.dense
    col_dead = ~out.weight.any(dim=0)
    row_dead = ~inter.weight.any(dim=1)
    dead = col_dead | row_dead
    constant = torch.zeros_like(out.bias)
    const_idx = torch.nonzero(row_dead & ~col_dead).flatten()
    if len(const_idx) and inter.bias is not None:
        act = layer.intermediate.intermediate_act_fn(inter.bias[const_idx])
        constant = out.weight[:, const_idx] @ act
    keep = torch.nonzero(~dead).flatten()
    return keep, constant


@torch.no_grad()
def prune_ffn(layer: nn.Module, keep: torch.Tensor) -> None:
    """Keep only FFN neurons ``keep`` (indices into the current intermediate size) in ``layer``."""
    inter = layer.intermediate.dense
    out = layer.output.dense
    keep = keep.to(inter.weight.device)
    new_inter = nn.Linear(inter.in_features, len(keep), bias=inter.bias is not None)
    new_inter.weight.copy_(inter.weight[keep])
    if inter.bias is not None:
        new_inter.bias.copy_(inter.bias[keep])
    new_out = nn.Linear(len(keep), out.out_features, bias=out.bias is not None)
    new_out.weight.copy_(out.weight[:, keep])
    if out.bias is not None:
        new_out.bias.copy_(out.bias)
    layer.intermediate.dense = new_inter.to(inter.weight.dtype)
    layer.output.dense = new_out.to(out.weight.dtype)


def prune_heads(model: nn.Module, heads: dict[int, list[int]]) -> None:
    """Remove heads (indices among each layer's *current* heads) with transformers' ``prune_heads``.

    transformers keeps ``pruned_heads`` in terms of original head numbers; this wrapper accepts
    current indices and translates, so it can be called repeatedly.
    """
    translated: dict[int, list[int]] = {}
    for idx, current in heads.items():
        if not current:
            continue
        layer = encoder_layers(model)[idx]
        already = layer.attention.pruned_heads
        original = [h for h in range(layer.attention.self.num_attention_heads + len(already)) if h not in already]
        translated[idx] = sorted(original[h] for h in current)
    if translated:
        model.base_model._prune_heads(translated)
        merged = {int(k): list(v) for k, v in (model.config.pruned_heads or {}).items()}
        for idx, hs in translated.items():
            merged[idx] = sorted(set(merged.get(idx, [])) | set(hs))
        model.config.pruned_heads = merged


@torch.no_grad()
def compact(model: nn.Module) -> CompactionReport:
    """Cut zeroed heads and FFN neurons out of ``model`` in place; outputs stay the same."""
    layers = encoder_layers(model)
    report = CompactionReport(params_before=count_parameters(model))
    to_prune: dict[int, list[int]] = {}
    for idx, layer in enumerate(layers):
        dead_heads, head_constant = _zero_heads(layer)
        n_heads, _ = _head_slices(layer)
        if len(dead_heads) == n_heads:
            dead_heads = dead_heads[1:]  # keep one (zero) head: a layer needs at least one
        layer.attention.output.dense.bias += head_constant
        if dead_heads:
            to_prune[idx] = dead_heads
            report.heads_removed[idx] = dead_heads

        keep, ffn_constant = _zero_neurons(layer)
        total = layer.intermediate.dense.out_features
        if len(keep) == 0:
            keep = torch.zeros(1, dtype=torch.long)  # keep one (zero) neuron
        layer.output.dense.bias += ffn_constant
        if len(keep) < total:
            prune_ffn(layer, keep)
        report.ffn_kept[idx] = len(keep)
        report.ffn_total[idx] = total
    prune_heads(model, to_prune)
    report.params_after = count_parameters(model)
    return report


# --- importance scores and removal, for making pruned models ----------------------------------


@dataclass
class Importance:
    """Per-layer head scores [layers, heads] and FFN neuron scores (one tensor per layer)."""

    heads: torch.Tensor
    neurons: list[torch.Tensor]


def score_importance(model: nn.Module, batches: Iterable[dict[str, torch.Tensor]], loss_fn=None) -> Importance:
    """First-order (Taylor) importance of heads and FFN neurons on calibration batches.

    Heads: |dL/dm_h| for a head mask m fixed at one (Michel et al., 2019). Neurons: |sum a * dL/da|
    over tokens, for each intermediate activation a (Molchanov et al., 2019). Both are normalized
    per layer (L2) so layers can be compared.
    """
    layers = encoder_layers(model)
    n_layers = len(layers)
    n_heads = layers[0].attention.self.num_attention_heads
    head_mask = torch.ones(n_layers, n_heads, requires_grad=True)
    neuron_scores = [torch.zeros(layer.intermediate.dense.out_features) for layer in layers]
    activations: dict[int, torch.Tensor] = {}

    def keep_activation(idx: int):
        def hook(_module, _inputs, output):
            output.retain_grad()
            activations[idx] = output

        return hook

    handles = [layer.intermediate.register_forward_hook(keep_activation(i)) for i, layer in enumerate(layers)]
    was_training = model.training
    model.eval()  # no dropout while scoring
    try:
        for batch in batches:
            inputs = {k: v for k, v in batch.items() if k not in ("start_positions", "end_positions")}
            out = model(**inputs, head_mask=head_mask)
            loss = loss_fn(out, batch) if loss_fn else _qa_loss(out, batch)
            loss.backward()
            for idx, act in activations.items():
                neuron_scores[idx] += (act * act.grad).sum(dim=(0, 1)).abs().detach()
            model.zero_grad(set_to_none=True)
            activations.clear()
        head_scores = head_mask.grad.abs().detach()
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    head_scores = head_scores / head_scores.norm(dim=1, keepdim=True).clamp_min(1e-12)
    neuron_scores = [s / s.norm().clamp_min(1e-12) for s in neuron_scores]
    return Importance(heads=head_scores, neurons=neuron_scores)


def _qa_loss(out, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    ce = nn.functional.cross_entropy
    return (ce(out.start_logits, batch["start_positions"]) + ce(out.end_logits, batch["end_positions"])) / 2


def select_heads(scores: torch.Tensor, share: float, min_per_layer: int = 1) -> dict[int, list[int]]:
    """The ``share`` of heads with the lowest global scores, keeping ``min_per_layer`` per layer."""
    n_layers, n_heads = scores.shape
    budget = round(share * n_layers * n_heads)
    left = {i: n_heads for i in range(n_layers)}
    chosen: dict[int, list[int]] = {}
    for flat in torch.argsort(scores.flatten()).tolist():
        if budget == 0:
            break
        layer, head = divmod(flat, n_heads)
        if left[layer] <= min_per_layer:
            continue
        chosen.setdefault(layer, []).append(head)
        left[layer] -= 1
        budget -= 1
    return {k: sorted(v) for k, v in chosen.items()}


def select_neurons(scores: list[torch.Tensor], share: float, min_per_layer: int = 32) -> dict[int, torch.Tensor]:
    """Per layer, the indices of FFN neurons to keep after removing ``share`` by global score."""
    flat = torch.cat(scores)
    owner = torch.cat([torch.full((len(s),), i) for i, s in enumerate(scores)])
    local = torch.cat([torch.arange(len(s)) for s in scores])
    budget = round(share * len(flat))
    removed = [torch.zeros(len(s), dtype=torch.bool) for s in scores]
    left = [len(s) for s in scores]
    for flat_idx in torch.argsort(flat).tolist():
        if budget == 0:
            break
        layer = int(owner[flat_idx])
        if left[layer] <= min_per_layer:
            continue
        removed[layer][local[flat_idx]] = True
        left[layer] -= 1
        budget -= 1
    return {i: torch.nonzero(~r).flatten() for i, r in enumerate(removed)}


@torch.no_grad()
def expand_to_dense(pruned: nn.Module, dense_template: nn.Module, kept_neurons: dict[int, torch.Tensor]) -> nn.Module:
    """A full-size copy of ``dense_template`` holding ``pruned``'s weights, zeros where removed.

    This is how pruned checkpoints are stored (like nn_pruning's): a standard dense model that
    any tool loads; :func:`compact` cuts the zeros back out. ``kept_neurons`` maps layer -> the
    original indices of the FFN neurons ``pruned`` kept.
    """
    dense = copy.deepcopy(dense_template)
    dense.config.pruned_heads = {}
    dense_layers, small_layers = encoder_layers(dense), encoder_layers(pruned)
    small_state = pruned.state_dict()
    # Everything outside the pruned Linear layers has the same shape: copy it directly.
    dense_state = dense.state_dict()
    dense.load_state_dict({k: v for k, v in small_state.items() if dense_state[k].shape == v.shape}, strict=False)
    for idx, (big, small) in enumerate(zip(dense_layers, small_layers, strict=True)):
        size = big.attention.self.attention_head_size
        n_heads = big.attention.self.num_attention_heads
        alive = [h for h in range(n_heads) if h not in small.attention.pruned_heads]
        cols = torch.cat([torch.arange(h * size, (h + 1) * size) for h in alive])
        for name in ("query", "key", "value"):
            big_lin, small_lin = getattr(big.attention.self, name), getattr(small.attention.self, name)
            big_lin.weight.zero_()
            big_lin.bias.zero_()
            big_lin.weight[cols] = small_lin.weight
            big_lin.bias[cols] = small_lin.bias
        big.attention.output.dense.weight.zero_()
        big.attention.output.dense.weight[:, cols] = small.attention.output.dense.weight
        big.attention.output.dense.bias.copy_(small.attention.output.dense.bias)
        keep = kept_neurons[idx]
        big.intermediate.dense.weight.zero_()
        big.intermediate.dense.bias.zero_()
        big.intermediate.dense.weight[keep] = small.intermediate.dense.weight
        big.intermediate.dense.bias[keep] = small.intermediate.dense.bias
        big.output.dense.weight.zero_()
        big.output.dense.weight[:, keep] = small.output.dense.weight
        big.output.dense.bias.copy_(small.output.dense.bias)
    return dense
