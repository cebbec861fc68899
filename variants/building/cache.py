"""A disk cache for built artifacts (ONNX models and their files), safe against crashes and races.

An entry is a folder ``root/<key>/`` holding the artifact's files and a ``manifest.json`` (every
file's size, mtime and sha256, written at build time). It is built in a temporary folder and renamed
into place only when the build succeeded, so a killed or failing build never leaves an entry that a
later start would trust. A hit compares sizes and mtimes with the manifest and hashes only a file
whose mtime changed, so starting does not read gigabytes again. Builders of the same key take a lock
file (``filelock``: POSIX and Windows), so two processes do not build the same thing twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout
from huggingface_hub import constants as hf_constants

from variants.core import config

log = logging.getLogger("variants.building.cache")

MANIFEST = "manifest.json"
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_CHUNK = 1 << 20


def default_cache_dir() -> Path:
    """``$VARIANTS_CACHE_DIR``, else ``qa-variants`` in the persistent folder (a Space's ``/data``, see
    :func:`variants.core.config.persistent_dir`), else ``qa-variants`` in the Hugging Face cache (``$HF_HOME``).

    Beside the models it is built from (``~/.cache/huggingface`` by default), where a user's cache clean-ups
    already look.
    """
    explicit = config.cache_dir()
    return explicit if explicit else Path(hf_constants.HF_HOME).expanduser() / "qa-variants"


def cache_key(parts: dict[str, Any], length: int = 16) -> str:
    """A stable short hex key: sha256 of ``parts`` dumped as JSON with sorted keys.

    Put everything that changes the artifact in ``parts``: the source identity (hub revision or
    :func:`source_fingerprint`), the build steps, the device type and :func:`artifact_versions`.
    """
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def source_fingerprint(folder: Path) -> str:
    """A cheap identity of a local model folder: relative path, size and mtime of every file.

    File contents are not read (checkpoints can be gigabytes); any rewrite changes size or mtime.
    """
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        stat = path.stat()  # follows symlinks, as in Hugging Face cache snapshots
        digest.update(f"{path.relative_to(folder).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's contents, read in chunks (hex)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(folder: Path, key: str) -> dict[str, Any]:
    """Record every file of ``folder`` (relative path, size, mtime, sha256) in ``folder/manifest.json``."""
    files = {
        p.relative_to(folder).as_posix(): {
            "size": p.stat().st_size,
            "mtime_ns": p.stat().st_mtime_ns,
            "sha256": file_sha256(p),
        }
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.relative_to(folder).as_posix() != MANIFEST
    }
    manifest = {"key": key, "created": time.time(), "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
    return manifest


def check_manifest(folder: Path, key: str, verify_hashes: bool = False) -> str | None:
    """What is wrong with the entry ``folder`` (missing/changed files), or None when it is intact.

    A file with the size and mtime recorded at build time is trusted without reading it; one whose
    mtime changed (rewritten in place, or copied without keeping times) is hashed. ``verify_hashes``
    hashes every file, for a full check.
    """
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"manifest missing or unreadable ({exc})"
    well_formed = isinstance(files, dict) and all(
        isinstance(info, dict) and isinstance(info.get("size"), int) and isinstance(info.get("sha256"), str)
        for info in files.values()
    )
    if not well_formed:  # edited or written by something else: rebuilt like an unreadable one
        return "manifest does not list each file with its size and sha256"
    if manifest.get("key") != key:
        return f"manifest is for key {manifest.get('key')!r}"
    for name, info in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        stat = path.stat()
        if stat.st_size != info["size"]:
            return f"{name} has size {stat.st_size}, expected {info['size']}"
        unchanged = stat.st_mtime_ns == info.get("mtime_ns")
        if (verify_hashes or not unchanged) and file_sha256(path) != info["sha256"]:
            return f"{name} has changed (sha256 mismatch)"
    return None


def _stamp(entry: Path) -> tuple[int, int] | None:
    """Identity of an entry's manifest file (a rebuilt entry has a new one)."""
    try:
        stat = (entry / MANIFEST).stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_mtime_ns


class ArtifactCache:
    """Built artifacts under ``root`` (default :func:`default_cache_dir`), one folder per key.

    ``verify_hashes`` hashes every file of an entry on each hit (see :func:`check_manifest`).
    """

    def __init__(self, root: Path | None = None, *, verify_hashes: bool = False) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.verify_hashes = verify_hashes

    def path(self, key: str) -> Path:
        """Where the entry for ``key`` lives (whether or not it exists)."""
        if not _KEY.fullmatch(key):
            raise ValueError(f"invalid cache key {key!r}: use letters, digits, '.', '_' and '-'")
        return self.root / key

    def get_or_build(
        self,
        key: str,
        build: Callable[[Path], None],
        validate: Callable[[Path], None] | None = None,
    ) -> Path:
        """The folder of entry ``key``; built with ``build(folder)`` when missing or broken.

        ``build`` writes the artifact's files into the (empty, temporary) folder it is given.
        ``validate(folder)`` (optional) should raise if the artifact is unusable, e.g. when an
        inference session cannot be opened; a cached entry that fails it is rebuilt, a fresh build
        that fails it is removed and the error is raised.
        """
        entry = self.path(key)
        checked: tuple[Any, str] | None = None  # (manifest stamp, problem) found without the lock
        if entry.is_dir():
            stamp = _stamp(entry)
            problem = self._problem(entry, key, validate)
            if problem is None:
                log.debug("cache hit %s", entry)
                return entry
            checked = (stamp, problem)
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock(key):
            if entry.is_dir():
                # Check again only if another process replaced the entry while we waited for the lock.
                same = checked is not None and _stamp(entry) == checked[0]
                problem = checked[1] if same else self._problem(entry, key, validate)
                if problem is None:
                    return entry
                log.warning("cache entry %s is unusable (%s); rebuilding it", entry, problem)
                self._remove(entry)
            self._remove_leftovers(key)
            self._build(key, build)
            if validate is not None:
                try:
                    validate(entry)
                except BaseException:
                    self._remove(entry)
                    raise
        return entry

    def clear(self) -> None:
        """Remove every entry and temporary folder (lock files stay: they may be held)."""
        if not self.root.is_dir():
            return
        for child in self.root.iterdir():
            if child.is_dir():
                self._remove(child)

    def _problem(self, entry: Path, key: str, validate: Callable[[Path], None] | None) -> str | None:
        problem = check_manifest(entry, key, self.verify_hashes)
        if problem is None and validate is not None:
            try:
                validate(entry)
            except Exception as exc:  # any failure means "rebuild"
                problem = f"validation failed: {type(exc).__name__}: {exc}"
        return problem

    def _build(self, key: str, build: Callable[[Path], None]) -> None:
        entry = self.root / key
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=self.root))
        started = time.perf_counter()
        log.info("building cache entry %s", entry)
        try:
            build(tmp)
            write_manifest(tmp, key)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.rename(tmp, entry)  # atomic on one filesystem; fails if entry exists and is not empty
        except OSError:
            if not entry.is_dir():
                shutil.rmtree(tmp, ignore_errors=True)
                raise
            log.info("cache entry %s appeared meanwhile; keeping it and discarding this build", entry)
            shutil.rmtree(tmp, ignore_errors=True)
            return
        log.info("built cache entry %s in %.1fs", entry, time.perf_counter() - started)

    def _remove(self, path: Path) -> None:
        """Delete a folder: first renamed out of the way (atomic), so nobody sees it half-deleted."""
        trash = self.root / f".trash-{path.name}-{uuid.uuid4().hex}"
        try:
            os.rename(path, trash)
        except FileNotFoundError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    def _remove_leftovers(self, key: str) -> None:
        """Temporary folders of ``key`` left by killed builds (safe: we hold the key's lock)."""
        for prefix in (f".tmp-{key}-", f".trash-{key}-"):
            for stale in self.root.glob(f"{prefix}*"):
                if "-" not in stale.name[len(prefix) :]:  # not ".tmp-{key}-more-..." of another key
                    log.info("removing leftover %s", stale)
                    shutil.rmtree(stale, ignore_errors=True)

    @contextmanager
    def _lock(self, key: str) -> Iterator[None]:
        lock = FileLock(self.root / f"{key}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:
            log.info("waiting for another process building cache entry %s", key)
            lock.acquire()
        try:
            yield
        finally:
            lock.release()
