"""How the engine asks every variant one question and times it: the order (fastest first), the one timed
answer each variant always gives, and the timed turns within the budget (the timing rule,
:class:`~variants.answering.timing.TimingRule`). A mixin of :class:`~variants.serving.engine.Engine`, apart
from its loading and building so that each module does one thing; it uses the engine's ``variants``,
``loaded``, ``check_input``, ``_prepare`` and ``measures_cpu``."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from functools import partial

import numpy as np

from variants.answering.language import language_notice
from variants.answering.qa import Answer, InputError, NullThreshold, with_null_decision
from variants.answering.timing import TimingRule, cpu_clock, cpu_since
from variants.serving.outcome import AskProgress, VariantResult, describe_error, fill_answer, fill_timing, snapshot

log = logging.getLogger("variants.serving.engine")


class TimedAsking:
    """The engine's asking and timing (see the module's docstring)."""

    _paces: dict[str, float]  # each variant's ms per character on its latest question (run_order)

    def run_order(self, names: list[str]) -> list[str]:
        """``names`` fastest first: by each variant's pace on the latest question it answered (ms per character of
        question and passage), or, before every one has answered, by model size (smaller first, the later build
        step first among equals: along the chain, smaller is faster)."""
        paces = self._paces
        if all(n in paces for n in names):
            return sorted(names, key=lambda n: paces[n])
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

        for name in order:  # every variant answers once, the fastest first
            result, run = self._prepare(name, null_threshold)
            result.runs_asked, result.budget_s, result.notice = rule.runs, rule.budget_s, notice
            results[name] = result
            if run is not None:
                runners[name] = partial(run, question, context)
                if (timed := self._timed(result, runners[name])) is None:
                    del runners[name]
                else:
                    ans, ms, cpu = timed
                    fill_answer(result, with_null_decision(ans, result.null_threshold))
                    last_ms[name], seen_ms[name], result.pending = ms, [ms], True
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
        chars = max(1, len(question) + len(context))
        self._paces.update({n: r.latency_ms / chars for n, r in results.items() if r.latency_ms and not r.error})
        yield AskProgress(shown(), "done", rounds, rule)

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
