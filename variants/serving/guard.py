"""Every request's limits, decided in one place: how big a body may be, how much of an input a refusal may echo,
how many requests wait for the models and how long, and who owns a run.

The handlers (``POST /v1/answer``, the gradio ``/answer`` and ``/evaluate`` APIs, the tabs) ask here and turn a
:class:`Refused` into their own kind of answer (an HTTP status, a ``gr.Error``, a message under a box); none of
them counts or times on its own.

- :func:`request_rule`: the most one request may ask of the models, the same caps for every caller (the Ask
  tab's settings, the gradio ``/answer`` API, ``POST /v1/answer`` and its Ray Serve routes): at most
  :data:`MAX_RUNS` timed runs per variant and :data:`MAX_BUDGET_S` seconds of budget, a budget of 0 or none being
  the cap, never "unbounded"; and the whole call's model time, first runs included, within the same
  :data:`MAX_BUDGET_S` (``TimingRule.cap_s``: a variant whose first run would end past it, predicted from its pace
  and the passage's windows, is skipped before it starts, :mod:`variants.serving.asking`).

- :class:`ModelLine`: requests that wait for the models, in a line of their own with a bounded length; one more
  is refused at once, saying how long to wait, instead of waiting in the server's shared thread pool. One visitor
  holds at most :data:`MAX_WAITING_PER_VISITOR` places in it.
- :class:`RunBook`: the long runs (a file of questions scored in chunks) going on in the whole app, each bound
  to the session that started it; another session's run id reads nothing and changes nothing; one run per
  visitor; idle runs and runs past their wall-clock life are dropped.
- :func:`visitor`: who a request comes from, the one key of "per visitor": the client's address, which is the
  forwarded one only behind a proxy the host names (:func:`variants.core.config.trusted_proxies`; the server
  resolves it, :mod:`variants.serving.edge`), so that a client cannot pretend to be many.
- :func:`excerpt`: the most of a visitor's input any refusal quotes back.
- The body limits every route has (:data:`MAX_BODY_BYTES`, :data:`MAX_FILE_BODY_BYTES`, :data:`BODY_TIMEOUT_S`),
  applied in front of every route by :mod:`variants.serving.edge`.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from variants.answering.timing import SERVED, TimingRule

MAX_RUNS = 20  # timed runs per variant one request may ask for (the Ask tab's slider goes this far)
MAX_BUDGET_S = 30.0  # seconds of model time one request's timed runs may take (the default is 12 s)
MAX_BODY_BYTES = 1_000_000  # any request's body: a 25,000-character passage in JSON is ~0.1 MB
MAX_FILE_BYTES = 5_000_000  # a file of questions (the Your questions tab's, /evaluate's data)
# the body of a route that carries such a file (an upload, or /evaluate's data as JSON text, whose escapes can
# triple it: a newline is two characters, a non-ASCII one up to six)
MAX_FILE_BODY_BYTES = 3 * MAX_FILE_BYTES + MAX_BODY_BYTES
BODY_TIMEOUT_S = 120.0  # a body must have arrived this long after its headers (a 16 MB one at 1 Mbit/s)
# connections (or requests in flight) a server of the app's own takes at once: an open page holds two or three (its
# event stream, a call, a poll), so this is ~100 pages at once, past what a few cores answer, while a client that
# opens thousands of idle connections is refused at once rather than holding the process's file descriptors
MAX_CONNECTIONS = 256
EXCERPT_CHARS = 60  # the most of an input a refusal quotes back
MAX_WAITING = 32  # requests waiting for the models in one line; one more is refused with how long to wait
# places one visitor may hold in that line (waiting or on the models): a page sends one question at a time, so a
# few is room for a second tab or a script that keeps the models busy without gaps, and 32 / 4 = 8 visitors at
# least can wait at once whatever one of them sends
MAX_WAITING_PER_VISITOR = 4
MAX_LONG_RUNS = 2  # /evaluate runs (the tab's and the API's together) going on in the app at once, one per visitor
RUN_IDLE_S = 120.0  # a run whose owner has not asked for a chunk this long is dropped (its page closed)
RUN_LIFE_S = 900.0  # and any run is dropped this long after it started, however it is kept alive

T = TypeVar("T")


class Refused(Exception):
    """A request turned away, with the one sentence that says why; ``status`` the HTTP status that fits it and
    ``retry_after`` (seconds) when waiting will help."""

    def __init__(self, message: str, status: int = 422, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def excerpt(value: Any, n: int = EXCERPT_CHARS) -> str:
    """A short, printable quote of ``value`` for a refusal: its ``repr`` cut to ``n`` characters with its size,
    so that a 30 MB input is never echoed back (and a lone surrogate is shown escaped, never written raw)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= n:
        return repr(text) if isinstance(value, str) else text
    return f"{text[: n - 1]!r}… ({len(text):,} characters)"


def visitor(request: Any) -> str:
    """Who ``request`` (a ``gr.Request``, a starlette ``Request``) comes from: its client's address. Behind a proxy
    the host names, the server has already put the forwarded client's address there (uvicorn's proxy headers,
    set up by :func:`variants.serving.edge.trust_proxies`); otherwise it is the connection's own, whatever headers
    it sends. "" when unknown (a handler called without a request)."""
    client = getattr(request, "client", None)
    return str(getattr(client, "host", None) or "")


def wait_words(seconds: float) -> str:
    """'about 40 seconds', 'about 3 minutes': how long to wait, in words a visitor reads."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} seconds"
    return f"about {round(seconds / 60)} minutes"


class FairTurns:
    """``slots`` turns handed out first come, first served (thread-safe). A ``threading.Semaphore`` is not: a
    thread that releases it and asks again at once (a long run's next chunk) takes it back before a thread that
    waited meanwhile wakes, so a question asked during a long run waited for the whole run's model time, not one
    chunk's."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._order: deque[object] = deque()
        self._cond = threading.Condition()

    def acquire(self) -> None:
        me = object()
        with self._cond:
            self._order.append(me)
            try:
                while not (self._free and self._order[0] is me):
                    self._cond.wait()
            except BaseException:
                self._order.remove(me)
                self._cond.notify_all()
                raise
            self._order.popleft()
            self._free -= 1
            self._cond.notify_all()  # with more slots, the next in line may go too

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    @property
    def waiting(self) -> int:
        """Threads waiting for a turn now."""
        with self._cond:
            return len(self._order)


@dataclass
class ModelLine:
    """Requests waiting their turn at the models, in a line of their own: ``slots`` run at once, at most
    ``max_waiting`` wait, and one more is refused at once (:class:`Refused`, status 429) with how long the line
    takes to clear, from the mean time of the last turns. ``name`` says what waits ("question", "request"). A
    request that names its ``visitor`` (:func:`visitor`) is also refused when that visitor holds ``per_visitor``
    places already (waiting or on the models), saying so. Turns go in the order they were asked for
    (:class:`FairTurns`): a long run's next chunk waits behind a question that came while its last chunk ran.

    :meth:`turn` is the blocking form (a worker thread waits its turn); :meth:`run` the async one: it admits or
    refuses on the event loop and waits in a thread counted by the line's own limiter, never in the server's
    shared pool, so that the page's own routes are served whatever the line's length."""

    slots: int = 1
    max_waiting: int = MAX_WAITING
    name: str = "request"
    first_guess_s: float = 2.0  # a turn's time before any was measured
    ticket_s: float = 300.0  # a place reserved ahead of another queue is given up after this long
    per_visitor: int = MAX_WAITING_PER_VISITOR
    _waiting: int = field(default=0, init=False)
    _tickets: list[tuple[float, str]] = field(default_factory=list, init=False)  # when each reserved place lapses
    _held: dict[str, int] = field(default_factory=dict, init=False)  # places each visitor holds, tickets included
    _mean_s: float | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    _turns: FairTurns = field(init=False)
    _limiter: Any = field(default=None, init=False)

    def __post_init__(self) -> None:
        self._turns = FairTurns(self.slots)

    @property
    def waiting(self) -> int:
        """Requests waiting now: in the line, and with a place reserved ahead of another queue."""
        return self._waiting + len(self._tickets)

    def wait_s(self) -> float:
        """How long the line takes to clear now, in seconds (at least one turn)."""
        turn = self._mean_s or self.first_guess_s
        return turn * (self.waiting + self.slots) / self.slots

    def busy(self) -> Refused:
        wait, ahead = self.wait_s(), self.waiting
        return Refused(
            f"The app is busy: {ahead} {self.name}{'s are' if ahead != 1 else ' is'} waiting for the models, as "
            f"many as it holds; try again in {wait_words(wait)}.",
            429,
            max(1, math.ceil(wait)),
        )

    def full(self) -> bool:
        """Whether one more request would be refused now (a cheap look, before its body is even read)."""
        return self.waiting >= self.max_waiting

    def holds(self, visitor: str) -> int:
        """The places ``visitor`` holds now: waiting, on the models, or reserved."""
        with self._lock:
            self._lapse(time.monotonic())
            return self._held.get(visitor, 0)

    def _too_many(self, visitor: str) -> Refused:
        held = self._held.get(visitor, 0)
        wait = self._mean_s or self.first_guess_s
        return Refused(
            f"You have {held} {self.name}{'s' if held != 1 else ''} in the line for the models already (from "
            f"this page, another tab or a script), as many as one visitor may: wait for "
            f"{'one of them' if held != 1 else 'it'} to be answered, then ask again.",
            429,
            max(1, math.ceil(wait)),
        )

    def _hold(self, visitor: str, change: int) -> None:  # under the lock
        if visitor:
            held = self._held.get(visitor, 0) + change
            if held > 0:
                self._held[visitor] = held
            else:
                self._held.pop(visitor, None)

    def _lapse(self, now: float) -> None:  # under the lock: reserved places nobody took in time
        for _, who in (t for t in self._tickets if t[0] <= now):
            self._hold(who, -1)
        self._tickets = [t for t in self._tickets if t[0] > now]

    def _admit(self, claim: bool = False, visitor: str = "") -> None:
        with self._lock:
            mine = next((t for t in self._tickets if t[1] == visitor), None) if claim else None
            if claim and (mine or self._tickets):  # its place was reserved: it takes that place
                taken = mine or self._tickets[0]
                self._tickets.remove(taken)
                self._hold(taken[1], -1)
            elif self.waiting >= self.max_waiting:
                raise self.busy()
            elif visitor and self._held.get(visitor, 0) >= self.per_visitor:
                raise self._too_many(visitor)
            self._waiting += 1
            self._hold(visitor, 1)

    def reserve(self, visitor: str = "") -> None:
        """Reserve a place for a request about to wait in another queue first (the page's model queue: a
        validator runs before it), refused at once when the line is full or ``visitor`` holds their share;
        :meth:`turn` with ``claim`` takes it. A place not taken in ``ticket_s`` (the request was cancelled)
        lapses."""
        with self._lock:
            now = time.monotonic()
            self._lapse(now)
            if self.waiting >= self.max_waiting:
                raise self.busy()
            if visitor and self._held.get(visitor, 0) >= self.per_visitor:
                raise self._too_many(visitor)
            self._tickets.append((now + self.ticket_s, visitor))
            self._hold(visitor, 1)

    def _take_turn(self) -> float:
        try:
            self._turns.acquire()
        finally:
            with self._lock:
                self._waiting -= 1
        return time.monotonic()

    def _end_turn(self, started: float, visitor: str = "") -> None:
        took = time.monotonic() - started
        with self._lock:
            self._mean_s = took if self._mean_s is None else 0.8 * self._mean_s + 0.2 * took
            self._hold(visitor, -1)
        self._turns.release()

    @contextmanager
    def turn(self, claim: bool = False, visitor: str = "") -> Iterator[None]:
        """Wait for a turn in this thread (refused at once when the line is full or ``visitor`` holds their share,
        unless ``claim`` takes a place :meth:`reserve` kept), then hold it."""
        self._admit(claim, visitor)
        try:
            started = self._take_turn()
        except BaseException:
            with self._lock:
                self._hold(visitor, -1)
            raise
        try:
            yield
        finally:
            self._end_turn(started, visitor)

    @contextmanager
    def queued_turn(self) -> Iterator[None]:
        """A turn for work that already waited in the page's own model queue (a chunk of a long run): it waits for
        the models like any request in this line, so it never runs beside one, but it is never refused (its run
        was admitted when it started) and is not counted as waiting."""
        self._turns.acquire()
        started = time.monotonic()
        try:
            yield
        finally:
            self._end_turn(started)

    async def run(self, fn: Callable[..., T], *args: Any, visitor: str = "") -> T:
        """``fn(*args)`` in a worker thread once its turn comes; refused at once when the line is full or
        ``visitor`` holds their share of it."""
        self._admit(visitor=visitor)
        if self._limiter is None:  # made on the server's event loop, on first use; never fuller than the line
            self._limiter = anyio.CapacityLimiter(self.max_waiting + self.slots)
        started: list[float] = []

        def in_turn() -> T:
            started.append(self._take_turn())
            try:
                return fn(*args)
            finally:
                self._end_turn(started[0], visitor)

        try:
            return await anyio.to_thread.run_sync(in_turn, limiter=self._limiter)
        finally:
            if not started:  # cancelled before its thread began: it no longer waits
                with self._lock:
                    self._waiting -= 1
                    self._hold(visitor, -1)


@dataclass
class Run:
    """One long run and whose it is."""

    owner: str
    run: Any
    visitor: str = ""
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started: float = field(default_factory=time.monotonic)
    seen: float = field(default_factory=time.monotonic)


class RunBook:
    """The long runs going on in the whole app (thread-safe): at most ``max_runs`` at once, one per owner (a
    browser session, or an API client's session) and one per visitor (:func:`visitor`: two tabs or two API
    clients from one address share one), each found only by its owner; a run not asked for in ``idle_s`` or older
    than ``life_s`` is dropped."""

    def __init__(self, max_runs: int = MAX_LONG_RUNS, idle_s: float = RUN_IDLE_S, life_s: float = RUN_LIFE_S) -> None:
        self.max_runs, self.idle_s, self.life_s = max_runs, idle_s, life_s
        self._runs: dict[str, Run] = {}
        self._lock = threading.Lock()

    def _prune(self, now: float) -> None:
        """Drop the runs nobody asked for in ``idle_s`` or older than ``life_s``. A finished (or stopped) run stays
        until its owner reads it (:meth:`end`), so its results are shown, but no longer counts as going."""
        self._runs = {
            k: r for k, r in self._runs.items() if now - r.seen < self.idle_s and now - r.started < self.life_s
        }

    def _going(self) -> dict[str, Run]:
        return {k: r for k, r in self._runs.items() if not getattr(r.run, "finished", False)}

    def _free_in(self, runs: list[Run], now: float) -> float:
        """Seconds until the first of ``runs`` is dropped at the latest (idle or past its life)."""
        return min(min(self.life_s - (now - r.started), self.idle_s - (now - r.seen)) for r in runs)

    def start(self, owner: str, run: Any, visitor: str = "") -> str:
        """Book ``run`` for ``owner`` (from ``visitor``) and return its id; :class:`Refused` if this owner, this
        visitor, or too many, run one."""
        with self._lock:
            now = time.monotonic()
            self._prune(now)
            going = self._going()
            if owner in going:
                raise Refused("Your run is still going: stop it, or wait for it to finish, before starting another.")
            theirs = [r for r in going.values() if visitor and r.visitor == visitor]
            if theirs:
                free = self._free_in(theirs, now)
                raise Refused(
                    "Your other run is still going, in another tab or another API session: stop it there, or wait "
                    f"for it to finish (it ends within {wait_words(max(free, 30.0))} at most), then start this one.",
                    429,
                    max(1, math.ceil(free)),
                )
            if len(going) >= self.max_runs:
                free = self._free_in(list(going.values()), now)
                raise Refused(
                    f"{len(going)} runs are going on this app already, as many as it takes at once; try again "
                    f"in {wait_words(max(free, 30.0))} at most.",
                    429,
                    max(1, math.ceil(free)),
                )
            booked = Run(owner, run, visitor)
            self._runs[owner] = booked
            return booked.id

    def get(self, owner: str, run_id: str | None = None) -> Any | None:
        """``owner``'s run (with ``run_id``: only if it is that one), marked as seen; None for anyone else's."""
        with self._lock:
            now = time.monotonic()
            self._prune(now)
            booked = self._runs.get(owner)
            if booked is None or (run_id is not None and booked.id != run_id):
                return None
            booked.seen = now
            return booked.run

    def end(self, owner: str, run_id: str | None = None) -> None:
        with self._lock:
            booked = self._runs.get(owner)
            if booked is not None and (run_id is None or booked.id == run_id):
                del self._runs[owner]

    def __len__(self) -> int:
        """The runs going now (a finished run waiting to be read does not count)."""
        with self._lock:
            self._prune(time.monotonic())
            return len(self._going())


# --- what one request may ask of the models ---------------------------------------------------------


def request_rule(runs: int, budget_s: float | None, warmup: bool = True) -> TimingRule:
    """The timing rule a request asks for, within the caps: runs above :data:`MAX_RUNS` and a budget above
    :data:`MAX_BUDGET_S`, 0 or none are capped (the rule's ``note`` says so where it changed what was asked);
    ``ValueError`` for what no rule can mean (runs below 1, a negative or not-a-number budget).

    One run without a warm-up is the request as served (:data:`~variants.answering.timing.SERVED`): no
    budget to cap, it times every variant's one answer.

    Every rule it gives caps the call's whole model time at :data:`MAX_BUDGET_S`, first runs included
    (``TimingRule.cap_s``): a variant whose first run would end past it is skipped before it starts.
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    if budget_s is not None and (math.isnan(budget_s) or budget_s < 0):
        raise ValueError(f"budget_s must be 0 or more seconds, not {budget_s}")
    if runs == 1 and not warmup:
        return replace(SERVED, cap_s=MAX_BUDGET_S)
    notes = []
    if runs > MAX_RUNS:
        notes.append(f"runs capped at {MAX_RUNS} ({runs} asked)")
    if budget_s and budget_s > MAX_BUDGET_S:
        notes.append(f"budget capped at {MAX_BUDGET_S:g} s ({budget_s:g} asked)")
    elif not budget_s:
        notes.append(f"budget: the {MAX_BUDGET_S:g} s cap (no limit asked)")
    budget = min(budget_s, MAX_BUDGET_S) if budget_s else MAX_BUDGET_S  # 0 or none: the most allowed
    return TimingRule(
        runs=min(runs, MAX_RUNS), budget_s=budget, warmup=warmup, note="; ".join(notes), cap_s=MAX_BUDGET_S
    )
