"""Checkpoints that let a training run survive an interruption and resume where it stopped.

A long CPU run (an hour or more on two shared cores) gets killed: a session ends, a machine is
handed back. Every ``every_s`` seconds, at the end of each stage, and when SIGTERM or SIGINT asks
it to stop, the loop saves everything a bit-identical continuation needs: weights, optimizer and
scheduler state, the RNG states (dropout, data order), the step, and the stage's own extras (for a
pruning stage, which heads and neurons it cut). ``--resume`` loads it back.

The file is written to a temporary name in the same folder and moved over the old one with
``os.replace`` (atomic on POSIX), so a kill mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

FILE = "checkpoint.pt"


class Interrupted(Exception):
    """Training stopped on request after saving a checkpoint; ``--resume`` continues it."""


@dataclass
class Checkpointer:
    """Where and how often a run saves itself, and whether it has been asked to stop.

    ``stop_after_steps`` stops (with a checkpoint) after that many optimizer steps of this
    invocation: a planned pause, for example before a lent machine's time runs out.
    """

    folder: Path
    every_s: float = 600.0
    stop_after_steps: int = 0
    resume: bool = False
    config: dict[str, Any] | None = None  # the run's settings: a resumed run must have the same
    defaults: dict[str, Any] = field(default_factory=dict)  # a setting newer than the checkpoint had this value
    stop_requested: bool = False
    steps_taken: int = 0
    prior_s: float = 0.0  # seconds the run spent in earlier invocations (from the checkpoint)
    started: float = field(default_factory=time.monotonic)
    last_save: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        """Seconds the whole run has taken, earlier invocations included."""
        return self.prior_s + time.monotonic() - self.started

    @property
    def path(self) -> Path:
        return Path(self.folder) / FILE

    def load(self) -> dict[str, Any] | None:
        """The saved state when resuming and one exists, else None (a fresh start)."""
        if not self.resume or not self.path.is_file():
            return None
        state = torch.load(self.path, map_location="cpu", weights_only=False)
        saved = state.get("config")
        if self.config is not None and saved is not None:
            saved = {**_settings(self.defaults), **saved}
            changed = {k: (saved.get(k), v) for k, v in _settings(self.config).items() if saved.get(k) != v}
            if changed:
                raise ValueError(f"{self.path} was saved by a run with other settings (saved, now): {changed}")
        self.prior_s = state.get("run_elapsed_s", 0.0)
        return state

    def save(self, state: dict[str, Any]) -> None:
        """Write ``state`` atomically (temporary file, then rename)."""
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        state = {**state, "run_elapsed_s": self.elapsed()}
        if self.config is not None:
            state["config"] = _settings(self.config)
        tmp = self.path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.path)
        self.last_save = time.monotonic()

    def kept(self, name: str, make: Callable[[], Any], resumed: bool) -> Any:
        """What ``make`` returns, saved in the run folder as ``<name>.pt``; a resumed run (``resumed``: its
        checkpoint was loaded, so its settings match) loads it back instead of making it again. Written
        before the run's first checkpoint, so a checkpoint never sits beside another run's file."""
        path = Path(self.folder) / f"{name}.pt"
        if resumed and path.is_file():
            return torch.load(path, map_location="cpu", weights_only=False)
        value = make()
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(value, tmp)
        os.replace(tmp, path)
        return value

    def after_step(self) -> tuple[bool, bool]:
        """Count a step; return (save now, then stop)."""
        self.steps_taken += 1
        stop = self.stop_requested or (self.stop_after_steps and self.steps_taken >= self.stop_after_steps)
        return bool(stop) or time.monotonic() - self.last_save >= self.every_s, bool(stop)

    @contextmanager
    def stop_on_signals(self) -> Iterator[None]:
        """SIGTERM / SIGINT set ``stop_requested`` (the loop checkpoints after its current step) instead of
        killing the run mid-update; the previous handlers come back afterwards."""

        def request(_signum, _frame) -> None:
            self.stop_requested = True

        if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
            yield
            return
        previous = {sig: signal.signal(sig, request) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _settings(config: dict[str, Any]) -> dict[str, Any]:
    """What must not change between a run and its resumption: all but the thread count, the device (a run
    started on a GPU may finish on a CPU) and the output folder."""
    return {k: v for k, v in config.items() if k not in ("threads", "device", "out")}


def rng_state() -> dict[str, Any]:
    """torch's global RNG (dropout) and, when present, CUDA's."""
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
