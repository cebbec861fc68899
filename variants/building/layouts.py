"""Where an encoder family keeps the parts that structured pruning cuts: a :class:`Layout` per family.

BERT, RoBERTa, ELECTRA, CamemBERT and XLM-RoBERTa share one layout (``encoder.layer[i]`` with
``attention.self.query/key/value``, ``attention.output.dense``, ``intermediate.dense``, ``output.dense``);
DistilBERT has its own (``transformer.layer[i]`` with ``attention.q_lin/k_lin/v_lin/out_lin`` and
``ffn.lin1/lin2``). :mod:`variants.building.prune` reads and replaces a layer's parts only through these
paths, so compaction, the compact store, the importance scores and the training recipes take either.

Both families' attention reads its head count and all-heads width from attributes at run time
(``num_attention_heads`` / ``all_head_size``, ``n_heads`` / ``dim``), which is what lets a layer keep
a head count of its own after a cut. A family is named by its config's ``model_type``
(:data:`LAYOUT_OF`), so a model is refused before anything is loaded or trained
(:func:`refusal`); the layout is then checked on the loaded model (:func:`layout_of`).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn


@dataclass(frozen=True)
class Layout:
    """Paths from the base model (``layers``) and from one layer (the rest) to the parts a cut slices."""

    family: str
    layers: str  # the ModuleList of layers, from the base model
    attention: str  # the module that holds q/k/v and reads the head count
    qkv: tuple[str, str, str]  # the query, key and value projections, attributes of ``attention``
    out: str  # the attention's output projection (its inputs are the heads' contexts)
    ffn_in: str  # the FFN's first Linear (one output per neuron)
    ffn_out: str  # the FFN's second Linear (one input per neuron)
    activation: str  # the FFN's activation module (its output: one value per neuron)
    heads: str  # the head-count attribute of ``attention``
    width: str  # the all-heads width attribute of ``attention`` (heads x head size)
    headless: str  # what a layer with no heads left replaces: ``attention`` or the whole attention block


BERT = Layout(
    family="BERT",
    layers="encoder.layer",
    attention="attention.self",
    qkv=("query", "key", "value"),
    out="attention.output.dense",
    ffn_in="intermediate.dense",
    ffn_out="output.dense",
    activation="intermediate.intermediate_act_fn",
    heads="num_attention_heads",
    width="all_head_size",
    headless="attention.self",
)

DISTILBERT = Layout(
    family="DistilBERT",
    layers="transformer.layer",
    attention="attention",
    qkv=("q_lin", "k_lin", "v_lin"),
    out="attention.out_lin",
    ffn_in="ffn.lin1",
    ffn_out="ffn.lin2",
    activation="ffn.activation",
    heads="n_heads",
    width="dim",
    headless="attention",
)

# config.model_type -> layout: the families whose transformers classes have these parts as named (post-LayerNorm
# layers, separate q/k/v projections, one FFN). Others are refused before any work (:func:`refusal`).
LAYOUT_OF = {
    "bert": BERT,
    "roberta": BERT,
    "xlm-roberta": BERT,
    "camembert": BERT,
    "electra": BERT,
    "distilbert": DISTILBERT,
}

WHY_NOT = {  # families people bring that look close but are not cut here, and why
    "albert": "ALBERT shares one set of layer weights across all its layers, so a head cut in one is cut in all",
    "mobilebert": "MobileBERT's layers are bottlenecked (their width is not the model's hidden size)",
    "deberta": "DeBERTa's disentangled attention projects positions with the same heads",
    "deberta-v2": "DeBERTa's disentangled attention projects positions with the same heads",
}


def refusal(model_type: str | None, architectures: list[str] | None) -> str | None:
    """One sentence on why a model of ``model_type`` (its ``architectures``) cannot be pruned here, or None."""
    names = ", ".join(sorted(LAYOUT_OF))
    if model_type not in LAYOUT_OF:
        why = WHY_NOT.get(str(model_type), "its layers are not laid out as BERT's or DistilBERT's")
        return f"a {model_type or 'model without a model_type'} model cannot be pruned here: {why} (supported: {names})"
    if architectures and not any(a.endswith("ForQuestionAnswering") for a in architectures):
        return (
            f"a {', '.join(architectures)} is not a question-answering model: fine-tune it for extractive QA first "
            "(python -m variants train finetune --base MODEL ...), then prune that"
        )
    return None


def ffn_size(config) -> int:
    """FFN neurons per layer in a model config (BERT's ``intermediate_size``, DistilBERT's ``hidden_dim``)."""
    return getattr(config, "intermediate_size", None) or config.hidden_dim


def part(root: nn.Module, path: str) -> nn.Module:
    """The submodule at dotted ``path`` below ``root``."""
    return root.get_submodule(path)


def replace(root: nn.Module, path: str, module: nn.Module) -> None:
    """Put ``module`` at dotted ``path`` below ``root``."""
    parent, _, name = path.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def layout_of(model: nn.Module) -> Layout:
    """The layout ``model`` (a ``*ForQuestionAnswering`` or its base model) has; TypeError for none."""
    base = getattr(model, "base_model", model)
    for layout in (BERT, DISTILBERT):
        try:
            first = part(base, layout.layers)[0]
            part(first, layout.attention), part(first, layout.ffn_in), part(first, layout.ffn_out)
        except (AttributeError, IndexError, TypeError):
            continue
        return layout
    raise TypeError(
        f"{type(model).__name__} is not a BERT-family encoder (encoder.layer[i].attention.self / .intermediate / "
        ".output, or DistilBERT's transformer.layer[i].attention / .ffn); structured pruning supports BERT, "
        "RoBERTa, ELECTRA, DistilBERT and similar."
    )
