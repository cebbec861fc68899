"""A visitor's own Hub model, built into its no-training chain beside the preset's, with a public app's bounds.

After the checks of :mod:`variants.building.custom` (an id, a QA head of a BERT-family type, no custom code, the
host's size cap), :meth:`VisitorChains.start` builds the model's no-training chain (:func:`~variants.core.spec.chain`
without a pruned partner: the model, ONNX, ONNX Runtime's optimization, INT8 on a CPU or FP16 on a GPU) in a
background thread, into an :class:`~variants.serving.engine.Engine` of its own: its own
:class:`~variants.serving.build_status.BuildStatus` (the page draws it as it draws the start-up build), its own
artifact folder (removed when the chain is dropped) and its own speedups (against the visitor's baseline, not the
preset's).

Whose is it: the visitor's (the session that asked), and no one else's. Other visitors see neither the model nor
its answers, only, when they ask for a build of their own meanwhile, that another is going and for about how long:
the app's rule is that no client reads another's work, and a model id typed into a page is such work.

The bounds:

- one chain builds at a time in the whole app (:class:`VisitorBusy` says so, in one sentence, with the time left);
  a visitor's new model replaces their old one;
- a build never takes a place in the models' line: it runs in its own thread at a lower CPU priority (Linux), and
  questions go on meanwhile;
- ``build_s``: a build that takes longer is stopped; :meth:`VisitorChains.stop` stops one at once. Stopping is
  cooperative: the build checks between its steps (the download's files, export, optimize, INT8 or FP16) and ends
  at the next one; a step under way (an export: seconds for a 500 MB model on 2 cores) finishes first. A build in a
  subprocess would stop within a step, but the chain answers from this process (its models loaded here, beside the
  preset's), so it would build twice or hand files across; the step's seconds are the price of one path;
- ``idle_s``: a chain unused that long is dropped (checked by a timer thread), its artifact folder and its own
  download removed; a model read from the host's Hub cache stays there (the host put it there).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from variants.building import custom
from variants.building.sources import ResolvedSource, SourceUnavailable, resolve_hub
from variants.core import config
from variants.core import spec as specs
from variants.serving.build_status import BuildSnapshot, BuildStatus
from variants.serving.engine import Engine

log = logging.getLogger("variants.serving.visitor")

SMALL_MB = 200  # below this a model's steps are estimated with the small model's seconds (build_status)
BUILD_NICE = 10  # the build thread's niceness (Linux): questions on the models go first
STOPPED = "Stopped."


class VisitorBusy(ValueError):
    """Another visitor's chain is building; the message says so, and for about how long, in one sentence."""


class BuildStopped(BaseException):
    """Raised in the build thread at its next step when Stop or the time cap ends it. A BaseException, as
    asyncio's CancelledError is, so that the engine's per-variant isolation (``except Exception``) does not
    keep building the next variant."""


@dataclass
class VisitorChain:
    """One visitor's model and its chain: checked, building, built (or stopped, or failed)."""

    owner: str
    checked: custom.CheckedModel
    engine: Engine
    folder: Path  # the chain's artifacts (and its own download): removed when it is dropped
    started: float
    last_used: float
    stop_reason: str | None = None
    finished: float | None = None
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def model_id(self) -> str:
        return self.checked.model_id

    @property
    def building(self) -> bool:
        return self.finished is None

    def snapshot(self) -> BuildSnapshot:
        return self.engine.status.snapshot()

    def ready_names(self) -> list[str]:
        """The chain's variants that answer now."""
        return [v.spec.name for v in self.engine.loaded if v.ok]


class VisitorChains:
    """The visitors' chains, one per visitor (``owner``: the page's session), one building at a time.

    ``device``, ``settings``, ``max_context_chars`` and ``null_threshold`` are the preset engine's, so the chain
    answers as the preset's variants do; ``root`` holds each chain's folder (a fresh temporary folder by default).
    ``clock`` is for tests.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        max_mb: float | None = None,
        build_s: float | None = None,
        idle_s: float | None = None,
        root: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        sweep_every_s: float | None = None,
    ) -> None:
        self.base = engine
        self.max_mb = custom.max_custom_mb() if max_mb is None else max_mb
        self.build_s = config.visitor_build_s() if build_s is None else build_s
        self.idle_s = config.visitor_idle_s() if idle_s is None else idle_s
        self.root = Path(root) if root is not None else Path(tempfile.mkdtemp(prefix="qa-visitor-chains-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._clock = clock
        self._lock = threading.Lock()
        self._chains: dict[str, VisitorChain] = {}
        self._closed = threading.Event()
        every = sweep_every_s if sweep_every_s is not None else min(30.0, max(0.5, self.idle_s / 4))
        self._sweeper = threading.Thread(target=self._sweep_loop, args=(every,), name="visitor-sweep", daemon=True)
        self._sweeper.start()

    # --- a visitor's requests ----------------------------------------------------------------------

    def start(self, owner: str, model_id: str) -> VisitorChain:
        """Check ``model_id`` and start building its chain for ``owner`` (replacing their previous one);
        :class:`~variants.building.custom.CustomModelRefused` or :class:`VisitorBusy` say why not."""
        model_id = custom.check_model_id(model_id)
        self._refuse_if_busy(owner)
        checked = custom.inspect_model(model_id, self.max_mb)  # the Hub's listing and config.json only
        with self._lock:
            self._refuse_if_busy(owner, locked=True)
            old = self._chains.pop(owner, None)
            chain = self._new_chain(owner, checked)
            self._chains[owner] = chain
        if old is not None:
            self._discard(old)
        chain.thread = threading.Thread(target=self._build, args=(chain,), name="visitor-build", daemon=True)
        chain.thread.start()
        return chain

    def get(self, owner: str | None, touch: bool = True) -> VisitorChain | None:
        """``owner``'s chain, if any; ``touch`` counts this as a use (the idle time starts again)."""
        with self._lock:
            chain = self._chains.get(owner) if owner else None
            if chain is not None and touch:
                chain.last_used = self._clock()
            return chain

    def stop(self, owner: str, reason: str = STOPPED) -> bool:
        """Ask ``owner``'s build to stop at its next step; False when nothing of theirs is building."""
        chain = self.get(owner, touch=False)
        if chain is None or not chain.building:
            return False
        chain.stop_reason = chain.stop_reason or reason
        return True

    def drop(self, owner: str) -> None:
        """Drop ``owner``'s chain now (a build under way stops at its next step), files and all."""
        with self._lock:
            chain = self._chains.pop(owner, None)
        if chain is not None:
            self._discard(chain)

    def building(self) -> VisitorChain | None:
        """The chain building now, whoever's, or None."""
        with self._lock:
            return next((c for c in self._chains.values() if c.building), None)

    def close(self) -> None:
        """Stop the sweeper and drop every chain."""
        self._closed.set()
        for owner in list(self._chains):
            self.drop(owner)

    # --- building ----------------------------------------------------------------------------------

    def _refuse_if_busy(self, owner: str, locked: bool = False) -> None:
        chains = self._chains.values() if locked else list(self._chains.values())
        other = next((c for c in chains if c.building and c.owner != owner), None)
        if other is not None:
            raise VisitorBusy(busy_sentence(other.snapshot(), self.build_s - (self._clock() - other.started)))
        own = self._chains.get(owner)
        if own is not None and own.building:
            raise VisitorBusy("Your model is still building: stop it first to build another.")

    def _new_chain(self, owner: str, checked: custom.CheckedModel) -> VisitorChain:
        folder = Path(tempfile.mkdtemp(prefix="chain-", dir=self.root))
        family = specs.Family(checked.model_id, baseline=f"hub:{checked.model_id}", pruned=None, description="")
        chain_specs = specs.chain(family, self.base.device)
        base = self.base
        engine = Engine(
            chain_specs,
            device=base.device,
            settings=base.settings,
            cache_dir=folder / "artifacts",
            preset="",
            max_context_chars=base.max_context_chars,
            null_threshold=base.null_threshold,
        )
        size = "small" if checked.download_mb < SMALL_MB else "large"
        said = checked.model_id
        engine.status = BuildStatus(chain_specs, "", log=lambda line: log.info("%s %s", said, line), size=size)
        now = self._clock()
        return VisitorChain(owner, checked, engine, folder, started=now, last_used=now)

    def _build(self, chain: VisitorChain) -> None:
        """The build thread: the source (a download, or the cached copy), then every variant, checking between
        steps whether to stop."""
        lower_priority()
        status = chain.engine.status
        status.begin()
        try:
            source = self._source(chain)
            status.stage("")
            chain.engine.use_source(f"hub:{chain.model_id}", source)
            chain.engine.load(lambda _f, _m: self._check(chain))
        except BuildStopped:
            reason = chain.stop_reason or STOPPED
            status.fail_pending(reason)
            log.info("%s: %s", chain.model_id, reason)
        except BaseException as exc:  # a download or a step that failed: on every pending variant, with the reason
            status.fail_pending(custom_error(exc))
            log.warning("%s: the build stopped: %s", chain.model_id, custom_error(exc))
        finally:
            if not chain.ready_names():  # stopped or failed: nothing to keep
                shutil.rmtree(chain.folder, ignore_errors=True)
            chain.finished = chain.last_used = self._clock()

    def _source(self, chain: VisitorChain) -> ResolvedSource:
        checked, status = chain.checked, chain.engine.status
        said = f"{checked.model_id} ({checked.download_mb:,.1f} MB)"
        self._check(chain)
        if checked.cached is not None:  # offline: the copy in the local Hub cache, as it is
            status.stage(f"Reading {said} from the local Hub cache")
            return ResolvedSource(checked.model_id, checked.cached, f"hub:{checked.model_id}@{checked.revision}", False)

        def files(done: int, total: int | None) -> None:
            status.stage(f"Downloading {said}: {done} of {total or '?'} files")
            self._check(chain)

        status.stage(f"Downloading {said}")
        try:
            return resolve_hub(checked.model_id, checked.revision, checked.extra_ignore, files, chain.folder / "hub")
        except SourceUnavailable as exc:
            raise RuntimeError(str(exc)) from None

    def _check(self, chain: VisitorChain) -> None:
        """Raise :class:`BuildStopped` when the visitor stopped the build or it ran past the time cap."""
        if chain.stop_reason is None and self._clock() - chain.started > self.build_s:
            chain.stop_reason = f"Stopped: it took longer than the {self.build_s:,.0f} s a build may take here."
        if chain.stop_reason is not None:
            raise BuildStopped(chain.stop_reason)

    # --- dropping ----------------------------------------------------------------------------------

    def _sweep_loop(self, every: float) -> None:
        while not self._closed.wait(every):
            self.sweep()

    def sweep(self) -> list[str]:
        """Drop the chains unused for ``idle_s`` (never one still building); returns their owners."""
        now = self._clock()
        with self._lock:
            idle = [o for o, c in self._chains.items() if not c.building and now - c.last_used >= self.idle_s]
            dropped = [self._chains.pop(o) for o in idle]
        for chain in dropped:
            log.info("%s: dropped after %.0f s unused", chain.model_id, now - chain.last_used)
            self._discard(chain)
        return idle

    def _discard(self, chain: VisitorChain) -> None:
        """Unload ``chain`` and remove its files (a build still going stops at its next step, then removes)."""
        if chain.building:
            chain.stop_reason = chain.stop_reason or STOPPED
            threading.Thread(target=self._discard_after_build, args=(chain,), daemon=True).start()
            return
        chain.engine.close()
        chain.engine.variants = {}
        shutil.rmtree(chain.folder, ignore_errors=True)

    def _discard_after_build(self, chain: VisitorChain) -> None:
        if chain.thread is not None:
            chain.thread.join()
        self._discard(chain)


def busy_sentence(snap: BuildSnapshot, cap_left_s: float) -> str:
    """What a second visitor reads: another build is going, and about how long it has left."""
    left = snap.remaining_s()
    left = min(left, cap_left_s) if left is not None else cap_left_s
    minutes = max(1, round(left / 60))
    about = f"about {max(5, round(left))} s" if left < 90 else f"about {minutes} min"
    return f"Another visitor's model is building (one at a time here, {about} left): try again then."


def custom_error(exc: BaseException) -> str:
    """One line for a build that stopped on an error."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


def lower_priority() -> None:
    """This thread (and the threads it starts) at a lower CPU priority, where the OS has per-thread niceness."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BUILD_NICE)


PREFIX = "yours-"  # the visitor's variants' names beside the preset's, where both are measured together


def beside(base: Engine, chain: VisitorChain | None) -> Engine:
    """An engine over the preset's variants and, when ``chain`` has any ready, the visitor's beside them (named
    ``yours-baseline``, ``yours-baseline-onnx``..., labelled "Your model ..."): what the quick benchmark and Your
    questions measure for that visitor, so that one record, chart, cost table and report show both chains, each
    speedup against its own chain's baseline (:func:`variants.benchmarking.bench.compare`). Nothing is loaded or
    built again; without a ready chain it is ``base`` itself."""
    ready = [v for v in (chain.engine.loaded if chain else []) if v.ok]
    if not ready:
        return base
    renamed = {}
    for loaded in ready:
        spec = loaded.spec
        label = spec.label.replace("Baseline", "Your model", 1)
        description = f"{chain.model_id} (commit {chain.checked.revision[:10]}): {spec.description}"
        # not headline: the record's one-sentence summary stays on the preset's chain
        renamed[PREFIX + spec.name] = replace(
            loaded, spec=replace(spec, name=PREFIX + spec.name, label=label, description=description, headline=False)
        )
    view = Engine(
        [*base.specs, *(v.spec for v in renamed.values())],
        device=base.device,
        settings=base.settings,
        cache_dir=base.cache_dir,
        preset=base.preset,
        max_context_chars=base.max_context_chars,
        null_threshold=base.null_threshold,
        variants={**base.variants, **renamed},
    )
    view.status = base.status
    return view
