"""Structured pruning of BERT-family encoders: importance scores, removal, and compaction.

Block-pruned checkpoints (such as madlag's nn_pruning models, or this project's own pruned demo
model) are stored dense, with removed attention heads and FFN neurons left as zeros. They run no
faster than the original until the zeros are cut out. :func:`compact` finds them and removes them
(what nn_pruning's ``optimize_model(model, "dense")`` did) by slicing the Linear layers around
them: a head's query/key/value rows and its output-projection columns, a neuron's intermediate row
and output column. Constant contributions (a zeroed weight row with a non-zero bias) are folded
into the next bias, so outputs are unchanged. Only public module attributes are used (not
transformers' private head-pruning hook nor its head-mask argument, both gone in transformers 5),
so the same code runs on transformers 4.x and 5.

Written here because no maintained library does this for Hugging Face BERT models: nn_pruning is
unmaintained and pins old transformers, and torch.nn.utils.prune only masks weights.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

from variants.building.layouts import BERT, DISTILBERT, Layout, layout_of, part, replace


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
    """The transformer layers of a BERT-family model (BERT, RoBERTa, ELECTRA, MiniLM, DistilBERT...)."""
    return list(part(getattr(model, "base_model", model), layout_of(model).layers))


def layer_layout(layer: nn.Module) -> Layout:
    """The layout one layer has (DistilBERT's blocks have an ``ffn``, BERT's an ``intermediate``)."""
    return DISTILBERT if hasattr(layer, "ffn") else BERT


def keep_layers(model: nn.Module, layers: list[int]) -> None:
    """Keep only the encoder layers ``layers`` (original numbers, in order) of ``model``, in place.

    The result is a plain model of ``len(layers)`` layers (``config.num_hidden_layers`` follows), which
    transformers saves and loads as any other: a dropped layer cannot be stored as zeros, since its
    LayerNorms still act. Layers are renumbered 0..n-1; a cut applied afterwards uses the new numbers.
    """
    current = encoder_layers(model)
    if not layers or sorted(set(layers)) != list(layers) or layers[-1] >= len(current) or layers[0] < 0:
        raise ValueError(f"layers to keep must be distinct, ascending and among 0..{len(current) - 1}; got {layers}")
    replace(model.base_model, layout_of(model).layers, nn.ModuleList(current[i] for i in layers))
    model.config.num_hidden_layers = len(layers)
    for new, layer in enumerate(encoder_layers(model)):  # the attention's cache index, where it has one
        attention = part(layer, layer_layout(layer).attention)
        if hasattr(attention, "layer_idx"):
            attention.layer_idx = new


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


class NoHeads(nn.Module):
    """Self-attention of a layer whose heads were all removed: it contributes nothing.

    transformers' attention cannot run with zero heads (it reshapes with -1 over an empty tensor),
    so compaction puts this module in place of BERT's ``layer.attention.self``. It returns an empty
    context ``[batch, seq, 0]``; the output projection then has no input columns, and the
    attention block's output is ``LayerNorm(hidden + output.dense.bias)``, which is what the layer
    computed with its heads zeroed. Both transformers 4.x and 5 unpack ``(context, weights)``.

    DistilBERT's attention holds its output projection (``out_lin``): there it replaces the whole
    ``layer.attention``, keeps ``out_lin`` (no inputs left, its bias the constant) and returns its
    output, ``(out_lin(empty), None)``, which the block unpacks with or without attention weights.
    """

    def __init__(self, head_size: int, out_lin: nn.Linear | None = None, pruned_heads: set[int] | None = None):
        super().__init__()
        self.num_attention_heads = self.n_heads = 0
        self.attention_head_size = head_size
        self.all_head_size = self.dim = 0
        if out_lin is not None:
            self.out_lin = out_lin
            self.pruned_heads = set(pruned_heads or ())

    def forward(self, *args, **kwargs) -> tuple[torch.Tensor, None]:
        hidden = args[0] if args else kwargs.get("hidden_states", kwargs.get("query"))
        empty = hidden[..., :0]
        return (self.out_lin(empty) if hasattr(self, "out_lin") else empty), None


def head_count(layer: nn.Module) -> int:
    """Heads ``layer`` has now (after any removal)."""
    layout = layer_layout(layer)
    return getattr(part(layer, layout.attention), layout.heads)


def removed_heads(layer: nn.Module) -> set[int]:
    """Original numbers of the heads removed from ``layer`` so far."""
    return set(getattr(layer.attention, "pruned_heads", set()))


def _head_size(layer: nn.Module) -> int:
    return part(layer, layer_layout(layer).attention).attention_head_size


def ffn_width(layer: nn.Module) -> int:
    """FFN neurons ``layer`` has now."""
    return part(layer, layer_layout(layer).ffn_in).out_features


@torch.no_grad()
def _zero_heads(layer: nn.Module) -> tuple[list[int], torch.Tensor]:
    """Heads whose contribution is constant, and that constant (to fold into the output bias).

    A head contributes ``W_o[:, h] @ softmax(QK^T) (X W_v[h] + b_v[h])``. It is zero when the
    output columns are zero; it is the constant ``W_o[:, h] @ b_v[h]`` when the value rows are zero
    (attention rows sum to one).
    """
    layout = layer_layout(layer)
    out = part(layer, layout.out)
    constant = torch.zeros_like(out.bias)
    dead: list[int] = []
    if head_count(layer) == 0:
        return dead, constant
    size, value = _head_size(layer), getattr(part(layer, layout.attention), layout.qkv[2])
    for h in range(head_count(layer)):
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
    layout = layer_layout(layer)
    inter, out = part(layer, layout.ffn_in), part(layer, layout.ffn_out)
    col_dead = ~out.weight.any(dim=0)
    row_dead = ~inter.weight.any(dim=1)
    dead = col_dead | row_dead
    constant = torch.zeros_like(out.bias)
    const_idx = torch.nonzero(row_dead & ~col_dead).flatten()
    if len(const_idx) and inter.bias is not None:
        act = part(layer, layout.activation)(inter.bias[const_idx])
        constant = out.weight[:, const_idx] @ act
    keep = torch.nonzero(~dead).flatten()
    return keep, constant


@torch.no_grad()
def _sliced(linear: nn.Linear, keep: torch.Tensor, dim: int) -> nn.Linear:
    """A copy of ``linear`` keeping only outputs (``dim=0``) or inputs (``dim=1``) ``keep``."""
    keep = keep.to(linear.weight.device)
    weight = linear.weight.index_select(dim, keep)
    with warnings.catch_warnings():  # a headless layer's output projection has 0 inputs: nothing to initialize
        warnings.filterwarnings("ignore", "Initializing zero-element tensors")
        new = nn.utils.skip_init(  # no random initialization to overwrite
            nn.Linear,
            weight.shape[1],
            weight.shape[0],
            bias=linear.bias is not None,
            device=linear.weight.device,
            dtype=linear.weight.dtype,
        )
    new.weight.copy_(weight)
    if linear.bias is not None:
        new.bias.copy_(linear.bias[keep] if dim == 0 else linear.bias)
    return new


@torch.no_grad()
def prune_ffn(layer: nn.Module, keep: torch.Tensor) -> None:
    """Keep only FFN neurons ``keep`` (indices into the current intermediate size) in ``layer``."""
    layout = layer_layout(layer)
    replace(layer, layout.ffn_in, _sliced(part(layer, layout.ffn_in), keep, dim=0))
    replace(layer, layout.ffn_out, _sliced(part(layer, layout.ffn_out), keep, dim=1))


@torch.no_grad()
def _remove_heads(layer: nn.Module, heads: list[int]) -> None:
    """Slice heads ``heads`` (current indices) out of one layer's attention.

    The query/key/value rows and the output projection's columns of those heads go; the head
    count and all-head size that the attention forward reads are set to match. A layer left with
    no heads gets :class:`NoHeads`. ``attention.pruned_heads`` keeps the original numbers (the
    attribute transformers 4.x keeps too), so removal can be repeated with current indices.
    """
    layout = layer_layout(layer)
    attn, size = part(layer, layout.attention), _head_size(layer)
    original = [h for h in range(head_count(layer) + len(removed_heads(layer))) if h not in removed_heads(layer)]
    kept = [h for h in range(head_count(layer)) if h not in set(heads)]
    layer.attention.pruned_heads = removed_heads(layer) | {original[h] for h in heads}
    rows = torch.tensor([h * size + i for h in kept for i in range(size)], dtype=torch.long)
    replace(layer, layout.out, _sliced(part(layer, layout.out), rows, dim=1))
    if not kept:
        if layout.out.startswith(layout.headless + "."):  # DistilBERT: the projection is inside what goes
            replace(layer, layout.headless, NoHeads(size, part(layer, layout.out), layer.attention.pruned_heads))
        else:
            replace(layer, layout.headless, NoHeads(size))
        return
    for name in layout.qkv:
        setattr(attn, name, _sliced(getattr(attn, name), rows, dim=0))
    setattr(attn, layout.heads, len(kept))
    setattr(attn, layout.width, len(kept) * size)


def prune_heads(model: nn.Module, heads: dict[int, list[int]]) -> None:
    """Remove heads (layer -> indices among that layer's *current* heads); callable repeatedly.

    Done by slicing weights rather than through transformers' ``prune_heads`` (a private
    head-pruning hook that transformers 5 removed). The model's config is left as it is:
    a compacted model is used in memory (and exported to ONNX), never saved as a checkpoint;
    :func:`expand_to_dense` makes the checkpoint.
    """
    layers = encoder_layers(model)
    for idx, current in heads.items():
        if current:
            _remove_heads(layers[idx], sorted(set(current)))


@torch.no_grad()
def compact(model: nn.Module) -> CompactionReport:
    """Cut zeroed heads and FFN neurons out of ``model`` in place; outputs stay the same.

    A layer whose heads are all zeroed loses them all (its attention becomes :class:`NoHeads`).
    A layer whose FFN neurons are all zeroed keeps one zero neuron.
    """
    layers = encoder_layers(model)
    report = CompactionReport(params_before=count_parameters(model))
    for idx, layer in enumerate(layers):
        layout = layer_layout(layer)
        dead_heads, head_constant = _zero_heads(layer)
        part(layer, layout.out).bias += head_constant
        if dead_heads:
            _remove_heads(layer, dead_heads)
            report.heads_removed[idx] = dead_heads

        keep, ffn_constant = _zero_neurons(layer)
        total = ffn_width(layer)
        if len(keep) == 0:
            keep = torch.zeros(1, dtype=torch.long)  # keep one (zero) neuron
        part(layer, layout.ffn_out).bias += ffn_constant
        if len(keep) < total:
            prune_ffn(layer, keep)
        report.ffn_kept[idx] = len(keep)
        report.ffn_total[idx] = total
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

    Heads: |dL/dg_h| for a gate g fixed at one on each head's context (Michel et al., 2019),
    applied by a forward pre-hook on the attention output projection, so it works with any
    attention implementation and needs no head-mask argument. Neurons: |sum a * dL/da| over tokens,
    for each intermediate activation a (Molchanov et al., 2019). Both are normalized per layer
    (L2) so layers can be compared.
    """
    layers = encoder_layers(model)
    n_heads = max(head_count(layer) for layer in layers)
    gates = torch.ones(len(layers), n_heads, requires_grad=True)
    neuron_scores = [torch.zeros(ffn_width(layer)) for layer in layers]
    activations: dict[int, torch.Tensor] = {}

    def gate_heads(idx: int, size: int):
        def hook(_module, inputs):
            (context,) = inputs
            heads = context.unflatten(-1, (-1, size))
            gate = gates[idx, : heads.shape[-2]].to(heads.device, heads.dtype)
            return ((heads * gate[:, None]).flatten(-2),)

        return hook

    def keep_activation(idx: int):
        def hook(_module, _inputs, output):
            output.retain_grad()
            activations[idx] = output

        return hook

    handles = [
        part(layer, layer_layout(layer).out).register_forward_pre_hook(gate_heads(i, _head_size(layer)))
        for i, layer in enumerate(layers)
        if head_count(layer)
    ]
    handles += [
        part(layer, layer_layout(layer).activation).register_forward_hook(keep_activation(i))
        for i, layer in enumerate(layers)
    ]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()  # no dropout while scoring
    try:
        for on_cpu in batches:
            batch = {k: v.to(device) for k, v in on_cpu.items()}
            inputs = {k: v for k, v in batch.items() if k not in ("start_positions", "end_positions")}
            out = model(**inputs)
            loss = loss_fn(out, batch) if loss_fn else _qa_loss(out, batch)
            loss.backward()
            for idx, act in activations.items():
                neuron_scores[idx] += (act * act.grad).sum(dim=(0, 1)).abs().detach().float().cpu()
            model.zero_grad(set_to_none=True)
            activations.clear()
        head_scores = gates.grad.abs().detach()
    finally:
        for handle in handles:
            handle.remove()
        model.train(was_training)
    head_scores = head_scores / head_scores.norm(dim=1, keepdim=True).clamp_min(1e-12)
    neuron_scores = [s / s.norm().clamp_min(1e-12) for s in neuron_scores]
    return Importance(heads=head_scores, neurons=neuron_scores)


def qa_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The mean cross-entropy of ``model``'s start and end logits against ``batch``'s gold positions."""
    inputs = {k: v for k, v in batch.items() if k not in ("start_positions", "end_positions")}
    return _qa_loss(model(**inputs), batch)


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
    if getattr(dense.config, "pruned_heads", None):
        dense.config.pruned_heads = {}  # transformers 4.x would cut them out again on load
    dense_layers, small_layers = encoder_layers(dense), encoder_layers(pruned)
    small_state = pruned.state_dict()
    # Everything outside the pruned Linear layers has the same shape: copy it directly.
    dense_state = dense.state_dict()
    dense.load_state_dict({k: v for k, v in small_state.items() if dense_state[k].shape == v.shape}, strict=False)
    for idx, (big, small) in enumerate(zip(dense_layers, small_layers, strict=True)):
        size = _head_size(big)
        gone = removed_heads(small)
        alive = [h for h in range(head_count(big)) if h not in gone]
        cols = torch.tensor([h * size + i for h in alive for i in range(size)], dtype=torch.long)
        layout = layer_layout(big)
        big_attn, small_attn = part(big, layout.attention), part(small, layout.attention)
        for name in layout.qkv:  # a NoHeads layer has none: all zeros
            _scatter(getattr(big_attn, name), getattr(small_attn, name, None), cols, dim=0)
        _scatter(part(big, layout.out), part(small, layout.out), cols, dim=1)
        keep = kept_neurons[idx]
        _scatter(part(big, layout.ffn_in), part(small, layout.ffn_in), keep, dim=0)
        _scatter(part(big, layout.ffn_out), part(small, layout.ffn_out), keep, dim=1)
    return dense


@torch.no_grad()
def _scatter(big: nn.Linear, small: nn.Linear | None, index: torch.Tensor, dim: int) -> None:
    """The inverse of :func:`_sliced`: ``small``'s outputs (``dim=0``) or inputs (``dim=1``) into
    positions ``index`` of ``big``, zeros elsewhere (all zeros when ``small`` is None)."""
    big.weight.zero_()
    if big.bias is not None and (dim == 0 or small is None):
        big.bias.zero_()
    if small is None:
        return
    big.weight.index_copy_(dim, index.to(big.weight.device), small.weight.to(big.weight))
    if big.bias is not None:
        if dim == 0:
            big.bias[index.to(big.bias.device)] = small.bias.to(big.bias)
        else:
            big.bias.copy_(small.bias)


@dataclass
class Cut:
    """What a pruning removes, in the teacher's (original) indices: heads per layer, FFN neurons kept per layer."""

    heads: dict[int, list[int]]
    kept: dict[int, torch.Tensor]


def apply_cut(model: nn.Module, cut: Cut, before: Cut | None = None) -> None:
    """Cut ``model`` down to ``cut``. ``before`` is the cut ``model`` already has (None: none), which
    ``cut`` must contain: a gradual prune adds to its last cut, a resumed run rebuilds its student."""
    layers = encoder_layers(model)
    for idx, keep_ids in cut.kept.items():
        keep = torch.as_tensor(keep_ids)
        now = before.kept[idx] if before else torch.arange(ffn_width(layers[idx]))
        position = {int(n): i for i, n in enumerate(now)}
        if len(keep) < len(now):
            prune_ffn(layers[idx], torch.tensor([position[int(n)] for n in keep]))
    current = {}
    for idx, removed in cut.heads.items():
        gone = set(before.heads.get(idx, [])) if before else set()
        alive = [h for h in range(head_count(layers[idx]) + len(gone)) if h not in gone]
        current[idx] = [alive.index(h) for h in removed if h not in gone]
    prune_heads(model, current)
