"""Dynamic batching, as Triton's dynamic batcher does it: requests that reach one model at about the same
time are gathered for a few milliseconds and run as one batch.

A :class:`Batcher` owns one worker thread and one model (through a ``run(pairs) -> answers`` function, in
the engine :func:`variants.answering.qa.answer_pairs`). Callers block in :meth:`Batcher.answer`; the worker waits
until ``max_batch_size`` requests are pending or the oldest has waited ``max_wait_ms``, splits what it
took into groups that are windowed alike (``group_key``), sorts each group by length (windows of similar
length share a forward pass with little padding) and runs it. Each caller gets its own answer or its
own error: when a batch fails, its requests are run again one by one, so one bad request cannot fail the
others. The model runs one batch at a time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future
from dataclasses import dataclass, field

log = logging.getLogger("variants.serving.batching")

Pair = tuple[str, str]  # (question, context)


@dataclass(frozen=True)
class BatchingConfig:
    """How long a request may wait for others, and how many run together."""

    max_wait_ms: float = 5.0
    max_batch_size: int = 16

    def __post_init__(self) -> None:
        if self.max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, not {self.max_wait_ms}")
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, not {self.max_batch_size}")


@dataclass
class _Request:
    pair: Pair
    arrived: float = field(default_factory=time.monotonic)
    future: Future = field(default_factory=Future)


@dataclass
class BatchStats:
    """Counters since start: requests answered and batches (model calls) run."""

    requests: int = 0
    batches: int = 0
    largest: int = 0

    @property
    def mean_batch(self) -> float:
        return self.requests / self.batches if self.batches else 0.0


class BatcherClosed(RuntimeError):
    """A request reached a batcher after :meth:`Batcher.close` (its variant was replaced or removed)."""


class Batcher:
    """Gathers concurrent requests for one model into batches (thread-safe; :meth:`close` when done)."""

    def __init__(
        self,
        run: Callable[[list[Pair]], list],
        config: BatchingConfig = BatchingConfig(),
        group_key: Callable[[Pair], Hashable] | None = None,
        name: str = "model",
        on_idle: Callable[[], object] | None = None,
    ) -> None:
        self.run, self.config, self.name, self.on_idle = run, config, name, on_idle
        self.group_key = group_key or (lambda _pair: None)
        self.stats = BatchStats()
        self._pending: list[_Request] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name=f"batcher-{name}", daemon=True)
        self._thread.start()

    def submit(self, question: str, context: str) -> Future:
        """Queue one pair; the future holds its answer (or its exception)."""
        request = _Request((question, context))
        with self._cond:
            if self._closed:
                raise BatcherClosed(f"the batcher of {self.name} is closed")
            self._pending.append(request)
            self._cond.notify()
        return request.future

    def answer(self, question: str, context: str):
        """The answer to one pair, run together with whatever else arrives meanwhile (blocks)."""
        return self.submit(question, context).result()

    def close(self, timeout: float = 10.0) -> None:
        """Stop taking requests, answer those already queued, and end the worker thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # --- the worker -------------------------------------------------------------------------------

    def _loop(self) -> None:
        while (batch := self._take()) is not None:
            try:
                self._run_batch(batch)
            except BaseException as exc:  # never leave a caller waiting forever
                for request in batch:
                    if not request.future.done():
                        request.future.set_exception(exc)
                raise
            if self.on_idle is not None and not self._pending:  # nobody waits: a good moment to tidy up
                self.on_idle()

    def _take(self) -> list[_Request] | None:
        """Wait for a batch: full, or the oldest request's wait is over (None once closed and drained)."""
        limit, wait = self.config.max_batch_size, self.config.max_wait_ms / 1000
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if not self._pending:
                return None
            deadline = self._pending[0].arrived + wait
            while len(self._pending) < limit and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            batch, self._pending = self._pending[:limit], self._pending[limit:]
            return batch

    def _run_batch(self, batch: list[_Request]) -> None:
        groups: dict[Hashable, list[_Request]] = {}
        for request in batch:
            try:
                key = self.group_key(request.pair)
            except Exception as exc:  # e.g. a question too long for a window: that request alone fails
                request.future.set_exception(exc)
                continue
            groups.setdefault(key, []).append(request)
        for group in groups.values():
            group.sort(key=lambda r: len(r.pair[1]))
            self._run_group(group)

    def _run_group(self, group: list[_Request]) -> None:
        try:
            answers = self.run([r.pair for r in group])
        except Exception as exc:
            if len(group) > 1:  # find out whose request it was: each runs alone
                log.info("a batch of %d failed on %s (%s); running its requests one by one", len(group), self.name, exc)
                for request in group:
                    self._run_group([request])
            else:
                group[0].future.set_exception(exc)
            return
        self.stats.requests += len(group)
        self.stats.batches += 1
        self.stats.largest = max(self.stats.largest, len(group))
        for request, answer in zip(group, answers, strict=True):
            request.future.set_result(answer)
