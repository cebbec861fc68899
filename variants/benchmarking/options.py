"""What a benchmark run is set to (:class:`Options`), its defaults and the method text every record
carries, and :class:`Runner`, one timed answerer (a variant or the peer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from variants.answering.qa import DecodeSettings
from variants.answering.timing import Answerer
from variants.core.spec import ASSETS
from variants.records.record import VariantEntry

DEFAULT_DATA = ASSETS / "data" / "squad_v2_dev_sample.json"


SEQ_LENS = (32, 64, 128, 256, 384)


LATENCY_PASSES = 5  # whole latency passes per bench run, by default (see measure.latency_passes)


BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)


METHOD = {
    "accuracy": "official SQuAD v2 metric (percent); answers from the engine's decoding, accuracy_batch questions "
    "per call, except for a model whose answers depend on what shares its batch (dynamic INT8: one activation scale "
    "per pass), which answers one question per call, as the app calls it. "
    "Each question is decoded once, keeping its best span and ln(null score / span score); three views decide "
    "from those: 'pipeline' at null threshold 0 (transformers' pipeline rule, what the app does), 'best' at the "
    "threshold that maximizes F1 on these questions (official best_f1 search; HasAns/NoAns at that threshold), "
    "'calibrated' at the model's own threshold from its config.json (none for a model without one). The peer "
    "has the pipeline view only: the pipeline returns no null score beside a span, and has no threshold to set",
    "latency_ms": "batch 1, one question end to end (tokenize, every window, decode: what Engine.answer_one "
    "times) after warm-up; time.perf_counter. Variants take turns in rounds of latency_round questions, each "
    "turn after one untimed question (the first call after another backend ran is slower). The whole pass runs "
    "latency_passes times, one after another, each with its warm-up: the statistics pool every pass's times, "
    "and latency_pass_p50_ms keeps each pass's median",
    "throughput_qps": "1000 / mean batch-1 latency (every pass); peak_throughput_qps: the best of the batch sweep",
    "speedup": "p50 latency of the baseline (or the peer) / p50 latency of the variant. With latency_passes > 1 "
    "the whole latency pass runs that many times, one after another: the speedup is then the median of the "
    "per-pass ratios, and *_range their lowest and highest (latency_ms pools every pass's times)",
    "agreement_with_baseline": "share of questions whose normalized answer (at threshold 0) equals the baseline's",
    "profile": "per variant, on the first profile_questions questions at batch 1: median ms of tokenizing, the forward "
    "pass (every window) and decoding, timed apart; variants take turns as in latency_ms; GFLOP per question "
    "counted by torch's FlopCounterMode on the torch model whose arithmetic the variant runs, at the shape of "
    "each forward pass the question takes (variants.answering.qa.model_passes); achieved GFLOP/s = that count / "
    "forward time (median over questions). "
    "hardware.measured_peak: the best FP32 and INT8 matrix products this machine ran on the same threads "
    "(variants.benchmarking.profile)",
    "seq_len_sweep": "one synthetic window of exactly seq_len tokens through model.run; variants take turns, "
    "5 runs each (after one untimed run), so load from elsewhere falls on all of them alike",
    "batch_sweep": "batch_size real questions per call, their windows in one forward pass where they fit (ONNX "
    "Runtime on the CPU: passes of at most the model's pass_tokens tokens, as the engine runs them)",
    "memory": "MB = 1e6 bytes. Process RSS, and its peak during this variant's accuracy pass and sweeps "
    "(the whole process, with every variant loaded); on CUDA torch's peak allocation (PyTorch "
    "tensors only) and NVML's used device memory (all processes)",
}


@dataclass
class Options:
    """How much to measure."""

    latency_samples: int = 200
    warmup: int = 5
    latency_round: int = 25
    latency_passes: int = 1  # the command line's default is LATENCY_PASSES; the app's quick runs keep one
    runs: int = 30
    seq_lens: tuple[int, ...] = SEQ_LENS
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    sweep_questions: int = 64
    sort_by_length: bool = False
    skip_sweeps: bool = False
    accuracy_batch: int = 16
    profile_questions: int = 100  # 0: no profile


@dataclass
class Runner:
    """Something that answers questions (a loaded variant, or the peer) and the record entry it fills."""

    name: str
    answer: Answerer  # (text, ln(null/span) or None) per pair; engine variants give the undecided best span
    entry: VariantEntry
    model: Any = None  # a variants.answering.runtime.QAModel, for the sequence-length sweep
    tokenizer: Any = None
    settings: DecodeSettings | None = None
    batch_invariant: bool = True  # without a model: whether its answers are the same whatever shares the call
    # where it runs in a process of its own (a peer): that process's memory for its entry, instead of the bench's
    memory: Callable[[], dict[str, Any]] | None = None
