"""The export itself: a ``*ForQuestionAnswering`` torch model traced to ONNX by ``torch.onnx.export``.

Ours since transformers 5: optimum-onnx, the exporter before, holds transformers below 4.58 (docs/architecture.md,
"The export"). Written so that ONNX Runtime's transformer optimizer fuses what it fused in optimum's graphs, on
every family the chain accepts (BERT, DistilBERT, RoBERTa, ELECTRA, XLM-RoBERTa: tests/test_export_families.py):

* eager attention (the SDPA kernel traces into a graph the optimizer does not recognize);
* the attention mask handed to the model as a 4D additive mask built as transformers 4 built it (transformers 5's
  own mask code traces into index operations the attention fusion does not match);
* each layer's head count written into the shape its Q, K and V are reshaped to (:func:`write_head_counts`).

The TorchScript exporter (``dynamo=False``) is the one optimum-onnx's graphs were made by, so the one ORT's
fusions were written against; the dynamo exporter was not tried.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnxruntime.transformers.onnx_model import OnnxModel

from variants.building import outside

DEFAULT_OPSET = 18  # what optimum-onnx exported with before (its default); ORT's fusions match it
PROTOBUF_LIMIT = 2**31 - 2**24  # a little under 2 GB: beyond it, weights go to an external file
OUTPUTS = ("start_logits", "end_logits")
_AXES = {0: "batch_size", 1: "sequence_length"}


def exporter() -> str:
    """The exporter's name and version, as the export's manifest records it."""
    return f"torch.onnx {torch.__version__}"


class _Logits(torch.nn.Module):
    """A QA model's forward as a tuple ``(start_logits, end_logits)``, the two graph outputs."""

    def __init__(self, model: Any, names: Sequence[str]) -> None:
        super().__init__()
        self.model, self.names = model, tuple(names)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feed = dict(zip(self.names, inputs, strict=True))
        # transformers takes a 4D additive mask as given. This one is built as transformers 4 built it for
        # SDPA (0 where a token is kept, the lowest float where it is padding), a pattern ORT's attention fusion
        # recognizes; transformers 5's own mask code traces into index ops that it does not.
        mask = feed["attention_mask"]
        batch, length = mask.shape
        inverted = 1.0 - mask[:, None, None, :].expand(batch, 1, length, length).to(torch.float32)
        feed["attention_mask"] = inverted.masked_fill(inverted.to(torch.bool), torch.finfo(torch.float32).min)
        out = self.model(**feed, return_dict=True)
        return out.start_logits, out.end_logits


def input_names(model: Any) -> list[str]:
    """``input_ids``, ``attention_mask`` and, where the model has more than one segment type (BERT, ALBERT,
    ELECTRA, MobileBERT; not DistilBERT or the RoBERTa family), ``token_type_ids``: what the exporter feeds."""
    types = int(getattr(model.config, "type_vocab_size", 0) or 0)
    return ["input_ids", "attention_mask", *(["token_type_ids"] if types > 1 else [])]


def trace_to_onnx(model: Any, path: Path, opset: int = DEFAULT_OPSET, weights_outside: bool = False) -> None:
    """TorchScript-trace ``model`` (eval, FP32, CPU, eager attention: the caller's) on a small right-padded batch
    into ``path``, batch and sequence dynamic, then write its head counts.

    ``weights_outside`` (a large model's build): the exporter writes the graph alone, unfolded, its weights left as
    inputs, and they are then written from the model into a file beside it one at a time (:func:`outside.attach`).
    The exporter would otherwise hold them three times over while it folds and serializes them into one message.
    ONNX Runtime folds the same constants when it loads the graph, and the optimization step's basic pass writes
    the head counts (:func:`set_head_counts`) before the fusions: the fused graph is the one-file export's.
    """
    names = input_names(model)
    batch, length = 2, 16
    first = 5 if model.config.vocab_size > 5 else 0  # above the special ids, so no token reads as padding
    ids = torch.randint(first, min(1000, model.config.vocab_size), (batch, length))
    mask = torch.ones(batch, length, dtype=torch.int64)
    mask[1, length // 2 :] = 0
    types = (torch.arange(length) >= length // 4).long().expand(batch, length).contiguous()
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    wrapped = _Logits(model, names)
    torch.onnx.export(
        wrapped,
        tuple(feed[n] for n in names),
        str(path),
        input_names=names,
        output_names=list(OUTPUTS),
        dynamic_axes={n: _AXES for n in [*names, *OUTPUTS]},
        opset_version=opset,
        do_constant_folding=not weights_outside,
        export_params=not weights_outside,
        dynamo=False,
    )
    if weights_outside:
        # the graph's weight inputs are named as the wrapper's state (tied weights under each name they have)
        outside.attach(path, {**dict(wrapped.named_buffers()), **wrapped.state_dict(keep_vars=True)}, names)
        return
    write_head_counts(path)


def write_head_counts(path: Path) -> None:
    """:func:`set_head_counts` on the graph in ``path``, saved where it changed anything."""
    path = Path(path)
    model = onnx.load(str(path))
    if set_head_counts(model):
        save_graph(OnnxModel(model), path)


def set_head_counts(model: onnx.ModelProto) -> bool:
    """Write each attention layer's head count into the shape its Q, K and V are reshaped to; whether any was.

    transformers 5 reshapes them to ``(batch, length, -1, head_size)``; ORT's optimizer reads the head count
    from that shape (the third entry) and does not fuse the attention where it is -1. The count is the
    projection's bias length over ``head_size``, per layer, so a compacted layer gets its own. Reads only the
    biases' shapes and the small constants: the graph's large weights may stay in a file (:mod:`outside`).
    """
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    weights = {w.name: w for w in graph.initializer}

    def weight(name: str) -> onnx.TensorProto | None:
        while name in producer and producer[name].op_type == "Identity":  # the exporter shares equal weights
            name = producer[name].input[0]
        return weights.get(name)

    def constant(name: str) -> np.ndarray | None:
        node = producer.get(name)
        if node is not None and node.op_type == "Constant":
            return onnx.numpy_helper.to_array(node.attribute[0].t)
        tensor = weight(name)
        if tensor is None or tensor.data_location == onnx.TensorProto.EXTERNAL:  # a large weight on disk: no constant
            return None
        return onnx.numpy_helper.to_array(tensor)

    counts: dict[int, str] = {}
    for node in (n for n in graph.node if n.op_type == "Reshape"):
        concat, add = producer.get(node.input[1]), producer.get(node.input[0])
        if concat is None or concat.op_type != "Concat" or len(concat.input) != 4 or add is None:
            continue
        heads, size = constant(concat.input[2]), constant(concat.input[3])
        biases = [w for w in map(weight, add.input) if w is not None and len(w.dims) == 1]
        if heads is None or size is None or heads.size != 1 or int(heads.item()) != -1 or len(biases) != 1:
            continue
        count = biases[0].dims[0] // int(size.item())
        if count not in counts:
            counts[count] = f"qa_export_heads_{count}"
            graph.initializer.append(onnx.numpy_helper.from_array(np.array([count], dtype=np.int64), counts[count]))
        concat.input[2] = counts[count]
    if counts:
        used = {name for node in graph.node for name in node.input} | {o.name for o in graph.output}
        unused = [n for n in graph.node if n.op_type == "Constant" and not used & set(n.output)]
        for node in unused:  # the -1s replaced (ONNX Runtime would warn of each one at every load)
            graph.node.remove(node)
    return bool(counts)


def save_graph(model: OnnxModel, path: Path, weights_from: Path | None = None) -> None:
    """Save with ORT's saver (it sorts the graph and declares the com.microsoft opset of fused ops).

    Weights go to ``<name>.data`` beside the graph when it is near protobuf's 2 GB limit; with ``weights_from`` (the
    folder the graph's own outside weights are read from), always, written one at a time (:mod:`outside`).
    """
    if weights_from is None:
        model.save_model_to_file(str(path), use_external_data_format=model.model.ByteSize() > PROTOBUF_LIMIT)
        return
    model.topological_sort()
    outside.save(model.model, path, weights_from)
