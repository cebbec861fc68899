"""A large model's graph with its weights outside it, in one file beside it, read and written a tensor at a time.

A build step on a model the size of BERT-large used to hold its weights three or four times over: torch's exporter
folds them and serializes the graph with them into one message (and parses it back), ``onnx.load`` reads every
weight in, ONNX Runtime's transformer optimizer runs shape inference on whole copies of the model, and saving a
graph (``onnx.save_model``, ORT's ``OnnxModel.save``) serializes it whole. Here a large model's graph keeps its
weights in ``model.onnx.data`` (ONNX's external data, the format ORT and ``onnx`` read for models over 2 GB): the
export writes the graph alone and :func:`attach` writes each weight from the torch model; a later step reads the
graph without its weights, the libraries read the few they change (the attention fusion's Q, K and V, which it
joins into one), and :func:`save` writes each weight into the new file one at a time, from memory or from the file
it was in. Written here because ONNX's helpers have no such save (``onnx.external_data_helper`` moves only weights
held in memory); the format is ONNX's own (``TensorProto.external_data``).

Used for the models whose steps run in a child process (:mod:`variants.building.apart`); a small model's graph is
one file, as before.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import onnx
from onnx.external_data_helper import ExternalDataInfo, uses_external_data
from onnxruntime.transformers.onnx_model import OnnxModel

DATA_SUFFIX = ".data"  # model.onnx -> model.onnx.data, ORT's and the exporters' name for it
MIN_BYTES = 1024  # weights smaller than this stay in the graph (shape constants, LayerNorm's scalars)
ALIGN = 4096  # each weight starts on a page, so ONNX Runtime can map it instead of copying it


def data_path(path: Path) -> Path:
    """The weights' file of graph ``path``."""
    return path.with_name(path.name + DATA_SUFFIX)


def has_outside_weights(path: Path) -> bool:
    """Whether graph ``path`` keeps its weights in a file beside it."""
    return data_path(Path(path)).is_file()


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """The graph's initializers and its subgraphs' (Constant nodes' small tensors stay in the graph)."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            for sub in (attribute.g, *attribute.graphs) if attribute.HasField("g") else attribute.graphs:
                yield from _tensors(sub)


def _read(tensor: onnx.TensorProto, base_dir: Path) -> bytes:
    info = ExternalDataInfo(tensor)
    location = Path(info.location)
    if location.is_absolute() or ".." in location.parts:
        raise ValueError(f"weight {tensor.name} points outside its folder ({info.location})")
    with open(base_dir / location, "rb") as f:
        f.seek(info.offset or 0)
        return f.read(info.length) if info.length else f.read()


def _append(out: BinaryIO, tensor: onnx.TensorProto, blob: Any, location: str) -> None:
    """Write ``blob`` (bytes, or any buffer) at the next page of ``out`` and point ``tensor`` at it."""
    out.write(b"\0" * (-out.tell() % ALIGN))
    offset = out.tell()
    out.write(blob)
    tensor.ClearField("raw_data")
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", out.tell() - offset)):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)


@contextlib.contextmanager
def _writing(model: onnx.ModelProto, path: Path) -> Iterator[BinaryIO]:
    """The weights' file of ``path``, written under a name of this process's beside it (the folder is the step's
    own, created with the umask's mode like the graph), then the graph (ORT's saver declares the fused operators'
    opset), then the file renamed into place; nothing half-written is left where it fails."""
    target = data_path(path)
    tmp_name = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp_name, "xb") as out:
            yield out
        OnnxModel.save(model, str(path))
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise


def save(model: onnx.ModelProto, path: Path, base_dir: Path | None = None) -> None:
    """Save ``model`` to ``path`` with every weight of :data:`MIN_BYTES` or more in :func:`data_path` (``path``'s
    ``.data``), written one at a time: a weight held in memory is moved out of the graph (``model`` no longer holds
    it after), one in a file is copied from it (its location read from ``base_dir``, default ``path``'s folder; the
    file may be the one being replaced)."""
    path = Path(path)
    base_dir = Path(base_dir) if base_dir is not None else path.parent
    location = data_path(path).name
    with _writing(model, path) as out:
        for tensor in _tensors(model.graph):
            if tensor.HasField("raw_data"):
                if len(tensor.raw_data) >= MIN_BYTES:
                    _append(out, tensor, tensor.raw_data, location)
            elif uses_external_data(tensor):
                _append(out, tensor, _read(tensor, base_dir), location)
            # typed fields (float_data...): small tensors made by hand, left in the graph


def attach(path: Path, weights: Mapping[str, Any], inputs: Sequence[str]) -> None:
    """Graph ``path``, exported without its weights (they are its inputs besides ``inputs``, named as in
    ``weights``: a module's state), gets them as initializers, each written from its tensor into
    :func:`data_path` one at a time (a small one into the graph); the inputs they were are removed."""
    path = Path(path)
    model = onnx.load(str(path))
    graph = model.graph
    location = data_path(path).name
    given = [i for i in graph.input if i.name not in inputs]
    unknown = [i.name for i in given if i.name not in weights]
    if unknown:  # an input the exporter named otherwise than the module's state
        raise RuntimeError(f"the export has inputs with no weight to give them: {', '.join(unknown[:5])}")
    with _writing(model, path) as out:
        for graph_input in given:
            array = weights[graph_input.name].detach().cpu().contiguous().numpy()  # the tensor's own memory
            tensor = onnx.TensorProto(name=graph_input.name, dims=array.shape)
            tensor.data_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
            if array.nbytes < MIN_BYTES:
                tensor.raw_data = array.tobytes()
            else:
                _append(out, tensor, memoryview(array).cast("B"), location)
            graph.initializer.append(tensor)
            graph.input.remove(graph_input)


def optimize(src: Path, options: Any, work_in: Path, prepare: Callable[[onnx.ModelProto], Any]) -> Any:
    """ONNX Runtime's transformer optimizer (model type "bert", basic ORT pass first: what
    :func:`variants.building.export.optimize_onnx` runs) on graph ``src`` with its weights outside; returns the
    ``OnnxModel`` and the folder its untouched weights are read from (a temporary one in ``work_in``, on the disk the
    result goes to, not in a temporary folder that may be in memory: keep it open until saved)."""
    from onnxruntime.transformers.optimizer import optimize_by_onnxruntime, optimize_model  # noqa: PLC0415

    work = tempfile.TemporaryDirectory(prefix=".optimize-", dir=work_in)
    folder = Path(work.name)
    basic = folder / "basic.onnx"
    # The basic pass (constant folding...) as optimize_model(opt_level=1) runs it, its weights written outside.
    optimize_by_onnxruntime(
        str(src),
        use_gpu=False,
        optimized_model_path=str(basic),
        opt_level=1,
        save_as_external_data=True,
        external_data_filename=basic.name + DATA_SUFFIX,
    )
    model = onnx.load(str(basic), load_external_data=False)
    prepare(model)  # the head counts, on the graph as folded (an export of ours is written unfolded)
    # ORT's fusions read the few weights they change with onnx.numpy_helper.to_array, which finds a weight's file
    # relative to the working directory: the whole process's, so this runs in a step's child process only (apart)
    with contextlib.chdir(folder):
        optimizer = optimize_model(
            model, "bert", num_heads=0, hidden_size=0, optimization_options=options, opt_level=0, use_gpu=False
        )
    return optimizer, work
