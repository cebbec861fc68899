"""What the engine's build is doing, variant by variant: the one object the page and the log read.

The app serves while the variants build in a background thread (:meth:`Engine.build_in_background
<variants.serving.engine.Engine.build_in_background>`). :class:`BuildStatus` knows each variant's state
(queued, building with its current step and how long it has taken, ready, or failed with the reason) and the
stage before the variants (fetching the models: a download, or a replica made here); it is written by the
engine's build thread and read by any number of request threads, so each read is a consistent snapshot
(:meth:`BuildStatus.snapshot`). Every change is also one log line with the seconds since the build began.

The estimates are typical durations per step measured on a 2-core CPU (``STEP_SECONDS``); a step found in the
artifact cache takes far less, so an estimate is an upper bound on a warm start.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from variants.core import spec as specs

QUEUED, BUILDING, READY, FAILED = "queued", "building", "ready", "failed"

# What each step is called on the page and in the log.
STEP_WORDS = {
    "load": "load the weights",
    "compact": "compact (cut out the pruned heads and neurons)",
    "export": "export to ONNX",
    "optimize": "optimize the ONNX graph",
    "int8": "quantize to INT8",
    "fp16": "convert to FP16",
    "warmup": "warm up",
}
# Typical seconds per step on a 2-core CPU (a quiet AMD EPYC family 25, cold starts with an empty folder:
# experiments/records/space/app-*-cold-*.log), by model size: "large" is BERT-large (the published models and the
# replica), "small" the embedded MiniLM; FP16 is a GPU step, not measured there. A busy machine or a slower Space
# takes longer. The fetch stage: the replica's random weights made here; the Hub download is not estimated (it
# depends on the network) but shows its progress.
STEP_SECONDS = {
    "large": {"load": 1, "compact": 1, "export": 9, "optimize": 13, "int8": 9, "fp16": 20, "warmup": 1},
    "small": {"load": 1, "compact": 1, "export": 2, "optimize": 2, "int8": 2, "fp16": 2, "warmup": 1},
}
FETCH_SECONDS = {"bert-large-replica": 15}


def variant_steps(spec: specs.VariantSpec) -> tuple[str, ...]:
    """The steps ``spec`` goes through when it builds, in order (a step found in the cache is quick)."""
    steps = ["load"]
    if "compact" in spec.steps and spec.backend == "torch":  # an ONNX chain compacts within its export
        steps.append("compact")
    steps += ["export" if s == "onnx" else s for s in spec.steps if s in ("onnx", "optimize", "fp16", "int8")]
    return (*steps, "warmup")


def model_size(preset: str) -> str:
    return "small" if preset == specs.FALLBACK_PRESET else "large"


@dataclass(frozen=True)
class VariantStatus:
    """One variant's state at the moment of the snapshot; ``seconds`` is how long it has built (or took)."""

    name: str
    label: str
    state: str = QUEUED
    step: str = ""  # the current step (STEP_WORDS' keys), while building
    step_seconds: float = 0.0  # how long the current step has run
    seconds: float = 0.0
    estimate_s: float | None = None  # typical total for this variant's steps still to come, this one included
    steps: tuple[str, ...] = ()
    shared: tuple[str, ...] = ()  # steps an earlier variant of the same source does (its result is reused)
    error: str | None = None
    started: float | None = field(default=None, repr=False)
    step_started: float | None = field(default=None, repr=False)
    finished: float | None = field(default=None, repr=False)

    @property
    def done(self) -> bool:
        return self.state in (READY, FAILED)

    def step_words(self) -> str:
        return STEP_WORDS.get(self.step, self.step)


@dataclass(frozen=True)
class BuildSnapshot:
    """Every variant's state and the stage before them, at one moment."""

    variants: tuple[VariantStatus, ...]
    stage: str  # what happens before the variants build (fetching the models), "" once they build
    seconds: float  # since the build began (0 before it began)
    started: bool
    version: int  # grows with every change of state or step: a reader re-renders only when it changed
    stage_estimate_s: float | None = None  # typical seconds of the stage, where known (the replica's weights)

    @property
    def done(self) -> bool:
        return self.started and not self.stage and all(v.done for v in self.variants)

    @property
    def pending(self) -> list[VariantStatus]:
        return [v for v in self.variants if not v.done]

    def state(self, name: str) -> VariantStatus | None:
        return next((v for v in self.variants if v.name == name), None)

    def remaining_s(self) -> float | None:
        """Typical seconds until every variant is built (the variants build one after another), or None when
        no estimate is known."""
        left = [v.estimate_s for v in self.pending]
        if not left or any(e is None for e in left):
            return None
        stage = max(0.0, self.stage_estimate_s - self.seconds) if self.stage_estimate_s else 0.0
        return float(sum(left)) + stage


class BuildStatus:
    """Each variant's build state, written by the build thread and read by the page (thread-safe).

    ``log`` receives one line per change (a step begins, a variant is ready or failed), with the seconds since
    the build began; ``clock`` is for tests.
    """

    def __init__(
        self,
        variant_specs: Sequence[specs.VariantSpec],
        preset: str = "",
        log: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._log = log or (lambda _line: None)
        self._began: float | None = None
        self._stage = ""
        self._version = 0
        self._variants: dict[str, VariantStatus] = {}
        self._size, self._preset = model_size(preset), preset
        self.reset(variant_specs, preset)

    def set_log(self, log: Callable[[str], None]) -> None:
        self._log = log

    def reset(self, variant_specs: Sequence[specs.VariantSpec], preset: str) -> None:
        """Queue ``variant_specs`` (e.g. after the fallback to the embedded preset replaced the specs)."""
        done: set[tuple[str, str]] = set()  # (source, step): the torch model and each ONNX step are built once
        variants = {}
        for s in variant_specs:
            steps = variant_steps(s)
            shared = tuple(step for step in steps if step != "warmup" and (s.source, step) in done)
            done.update((s.source, step) for step in steps)
            variants[s.name] = VariantStatus(s.name, specs.short_label(s.name, s.label), steps=steps, shared=shared)
        with self._lock:
            self._size, self._preset = model_size(preset), preset
            self._variants = variants
            self._version += 1

    def begin(self) -> None:
        """The build starts now (the clock every log line counts from)."""
        with self._lock:
            self._began = self._clock()
            self._version += 1

    def stage(self, text: str) -> None:
        """What happens before the variants build ("" when it is over); logged when it begins."""
        with self._lock:
            changed = text != self._stage
            self._stage = text
            self._version += 1
            line = self._line(text) if changed and text else ""
        if line:
            self._log(line)

    def step(self, name: str, step: str) -> None:
        """Variant ``name`` starts ``step`` (building from its first step on)."""
        now = self._clock()
        with self._lock:
            current = self._variants.get(name)
            if current is None or current.step == step:
                return
            self._variants[name] = replace(
                current,
                state=BUILDING,
                step=step,
                started=current.started if current.started is not None else now,
                step_started=now,
            )
            self._version += 1
            line = self._line(f"{name}: {STEP_WORDS.get(step, step)}")
        self._log(line)

    def step_over(self, name: str, step: str, cached: bool, seconds: float) -> None:
        """Variant ``name``'s ``step`` is over: found in the artifact cache or built, in ``seconds``. One log line,
        so that a warm start's log reads as one ("export to ONNX: from the cache (0.1 s)")."""
        how = "from the cache" if cached else "built"
        with self._lock:
            line = self._line(f"{name}: {STEP_WORDS.get(step, step)}: {how} ({seconds:.1f} s)")
        self._log(line)

    def ready(self, name: str) -> None:
        self._finish(name, READY, None)

    def failed(self, name: str, reason: str) -> None:
        self._finish(name, FAILED, reason)

    def fail_pending(self, reason: str) -> None:
        """Every variant not built yet failed (the build itself stopped)."""
        for v in self.snapshot().pending:
            self.failed(v.name, reason)
        self.stage("")

    def _finish(self, name: str, state: str, reason: str | None) -> None:
        now = self._clock()
        with self._lock:
            current = self._variants.get(name)
            if current is None:
                return
            started = current.started if current.started is not None else now
            self._variants[name] = replace(
                current, state=state, step="", error=reason, started=started, finished=now, seconds=now - started
            )
            self._version += 1
            took = f" in {now - started:.1f} s"
            lines = [self._line(f"{name}: ready{took}" if state == READY else f"{name}: FAILED{took}: {reason}")]
            if not self._stage and all(v.done for v in self._variants.values()):
                ready = sum(v.state == READY for v in self._variants.values())
                lines.append(self._line(f"build over: {ready} of {len(self._variants)} variants ready"))
        for line in lines:
            self._log(line)

    def _line(self, text: str) -> str:
        since = self._clock() - self._began if self._began is not None else 0.0
        return f"[{since:6.1f} s] {text}"

    def snapshot(self) -> BuildSnapshot:
        now = self._clock()
        with self._lock:
            variants = tuple(self._timed(v, now) for v in self._variants.values())
            seconds = now - self._began if self._began is not None else 0.0
            fetch = FETCH_SECONDS.get(self._preset) if self._stage else None
            return BuildSnapshot(variants, self._stage, seconds, self._began is not None, self._version, fetch)

    def _timed(self, v: VariantStatus, now: float) -> VariantStatus:
        """``v`` with its elapsed times and its estimate as of ``now``."""
        typical = STEP_SECONDS[self._size]
        if v.done:
            return replace(v, estimate_s=0.0)
        to_come = v.steps[v.steps.index(v.step) :] if v.step in v.steps else v.steps
        estimate = float(sum(typical.get(s, 0) for s in to_come if s not in v.shared))
        if v.state != BUILDING:
            return replace(v, estimate_s=estimate)
        step_seconds = now - (v.step_started or now)
        estimate = max(0.0, estimate - step_seconds)
        return replace(v, step_seconds=step_seconds, seconds=now - (v.started or now), estimate_s=estimate)


def fetch_words(source: str, cached: bool = False) -> str:
    """What fetching ``source`` does, in words, for the page and the log; ``cached``: an earlier start kept it (the
    replica's weights in the artifact cache, a Hub model in the Hub cache), so a warm start says so."""
    if source.startswith("replica:"):
        if cached:
            return f"Reading {source}'s random weights from the cache (made on an earlier start)"
        return f"Making {source}'s random weights here (no download)"
    if Path(source).expanduser().is_dir():
        return f"Reading {Path(source).name}"
    if cached:
        return f"Reading {source} from the Hub cache (no download)"
    return f"Downloading {source}"
