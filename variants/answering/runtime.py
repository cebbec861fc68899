"""One ``QAModel`` interface over PyTorch and ONNX Runtime.

Each model reports the device and execution provider it really runs on: ONNX Runtime silently
falls back to the CPU when the CUDA provider cannot start (missing CUDA/cuDNN libraries), so the
session's active providers are read back rather than trusted from the request. Both backends are
safe to call from several threads at once (no state is shared between calls; an IOBinding is made
per call).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from variants.answering.cuda_graphs import GraphRunner, bound_run, execution_name
from variants.core import config

log = logging.getLogger("variants.answering.runtime")


DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")


def resolve_device(device: str = "auto") -> str:
    """``auto`` -> ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu``, ``cuda`` and ``cuda:N`` as they are.
    Anything else is a ``ValueError`` that says what is accepted."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise ValueError(f"unknown device {device!r}: use auto, cpu, cuda or cuda:N")
    if device != "auto":
        return device
    import torch  # noqa: PLC0415

    return "cuda" if torch.cuda.is_available() else "cpu"


def folder_size(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


class QAModel(ABC):
    """A loaded model that maps token ids to start/end logits (float32 numpy)."""

    backend: str = ""
    device: str = "cpu"  # where it really runs: "cpu" or "cuda:0"
    provider: str = ""  # "PyTorch", "CPUExecutionProvider", "CUDAExecutionProvider"
    dtype: str = "fp32"  # fp32 / fp16 / int8
    input_names: tuple[str, ...] = ()
    size_bytes: int = 0  # weights as run
    num_parameters: int = 0
    notes: tuple[str, ...] = ()  # e.g. a provider fallback
    execution: str = ""  # how a call runs where there is a choice: "CUDA graphs", "IOBinding", ...
    build: Mapping[str, Any] = MappingProxyType({})  # how its graph was built, e.g. the INT8 step's choices
    # Whether a pair's logits are the same whichever other windows share its batch. Not so for dynamic INT8
    # quantization: its activation scales are taken over the whole batch tensor.
    batch_invariant: bool = True
    # The most tokens (windows x their width) one forward pass should hold; None: as many windows as the
    # settings' ``batch_size``. ONNX Runtime on the CPU sets CPU_PASS_TOKENS.
    pass_tokens: int | None = None

    @abstractmethod
    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Start and end logits for a batch of windows; returns once the device has finished."""

    def warmup(self, width: int = 64, batch: int = 1) -> None:
        ids = np.ones((batch, width), dtype=np.int64)  # id 1 exists in every vocabulary
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        self.run({k: v for k, v in feed.items() if k in self.input_names})

    def describe(self) -> dict:
        return {
            "backend": self.backend,
            "device": self.device,
            "provider": self.provider,
            "dtype": self.dtype,
            "size_mb": round(self.size_bytes / 1e6, 1),
            "parameters": self.num_parameters,
            "notes": list(self.notes),
            "execution": self.execution,
            "build": dict(self.build),
            "pass_tokens": self.pass_tokens,
        }


class TorchQAModel(QAModel):
    """A transformers ``*ForQuestionAnswering`` model in PyTorch."""

    backend = "torch"
    provider = "PyTorch"

    def __init__(self, model, device: str = "cpu") -> None:
        import inspect  # noqa: PLC0415

        import torch  # noqa: PLC0415

        self._torch = torch
        self.model = model.eval().to(device)
        self.device = str(next(model.parameters()).device)
        self.dtype = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[
            next(model.parameters()).dtype
        ]
        accepted = inspect.signature(model.forward).parameters
        self.input_names = tuple(n for n in ("input_ids", "attention_mask", "token_type_ids") if n in accepted)
        self.num_parameters = sum(p.numel() for p in model.parameters())
        self.size_bytes = sum(p.numel() * p.element_size() for p in model.parameters())

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        torch = self._torch
        feed = {k: torch.from_numpy(np.ascontiguousarray(v)).to(self.device) for k, v in inputs.items()}
        with torch.inference_mode():
            out = self.model(**feed)
            start, end = out.start_logits.float().cpu().numpy(), out.end_logits.float().cpu().numpy()
        return start, end  # .cpu() waits for the device


# ONNX Runtime on the CPU is slower per window when a pass holds many long windows: on 2 cores of an Intel
# Xeon (family 6 model 207), a 14-window passage (384 tokens each) took the INT8 graph 282 to 315 ms in
# passes of at most 384 to 1,536 tokens against 457 ms in one pass, the FP32 graph 411 to 469 against 630;
# short windows still gain from sharing a pass (INT8: 3.7 ms a window in passes of 4 x 128, 5.7 alone).
# 768 tokens a pass keeps both: 2 windows of 384, 4 of 192 (experiments/records/pass-tokens-probe-*.json);
# VARIANTS_PASS_TOKENS sets another (0: no cap). PyTorch showed no consistent difference between caps and
# keeps its passes of up to 32 windows; CUDA gains from large passes.
CPU_PASS_TOKENS = 768

QUANTIZED_OPS = {"MatMulInteger", "DynamicQuantizeMatMul", "QLinearMatMul", "MatMulIntegerToFloat", "QAttention"}


def _onnx_parameters(path: Path) -> tuple[int, str]:
    """Parameter count and weight dtype (fp32/fp16/int8) of an ONNX graph's initializers."""
    import onnx  # noqa: PLC0415

    graph = onnx.load(str(path), load_external_data=False).graph
    counts: dict[int, int] = {}
    for init in graph.initializer:
        n = int(np.prod(init.dims)) if init.dims else 1
        counts[init.data_type] = counts.get(init.data_type, 0) + n
    total = sum(counts.values())
    tp = onnx.TensorProto
    # Quantized matrix products make it INT8 however many FP32 weights stay (embeddings are not quantized:
    # in a heavily pruned model they outweigh the INT8 layers).
    if any(node.op_type in QUANTIZED_OPS for node in graph.node):
        dtype = "int8"
    elif counts.get(tp.FLOAT16, 0) > total / 2:
        dtype = "fp16"
    else:
        dtype = "fp32"
    return total, dtype


# ONNX Runtime's thread spinning, by VARIANTS_ORT_SPIN (config.ort_spin). Spinning inside a run and
# stopping at its end is faster than never spinning (threads wake at once between a run's kernels)
# and, unlike ORT's default, burns no CPU after the run: the next variant, or the next request, gets
# the cores (docs/results.md has the measurement).
SPIN_SETTINGS: dict[str, dict[str, str]] = {
    "run": {"session.intra_op.allow_spinning": "1", "session.force_spinning_stop": "1"},
    "never": {"session.intra_op.allow_spinning": "0"},
    "always": {"session.intra_op.allow_spinning": "1"},
}


def skip_layer_norm_fusion(cuda: bool) -> bool:
    """Whether residual Add + LayerNormalization become SkipLayerNormalization: on CUDA only.

    On the CPU, ORT's SkipLayerNormalization kernel is several times slower than the two ops it
    replaces (onnxruntime 1.31; docs/results.md has the measurement). The one decision for both places that fuse:
    the build's optimizer (``export.optimize_onnx``) and the session (:func:`session_options`).
    """
    return cuda


def session_options(threads: int = 0, cuda: bool = False, profile_prefix: str | None = None) -> tuple[Any, list[str]]:
    """The ONNX Runtime session options every variant runs with, and the graph fusions to turn off
    (the session would otherwise fuse what :func:`skip_layer_norm_fusion` leaves apart).

    ``profile_prefix`` turns on ORT's profiler, writing ``<prefix>_<date>.json`` at ``end_profiling()``."""
    import onnxruntime as ort  # noqa: PLC0415

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Memory bounded under requests of every length (variants/benchmarking/soak.py measures it). ORT's CPU
    # arena grows by powers of two up to the largest request's peak and keeps it; memory patterns are
    # planned and cached per input shape, and every sequence length is a new shape. Without both, each
    # run allocates from malloc and frees on return (bounded by limit_native_memory's settings).
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    if threads:
        options.intra_op_num_threads = threads
    for key, value in SPIN_SETTINGS[config.ort_spin()].items():
        options.add_session_config_entry(key, value)
    options.log_severity_level = 3
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return options, ([] if skip_layer_norm_fusion(cuda) else ["SkipLayerNormFusion"])


QUANTIZATION_REPORT = "quantization.json"  # the INT8 step's report, beside its graph (variants.building.export)


def build_facts(folder: Path) -> dict[str, Any]:
    """What a built ONNX folder says about its build steps, for records: the INT8 step's report
    (weight format, per-channel, the products left FP32), if it has one."""
    report = Path(folder) / QUANTIZATION_REPORT
    try:
        return {"int8": json.loads(report.read_text(encoding="utf-8"))} if report.is_file() else {}
    except (OSError, ValueError) as exc:
        log.warning("%s: unreadable (%s)", report, exc)
        return {}


CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
FALLBACK_OFF = "session.disable_cpu_ep_fallback"  # ORT's session config key: no node may run on the CPU


@dataclass(frozen=True)
class SessionPlan:
    """The execution providers (each with its options) and the session config entries one session gets,
    beyond :func:`session_options`: the one place a mode's choice is made, so tests check every mode's."""

    providers: tuple[tuple[str, Mapping[str, str]], ...]
    config: Mapping[str, str]

    def ort_providers(self) -> list[tuple[str, dict[str, str]]]:
        return [(name, dict(options)) for name, options in self.providers]


def session_plan(device: str, *, strict: bool = False, cuda_graph: bool = False) -> SessionPlan:
    """What a session on ``device`` asks ONNX Runtime for.

    * ``cpu``: the CPU provider.
    * ``cuda[:N]``: the CUDA provider on GPU N, the CPU provider after it for the nodes CUDA has no kernel
      for (shape arithmetic, say): ORT falls back, the session still runs.
    * ``strict`` (CUDA only): no node may run on the CPU. ORT refuses a session that lists the CPU provider
      *and* turns its fallback off ("Conflicting session configuration"), so the CUDA provider comes alone.
    * ``cuda_graph`` (CUDA only): ORT's CUDA graphs, which need every node on CUDA: strict, too.
    """
    if not device.startswith("cuda"):
        if strict or cuda_graph:
            raise ValueError(f"strict sessions and CUDA graphs need a CUDA device, not {device!r}")
        return SessionPlan(((CPU, MappingProxyType({})),), MappingProxyType({}))
    options = {"device_id": device.split(":")[1] if ":" in device else "0"}
    if cuda_graph:
        options["enable_cuda_graph"] = "1"
    if strict or cuda_graph:
        return SessionPlan(((CUDA, MappingProxyType(options)),), MappingProxyType({FALLBACK_OFF: "1"}))
    return SessionPlan(((CUDA, MappingProxyType(options)), (CPU, MappingProxyType({}))), MappingProxyType({}))


def open_session(
    path: Path,
    device: str = "cpu",
    *,
    threads: int = 0,
    strict: bool = False,
    cuda_graph: bool = False,
    profile_prefix: str | None = None,
):
    """An ONNX Runtime session of ``path`` on ``device`` with the engine's options and
    :func:`session_plan`'s providers; read ``get_providers()`` afterwards for what it really got."""
    import onnxruntime as ort  # noqa: PLC0415

    plan = session_plan(device, strict=strict, cuda_graph=cuda_graph)
    options, disabled = session_options(threads, device.startswith("cuda"), profile_prefix)
    for key, value in plan.config.items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(
        str(path), sess_options=options, providers=plan.ort_providers(), disabled_optimizers=disabled
    )


class OrtQAModel(QAModel):
    """An ONNX graph in an ONNX Runtime session: on the CPU; on CUDA through IOBinding with its inputs and
    outputs as OrtValues on the GPU; the FP16 graph on CUDA replaying captured CUDA graphs, one per length
    and batch bucket (:mod:`variants.answering.cuda_graphs`), with plain IOBinding as the named fallback
    where they cannot be captured. ``execution`` says which runs."""

    backend = "onnxruntime"

    def __init__(
        self, path: str | Path, device: str = "cpu", threads: int = 0, profile_prefix: str | None = None
    ) -> None:
        path = Path(path)
        model_file = path / "model.onnx" if path.is_dir() else path
        wants_cuda = device.startswith("cuda")
        self.cuda_index = int(device.split(":")[1]) if wants_cuda and ":" in device else 0
        self.num_parameters, self.dtype = _onnx_parameters(model_file)
        self.graphs: GraphRunner | None = None
        notes: list[str] = []
        if wants_cuda and self.dtype == "fp16" and config.cuda_graphs() and not profile_prefix:
            try:
                self.session = open_session(model_file, device, threads=threads, cuda_graph=True)
                self.graphs = GraphRunner(self.session, "cuda", self.cuda_index).capture()
            except Exception as exc:  # a node without a CUDA kernel, capture refused: plain IOBinding, named
                self.graphs = None
                note = f"CUDA graphs not captured ({type(exc).__name__}: {str(exc)[:200]}); plain IOBinding runs"
                log.warning(note)
                notes.append(note)
        if self.graphs is None:
            self.session = open_session(model_file, device, threads=threads, profile_prefix=profile_prefix)
        active = self.session.get_providers()
        self.provider = active[0]
        self.uses_cuda = self.provider == CUDA
        self.device = device if self.uses_cuda else "cpu"
        if wants_cuda and not self.uses_cuda:
            note = f"asked for {device}, but ONNX Runtime fell back to the CPU (CUDA provider unavailable)"
            log.warning(note)
            notes.append(note)
        self.notes = tuple(notes)
        self.execution = execution_name(self.uses_cuda, self.graphs, bool(notes) and wants_cuda)
        self.input_names = tuple(i.name for i in self.session.get_inputs())
        self.output_names = tuple(o.name for o in self.session.get_outputs())
        self.build = build_facts(model_file.parent)
        self.batch_invariant = self.dtype != "int8"
        self.pass_tokens = None if self.uses_cuda else config.cpu_pass_tokens(CPU_PASS_TOKENS)
        # The graph plus its external weights (model.onnx, model.onnx_data / model.onnx.data).
        self.size_bytes = sum(f.stat().st_size for f in model_file.parent.glob(model_file.stem + ".onnx*"))
        self.path = model_file

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        feed = {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in inputs.items() if k in self.input_names}
        if self.graphs is not None:
            start, end = self.graphs.run(feed)
        elif self.uses_cuda:
            start, end = bound_run(self.session, feed, "cuda", self.cuda_index)
        else:
            start, end = self.session.run(["start_logits", "end_logits"], feed)
        return start.astype(np.float32), end.astype(np.float32)


# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
# Blocks up to this size come from the heap, where the next run reuses them; larger ones are mmapped
# and go back to the system when freed. 16 MiB holds every buffer of one 384-token window, BERT-large
# included (its attention probabilities: 16 heads x 384 x 384 floats, 9.4 MB). glibc refuses more than
# 32 MiB on 64-bit systems.
ARENA_MAX = 2
MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # free memory at each arena's top kept for the next run


def limit_native_memory(mmap_threshold: int | None = None) -> bool:
    """Bound what glibc malloc keeps when the server answers from many threads, and keep what one run reuses.

    The app answers on a pool of worker threads; glibc gives each thread its own arena (up to 8 per
    core), and each arena keeps what it freed at its high-water mark, so resident memory climbs with
    every thread that meets a long input. Also, after a large block is freed, glibc raises its mmap
    threshold (up to 32 MiB, moving with the workload). Two arenas and fixed thresholds bound both:
    the buffers of one window stay on the heap and are reused, larger ones (batches of many windows)
    are mmapped and returned on free. With a 1 MiB threshold, every run of a question over ~160 tokens
    mmapped its attention buffers afresh and page-faulted them in, which cost mean and tail latency but not
    the median (``experiments/malloc_probe.py`` measures each setting in its own process; its records in
    ``experiments/records/``, the numbers in docs/results.md).
    ``MALLOC_ARENA_MAX`` and friends do the same from outside, but only before the process starts.
    Training passes its own ``mmap_threshold`` (:func:`variants.training.loop.teacher_logits`), the trim
    threshold twice it; None: :data:`MMAP_THRESHOLD` and :data:`TRIM_THRESHOLD` as they are at the call.
    Returns False where there is no glibc (macOS, Windows, musl) or glibc refused a setting (logged).
    """
    libc = _glibc()
    if libc is None:
        return False
    mmap, trim = (MMAP_THRESHOLD, TRIM_THRESHOLD) if mmap_threshold is None else (mmap_threshold, 2 * mmap_threshold)
    settings = {"M_ARENA_MAX": (_M_ARENA_MAX, ARENA_MAX), "M_MMAP_THRESHOLD": (_M_MMAP_THRESHOLD, mmap)}
    settings["M_TRIM_THRESHOLD"] = (_M_TRIM_THRESHOLD, trim)
    refused = [name for name, (param, value) in settings.items() if libc.mallopt(param, value) != 1]
    if refused:
        log.warning("glibc refused mallopt %s", ", ".join(refused))
    return not refused


@functools.cache
def _glibc() -> Any | None:
    """The C library when it is glibc (it has ``malloc_trim``), else None (macOS, Windows, musl)."""
    import ctypes  # noqa: PLC0415
    import ctypes.util  # noqa: PLC0415

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def release_free_memory() -> bool:
    """Give the heap's free pages back to the system (glibc's ``malloc_trim``; False elsewhere).

    Memory freed inside the heap stays resident: requests of many shapes (dynamic batching) leave
    free holes that later allocations do not fill, and resident memory creeps up. The batcher
    calls this when its queue is empty, so no waiting request pays for it."""
    libc = _glibc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


def cpu_threads() -> int:
    """Threads for CPU inference: ``VARIANTS_THREADS`` or all cores (0)."""
    return config.cpu_threads()


def usable_device(device: str) -> tuple[str, str]:
    """``device``, or the CPU with a sentence saying why when CUDA is asked for and torch sees no GPU: every
    variant then runs on the CPU and the page says so, instead of the PyTorch ones failing while ONNX Runtime's
    fall back to the CPU on their own."""
    if not device.startswith("cuda"):
        return device, ""
    import torch  # noqa: PLC0415

    if torch.cuda.is_available():
        return device, ""
    why = "this PyTorch build has no CUDA" if torch.version.cuda is None else "PyTorch sees no GPU"
    return "cpu", f"The {device} device was asked for, but {why}: every variant runs on the CPU."
