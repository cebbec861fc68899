"""ONNX build steps for a Hugging Face question-answering model: export, optimize, FP16, INT8.

Every step reads one ``model.onnx`` and writes another into a new folder, so the engine can chain
them (:func:`run_onnx_chain`, the one chain, kept step by step in :class:`variants.building.cache.ArtifactCache`):

* :func:`export_onnx`: torch model in memory -> ONNX (``torch.onnx.export``, :mod:`variants.building.onnx_trace`),
  FP32, on CPU, with ``export.json`` (the exporter and its version, the opset) beside it. Exporting the
  in-memory model matters for compacted pruned models, whose layers have different head counts and
  FFN sizes that a saved config cannot describe.
* :func:`optimize_onnx`: ONNX Runtime's transformer fusions (Attention, SkipLayerNormalization,
  BiasGelu, EmbedLayerNormalization...), checked numerically against the input graph.
* :func:`to_fp16`: FP16 weights and compute for the CUDA provider; inputs/outputs stay FP32/INT64.
* :func:`quantize_int8`: dynamic INT8 quantization for the CPU provider, in the weight format that
  suits this CPU (:func:`variants.core.hardware.int8_settings`).
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import shutil
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnxruntime.quantization import QuantType, quantize_dynamic
from onnxruntime.transformers.fusion_options import FusionOptions
from onnxruntime.transformers.onnx_model import OnnxModel
from onnxruntime.transformers.optimizer import optimize_model

from variants.answering.runtime import QUANTIZATION_REPORT, skip_layer_norm_fusion
from variants.building import outside
from variants.building.onnx_trace import (
    DEFAULT_OPSET,
    PROTOBUF_LIMIT,
    exporter,
    save_graph,
    set_head_counts,
    trace_to_onnx,
)
from variants.core.hardware import Int8Settings, int8_settings

log = logging.getLogger("variants.building.export")

ONNX_NAME = "model.onnx"
STEPS = ("optimize", "fp16", "int8")
EXPORT_MANIFEST = "export.json"  # what made the graph: the exporter and its version, the opset, the inputs
_META_FILES = ("optimization.json", QUANTIZATION_REPORT, "build.json")


# --- export -------------------------------------------------------------------------------------


def export_onnx(
    model: Any, tokenizer: Any, out_dir: Path, opset: int | None = None, weights_outside: bool = False
) -> Path:
    """Export a ``*ForQuestionAnswering`` torch model to ``out_dir/model.onnx`` (+ config, tokenizer).

    Inputs ``input_ids``, ``attention_mask`` (and ``token_type_ids`` if the architecture uses them)
    with dynamic batch and sequence axes; outputs ``start_logits``, ``end_logits``. The export runs
    on CPU in FP32; a model on another device or dtype is copied first, the caller's model is left
    as it was. ``weights_outside`` (a large model's build): the graph is written as traced, unfolded, its weights
    in ``model.onnx.data`` beside it, and the steps after read and write them a tensor at a time
    (:mod:`variants.building.outside`); ONNX Runtime folds it as it loads it, and the optimization step's fused graph
    is the one-file export's.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    param = next(model.parameters())
    if param.device.type != "cpu" or param.dtype != torch.float32:
        model = copy.deepcopy(model).to("cpu", torch.float32)
    was_training, attention = model.training, model.config._attn_implementation
    model.eval()
    # ORT's transformer optimizer fuses the eager attention's MatMul/Softmax pattern; the SDPA kernel traces
    # into another graph it does not recognize.
    model.set_attn_implementation("eager")
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # transformers' mask code makes constants while traced; harmless for this export.
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            trace_to_onnx(model, out_dir / ONNX_NAME, opset or DEFAULT_OPSET, weights_outside)
    finally:
        model.set_attn_implementation(attention)
        model.train(was_training)
    model.config.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    path = out_dir / ONNX_NAME
    graph = onnx.load(path, load_external_data=False)
    names = [o.name for o in graph.graph.output]
    if names[:2] != ["start_logits", "end_logits"]:
        raise RuntimeError(f"unexpected ONNX outputs {names}; expected start_logits, end_logits")
    manifest = {
        "exporter": exporter(),
        "opset": next(o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")),
        "inputs": [i.name for i in graph.graph.input],
        "model_class": type(model).__name__,
        "model_type": model.config.model_type,
    }
    (out_dir / EXPORT_MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    log.info("exported %s to %s", type(model).__name__, path)
    return path


# --- graph optimization -------------------------------------------------------------------------


def optimize_onnx(
    src: Path,
    out_dir: Path,
    for_gpu: bool,
    *,
    raw_attention_mask: bool = False,
    tolerance: float = 1e-3,
) -> Path:
    """ONNX Runtime transformer graph optimization of ``src`` into ``out_dir/model.onnx``.

    Uses ``onnxruntime.transformers.optimizer.optimize_model`` (model type "bert", head count and
    hidden size detected per attention node, so compacted layers with different head counts fuse
    too). The result is compared with ``src`` on a small input; if it drifts by more than
    ``tolerance`` (relative to the logits' scale), attention fusion is turned off and the other
    fusions are kept. ``out_dir/optimization.json`` records the fused operator counts and each fused
    attention node's head count, in graph order (a compacted model's layers keep their own counts).

    ``raw_attention_mask=False`` is ORT's default for BERT (a 1-D mask index), the fastest, but it
    assumes right-side padding, as BERT-family tokenizers do; pass True for left-padded inputs.
    ``for_gpu`` is recorded: the ORT pass used here (basic level, run before graph partitioning)
    and the fused contrib operators are the same for the CPU and CUDA providers.
    """
    src, out_dir = Path(src), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    out = out_dir / ONNX_NAME
    feed = dummy_inputs(src)
    reference = run_cpu(src, feed)
    scale = max(1.0, *(float(np.abs(r).max()) for r in reference))
    for attention in (True, False):
        options = FusionOptions("bert")
        options.enable_attention = attention
        options.enable_skip_layer_norm = skip_layer_norm_fusion(for_gpu)
        options.use_raw_attention_mask(raw_attention_mask)
        if outside.has_outside_weights(src):  # a large model's: the same passes, its weights read as needed
            optimizer, work = outside.optimize(src, options, out.parent, set_head_counts)
            with work:
                save_graph(optimizer, out, weights_from=Path(work.name))
        else:
            # opt_level=1: ORT's basic optimizations (constant folding...) before the Python fusions,
            # the default for BERT; EP-independent, so run on CPU even for a GPU target.
            optimizer = optimize_model(
                str(src), "bert", num_heads=0, hidden_size=0, optimization_options=options, opt_level=1, use_gpu=False
            )
            save_graph(optimizer, out)
        stats = {k: int(v) for k, v in optimizer.get_fused_operator_statistics().items()}
        del optimizer  # its graph (the model's size) is not needed while the saved one is checked
        diff = max_abs_diff(reference, run_cpu(out, feed))
        if diff <= tolerance * scale:
            break
        if not attention or not _fused_attention(stats):
            raise RuntimeError(f"optimized graph differs from {src} by {diff:.3g} (fusions {stats})")
        log.warning("attention fusion changed outputs by %.3g; optimizing again without it", diff)
    report = {
        "fused_operators": stats,
        "attention_fusion": attention,
        "skip_layer_norm_fusion": options.enable_skip_layer_norm,
        "attention_heads": attention_heads(out),
        "attention_mask": "raw" if raw_attention_mask else "mask_index_end (right padding)",
        "for_gpu": for_gpu,
        "max_abs_diff_vs_input": diff,
        "logits_scale": scale,
    }
    (out_dir / "optimization.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    log.info("optimized %s: %s", src, {k: v for k, v in stats.items() if v})
    return out


class _PrunedHiddenSizeFilter(logging.Filter):
    """Drop ORT's "Input hidden size (N) is not same as weight matrix dimension" warning.

    ORT logs it for every attention node of a compacted layer (fewer heads than the model's hidden
    size); the fused node is still right (ORT supports pruned Q/K/V sizes), and optimize_onnx
    checks the outputs itself, so the warning would only mislead.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Input hidden size")


_ORT_ATTENTION_LOGGER = logging.getLogger("fusion_attention")  # ORT imports its fusion modules top-level
_ORT_ATTENTION_LOGGER.addFilter(_PrunedHiddenSizeFilter())

# A start-up warning that does not apply to these models, dropped only around the call that logs it:
#
# - ONNX Runtime's quantize_dynamic: "Please consider to run pre-processing before quantization". Its
#   pre-processing (onnxruntime.quantization.shape_inference.quant_pre_process: symbolic shape inference,
#   ORT's basic optimizations, ONNX shape inference) was tried on the shipped pruned model's optimized graph:
#   the INT8 graph came out the same (the same 157 nodes by type: 6 QAttention, 19 MatMulInteger, ...) with
#   outputs equal to the last bit on a 2 x 64-token batch, for 1.4 s more per build. The graph it would
#   prepare is already ORT-optimized (optimize_onnx) and the outputs' types are given (DefaultTensorType).
_NO_PRE_PROCESSING = "Please consider to run pre-processing before quantization"


class _DropMessage(logging.Filter):
    """Drop log records whose message starts with ``prefix``; every other record passes."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


@contextlib.contextmanager
def _without_message(logger: logging.Logger, prefix: str) -> Iterator[None]:
    """While the block runs, ``logger`` drops the records that start with ``prefix`` (and nothing else)."""
    drop = _DropMessage(prefix)
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def attention_heads(path: Path) -> list[int]:
    """``num_heads`` of each fused attention node of a graph, in graph order (one per encoder layer)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    ops = ("Attention", "QAttention", "MultiHeadAttention")
    return [
        next(a.i for a in node.attribute if a.name == "num_heads")
        for node in graph.node
        if node.op_type in ops and node.domain == "com.microsoft"
    ]


def _fused_attention(stats: dict[str, int]) -> bool:
    return any(stats.get(op, 0) for op in ("Attention", "MultiHeadAttention"))


# --- precision ----------------------------------------------------------------------------------


def to_fp16(src: Path, out_dir: Path) -> Path:
    """FP16 weights and compute for the CUDA provider; graph inputs and outputs keep their types.

    ``OnnxModel.convert_float_to_float16`` (ONNX Runtime's converter, symbolic shape inference so
    fused contrib operators are typed) with ``keep_io_types=True``; ops in its default block list
    stay FP32 behind Cast nodes.
    """
    out = Path(out_dir) / ONNX_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    model = OnnxModel(onnx.load(src))
    model.convert_float_to_float16(keep_io_types=True)
    save_graph(model, out)
    log.info("converted %s to FP16", src)
    return out


GELU_OPS = frozenset({"Gelu", "BiasGelu", "FastGelu", "QuickGelu"})


def ffn_output_products(path: Path) -> list[str]:
    """The MatMuls that read a GELU's output: each layer's FFN output product (its down-projection).

    Dynamic INT8 quantizes a product's input with one scale over the whole tensor, and a GELU's outputs
    are the most uneven inputs a BERT layer has: these are the products to leave FP32
    (:func:`quantize_int8`'s ``fp32_products``) when INT8 costs a model accuracy.
    ``experiments/int8_ffn_output_probe.py`` measures whether it does for a given model (its records in
    ``experiments/records/``); for the shipped pruned model it does not, so the engine's INT8 build
    quantizes them all. An exact GELU exported unfused ends in a Mul named after the activation
    (``intermediate_act_fn``).
    """
    graph = onnx.load(str(path), load_external_data=False).graph
    gelu_outputs = {
        out
        for node in graph.node
        if node.op_type in GELU_OPS or "intermediate_act_fn" in node.name
        for out in node.output
    }
    return [n.name for n in graph.node if n.op_type == "MatMul" and n.input[0] in gelu_outputs]


HEAD_PRODUCTS = frozenset({"MatMul", "Gemm"})
SHAPE_ONLY = frozenset({"Shape", "Size"})  # read a tensor's shape, not its values


def head_products(path: Path) -> list[str]:
    """The products that make the graph's outputs: for a ``*ForQuestionAnswering`` model its QA head
    (``qa_outputs``, hidden size -> 2: the start and end logits), found from the outputs backwards up to the
    first product on each path that reads values (not through ``Shape``), so it holds whatever the head is named.

    Dynamic INT8 quantizes its input, the last hidden state, with one scale for the whole tensor; the head
    is a tiny share of the work, so it is the cheapest product to leave FP32 (docs/results.md, "The QA head").
    """
    graph = onnx.load(str(path), load_external_data=False).graph
    producer = {out: node for node in graph.node for out in node.output}
    heads, seen = set(), set()
    pending = [o.name for o in graph.output]
    while pending:
        node = producer.get(pending.pop())
        if node is None or id(node) in seen or node.op_type in SHAPE_ONLY:
            continue
        seen.add(id(node))
        if node.op_type in HEAD_PRODUCTS:
            heads.add(node.name)
        else:
            pending.extend(node.input)
    return [n.name for n in graph.node if n.name in heads]  # graph order


def quantize_int8(
    src: Path,
    out_dir: Path,
    *,
    per_channel: bool = True,
    settings: Int8Settings | None = None,
    fp32_products: Sequence[str] | None = None,
    embeddings: bool = False,
) -> Path:
    """Dynamic INT8 quantization for the CPU provider (activations quantized at run time).

    MatMul and fused Attention nodes are quantized (MatMulInteger / QAttention), except the nodes named
    in ``fp32_products`` (default none), which stay FP32: the engine's chain names the QA head
    (:func:`head_products`); :func:`ffn_output_products` names other candidates. ``embeddings``: the fused
    embedding node's tables too (``QEmbedLayerNormalization``, most of a small model's file). ``per_channel`` (one scale
    per output column) is more accurate. ``settings`` (default: this CPU's,
    :func:`variants.core.hardware.int8_settings`) picks s8, 7-bit s8 (``reduce_range``) or u8 weights: 8-bit s8
    would saturate on x86 CPUs without VNNI. ``out_dir/quantization.json`` records the choice.
    """
    settings = settings or int8_settings()
    fp32_products = list(fp32_products or [])
    out = Path(out_dir) / ONNX_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    with _without_message(logging.getLogger(), _NO_PRE_PROCESSING):  # ORT logs it on the root logger
        quantize_dynamic(
            Path(src),
            out,
            weight_type=QuantType[settings.weight_type],
            per_channel=per_channel,
            reduce_range=settings.reduce_range,
            op_types_to_quantize=["MatMul", "Attention", *(["EmbedLayerNormalization"] if embeddings else [])],
            nodes_to_exclude=fp32_products,
            use_external_data_format=_onnx_bytes(Path(src)) > PROTOBUF_LIMIT,
            # ONNX shape inference cannot type the outputs of fused contrib ops; they are all FP32 here.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
    report = {"per_channel": per_channel, **settings.as_dict(), "fp32_products": fp32_products}
    report |= {"embeddings": "int8"} if embeddings else {}
    (out.parent / QUANTIZATION_REPORT).write_text(json.dumps(report, indent=1), encoding="utf-8")
    log.info("quantized %s to INT8 (%s, per_channel=%s)", src, settings.format, per_channel)
    return out


def quantized_weights(path: Path) -> dict[str, Any]:
    """The integer weights of a quantized graph's products (``MatMulInteger`` / ``QAttention``): their
    element types and largest stored |value| (at most 64 for 7-bit s8 weights), for tests and records."""
    graph = onnx.load(str(path)).graph
    names = {n.input[1] for n in graph.node if n.op_type in ("MatMulInteger", "QAttention")}
    weights = [i for i in graph.initializer if i.name in names]
    return {
        "types": sorted({onnx.TensorProto.DataType.Name(i.data_type) for i in weights}),
        "max_abs": max((int(np.abs(onnx.numpy_helper.to_array(i).astype(np.int32)).max()) for i in weights), default=0),
    }


def step_options(step: str, for_gpu: bool = False) -> dict[str, Any]:
    """What a build step's output depends on besides its input, for the cache keys of it and every later
    step: the optimizer's fusions (they differ by target), INT8's weight format and which products it
    leaves FP32 (``"fp32": "head"``: the chain keeps the QA head FP32, :func:`head_products`, and every
    other product INT8; docs/results.md, "The QA head").

    An INT8 graph built on a CPU with VNNI (s8 weights) would saturate on one without, so the choice
    is part of the key and each kind of CPU builds and keeps its own.
    """
    if step == "optimize":
        return {"optimize": {"skip_layer_norm": skip_layer_norm_fusion(for_gpu)}}
    if step != "int8":
        return {}
    settings = int8_settings()
    return {"int8": {"weight_type": settings.weight_type, "reduce_range": settings.reduce_range, "fp32": "head"}}


# --- chain --------------------------------------------------------------------------------------


StepStore = Callable[[tuple[str, ...], Callable[[Path], None]], Path]
"""``store(done, build)``: the folder holding the graph after steps ``done`` ("export" first), made by
``build(folder)`` unless the store already has it (a plain folder per step, or the artifact cache)."""


def check_steps(steps: Sequence[str]) -> None:
    """Raise ``ValueError`` unless ``steps`` are known, distinct, in order, and one precision at most."""
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise ValueError(f"unknown ONNX build steps {unknown}; known: {STEPS}")
    if "fp16" in steps and "int8" in steps:
        raise ValueError("fp16 and int8 are alternative precisions; choose one")
    if list(steps) != sorted(set(steps), key=STEPS.index):
        raise ValueError(f"steps must be distinct and in the order {STEPS}, got {tuple(steps)}")


def apply_step(step: str, src: Path, out_dir: Path, for_gpu: bool) -> Path:
    """One build step ("optimize", "fp16" or "int8") from ``src`` into ``out_dir``, which keeps the export's
    manifest (``export.json``: every graph of a chain says what exported it)."""
    out = _apply_step(step, src, out_dir, for_gpu)
    manifest = Path(src).parent / EXPORT_MANIFEST
    if manifest.is_file():
        shutil.copyfile(manifest, out.parent / EXPORT_MANIFEST)
    return out


def _apply_step(step: str, src: Path, out_dir: Path, for_gpu: bool) -> Path:
    if step == "optimize":
        return optimize_onnx(src, out_dir, for_gpu=for_gpu)
    if step == "fp16":
        return to_fp16(src, out_dir)
    if step == "int8":
        head = head_products(src)
        if len(head) != 1:  # a QA model's logits come from one product; kept FP32 anyway, but it costs time
            log.warning("%s: %d products make the outputs (%s); all stay FP32 in INT8", src, len(head), head)
        return quantize_int8(src, out_dir, fp32_products=head)
    raise ValueError(f"unknown ONNX build step {step!r}; known: {STEPS}")


def run_onnx_chain(
    export: Callable[[Path], Any],
    steps: Sequence[str],
    for_gpu: bool,
    store: StepStore,
    progress: Callable[[float, str], None] | None = None,
    apply: Callable[[str, Path, Path, bool], Any] = apply_step,
) -> Path:
    """The one ONNX chain: ``export(folder)`` writes the FP32 graph, then each of ``steps`` reads the one
    before; ``store`` keeps each step's folder (the engine's is the artifact cache, so a chain shares its
    steps with every other chain that starts the same way). Returns the final ``model.onnx``. ``apply`` runs
    a step (:func:`apply_step`'s arguments; the engine's runs a large model's in a child process,
    :mod:`variants.building.apart`)."""
    check_steps(steps)
    names = ("export", *steps)
    path: Path | None = None
    for i, step in enumerate(names):
        if progress is not None:
            progress(i / len(names), step)
        if step == "export":
            build = export
        else:

            def build(tmp: Path, src: Path | None = path, step: str = step) -> None:
                assert src is not None
                apply(step, src, tmp, for_gpu)

        path = store(names[: i + 1], build) / ONNX_NAME
    assert path is not None
    return path


def build_onnx_chain(model: Any, tokenizer: Any, steps: Sequence[str], out_dir: Path, for_gpu: bool) -> Path:
    """Export ``model``, then apply ``steps`` (among "optimize", "fp16", "int8", in order), into one folder.

    :func:`run_onnx_chain` with a folder per step in ``out_dir/.work`` (removed after); leaves the final
    ``model.onnx`` (+ external data, config, tokenizer, ``optimization.json`` if optimized) and a
    ``build.json`` describing the steps in ``out_dir``.
    """
    check_steps(steps)
    out_dir = Path(out_dir)
    work = out_dir / ".work"

    def store(done: tuple[str, ...], build: Callable[[Path], None]) -> Path:
        folder = work / done[-1]
        build(folder)
        return folder

    current = run_onnx_chain(lambda tmp: export_onnx(model, tokenizer, tmp), steps, for_gpu, store)
    export_dir = work / "export"
    # Final graph (+ its external data), step reports, then config/tokenizer files from the export.
    for path in current.parent.iterdir():
        shutil.move(path, out_dir / path.name)
    for step in steps:
        for name in _META_FILES:
            if (work / step / name).is_file() and not (out_dir / name).exists():
                shutil.move(work / step / name, out_dir / name)
    for path in export_dir.iterdir():
        if not path.name.startswith(ONNX_NAME) and not (out_dir / path.name).exists():
            shutil.move(path, out_dir / path.name)
    shutil.rmtree(work)
    build = {"steps": ["export", *steps], "for_gpu": for_gpu, "model_class": type(model).__name__}
    build["export"] = json.loads((out_dir / EXPORT_MANIFEST).read_text(encoding="utf-8"))
    (out_dir / "build.json").write_text(json.dumps(build, indent=1), encoding="utf-8")
    return out_dir / ONNX_NAME


# --- helpers ------------------------------------------------------------------------------------


def dummy_inputs(path: Path, batch: int = 2, seq_len: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """A small right-padded batch for the graph's inputs (ids below the vocabulary size if known)."""
    path = Path(path)
    config_file = path.parent / "config.json"
    config = json.loads(config_file.read_text()) if config_file.is_file() else {}
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, seq_len), dtype=np.int64)
    mask[1:, seq_len * 2 // 3 :] = 0  # padding on the right of the other rows
    values = {
        "input_ids": rng.integers(0, min(config.get("vocab_size", 100), 1000), (batch, seq_len)),
        "attention_mask": mask,
        "token_type_ids": np.repeat((np.arange(seq_len) >= seq_len // 2)[None], batch, 0)
        * int(config.get("type_vocab_size", 2) > 1),
    }
    names = [i.name for i in onnx.load(path, load_external_data=False).graph.input]
    return {name: values[name].astype(np.int64) for name in names}


def run_cpu(path: Path, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of ``path`` on ONNX Runtime's CPU provider (a check on a small input: the session keeps no packed
    copy of the weights and no memory arena, so it holds the model's size once, not twice)."""
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_prepacking", "1")
    options.enable_cpu_mem_arena = False
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def max_abs_diff(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Largest absolute difference between matching outputs (compared in FP32)."""
    pairs = zip(a, b, strict=True)
    return max(float(np.abs(np.float32(x) - np.float32(y)).max()) for x, y in pairs)


def _onnx_bytes(path: Path) -> int:
    """Size of a saved graph with its external data files (those next to it, named after it)."""
    return sum(p.stat().st_size for p in path.parent.glob(f"{path.stem}*") if p.is_file())
