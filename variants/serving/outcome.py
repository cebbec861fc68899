"""What the engine hands back for one question: each variant's :class:`VariantResult` (its answer, or the
error that stopped it, and its timing under the one timing rule), the :class:`AskProgress` of a streamed call,
and how both are filled. No model code: the UI reads these without loading anything."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace

from variants.answering.qa import Answer, InputError
from variants.answering.timing import TimingRule, busy, speedup, spread, stretch
from variants.building.sources import SourceUnavailable
from variants.serving.build_status import FAILED, QUEUED, READY, VariantStatus

MAX_MESSAGE_CHARS = 300  # an error on a card is one line, at most this long


@dataclass
class VariantResult:
    """One variant's answer to one question, or the error that stopped it.

    Timing (:class:`~variants.answering.timing.TimingRule`, the same in every interface): ``latency_ms``
    is the median of the ``timed_runs`` (k) runs in ``latency_runs`` (in order), with the fastest and the
    slowest as the spread; ``runs_asked`` is the most asked for and ``budget_s`` the time budget that can
    make k smaller (``budget_cut``: it did); ``first_timed``: its first run is among the k, not warmed up;
    ``timing`` says what was done in words. ``speedup`` is the baseline's median over this
    variant's (:func:`~variants.answering.timing.speedup`). ``pending``: answered, still being timed; or, with
    ``state`` "queued" or "building" (and the build ``step`` it is at, in the page's words), not built yet: an API
    lists every variant of the preset, so a client tells "not built yet" from "not in this preset"
    (:func:`build_result`). ``skipped``: not run, its first run would have ended past the request's cap.

    How busy the machine was (:func:`~variants.answering.timing.cpu_clock`): ``cpu_runs`` is the process's CPU
    time during each timed run and ``wait_runs`` how long its threads waited for a CPU meanwhile (ms, None
    where the kernel does not say); ``stretch`` the median run's (CPU + wait) / CPU, and ``busy`` whether it is
    above :data:`~variants.answering.timing.BUSY_ABOVE`, when its latency and speedup cannot be trusted.
    """

    variant: str
    label: str
    answer: str = ""
    score: float = 0.0
    latency_ms: float | None = None  # median of latency_runs
    latency_runs: list[float] = field(default_factory=list)
    latency_min_ms: float | None = None
    latency_max_ms: float | None = None
    null_threshold: float = 0.0  # the threshold this answer was decided at
    device: str = ""
    provider: str = ""
    dtype: str = ""
    execution: str = ""  # how the call ran where there is a choice, e.g. "CUDA graphs (24: 64/128/256/384 tokens)"
    start: int = 0
    end: int = 0
    null_score: float = 0.0
    guess: str = ""  # with no answer: the best span, which "no answer" beat
    guess_start: int = 0
    guess_end: int = 0
    guess_score: float = 0.0  # the guess's probability
    size_mb: float | None = None
    parameters: int | None = None
    speedup: float | None = None
    error: str | None = None
    latency_only: bool = False  # random weights (spec.latency_only): the answer and score mean nothing
    timed_runs: int = 0  # k: how many runs the median is of
    runs_asked: int = 0  # the most timed runs the rule asked for
    budget_s: float | None = None  # the rule's time budget for the whole call (None: none)
    timing: str = ""  # what was done, e.g. "3 timed runs (5 asked; the 10 s time budget allowed 3), ..."
    pending: bool = False  # answered; the timed runs are still going
    first_timed: bool = False  # its first run is its first timed run (long enough not to need a warm-up, or no room)
    budget_cut: bool = False  # it gave up timed runs: the next would have ended past the time budget
    skipped: bool = False  # not run: its first run would have ended past the request's cap (``error`` says why)
    cpu_runs: list[float] = field(default_factory=list)  # the process's CPU time during each timed run, ms
    wait_runs: list[float | None] = field(default_factory=list)  # its threads' wait for a CPU meanwhile, ms
    stretch: float | None = None  # the median run's (CPU + wait) / CPU: 1.0 on an idle machine
    busy: bool = False  # stretch above BUSY_ABOVE: the latency and the speedup are unreliable
    notice: str = ""  # one line about the input every interface shows, e.g. that it is not English
    state: str = READY  # its build: ready (answered, or failed to load: ``error``), queued, building or failed
    step: str = ""  # while building: the step it is at, in the page's words ("export to ONNX")

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class AskProgress:
    """Where one call of :meth:`Engine.ask_stream` stands: every variant's result so far (baseline first),
    the phase ("answering", "timing" or "done") and the timed rounds done."""

    results: dict[str, VariantResult]
    phase: str
    rounds: int
    rule: TimingRule


def build_result(name: str, label: str, status: VariantStatus | None) -> VariantResult:
    """The result of a variant of the preset that is not loaded yet: ``pending`` with its build ``state`` and
    ``step`` while it is queued or building, its build's error once that failed."""
    state = status.state if status is not None else QUEUED
    result = VariantResult(name, label, state=state, step=status.step_words() if status and status.step else "")
    if state == FAILED:
        result.error = status.error or "Its build failed."
    else:
        result.pending = True
    return result


def fill_answer(result: VariantResult, ans: Answer) -> None:
    result.answer, result.score = ans.text, round(ans.score, 4)
    result.start, result.end, result.null_score = ans.start, ans.end, round(ans.null_score, 4)
    result.guess, result.guess_start, result.guess_end = ans.guess, ans.guess_start, ans.guess_end
    result.guess_score = round(ans.span_score, 4) if ans.guess else 0.0


def snapshot(results: dict[str, VariantResult]) -> dict[str, VariantResult]:
    """Copies of the results as they stand (the engine goes on filling its own)."""
    return {
        name: replace(r, latency_runs=list(r.latency_runs), cpu_runs=list(r.cpu_runs), wait_runs=list(r.wait_runs))
        for name, r in results.items()
    }


def fill_timing(results: dict[str, VariantResult], rule: TimingRule, done: bool) -> None:
    """Each result's median, spread, k and speedup from its timed runs so far; with ``done``, what was done."""
    base = results.get("baseline")
    for result in results.values():
        result.latency_ms, result.latency_min_ms, result.latency_max_ms = spread(result.latency_runs)
        result.timed_runs = len(result.latency_runs)
        result.stretch = stretch(result.cpu_runs, result.wait_runs)
        result.busy = busy(result.stretch)
    for result in results.values():
        ok = result.error is None and base is not None and base.error is None
        result.speedup = speedup(base.latency_ms, result.latency_ms) if ok else None
        if done:
            result.pending = False
            words = rule.describe(result.timed_runs, first_counted=result.first_timed, gave_up=result.budget_cut)
            result.timing = words if result.timed_runs and not result.error else ""


def busy_words(results: Iterable[VariantResult]) -> str:
    """One sentence when the machine was busy while the variants were timed (any of them stretched above
    :data:`~variants.answering.timing.BUSY_ABOVE`), else "": the card, the summary, the API and the CLI all
    say it in these words."""
    worst = max((r.stretch for r in results if r.busy and r.stretch), default=None)
    if worst is None:
        return ""
    return (
        f"The machine was busy: waiting for a CPU, runs took up to {worst:.1f}× their computing time, "
        "so these latencies and speedups are unreliable; ask again when it is quieter."
    )


def describe_error(exc: BaseException) -> str:
    """A one-line message for a card or a log; tracebacks go to the log only."""
    if isinstance(exc, (SourceUnavailable, InputError)):
        return one_line(str(exc), 1000)
    text = one_line(str(exc))
    if isinstance(exc, MemoryError) or "out of memory" in text.lower():
        return f"Out of memory ({type(exc).__name__}): not enough memory for this variant; the others are unaffected."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The first non-empty line of ``text``, cut to ``limit`` characters."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"
