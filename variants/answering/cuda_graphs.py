"""A session's calls through IOBinding, and captured CUDA graphs replayed per length and batch bucket.

On a GPU most of a small model's time is the host launching kernels one by one; a CUDA graph launches a
whole captured run at once. ONNX Runtime captures one graph per ``gpu_graph_id`` (a run option), each on
fixed shapes and fixed buffers, so :class:`GraphRunner` keeps a bound set of OrtValues per
(batch bucket, length bucket), pads each call's windows into the smallest set that holds them (BERT
masks the padding; its logits are cut away again), writes the tokens in place and replays that shape's
graph. Every shape is captured and checked at load (:meth:`GraphRunner.capture`), so no request pays for
a capture; a call larger than every bucket runs the same session without a graph.

The same code runs on the CPU provider (a run option it does not know is ignored), which is how the
padding, the buffers and the slicing are tested without a GPU.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

# Windows are at most 384 tokens (qa.MAX_LENGTH); a pass holds up to 32 of them (DecodeSettings.batch_size).
LENGTH_BUCKETS = (64, 128, 256, 384)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32)
GRAPH_ID = "gpu_graph_id"  # ORT's run option naming which captured graph a run is (-1: none)
NO_GRAPH = "-1"
CAPTURE_RUNS = 3  # ORT runs a shape plainly before it captures it (2 in onnxruntime 1.31), then replays
_NUMPY = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def bucket_for(n: int, buckets: Sequence[int]) -> int:
    """The smallest bucket that holds ``n``; ``ValueError`` where none does."""
    fitting = [b for b in sorted(buckets) if b >= n]
    if n < 1 or not fitting:
        raise ValueError(f"no bucket holds {n} (buckets {tuple(buckets)})")
    return fitting[0]


def pad_feed(feed: dict[str, np.ndarray], rows: int, width: int) -> dict[str, np.ndarray]:
    """``feed`` (int64 ``[n, length]`` arrays) padded to ``[rows, width]``: tokens on the right with id 0,
    attention mask 0 and token type 0 (the model ignores masked positions); extra rows are one [PAD]
    token each, attended, so no row is wholly masked. Their logits are thrown away."""
    n, length = next(iter(feed.values())).shape
    if n > rows or length > width:
        raise ValueError(f"{n} windows of {length} tokens do not fit {rows} x {width}")
    padded = {}
    for name, value in feed.items():
        out = np.zeros((rows, width), dtype=np.int64)
        out[:n, :length] = value
        if name == "attention_mask":
            out[n:, 0] = 1
        padded[name] = out
    return padded


def _run_options(graph_id: str):
    import onnxruntime as ort  # noqa: PLC0415 - imported where a session runs

    options = ort.RunOptions()
    options.add_run_config_entry(GRAPH_ID, graph_id)
    return options


def bound_run(session, feed: dict[str, np.ndarray], kind: str, index: int = 0, graph_id: str = NO_GRAPH):
    """One run through IOBinding: ``feed`` copied once into OrtValues on ``kind`` ("cuda" or "cpu"), the
    outputs allocated there by ORT and copied to the host after. Start and end logits, as the model gives them."""
    import onnxruntime as ort  # noqa: PLC0415

    binding = session.io_binding()
    for name, value in feed.items():
        binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value, kind, index))
    for name in ("start_logits", "end_logits"):
        binding.bind_output(name, kind, index)
    session.run_with_iobinding(binding, _run_options(graph_id))
    start, end = binding.copy_outputs_to_cpu()
    return start, end


class Shape:
    """One (rows, width) shape's inputs and outputs, bound once on the device; its graph replays on them."""

    def __init__(self, session, names: Sequence[str], rows: int, width: int, kind: str, index: int, graph_id: int):
        import onnxruntime as ort  # noqa: PLC0415

        self.rows, self.width, self.options = rows, width, _run_options(str(graph_id))
        self.binding = session.io_binding()
        self.inputs = {}
        for name in names:
            value = ort.OrtValue.ortvalue_from_shape_and_type([rows, width], np.int64, kind, index)
            self.inputs[name] = value
            self.binding.bind_ortvalue_input(name, value)
        self.outputs = []
        for out in session.get_outputs():
            value = ort.OrtValue.ortvalue_from_shape_and_type([rows, width], _NUMPY[out.type], kind, index)
            self.outputs.append(value)
            self.binding.bind_ortvalue_output(out.name, value)

    def write(self, feed: dict[str, np.ndarray]) -> None:
        for name, value in feed.items():
            self.inputs[name].update_inplace(value)  # same address: the captured graph reads the new tokens

    def run(self, session) -> None:
        """Runs (or replays) on the bound buffers; returns once the outputs are ready, copying nothing."""
        session.run_with_iobinding(self.binding, self.options)
        self.binding.synchronize_outputs()

    def __call__(self, session, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """``feed`` written in, one run, the outputs copied to the host."""
        self.write(feed)
        self.run(session)
        return [value.numpy() for value in self.outputs]


class GraphRunner:
    """A session with one bound shape per (batch bucket, length bucket), each its own captured graph.

    Calls from several threads take turns (a graph replays on its shape's buffers). Where ``session`` has
    no CUDA graphs (the CPU provider, or CUDA without ``enable_cuda_graph``) the same calls run plainly."""

    def __init__(
        self,
        session,
        kind: str = "cuda",
        index: int = 0,
        lengths: Sequence[int] = LENGTH_BUCKETS,
        batches: Sequence[int] = BATCH_BUCKETS,
    ) -> None:
        self.session, self.kind, self.index = session, kind, index
        self.lengths, self.batches = tuple(sorted(lengths)), tuple(sorted(batches))
        self.names = [i.name for i in session.get_inputs()]
        self.shapes: dict[tuple[int, int], Shape] = {}
        self.unbucketed = 0  # calls larger than every bucket, run without a graph
        self._lock = threading.Lock()

    def capture(self) -> GraphRunner:
        """Binds every shape and runs it until ORT has captured its graph, the largest first (the memory
        arena grows once, the smaller shapes fit in it); then replays each once and checks that the replay
        gives the logits the plain runs gave. Raises where a shape fails or a replay differs."""
        keys = sorted(((b, n) for b in self.batches for n in self.lengths), reverse=True)
        for graph_id, (rows, width) in enumerate(keys, start=1):
            shape = Shape(self.session, self.names, rows, width, self.kind, self.index, graph_id)
            feed = warm_feed(self.names, rows, width)
            first = shape(self.session, feed)
            for _ in range(CAPTURE_RUNS - 1):
                shape(self.session, feed)
            replay = shape(self.session, feed)
            for a, b in zip(first, replay, strict=True):
                if not np.allclose(a.astype(np.float32), b.astype(np.float32), rtol=1e-2, atol=1e-2):
                    raise RuntimeError(f"the captured graph for {rows} x {width} gives other logits than its runs")
            self.shapes[(rows, width)] = shape
        return self

    def run(self, feed: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        n, length = next(iter(feed.values())).shape
        if n > self.batches[-1] or length > self.lengths[-1]:
            with self._lock:
                self.unbucketed += 1
                return bound_run(self.session, feed, self.kind, self.index)
        key = (bucket_for(n, self.batches), bucket_for(length, self.lengths))
        padded = pad_feed(feed, *key)
        with self._lock:
            start, end = self.shapes[key](self.session, padded)
        return start[:n, :length].copy(), end[:n, :length].copy()

    def describe(self) -> dict[str, Any]:
        return {"lengths": list(self.lengths), "batches": list(self.batches), "graphs": len(self.shapes)}


def warm_feed(names: Sequence[str], rows: int, width: int) -> dict[str, np.ndarray]:
    """Token id 1 everywhere (it exists in every vocabulary), every token attended: for capture runs."""
    ids = np.ones((rows, width), dtype=np.int64)
    values = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    return {name: values[name] for name in names}


def execution_name(on_cuda: bool, graphs: GraphRunner | None, fell_back: bool) -> str:
    """How an ONNX Runtime variant's calls run, in a few words for the card and the records."""
    if not on_cuda:
        return ""
    if graphs is not None:
        return f"CUDA graphs ({len(graphs.shapes)}: {'/'.join(map(str, graphs.lengths))} tokens)"
    return "IOBinding (CUDA graphs not captured)" if fell_back else "IOBinding"
