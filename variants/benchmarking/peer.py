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
from variants.building.sources import resolve
from variants.core import spec as specs
from variants.records.record import PEER, VariantEntry


def baseline_source(engine: Any, args: argparse.Namespace | None = None) -> Path:
    """The local folder of the baseline model (for the pipeline peer)."""

    for spec in engine.specs:
        if spec.name == "baseline":
            return engine.source(spec).path
    source = getattr(args, "baseline", None) or specs.FAMILIES[engine.preset].baseline
    return resolve(source).path


def peer_runner(engine: Any, args: argparse.Namespace | None = None) -> Runner | dict[str, Any]:
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
    s = engine.settings
    kwargs = {
        "handle_impossible_answer": True,
        "max_answer_len": s.max_answer_length,
        "max_seq_len": s.max_length,
        "doc_stride": min(s.stride, s.max_length // 2),
    }

    def answer(pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        if len(pairs) == 1:  # the call a user makes for one question
            out = [pipe(question=pairs[0][0], context=pairs[0][1], **kwargs)]
        else:
            out = pipe(question=[q for q, _ in pairs], context=[c for _, c in pairs], batch_size=batch, **kwargs)
        return [(o["answer"], None) for o in out]  # decided by the pipeline itself, at its threshold 0

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
    )
    return Runner(PEER, answer, entry)
