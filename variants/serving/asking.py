"""How the engine asks every variant one question and times it: the order (fastest first), the one timed
answer each variant gives unless it would end past the call's cap, and the timed turns within the budget (the
timing rule, :class:`~variants.answering.timing.TimingRule`). A mixin of :class:`~variants.serving.engine.Engine`,
apart from its loading and building so that each module does one thing; it uses the engine's ``variants``,
``loaded``, ``specs``, ``status``, ``settings_for``, ``check_input``, ``_prepare`` and ``measures_cpu``.

**The cap on first runs.** A request's model time is capped (``TimingRule.cap_s``, 30 s for every caller:
:func:`variants.serving.guard.request_rule`), first runs included. The passage is tokenized before any model runs
(once per tokenizer and window), so its windows are known; a variant's first run is predicted as its pace (ms per
full window of tokens, from its first run on the latest question it answered) times the passage's full windows.
Before a variant has answered anything (the first question after a start) its pace is guessed from its size:
:data:`GUESS_MS_PER_WINDOW_MB` per MB of weights per window, every window counted as full, a rate above what the
slowest variant of either CPU preset took per MB on a busy 2-core machine, so that a guess errs towards skipping
(the variants answer smallest first). Where that guess alone would skip it on a passage of several windows, it
first answers the passage's start (its first window, if the guess lets that fit), and the pace
measured there decides. A variant whose first run would end past the cap, counted from the call's start, is
skipped before it starts; its result says so and what would bring it in (:func:`skip_words`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import NamedTuple

import numpy as np

from variants.answering.language import language_notice
from variants.answering.qa import Answer, InputError, NullThreshold, tokenize, with_null_decision
from variants.answering.timing import TimingRule, cpu_clock, cpu_since
from variants.serving.outcome import (
    AskProgress,
    VariantResult,
    build_result,
    describe_error,
    fill_answer,
    fill_timing,
    snapshot,
)

log = logging.getLogger("variants.serving.engine")

# A variant's ms per window per MB of its weights before its pace is known: conservative (see the module's docstring)
GUESS_MS_PER_WINDOW_MB = 20.0


class Pace(NamedTuple):
    """A variant's pace: ms per full window of tokens, on a run of ``windows`` full windows (under 1: a short
    question, whose fixed costs make the pace per window look slower than it is on a long passage)."""

    ms_per_window: float
    windows: float


class PassageWindows(NamedTuple):
    """A passage's windows for one variant: how many, their tokens in full windows, where the first one ends."""

    count: int
    full: float  # tokens / the window's length
    first_end: int  # the character the first window's context ends at


class TimedAsking:
    """The engine's asking and timing (see the module's docstring)."""

    _paces: dict[str, Pace]  # each variant's pace on its latest question (run_order, the cap)

    def run_order(self, names: list[str]) -> list[str]:
        """``names`` fastest first: by each variant's pace on the latest question it answered (ms per full window
        of tokens), or, before every one has answered, by model size (smaller first, the later build step first
        among equals: along the chain, smaller is faster)."""
        paces = self._paces
        if all(n in paces for n in names):
            return sorted(names, key=lambda n: paces[n].ms_per_window)
        chain = {v.spec.name: i for i, v in enumerate(self.loaded)}

        def size(name: str) -> tuple[float, int]:
            loaded = self.variants.get(name)
            model = loaded.model if loaded is not None else None
            return (model.size_bytes if model is not None else 0.0), -chain.get(name, 0)

        return sorted(names, key=size)

    def ask_stream(
        self,
        question: str,
        context: str,
        names: list[str] | None = None,
        *,
        rule: TimingRule | None = None,
        null_threshold: NullThreshold | None = None,
        check: bool = True,
    ) -> Iterator[AskProgress]:
        """Answer with every variant in ``names`` and time them by ``rule`` (see
        :class:`~variants.answering.timing.TimingRule`; default: the shared one): the fastest answers first, and
        the results so far (baseline first, in chain order) are yielded after each variant's answer (phase
        "answering"), after each timed round ("timing") and at the end ("done"). A variant that fails keeps
        its error and drops out; the others go on.
        """
        if check:
            self.check_input(question, context)
        rule = rule or TimingRule()
        notice = language_notice(question, context)  # answered all the same
        started = time.perf_counter()
        chain = sorted(names or [v.spec.name for v in self.loaded], key=lambda n: n != "baseline")
        order = self.run_order(chain)
        results: dict[str, VariantResult] = {}
        runners: dict[str, Callable] = {}
        last_ms: dict[str, float] = {}
        seen_ms: dict[str, list[float]] = {}  # each variant's runs so far: the median says what its next will take
        first: dict[str, tuple[float, float | None, float | None]] = {}  # an uncounted first run: ms, CPU, wait

        def shown() -> dict[str, VariantResult]:
            return snapshot({n: results[n] for n in chain if n in results})

        windows = self.window_counts(chain, question, context)  # before any model runs: the cap and the paces
        for name in order:  # every variant answers once, the fastest first, unless it would end past the cap
            result, run = self._prepare(name, null_threshold)
            result.runs_asked, result.budget_s, result.notice = rule.runs, rule.budget_s, notice
            results[name] = result
            if run is not None and name in windows and rule.cap_s is not None:
                if skip := self._past_cap(name, run, question, context, windows[name], rule, started):
                    result.error, result.skipped, run = skip, True, None
            if run is not None:
                runners[name] = partial(run, question, context)
                if (timed := self._timed(result, runners[name])) is None:
                    del runners[name]
                else:
                    ans, ms, cpu = timed
                    fill_answer(result, with_null_decision(ans, result.null_threshold))
                    last_ms[name], seen_ms[name], result.pending = ms, [ms], True
                    if name in windows:  # its pace now: the next call's prediction and order
                        self._paces[name] = Pace(ms / max(windows[name].full, 1e-6), windows[name].full)
                    if rule.counts_first(ms):
                        result.first_timed = True
                        _keep_run(result, ms, cpu)
                    else:
                        first[name] = (ms, *cpu) if cpu else (ms, None, None)
            yield AskProgress(shown(), "answering", 0, rule)  # each variant's card can show its answer (or error)
        # the timed turns go fastest first by this question's own first runs (the order above was the last question's)
        turns = sorted((n for n in runners if len(results[n].latency_runs) < rule.runs), key=lambda n: seen_ms[n][0])
        rounds = 0
        while turns:
            for name in list(turns):
                result, run = results[name], runners[name]
                settle = rule.settle(last_ms[name])
                expected_s = float(np.median(seen_ms[name])) * (2 if settle else 1) / 1000  # a spike is not the rule
                if not rule.fits(time.perf_counter() - started, expected_s):  # the slowest give up first
                    result.budget_cut = True
                    turns.remove(name)
                    continue
                if settle and self._attempt(result, run) is None:
                    turns.remove(name)
                    continue
                if (timed := self._timed(result, run)) is None:
                    turns.remove(name)
                    continue
                _, last_ms[name], cpu = timed
                seen_ms[name].append(last_ms[name])
                _keep_run(result, last_ms[name], cpu)
                if len(result.latency_runs) >= rule.runs:
                    turns.remove(name)
            rounds += 1
            fill_timing(results, rule, done=False)
            yield AskProgress(shown(), "timing", rounds, rule)
        for name, (ms, cpu_ms, wait_ms) in first.items():  # the budget left no timed run: the first run times it
            result = results[name]
            if not result.latency_runs and result.error is None:
                result.first_timed = True
                _keep_run(result, ms, (cpu_ms, wait_ms) if cpu_ms is not None else None)
        fill_timing(results, rule, done=True)
        yield AskProgress(shown(), "done", rounds, rule)

    def not_ready(self, names: list[str] | None = None) -> list[VariantResult]:
        """The preset's variants (those of ``names``) not loaded yet, each a result with its build's state and step
        (:func:`~variants.serving.outcome.build_result`), in the preset's order."""
        snap = self.status.snapshot()
        return [
            build_result(s.name, s.label, snap.state(s.name))
            for s in self.specs
            if s.name not in self.variants and (names is None or s.name in names)
        ]

    def window_counts(self, names: list[str], question: str, context: str) -> dict[str, PassageWindows]:
        """Each of ``names``' windows for this question and their tokens in full windows (tokens / window length),
        tokenized once per tokenizer and window before any model runs; a variant without a tokenizer here (served
        elsewhere) is left out."""
        out: dict[str, PassageWindows] = {}
        seen: dict[tuple, PassageWindows] = {}
        for name in names:
            loaded = self.variants.get(name)
            if loaded is None or not loaded.ok or loaded.tokenizer is None:
                continue
            settings = self.settings_for(loaded)
            key = (
                getattr(loaded.tokenizer, "name_or_path", id(loaded.tokenizer)),
                settings.max_length,
                settings.stride,
            )
            if key not in seen:
                windows = tokenize(loaded.tokenizer, [(question, context)], settings)
                tokens = float(np.asarray(windows.encoding["attention_mask"]).sum())
                offsets, inside = np.asarray(windows.encoding["offset_mapping"][0]), windows.context_mask[0]
                first_end = int(offsets[inside, 1].max()) if inside.any() else len(context)
                seen[key] = PassageWindows(len(windows.owner), tokens / settings.max_length, first_end)
            out[name] = seen[key]
        return out

    def _past_cap(
        self,
        name: str,
        run: Callable,
        question: str,
        context: str,
        counts: PassageWindows,
        rule: TimingRule,
        started: float,
    ) -> str:
        """Why ``name``'s first run on a passage of ``counts`` windows would end past ``rule``'s cap, counted from
        ``started`` (:func:`skip_words`), or "" when it fits. A variant that would be skipped by a guess from its
        size, or by its pace on a question shorter than a window (fixed costs inflate it: a 20-token question gave
        BERT-large 57 s per window), first answers the passage's start (its first window) where that fits, by the
        lower of the two, so that its pace on a whole window decides."""
        first_s, paced = self.first_run_s(name, counts.count, counts.full)
        short = (pace := self._paces.get(name)) is None or pace.windows < 1  # a guess, or a short question's pace
        if short and counts.count > 1 and not rule.within_cap(time.perf_counter() - started, first_s):
            self._probe_pace(name, run, question, context[: counts.first_end], rule, started)
            first_s, paced = self.first_run_s(name, counts.count, counts.full)
        if rule.within_cap(time.perf_counter() - started, first_s):
            return ""
        return skip_words(first_s, paced, rule.cap_s, rule.within_cap(0.0, first_s), context)

    def _probe_pace(self, name: str, run: Callable, question: str, head: str, rule: TimingRule, started: float) -> None:
        """``name``'s pace from its answer on ``head`` (the start of the passage), where its guess says that fits in
        the cap; a failure is left to its own first run (or its skip) to tell."""
        probe = self.window_counts([name], question, head)
        if name not in probe:
            return
        paced_s = self.first_run_s(name, probe[name].count, probe[name].full)[0]
        if not rule.within_cap(time.perf_counter() - started, min(paced_s, self.size_guess_s(name, 1))):
            return
        timed = time.perf_counter()
        try:
            run(question, head)
        except Exception as exc:
            log.debug("%s: no pace from the passage's start: %s", name, exc)
            return
        ms = (time.perf_counter() - timed) * 1000
        self._paces[name] = Pace(ms / max(probe[name].full, 1e-6), probe[name].full)

    def first_run_s(self, name: str, windows: int, full: float) -> tuple[float, bool]:
        """How long ``name``'s first run on ``windows`` windows (``full`` full windows of tokens) should take, in
        seconds, and whether that is from its own pace (False: guessed from its size, before it answered anything)."""
        pace = self._paces.get(name)
        if pace is not None:
            return pace.ms_per_window * full / 1000, True
        return self.size_guess_s(name, windows), False

    def size_guess_s(self, name: str, windows: int) -> float:
        """Seconds ``windows`` windows should take ``name`` by its size alone (:data:`GUESS_MS_PER_WINDOW_MB`)."""
        loaded = self.variants.get(name)
        mb = loaded.model.size_bytes / 1e6 if loaded is not None and loaded.model is not None else 0.0
        return GUESS_MS_PER_WINDOW_MB * mb * windows / 1000

    def _timed(
        self, result: VariantResult, call: Callable[[], Answer]
    ) -> tuple[Answer, float, tuple[float, float | None] | None] | None:
        """``call``'s answer, its wall time (ms) and, where this process runs the model, its CPU time and wait for
        a CPU (read outside the timed span: how busy the machine was); None if it failed (see :meth:`_attempt`)."""
        clock = cpu_clock() if self.measures_cpu else None
        timed = time.perf_counter()
        if (ans := self._attempt(result, call)) is None:
            return None
        ms = (time.perf_counter() - timed) * 1000
        return ans, ms, (cpu_since(clock) if clock is not None else None)

    def _attempt(self, result: VariantResult, call: Callable[[], Answer]) -> Answer | None:
        """``call``'s answer, or None with the failure as the result's one-line error (bad input is raised:
        it would stop every variant alike)."""
        try:
            return call()
        except InputError:
            raise
        except Exception as exc:
            result.error, result.pending = describe_error(exc), False
            log.warning("variant %s failed: %s", result.variant, result.error)
            log.debug("traceback", exc_info=True)
            return None


def _keep_run(result: VariantResult, ms: float, cpu: tuple[float, float | None] | None) -> None:
    """One timed run on ``result``: its wall time and, where measured, its CPU time and wait for a CPU."""
    result.latency_runs.append(round(ms, 3))
    if cpu is not None:
        result.cpu_runs.append(cpu[0])
        result.wait_runs.append(cpu[1])


def skip_words(first_s: float, paced: bool, cap_s: float, alone: bool, context: str) -> str:
    """Why a variant was skipped and what brings it in: leaving out the others (when it would fit alone, answering
    first), or a shorter passage (about as much as would fit)."""
    how = "at its pace on the latest question" if paced else "guessed from its size: it has not answered yet"
    said = f"Skipped: its answer would take about {first_s:.0f} s ({how}), past the {cap_s:g} s one request may take"
    if alone:
        return (
            f"{said}, after the variants before it. Leave out the others to get its answer (the Ask tab's “Leave "
            "out”, or POST /v1/answer with its name)."
        )
    fits = int(len(context) * cap_s / first_s) // 100 * 100
    learn = "" if paced else " (or a short question first, which measures its pace)"
    return f"{said}. Ask about a shorter passage: about {fits:,} characters would fit{learn}."
