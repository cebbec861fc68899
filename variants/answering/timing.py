"""Timing and memory primitives for the benchmark (:mod:`variants.benchmarking.bench`), and the one timing
rule every interface shares (:class:`TimingRule`, with :func:`speedup`, the one place a speedup is computed).

Everything here times with ``time.perf_counter`` around calls that return only once the device has
finished (``QAModel.run`` copies its outputs to the CPU). An ``Answerer`` is any callable that takes
(question, context) pairs and a batch size and returns (answer text, no-answer probability or None)
per pair: a loaded variant through the engine's decoding, or a peer in a process of its own, which times
itself by the same rule (:class:`OwnTiming`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from variants.core.squad import QAExample

Progress = Callable[[float, str], None]
Answerer = Callable[[list[tuple[str, str]], int], list[tuple[str, float | None]]]


def describe(exc: BaseException) -> str:
    """A one-line ``Type: message`` for a record."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]


def summarize(times_ms: list[float]) -> dict[str, float | int]:
    """p50/p90/p99/mean/std/min/max (ms, numpy's linear-interpolated percentiles) and the sample count."""
    a = np.asarray(times_ms, dtype=float)
    if a.size == 0:
        return {"n": 0}
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    std = float(a.std(ddof=1)) if a.size > 1 else 0.0
    stats = {"p50": p50, "p90": p90, "p99": p99, "mean": a.mean(), "std": std, "min": a.min(), "max": a.max()}
    return {**{k: round(float(v), 3) for k, v in stats.items()}, "n": int(a.size)}


def cycle(examples: list[QAExample], n: int) -> list[QAExample]:
    """``n`` questions, going round ``examples`` again if it has fewer."""
    return [examples[i % len(examples)] for i in range(n)] if examples else []


@dataclass(frozen=True)
class OwnTiming:
    """One call timed where it ran, by :meth:`Timing.time_one`'s rule: an answerer in a process of its own (a peer,
    :mod:`variants.benchmarking.peer_worker`) times itself and keeps the reading in its ``timed`` attribute, so the
    pipe to it is not charged to it and its CPU time and wait are its own threads'."""

    ms: float
    cpu_ms: float
    wait_ms: float | None


@dataclass
class Timing:
    """Batch-1 latencies of one answerer, with the answers it gave."""

    times_ms: list[float] = field(default_factory=list)
    preds: dict[str, str] = field(default_factory=dict)
    na_probs: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    pass_p50_ms: list[float] = field(default_factory=list)  # one median per pass (see latency_passes)
    # beside each timed run's wall time: the process's CPU time and its threads' wait for a CPU (cpu_since)
    cpu_ms: list[float] = field(default_factory=list)
    wait_ms: list[float | None] = field(default_factory=list)

    def time_one(self, answer: Answerer, example: QAExample) -> None:
        """Answer ``example`` once at batch 1, timed end to end, keeping the answer and the run's CPU time and
        wait (read outside the timed span, so the reading costs the timing nothing)."""
        clock, started = cpu_clock(), time.perf_counter()
        ((text, na_prob),) = answer([(example.question, example.context)], 1)
        ms = (time.perf_counter() - started) * 1000
        cpu_ms, wait_ms = cpu_since(clock)
        if (own := getattr(answer, "timed", None)) is not None:  # it ran elsewhere and timed itself (OwnTiming)
            ms, cpu_ms, wait_ms = own.ms, own.cpu_ms, own.wait_ms
        self.times_ms.append(ms)
        self.cpu_ms.append(cpu_ms)
        self.wait_ms.append(wait_ms)
        self.preds[example.id] = text
        if na_prob is not None:
            self.na_probs[example.id] = na_prob

    @property
    def stretched(self) -> float | None:
        """The timing rule's measure of a busy machine over these runs (:func:`stretch`)."""
        return stretch(self.cpu_ms, self.wait_ms)


def latency_pass(
    answerers: dict[str, Answerer],
    examples: list[QAExample],
    samples: int,
    warmup: int,
    progress: Progress | None = None,
    round_size: int = 25,
) -> dict[str, Timing]:
    """Batch-1 latency of each answerer on ``samples`` questions, end to end, after ``warmup`` questions.

    The answerers take turns, ``round_size`` questions each, so that load from other processes falls
    on all of them alike. Each turn starts with one untimed question: the first call after another
    backend ran is slower (measured up to 1.7x after an ONNX Runtime session on a busy CPU), and no
    answerer should pay for the one before it. One that raises keeps its error and drops out.
    """
    timings = {name: Timing() for name in answerers}
    for name, answer in answerers.items():
        try:
            for e in cycle(examples, warmup):
                answer([(e.question, e.context)], 1)
        except Exception as exc:
            timings[name].error = describe(exc)
    questions = cycle(examples, samples)
    done, total = 0, len(questions) * len(answerers)
    for lo in range(0, len(questions), max(1, round_size)):
        chunk = questions[lo : lo + max(1, round_size)]
        for name, answer in answerers.items():
            t = timings[name]
            if t.error:
                continue
            try:
                answer([(chunk[0].question, chunk[0].context)], 1)  # settle, untimed
                for i, e in enumerate(chunk, start=lo + 1):
                    t.time_one(answer, e)
                    done += 1
                    if progress:
                        progress(done / total, f"latency: {name}, question {i}/{len(questions)}")
            except Exception as exc:
                t.error = describe(exc)
    return timings


def latency_passes(
    answerers: dict[str, Answerer],
    examples: list[QAExample],
    samples: int,
    warmup: int,
    passes: int = 1,
    progress: Progress | None = None,
    round_size: int = 25,
) -> dict[str, Timing]:
    """:func:`latency_pass` ``passes`` times over the same questions; each answerer's times from every pass
    together, with each pass's median in ``pass_p50_ms``.

    One pass can be off by more than the gaps it is meant to show: on a shared 2-core VM the ratio of
    two answerers' medians moved from 3.9 to 4.6 between passes of one process. A ratio per pass, and
    the median and range of those, says how far one number can be trusted.
    """
    merged = {name: Timing() for name in answerers}
    for i in range(max(1, passes)):
        step = None if progress is None else (lambda f, m, i=i: progress((i + f) / max(1, passes), m))
        running = {name: answer for name, answer in answerers.items() if not merged[name].error}
        for name, timing in latency_pass(running, examples, samples, warmup, step, round_size).items():
            into = merged[name]  # one that fails drops out of the later passes, as within a pass
            into.error = timing.error
            into.times_ms += timing.times_ms
            into.cpu_ms += timing.cpu_ms
            into.wait_ms += timing.wait_ms
            into.preds.update(timing.preds)
            into.na_probs.update(timing.na_probs)
            if timing.times_ms and not timing.error:
                into.pass_p50_ms.append(round(float(np.median(timing.times_ms)), 3))
    return merged


def synthetic_inputs(tokenizer: Any, length: int, names: tuple[str, ...], seed: int = 0) -> dict[str, np.ndarray]:
    """One window of exactly ``length`` tokens: [CLS] question [SEP] context [SEP], random word ids."""
    special = set(tokenizer.all_special_ids)
    words = np.array([i for i in range(len(tokenizer)) if i not in special])
    ids = np.random.default_rng(seed).choice(words, size=length)
    q = max(1, length // 8)
    ids[0], ids[q + 1], ids[-1] = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.sep_token_id
    types = np.zeros(length, dtype=np.int64)
    types[q + 2 :] = 1
    feed = {"input_ids": ids, "attention_mask": np.ones(length, dtype=np.int64), "token_type_ids": types}
    return {k: v.astype(np.int64)[None, :] for k, v in feed.items() if k in names}


def seq_len_sweep(
    models: dict[str, tuple[Any, Any]],
    lengths: tuple[int, ...],
    runs: int,
    warmup: int = 3,
    round_size: int = 5,
    thread_cpu: bool = False,
) -> dict[str, list[dict]]:
    """Latency of each ``model.run`` on one synthetic window of each length; ``models``: name -> (model, tokenizer).

    The models take turns, ``round_size`` runs each with one untimed run first, like ``latency_pass``:
    a burst of load from elsewhere then falls on all of them, not on whichever ran at that moment.
    A length that fails for a model records its error in that model's row; the others go on.
    ``thread_cpu`` adds the calling thread's CPU time per run (``thread_cpu_p50_ms``): with one compute
    thread it is the whole computation, and unlike wall time it does not grow while other processes
    hold the cores.
    """
    rows: dict[str, list[dict]] = {name: [] for name in models}
    for length in lengths:
        feeds, times, cpu_times, errors = {}, {}, {}, {}
        for name, (model, tokenizer) in models.items():
            try:
                feeds[name] = synthetic_inputs(tokenizer, length, model.input_names)
                for _ in range(warmup):
                    model.run(feeds[name])
                times[name], cpu_times[name] = [], []
            except Exception as exc:
                free_gpu()
                errors[name] = describe(exc)
        for _ in range(0, runs, max(1, round_size)):
            for name in list(times):
                model, feed = models[name][0], feeds[name]
                try:
                    model.run(feed)  # settle, untimed
                    for _ in range(min(max(1, round_size), runs - len(times[name]))):
                        started, cpu_started = time.perf_counter(), time.thread_time()
                        model.run(feed)
                        times[name].append((time.perf_counter() - started) * 1000)
                        cpu_times[name].append((time.thread_time() - cpu_started) * 1000)
                except Exception as exc:
                    free_gpu()
                    errors[name] = describe(exc)
                    del times[name]
        for name in models:
            if name in errors:
                rows[name].append({"seq_len": length, "error": errors[name]})
                continue
            st = summarize(times[name])
            rows[name].append(
                {
                    "seq_len": length,
                    "p50_ms": st["p50"],
                    "p90_ms": st["p90"],
                    "mean_ms": st["mean"],
                    "min_ms": st["min"],
                    "max_ms": st["max"],
                    "n": st["n"],
                }
            )
            if thread_cpu:
                cpu = summarize(cpu_times[name])
                rows[name][-1].update(thread_cpu_p50_ms=cpu["p50"], thread_cpu_min_ms=cpu["min"])
    return rows


def batch_sweep(
    answer: Answerer, examples: list[QAExample], sizes: tuple[int, ...], n_questions: int, sort_by_length: bool
) -> list[dict]:
    """Per-question latency and throughput with ``size`` real questions per call, for each size.

    At least as many questions as the largest size are used (going round ``examples`` if needed);
    each size is warmed up with one untimed batch.
    """
    n = max(n_questions, *sizes)
    pool = cycle(examples, n)
    if sort_by_length:
        pool.sort(key=lambda e: len(e.question) + len(e.context))
    rows = []
    for size in sizes:
        batches = [[(e.question, e.context) for e in pool[lo : lo + size]] for lo in range(0, n, size)]
        try:
            answer(batches[0], size)
            times = []
            for pairs in batches:
                started = time.perf_counter()
                answer(pairs, size)
                times.append(time.perf_counter() - started)
        except Exception as exc:
            free_gpu()
            rows.append({"batch_size": size, "error": describe(exc)})
            continue
        total = sum(times)
        rows.append(
            {
                "batch_size": size,
                "n_questions": n,
                "n_batches": len(batches),
                "ms_per_question": round(total * 1000 / n, 3),
                "batch_p50_ms": round(float(np.median(times)) * 1000, 3),
                "throughput_qps": round(n / total, 2),
            }
        )
    return rows


# --- memory -------------------------------------------------------------------------------------------


class MemoryProbe:
    """Process RSS and its peak (Linux VmHWM, resettable), and CUDA memory where there is a GPU (MB = 1e6 B)."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.index = int(device.split(":")[1]) if ":" in device else 0

    def reset(self) -> None:
        """Start a new peak: the process's peak RSS and torch's peak CUDA allocation."""
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)
        except OSError:
            pass
        if self.cuda:
            import torch  # noqa: PLC0415

            torch.cuda.reset_peak_memory_stats(self.index)

    def read(self) -> dict[str, float | None]:
        import psutil  # noqa: PLC0415

        out: dict[str, float | None] = {
            "rss_mb": round(psutil.Process().memory_info().rss / 1e6, 1),
            "peak_rss_mb": peak_rss_mb(),
        }
        if self.cuda:
            import torch  # noqa: PLC0415

            out["gpu_peak_allocated_mb"] = round(torch.cuda.max_memory_allocated(self.index) / 1e6, 1)
            out["gpu_used_mb"] = nvml_used_mb(self.index)
        return out


def peak_rss_mb() -> float | None:
    """Peak resident memory of this process since the last reset (VmHWM), else since it started."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) * 1024 / 1e6, 1)
    except OSError:
        pass
    try:
        import resource  # noqa: PLC0415

        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6, 1)
    except (ImportError, OSError):
        return None


def nvml_used_mb(index: int) -> float | None:
    """Memory in use on GPU ``index`` by every process (NVML), or None without NVML."""
    try:
        import pynvml  # noqa: PLC0415 - from nvidia-ml-py

        pynvml.nvmlInit()
        try:
            return round(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).used / 1e6, 1)
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None


def free_gpu() -> None:
    """Give cached CUDA memory back after an error (e.g. out of memory at a large batch)."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


# --- the timing rule every interface shares -------------------------------------------------------

DEFAULT_RUNS = 5  # timed runs per variant at most
DEFAULT_BUDGET_S = 12.0  # model time for the whole call, timed runs after every variant's first answer
SETTLE_BELOW_MS = 50.0  # a variant whose runs are shorter than this gets an untimed run at the start of each turn
# A first run longer than this is timed: what a warm-up saves (caches, the thread pool waking, buffers for a new
# length) is milliseconds, a few percent of such a run, while the warm-up would cost the whole run again.
COUNT_FIRST_ABOVE_MS = 1000.0


@dataclass(frozen=True)
class TimingRule:
    """How the engine times one question on several variants: the Ask tab, ``python -m variants ask``, the
    gradio ``/answer`` API and ``POST /v1/answer`` all go through it (:meth:`Engine.ask_stream
    <variants.serving.engine.Engine.ask_stream>`).

    1. **Fastest first, every variant answers once.** The variants answer in turn, the fastest first (by
       the engine's latest measure), so the first answer shows soonest. That first run is an untimed warm-up
       (the first run after loading, or after another model ran, is the slow one), except where it took
       longer than ``count_first_above_ms`` (or the rule has no warm-up): then it is the first timed run, as
       a warm-up would save little and cost a whole run. Every variant answers once, whatever the budget:
       an answer is worth more than a timing.
    2. **Timed in turns, within the budget.** Round after round, each variant still timing runs once, the
       fastest first, so that load from elsewhere falls on all of them alike; a variant whose runs take
       under ``settle_below_ms`` first runs once more untimed in its turn (the first call after another
       backend ran is slower, up to 1.7x, see :func:`latency_pass`, which matters for a 10 ms run and not
       for a 1 s one). A variant stops at ``runs`` timed runs, or gives them up when its next run (going by
       the median of its runs so far) would end past ``budget_s`` from the call's start: the slowest give up
       first. So the call's
       model time stays within the budget plus one run per variant, whatever the passage.
    3. **At least one timing.** A variant the budget left without a timed run is timed by its first run
       (not warmed up, and said so).
    4. **Median of k.** Each variant's latency is the median of its k runs, with the fastest and the
       slowest as the spread (with a handful of runs, quartiles would be interpolations of two or three
       of them); the speedup is :func:`speedup` of the medians, the one place a ratio is computed.
    """

    runs: int = DEFAULT_RUNS
    budget_s: float | None = DEFAULT_BUDGET_S
    warmup: bool = True
    settle_below_ms: float = SETTLE_BELOW_MS
    count_first_above_ms: float = COUNT_FIRST_ABOVE_MS
    note: str = ""  # what a request's limits changed, e.g. "runs capped at 20 (100 asked)"; said with the timing
    # The most model time the whole call may take, first runs included (None: no cap): a variant whose first run
    # would end past it, by its pace and the passage's windows, is skipped before it starts (guard.request_rule).
    cap_s: float | None = None

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs (repeats) must be at least 1, not {self.runs}")
        if self.budget_s is not None and not self.budget_s > 0:
            raise ValueError(f"the time budget must be above 0 seconds, not {self.budget_s}")

    def counts_first(self, first_ms: float) -> bool:
        """Whether a variant's first run, which took ``first_ms``, is its first timed run (no separate warm-up)."""
        return not self.warmup or first_ms > self.count_first_above_ms

    def fits(self, elapsed_s: float, next_s: float) -> bool:
        """Whether a timed run expected to take ``next_s``, starting ``elapsed_s`` into the call, ends within
        the budget."""
        return self.budget_s is None or elapsed_s + next_s <= self.budget_s

    def within_cap(self, elapsed_s: float, first_s: float) -> bool:
        """Whether a first run expected to take ``first_s``, starting ``elapsed_s`` into the call, ends in the cap."""
        return self.cap_s is None or elapsed_s + first_s <= self.cap_s

    def settle(self, last_ms: float | None) -> bool:
        """Whether a variant whose last run took ``last_ms`` gets an untimed run at the start of its turn."""
        return last_ms is not None and last_ms < self.settle_below_ms

    def describe(self, k: int, *, first_counted: bool = False, gave_up: bool = False) -> str:
        """What was done for one variant, in words, e.g. "3 timed runs, after one untimed warm-up run; 5 asked, but
        the next would have ended past the 12 s time budget the variants share"."""
        text = f"{k} timed run{'s' if k != 1 else ''}"
        if self.warmup and first_counted and gave_up and k == 1:
            text += ", its first run, not warmed up"
        elif self.warmup and first_counted:
            over = self.count_first_above_ms / 1000
            text += f", the first without a warm-up (it took over {over:g} s: a warm-up adds little)"
        elif self.warmup:
            text += ", after one untimed warm-up run"
        if gave_up and k < self.runs and self.budget_s is not None:
            text += (
                f"; {self.runs} asked, but the next would have ended past the {self.budget_s:g} s time budget "
                "the variants share"
            )
        return text + (f"; {self.note}" if self.note else "")


# --- how busy the machine was while a run was timed --------------------------------------------------

BUSY_ABOVE = 1.25  # a variant whose typical run took more than 1.25x its computing time was disturbed


def cpu_clock() -> tuple[float, float | None]:
    """This process's CPU time so far and how long its threads have waited for a CPU while ready to run
    (seconds; the wait None where the kernel does not say).

    Wall time alone cannot tell a slow variant from a busy machine; CPU time can. On Linux each thread's
    ``/proc/self/task/<tid>/schedstat`` gives its time on a CPU and its time runnable but waiting for one
    (the scheduler's run delay). Summed over the process's threads, they cover every thread a run uses:
    the caller, PyTorch's and ONNX Runtime's compute threads and a batcher's. A thread that waits on a lock
    or I/O is asleep and counts in neither. Elsewhere: ``time.process_time`` and no wait.
    """
    cpu = wait = 0
    try:
        tasks = list(os.scandir("/proc/self/task"))
    except OSError:
        return time.process_time(), None
    for task in tasks:
        try:
            with open(f"{task.path}/schedstat") as f:
                on_cpu, delay, _ = f.read().split()
        except (OSError, ValueError):  # a thread that ended meanwhile, or a kernel without schedstat
            continue
        cpu, wait = cpu + int(on_cpu), wait + int(delay)
    if cpu == 0:  # no schedstat at all
        return time.process_time(), None
    return cpu / 1e9, wait / 1e9


def cpu_since(start: tuple[float, float | None]) -> tuple[float, float | None]:
    """CPU and wait time (ms) since ``start`` (a :func:`cpu_clock` reading); never below 0 (a thread that
    ended in between takes its time with it)."""
    cpu, wait = cpu_clock()
    cpu_ms = round(max(0.0, cpu - start[0]) * 1000, 3)
    if wait is None or start[1] is None:
        return cpu_ms, None
    return cpu_ms, round(max(0.0, wait - start[1]) * 1000, 3)


def stretch(cpu_ms: list[float], wait_ms: list[float | None]) -> float | None:
    """How many times its computing time a typical run took because its threads waited for a CPU: the median
    over runs of (CPU + wait) / CPU. 1.0 on a machine with cores to spare, 2.0 when another process held
    them half the time; None without a wait measure."""
    ratios = [(c + w) / c for c, w in zip(cpu_ms, wait_ms, strict=False) if w is not None and c > 0]
    return round(float(np.median(ratios)), 2) if ratios else None


def busy(stretch_: float | None) -> bool:
    """Whether runs this stretched are disturbed enough that their latencies and speedups cannot be trusted."""
    return stretch_ is not None and stretch_ > BUSY_ABOVE


SERVED = TimingRule(runs=1, budget_s=None, warmup=False)  # one request as it is served: POST /v1/answer's default


def speedup(baseline_ms: float | None, ms: float | None) -> float | None:
    """The baseline's median over a variant's: above 1 is faster. The one place a speedup is computed
    (the engine fills ``VariantResult.speedup`` with it; cards, the summary and the chart show that)."""
    if not baseline_ms or not ms:
        return None
    return baseline_ms / ms


SAME_SIZE = 0.05  # sizes within 5% of each other are "the same size"


def size_ratio(baseline_mb: float | None, mb: float | None) -> float | None:
    """How many times smaller than the baseline a model is (below 1: larger); None without both sizes."""
    if not baseline_mb or not mb:
        return None
    return baseline_mb / mb


def same_size(ratio: float | None) -> bool:
    return ratio is not None and abs(ratio - 1) < SAME_SIZE


def spread(times_ms: list[float]) -> tuple[float | None, float | None, float | None]:
    """The median, fastest and slowest of ``times_ms`` (ms, rounded to 0.01), or Nones for no runs."""
    if not times_ms:
        return None, None, None
    return round(float(np.median(times_ms)), 2), round(min(times_ms), 2), round(max(times_ms), 2)
