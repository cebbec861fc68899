"""The benchmark's peer: transformers' own question-answering pipeline on the baseline, timed and scored
like the variants, so that every record says how far the project is ahead of the obvious way."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from variants.answering.timing import (
    describe,
)
from variants.benchmarking.options import Runner
from variants.building.cache import ArtifactCache, cache_key
from variants.building.sources import resolve, weights_identity
from variants.core import hardware
from variants.core import spec as specs
from variants.core.versions import artifact_versions
from variants.records.record import OPTIMUM_INT8, PEER, VariantEntry


def baseline_source(engine: Any, args: argparse.Namespace | None = None) -> Path:
    """The local folder of the baseline model (for the pipeline peer)."""

    for spec in engine.specs:
        if spec.name == "baseline":
            return engine.source(spec).path
    source = getattr(args, "baseline", None) or specs.FAMILIES[engine.preset].baseline
    return resolve(source, cache_dir=engine.cache_dir).path


OPTIMUM_LABEL = "optimum ORT dynamic INT8"


def peer_runner(engine: Any, args: argparse.Namespace | None = None) -> Runner | VariantEntry:
    """transformers' ``pipeline("question-answering", handle_impossible_answer=True)`` on the baseline model.

    Same device, FP32, and the engine's window and answer-length limits. The pipeline gives the null
    score only when the null answer wins, so the peer has the pipeline view only. If it cannot
    load, the returned entry carries the error.
    """
    label = "transformers pipeline (PyTorch FP32)"
    try:
        import torch  # noqa: PLC0415
        from transformers import pipeline  # noqa: PLC0415

        path = str(baseline_source(engine, args))
        started = time.perf_counter()
        pipe = pipeline("question-answering", model=path, tokenizer=path, device=engine.device, dtype=torch.float32)
        load_seconds = time.perf_counter() - started
    except Exception as exc:
        return VariantEntry(PEER, label, backend="transformers-pipeline", error=describe(exc))
    first = next(pipe.model.parameters())
    entry = VariantEntry(
        PEER,
        label,
        backend="transformers-pipeline",
        device=str(first.device),
        provider="PyTorch",
        dtype={torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}.get(first.dtype, str(first.dtype)),
        size_mb=round(sum(p.numel() * p.element_size() for p in pipe.model.parameters()) / 1e6, 1),
        parameters=sum(p.numel() for p in pipe.model.parameters()),
        load_seconds=round(load_seconds, 3),
        source=path,
        weights=weights_identity(resolve(path)),
        latency_only=baseline_latency_only(engine),
    )
    return Runner(PEER, pipeline_answerer(pipe, engine.settings), entry)


def baseline_latency_only(engine: Any) -> bool:
    """Whether the baseline the peers run has random weights (a replica): then their answers and F1 mean nothing,
    as the variants' do, and the bench times them without scoring them."""
    return any(s.latency_only for s in engine.specs if s.name == "baseline")


def pipeline_answerer(pipe: Any, settings: Any) -> Any:
    """A runner's ``answer`` over a transformers question-answering pipeline, with the engine's limits."""
    kwargs = {
        "handle_impossible_answer": True,
        "max_answer_len": settings.max_answer_length,
        "max_seq_len": settings.max_length,
        "doc_stride": min(settings.stride, settings.max_length // 2),
    }

    def answer(pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        if len(pairs) == 1:  # the call a user makes for one question
            out = [pipe(question=pairs[0][0], context=pairs[0][1], **kwargs)]
        else:
            out = pipe(question=[q for q, _ in pairs], context=[c for _, c in pairs], batch_size=batch, **kwargs)
        return [(o["answer"], None) for o in out]  # decided by the pipeline itself, at its threshold 0

    return answer


def quantization_config() -> tuple[str, Any]:
    """optimum's dynamic INT8 configuration for this CPU's instruction set, and its name: what the
    optimum documentation has an engineer pick (``AutoQuantizationConfig.<isa>(is_static=False)``)."""
    from optimum.onnxruntime.configuration import AutoQuantizationConfig  # noqa: PLC0415

    flags = hardware.cpu_features()
    if not hardware.is_x86():
        name = "arm64"
    elif "avx512_vnni" in flags:
        name = "avx512_vnni"
    elif "avx512f" in flags:
        name = "avx512"
    else:
        name = "avx2"
    return name, getattr(AutoQuantizationConfig, name)(is_static=False, per_channel=False)


def optimum_int8_runner(engine: Any, args: argparse.Namespace | None = None, threads: int | None = None) -> Any:
    """The second peer, the one an engineer would pick in ten lines: optimum's ``ORTModelForQuestionAnswering``
    exported from the same baseline, ONNX Runtime's dynamic INT8 through ``ORTQuantizer`` with the config for
    this CPU, answered by transformers' pipeline. Built once into the artifact cache (keyed by the baseline and
    the library versions). CPU only; on a GPU the entry says so. ``threads``: ONNX Runtime's intra-op threads
    (default: PyTorch's, as the variants get)."""
    if not engine.device.startswith("cpu"):
        return VariantEntry(
            OPTIMUM_INT8, OPTIMUM_LABEL, backend="optimum", error="a CPU peer: not run on " + engine.device
        )
    try:
        import onnxruntime as ort  # noqa: PLC0415
        import torch  # noqa: PLC0415
        from optimum.onnxruntime import ORTModelForQuestionAnswering, ORTQuantizer  # noqa: PLC0415
        from transformers import AutoTokenizer, pipeline  # noqa: PLC0415

        source = resolve(str(baseline_source(engine, args)))
        isa, qconfig = quantization_config()
        key = "optimum-int8-" + cache_key({"source": source.identity, "isa": isa, "versions": artifact_versions()})

        def build(tmp: Path) -> None:
            exported = ORTModelForQuestionAnswering.from_pretrained(source.path, export=True)
            ORTQuantizer.from_pretrained(exported).quantize(quantization_config=qconfig, save_dir=tmp)

        started = time.perf_counter()
        folder = ArtifactCache(engine.cache_dir).get_or_build(key, build)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or torch.get_num_threads()
        model = ORTModelForQuestionAnswering.from_pretrained(
            folder, file_name="model_quantized.onnx", session_options=options
        )
        tokenizer = AutoTokenizer.from_pretrained(source.path)
        pipe = pipeline("question-answering", model=model, tokenizer=tokenizer, device="cpu")
        load_seconds = time.perf_counter() - started
    except Exception as exc:
        return VariantEntry(OPTIMUM_INT8, OPTIMUM_LABEL, backend="optimum", error=describe(exc))
    onnx_file = Path(folder) / "model_quantized.onnx"
    entry = VariantEntry(
        OPTIMUM_INT8,
        f"{OPTIMUM_LABEL} ({isa})",
        backend="optimum",
        device="cpu",
        provider="CPUExecutionProvider",
        dtype="int8",
        size_mb=round(onnx_file.stat().st_size / 1e6, 1),
        load_seconds=round(load_seconds, 3),
        source=str(source.path),
        weights=weights_identity(source),
        build={"quantization": isa, "is_static": False, "per_channel": False, "threads": options.intra_op_num_threads},
        latency_only=baseline_latency_only(engine),
    )
    # dynamic INT8: activation scales come from the whole call, so its accuracy is measured one question a call
    return Runner(OPTIMUM_INT8, pipeline_answerer(pipe, engine.settings), entry, batch_invariant=False)
