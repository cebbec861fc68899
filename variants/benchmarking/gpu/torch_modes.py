"""PyTorch ways of running one QA model for the GPU report, each a factory ``make(length, batch=1)``.

* eager FP32, FP16 (weights cast) and AMP (FP32 weights, FP16 autocast);
* a captured CUDA graph of the FP16 model (one per shape), which removes Python and launch overhead;
* ``torch.compile`` of the FP16 model in three modes: the default, "reduce-overhead" (CUDA graphs
  under the compiled code) and "max-autotune" (also searches kernel configurations: slow to compile,
  so a short budget skips it first).

Only eager FP32 exists on the CPU. Inputs are random token ids, every token real (no mask needed).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from variants.benchmarking.gpu.timing import Factory

# The modes that compile, slowest to build last; the report runs them after everything else.
COMPILE_MODES = {
    "torch-compile-fp16": "default",
    "torch-compile-reduce-overhead-fp16": "reduce-overhead",
    "torch-compile-max-autotune-fp16": "max-autotune",
}


def torch_inputs(length: int, device: str, vocab: int = 30522, batch: int = 1) -> dict[str, Any]:
    """A batch of ``batch`` windows of ``length`` random token ids below ``vocab``, past the special tokens
    (all real tokens: no mask needed)."""
    import torch  # noqa: PLC0415 - torch is heavy; the report imports it only when it times

    generator = torch.Generator().manual_seed(length * 1000 + batch)
    ids = torch.randint(min(1000, vocab // 2), min(vocab, 29000), (batch, length), generator=generator)
    types = torch.zeros_like(ids)
    types[:, length // 4 :] = 1
    return {"input_ids": ids.to(device), "token_type_ids": types.to(device)}


def torch_sync(device: str) -> Callable[[], None]:
    import torch  # noqa: PLC0415 - as above

    if device.startswith("cuda"):
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def eager(model, device: str, autocast: bool = False) -> Factory:
    """``model`` called as it is (``autocast``: FP16 autocast around an FP32 model)."""
    import torch  # noqa: PLC0415 - as above

    vocab = model.config.vocab_size

    def make(length: int, batch: int = 1):
        feed = torch_inputs(length, device, vocab, batch)

        def call():
            with torch.inference_mode(), torch.autocast("cuda", torch.float16, enabled=autocast):
                return model(**feed).start_logits

        return call

    return make


def graphed(model, device: str) -> Factory:
    """A CUDA graph of one forward of ``model`` per shape, captured on first use; the call replays it."""
    import torch  # noqa: PLC0415 - as above

    vocab = model.config.vocab_size

    def make(length: int, batch: int = 1):
        # A 3-D mask of ones is taken as given; a 2-D (or no) mask makes transformers check it on the host
        # (torch.all(mask == 1)), a synchronization that a CUDA graph capture does not allow.
        mask = torch.ones((batch, length, length), device=device)
        feed = {**torch_inputs(length, device, vocab, batch), "attention_mask": mask}
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode():
            with torch.cuda.stream(stream):
                for _ in range(3):  # warm up on a side stream, as capture requires
                    model(**feed)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                model(**feed)
        return graph.replay

    return make


def compiled(model, device: str, mode: str) -> Factory:
    """``torch.compile(model, mode=mode)``; shapes are marked dynamic so that a new length or batch does
    not compile again ("reduce-overhead" still records a CUDA graph per shape)."""
    import torch  # noqa: PLC0415 - as above

    return eager(torch.compile(model, mode=mode, dynamic=True), device)


def torch_modes(model, device: str) -> dict[str, Factory]:
    """Name -> factory for each way of running ``model`` on ``device`` (FP32 eager only on the CPU).
    The compile modes come last, in :data:`COMPILE_MODES`' order."""
    modes = {"torch-fp32": eager(model, device)}
    if not device.startswith("cuda"):
        return modes
    half = copy.deepcopy(model).half().eval()
    modes["torch-fp16"] = eager(half, device)
    modes["torch-amp"] = eager(model, device, autocast=True)
    modes["torch-cudagraph-fp16"] = graphed(half, device)
    for name, mode in COMPILE_MODES.items():
        modes[name] = compiled(half, device, mode)
    return modes
