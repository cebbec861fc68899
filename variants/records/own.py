"""The record the app measures of its own chain, on the machine it serves from (``VARIANTS_SELF_BENCH``).

Once its chain is built, the app measures it on questions of the shipped SQuAD v2 sample, in turns behind visitors'
questions (:mod:`variants.benchmarking.self_bench` runs it). The record is an ordinary one (kind
:data:`~variants.records.record.SELF`) kept beside the built artifacts (a Space's ``/data``), in
:func:`own_folder`, with the key of what it measured in ``data["key"]``: the chain, its weights, the hardware and
the code. A start that finds a record of its key measures nothing; one that finds a checkpoint of its key goes on
from it. This module is where those files live and how they are read; :class:`OwnStatus` is where a measurement
stands, as the Benchmark tab, ``GET /v1/benchmark`` and ``python -m variants self-bench`` say it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from variants.records.record import Record, load_records

log = logging.getLogger("variants.records.own")

FOLDER = "records"  # under the built artifacts' folder (VARIANTS_CACHE_DIR): the artifacts' cache keys are hex
PARTIAL = ".partial"  # a measurement's checkpoint: ``<key>.partial`` (not a record: load_records reads *.json)

OFF, WAITING, MEASURING, DONE, FAILED = "off", "waiting", "measuring", "done", "failed"


def own_folder(artifacts: Path) -> Path:
    """Where the app keeps the records of its own chain: beside the built artifacts in ``artifacts``."""
    return Path(artifacts) / FOLDER


def own_records(folder: Path) -> list[Record]:
    """The app's own records in ``folder``, newest first."""
    return [r for r in load_records(folder) if r.is_own] if Path(folder).is_dir() else []


def find_own(folder: Path, key: str) -> Record | None:
    """The newest record in ``folder`` measured for ``key`` (what was measured, where, by which code), or None."""
    return next((r for r in own_records(folder) if r.data.get("key") == key), None)


def checkpoint_path(folder: Path, key: str) -> Path:
    return Path(folder) / f"{key}{PARTIAL}"


def read_checkpoint(folder: Path, key: str) -> dict[str, Any] | None:
    """The measurement of ``key`` that a stopped process left half-done, or None (none, or unreadable: logged)."""
    path = checkpoint_path(folder, key)
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("the checkpoint %s cannot be read (%s); measuring again from the start", path, exc)
        return None
    return state if isinstance(state, dict) and state.get("key") == key else None


def write_checkpoint(folder: Path, key: str, state: dict[str, Any]) -> Path:
    """Keep ``state`` for ``key``, whole or not at all (a process killed while writing leaves the last one)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = checkpoint_path(folder, key)
    handle, tmp = tempfile.mkstemp(prefix=f".{key}-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump({**state, "key": key}, f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def drop_checkpoint(folder: Path, key: str) -> None:
    checkpoint_path(folder, key).unlink(missing_ok=True)


@dataclass(frozen=True)
class OwnStatus:
    """Where the app's measurement of its own chain stands: ``state`` one of off, waiting (for the build),
    measuring, done and failed; ``done`` of ``total`` questions answered by every variant; ``record`` once done
    (or found from an earlier start: ``found``); ``resumed_at`` the question a restart went on from (0: none)."""

    state: str = OFF
    done: int = 0
    total: int = 0
    record: Record | None = None
    error: str | None = None
    resumed_at: int = 0
    found: bool = False
    file: str | None = None  # where the record is kept, once saved

    @property
    def measuring(self) -> bool:
        return self.state in (WAITING, MEASURING)

    def words(self) -> str:
        """One plain sentence, for the page, the API and the command line."""
        if self.state == WAITING:
            return f"This chain will be measured on this machine once it is built: {self.total:,} questions."
        if self.state == MEASURING:
            resumed = f", going on from question {self.resumed_at:,} after a restart" if self.resumed_at else ""
            return (
                f"Measuring this chain on this machine: {self.done:,} of {self.total:,} questions{resumed}. "
                "Questions asked meanwhile go first."
            )
        if self.state == DONE and self.record is not None:
            when = self.record.created.replace("T", " ").rstrip("Z")[:16]
            who = "an earlier start of this app" if self.found else "this app"
            return f"Measured on this machine by {who}: {self.record.n_questions:,} questions, {when} UTC."
        if self.state == FAILED:
            return f"This chain could not be measured on this machine: {self.error}"
        return ""

    def as_dict(self) -> dict[str, Any]:
        """The status as JSON (the record whole, as its file has it)."""
        return {
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "message": self.words(),
            "resumed_at": self.resumed_at,
            "error": self.error,
            "file": self.file,
            "record": self.record.to_dict() if self.record is not None else None,
        }
