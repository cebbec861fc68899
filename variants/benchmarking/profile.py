"""Where a variant's time per question goes: tokenizing, the forward pass, decoding; and how close the
forward pass comes to what the machine can do.

For each question (batch 1, the bench's sample) the three stages of :func:`variants.answering.qa.answer_pairs` are
timed apart. The operations a question costs are counted once per window shape with PyTorch's
``FlopCounterMode`` on the torch model whose arithmetic the variant runs (the compacted model for a
compacted chain: an ONNX graph computes the same products); achieved GFLOP/s is that count over the
forward time. The machine's peak is measured, not looked up: one large FP32 matrix product in torch
and one INT8 product (``MatMulInteger``, the op dynamic quantization runs) in ONNX Runtime, each on
the threads the variants get.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from variants.answering.qa import DecodeSettings, LogitsModel, decode, model_passes, run_windows, tokenize
from variants.answering.timing import describe
from variants.core.squad import QAExample

PEAK_SIZE = 1024  # the square matrix product that measures the peak


def _median(values: list[float]) -> float:
    """The median to 4 significant figures (stages of a tiny model take microseconds)."""
    return float(f"{np.median(values):.4g}") if values else float("nan")


def flop_counter(torch_model: Any) -> Callable[[int, int], float]:
    """``count(windows, width)``: floating-point operations of one forward pass of that shape (cached)."""
    import torch  # noqa: PLC0415
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415

    @functools.cache
    def count(windows: int, width: int) -> float:
        ids = torch.ones((windows, width), dtype=torch.long)
        with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=_cpu_attention_formula()) as counter:
            torch_model(input_ids=ids, attention_mask=ids, token_type_ids=torch.zeros_like(ids))
        return float(counter.get_total_flops())

    return count


def _cpu_attention_formula() -> dict:
    """torch's counter knows the CUDA attention kernels, not the CPU one (torch 2.13): the same formula for it."""
    import torch  # noqa: PLC0415
    from torch.utils.flop_counter import sdpa_flop_count  # noqa: PLC0415

    def cpu_sdpa(query_shape, key_shape, value_shape, *_args, out_shape=None, **_kwargs) -> int:
        return sdpa_flop_count(query_shape, key_shape, value_shape)

    op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    return {op: cpu_sdpa} if op is not None else {}


STAGES = ("tokenize_ms", "forward_ms", "decode_ms")


@dataclass
class StageTimer:
    """One variant's stage times, gathered a question at a time so that variants can take turns."""

    model: LogitsModel
    tokenizer: Any
    settings: DecodeSettings
    flops: Callable[[int, int], float] | None = None
    times: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in STAGES})
    shapes: list[tuple[int, int]] = field(default_factory=list)
    passes: list[list[tuple[int, int]]] = field(default_factory=list)  # each question's (windows, width) per pass
    error: str | None = None

    def answer(self, e: QAExample, timed: bool = True) -> None:
        """Tokenize, run and decode ``e``; keep the three stage times if ``timed``."""
        t0 = time.perf_counter()
        windows = tokenize(self.tokenizer, [(e.question, e.context)], self.settings)
        t1 = time.perf_counter()
        starts, ends = run_windows(self.model, windows, self.settings.batch_size)
        t2 = time.perf_counter()
        decode(windows, starts, ends, [e.context], self.settings)
        t3 = time.perf_counter()
        if timed:
            for name, seconds in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2), strict=True):
                self.times[name].append(seconds * 1000)
            self.shapes.append(windows.context_mask.shape)
            passes = model_passes(self.model, windows, self.settings.batch_size)
            self.passes.append([(rows.stop - rows.start, width) for rows, width in passes])

    def summary(self) -> dict[str, Any]:
        """Median ms of each stage, tokens and GFLOP per question, achieved GFLOP/s; or the error."""
        if self.error:
            return {"error": self.error}
        # Counted here, after the timed questions: counting runs the PyTorch model, whose threads
        # would still be busy when the next question's stages are timed.
        shapes = self.shapes
        gflop = [sum(self.flops(n, w) for n, w in passes) / 1e9 for passes in self.passes] if self.flops else []
        out: dict[str, Any] = {name: _median(values) for name, values in self.times.items()}
        out["tokens"] = int(np.median([n * w for n, w in shapes])) if shapes else None
        if gflop:
            out["gflop"] = _median(gflop)
            out["gflops_achieved"] = _median(
                [g / (ms / 1000) for g, ms in zip(gflop, self.times["forward_ms"], strict=True)]
            )
        out["n"] = len(shapes)
        return out


def profile_in_turns(
    timers: dict[str, StageTimer], examples: list[QAExample], warmup: int = 3, round_size: int = 25
) -> dict[str, dict[str, Any]]:
    """:meth:`StageTimer.summary` of each variant after timing ``examples`` on all of them.

    As in :func:`variants.answering.timing.latency_pass`, the variants take turns, ``round_size`` questions each,
    so that a change in the machine's speed falls on all of them alike, and each turn starts with one
    untimed question. A variant that raises keeps its error and drops out; the others go on.
    """

    def run(timer: StageTimer, questions: list[QAExample], timed: bool) -> None:
        if timer.error:
            return
        try:
            for e in questions:
                timer.answer(e, timed)
        except Exception as exc:  # one failing variant never stops the others
            timer.error = describe(exc)

    for timer in timers.values():
        run(timer, examples[:warmup], timed=False)
    step = max(1, round_size)
    for lo in range(0, len(examples), step):
        chunk = examples[lo : lo + step]
        for timer in timers.values():
            run(timer, chunk[:1], timed=False)
            run(timer, chunk, timed=True)
    return {name: timer.summary() for name, timer in timers.items()}


def profile_stages(
    model: LogitsModel,
    tokenizer: Any,
    examples: list[QAExample],
    settings: DecodeSettings,
    flops: Callable[[int, int], float] | None = None,
    warmup: int = 3,
) -> dict[str, Any]:
    """One variant's profile (:func:`profile_in_turns` with no other variant); raises what it raises."""
    timer = StageTimer(model, tokenizer, settings, flops)
    for e in examples[:warmup]:
        timer.answer(e, timed=False)
    for e in examples:
        timer.answer(e)
    return timer.summary()


def fp32_peak_gflops(threads: int, size: int = PEAK_SIZE, repeats: int = 5) -> float:
    """Best of ``repeats`` FP32 ``size``^3 matrix products in torch on ``threads`` threads, GFLOP/s."""
    import torch  # noqa: PLC0415

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size), torch.randn(size, size)
        torch.mm(a, b)
        best = min(_seconds(lambda: torch.mm(a, b)) for _ in range(repeats))
    finally:
        torch.set_num_threads(before)
    return round(2 * size**3 / best / 1e9, 1)


def int8_peak_gops(threads: int, size: int = PEAK_SIZE, repeats: int = 5) -> float:
    """Best of ``repeats`` INT8 ``size``^3 products (u8 x s8 ``MatMulInteger``) in ONNX Runtime, GOP/s."""
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.integers(-127, 127, (size, size), dtype=np.int8), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "w"], ["y"])],
        "peak",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [size, size])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [size, size])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    feed = {"a": rng.integers(0, 255, (size, size), dtype=np.uint8)}
    session.run(None, feed)
    best = min(_seconds(lambda: session.run(None, feed)) for _ in range(repeats))
    return round(2 * size**3 / best / 1e9, 1)


def _seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def machine_peak(threads: int) -> dict[str, Any]:
    """The measured FP32 and INT8 matrix-product peaks on ``threads`` threads."""
    return {
        "threads": threads,
        "fp32_gflops": fp32_peak_gflops(threads),
        "int8_gops": int8_peak_gops(threads),
        "method": f"best of 5 {PEAK_SIZE}^3 matrix products: FP32 torch.mm, INT8 ONNX Runtime MatMulInteger (u8 x s8)",
    }
