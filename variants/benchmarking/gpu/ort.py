"""ONNX Runtime for the GPU report: sessions whose provider is checked, IOBinding on the session's device,
CUDA graphs on inputs padded to a few length buckets, and where each graph's nodes ran.

* :func:`make_session` opens a session as the engine does (:func:`variants.answering.runtime.session_plan`:
  the CUDA provider on ``cuda[:N]``, alone where CPU fallback is off or ORT's CUDA graphs are on);
  :func:`provider_check` reads ``session.get_providers()`` afterwards, because ORT falls back to the CPU
  *without an error* when the CUDA provider cannot load (a CPU build, a missing cuDNN): such a row says
  ``cpu_fallback`` and its mode names the CPU, so it never passes as CUDA.
* :class:`Bound` binds a session's inputs and outputs to OrtValues on the device it really runs on
  (CUDA buffers, or CPU ones: the same code path CI runs), so no host copy is timed.
* :func:`graphed` captures CUDA graphs as the engine does: one session, one graph per (batch, length
  bucket): ORT captures a graph after a few plain runs and replays it after, which needs fixed shapes and
  fixed buffers, so inputs are padded on the right to the next bucket (BERT masks the padding) and
  written in place.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from variants.answering import cuda_graphs
from variants.answering.runtime import CUDA, open_session
from variants.benchmarking.gpu.timing import Factory

BUCKETS = cuda_graphs.LENGTH_BUCKETS
_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def device_id(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


# --- sessions -----------------------------------------------------------------------------------


def make_session(
    path: Path, device: str, *, strict: bool = False, cuda_graph: bool = False, profile_dir: Path | None = None
):
    """A session of ``path`` on ``device`` with the engine's options and providers
    (:func:`variants.answering.runtime.session_plan`): with ``strict`` (CUDA only) creation fails if any
    node would run on the CPU; ``cuda_graph`` turns on ORT's CUDA graphs (strict too)."""
    prefix = str(profile_dir / "ort") if profile_dir else None
    return open_session(path, device, strict=strict, cuda_graph=cuda_graph, profile_prefix=prefix)


def provider_check(session, device: str) -> dict[str, Any]:
    """What ``session`` runs on, read back after creation: ``cpu_fallback`` when CUDA was asked for and
    ORT gave a CPU session instead (it does so without raising)."""
    active = session.get_providers()
    on_cuda = bool(active) and active[0] == CUDA
    return {
        "providers": active,
        "ran_on": "cuda" if on_cuda else "cpu",
        "cpu_fallback": device.startswith("cuda") and not on_cuda,
    }


def mode_name(dtype: str, check: dict[str, Any], how: str = "iobinding") -> str:
    """``ort-<where it really ran>-<dtype>-<how>``, with "-cpu-fallback" when it was meant for CUDA."""
    name = f"ort-{check['ran_on']}-{dtype}-{how}"
    return f"{name}-cpu-fallback" if check["cpu_fallback"] else name


def nodes_per_provider(path: Path, device: str, length: int) -> tuple[dict[str, int], list[str]]:
    """How many graph nodes ran on each execution provider (from one profiled run of ``length`` tokens),
    and the names of those that ran on the CPU provider."""
    with tempfile.TemporaryDirectory() as tmp:
        session = make_session(path, device, profile_dir=Path(tmp))
        session.run(None, random_feed([i.name for i in session.get_inputs()], 1, length, graph_vocab(path)))
        events = json.loads(Path(session.end_profiling()).read_text())
    counts: dict[str, int] = {}
    seen: set[str] = set()
    on_cpu: list[str] = []
    for event in events:
        provider = event.get("args", {}).get("provider")
        if event.get("cat") == "Node" and provider and event["name"] not in seen:
            seen.add(event["name"])
            counts[provider] = counts.get(provider, 0) + 1
            if provider == "CPUExecutionProvider":
                on_cpu.append(event["name"].removesuffix("_kernel_time"))
    return counts, on_cpu


# --- inputs -------------------------------------------------------------------------------------


def graph_vocab(path: Path, default: int = 30522) -> int:
    """The vocabulary size in the ``config.json`` beside an exported graph (BERT's, without one)."""
    config = Path(path).parent / "config.json"
    return int(json.loads(config.read_text()).get("vocab_size", default)) if config.is_file() else default


def random_feed(
    names: Sequence[str], batch: int, length: int, vocab: int = 30522, seed: int | None = None
) -> dict[str, np.ndarray]:
    """``batch`` windows of ``length`` random token ids below ``vocab`` (past the special tokens), every
    token real, for the inputs in ``names``."""
    rng = np.random.default_rng(length * 1000 + batch if seed is None else seed)
    low = min(1000, vocab // 2)
    values = {
        "input_ids": rng.integers(low, min(vocab, 29000), (batch, length)),
        "attention_mask": np.ones((batch, length)),
        "token_type_ids": np.broadcast_to(np.arange(length) >= length // 4, (batch, length)),
    }
    return {name: np.ascontiguousarray(values[name], dtype=np.int64) for name in names}


def bucket_for(length: int, buckets: Sequence[int] = BUCKETS) -> int:
    """The smallest length bucket that holds ``length`` tokens (the engine's rule)."""
    return cuda_graphs.bucket_for(length, buckets)


def pad_feed(feed: dict[str, np.ndarray], bucket: int) -> dict[str, np.ndarray]:
    """``feed`` padded on the right to ``bucket`` tokens: token id 0 ([PAD] in BERT vocabularies),
    attention mask 0 (the model ignores those positions), token type 0."""
    length = next(iter(feed.values())).shape[1]
    if length > bucket:
        raise ValueError(f"{length} tokens do not fit a bucket of {bucket}")
    return {name: np.pad(value, ((0, 0), (0, bucket - length))) for name, value in feed.items()}


# --- running ------------------------------------------------------------------------------------


class Bound:
    """A session with its inputs and outputs bound to OrtValues on the device it runs on (CUDA or CPU);
    a call runs it on them, copying nothing to or from the host. :meth:`update` writes new inputs into
    the same buffers (a CUDA graph replays on fixed addresses)."""

    def __init__(self, session, feed: dict[str, np.ndarray], device: str = "cpu") -> None:
        import onnxruntime as ort  # noqa: PLC0415 - as in make_session

        self.session = session
        self.kind = provider_check(session, device)["ran_on"]
        index = device_id(device) if self.kind == "cuda" else 0
        self.binding = session.io_binding()
        self.inputs: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        for name, array in feed.items():
            self.inputs[name] = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array), self.kind, index)
            self.binding.bind_ortvalue_input(name, self.inputs[name])
        shape = list(next(iter(feed.values())).shape)  # start/end logits: [batch, length]
        for out in session.get_outputs():
            value = ort.OrtValue.ortvalue_from_shape_and_type(shape, _NUMPY_TYPES[out.type], self.kind, index)
            self.outputs[out.name] = value
            self.binding.bind_ortvalue_output(out.name, value)

    def update(self, feed: dict[str, np.ndarray]) -> None:
        for name, array in feed.items():
            self.inputs[name].update_inplace(np.ascontiguousarray(array, dtype=np.int64))

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)
        self.binding.synchronize_outputs()

    def results(self) -> dict[str, np.ndarray]:
        """The outputs, copied to the host (for checks, never inside a timed call)."""
        return {name: value.numpy() for name, value in self.outputs.items()}


def bound(path: Path, device: str, strict: bool = False) -> tuple[Factory, dict[str, Any]]:
    """A factory ``make(length, batch=1)`` of :class:`Bound` calls on one session of ``path``, and the
    session's provider check."""
    session = make_session(path, device, strict=strict)
    names, vocab = [i.name for i in session.get_inputs()], graph_vocab(path)

    def make(length: int, batch: int = 1) -> Bound:
        return Bound(session, random_feed(names, batch, length, vocab), device)

    return make, provider_check(session, device)


def graphed(path: Path, device: str, buckets: Sequence[int] = BUCKETS) -> Factory:
    """A factory of CUDA-graph calls as the engine makes them (:mod:`variants.answering.cuda_graphs`): one
    strict session with ORT's CUDA graphs on, one captured graph (its own ``gpu_graph_id``) and its own
    bound buffers per call shape, inputs padded to the length's bucket; the first runs capture the graph,
    the timed calls replay it. Raises on the CPU, or where ORT would not keep every node on CUDA."""
    if not device.startswith("cuda"):
        raise RuntimeError(f"ONNX Runtime's CUDA graphs need the CUDA provider; the device is {device}")
    session = make_session(path, device, strict=True, cuda_graph=True)
    check = provider_check(session, device)
    if check["cpu_fallback"]:
        raise RuntimeError(f"asked for CUDA graphs on {device}, but the session runs on {check['providers']}")
    names, vocab = [i.name for i in session.get_inputs()], graph_vocab(path)
    shapes: dict[tuple[int, int], Any] = {}

    def make(length: int, batch: int = 1):
        key = (batch, bucket_for(length, buckets))
        feed = cuda_graphs.pad_feed(random_feed(names, batch, length, vocab), *key)
        if key not in shapes:
            shapes[key] = cuda_graphs.Shape(session, names, *key, "cuda", device_id(device), len(shapes) + 1)
            for _ in range(cuda_graphs.CAPTURE_RUNS):  # plain runs, then the capture
                shapes[key](session, feed)
        shapes[key].write(feed)  # the captured graph reads the new tokens from the same buffers
        return functools.partial(shapes[key].run, session)

    return make
