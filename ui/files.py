"""Files the page hands to a visitor (a benchmark's CSV, a report, a run's answers): each in a new folder inside
one temporary folder of this process's own, made private (``tempfile.mkdtemp``: mode 0700, a name no one else
has) on first use and removed when the process exits. Gradio copies a file into its own cache before serving it,
so removing ours at exit takes nothing from a visitor. A fixed ``/tmp/qa-variants`` failed with PermissionError
wherever another user had made it first, and two apps on one machine wrote into each other's."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
_root: Path | None = None


def process_folder() -> Path:
    """This process's temporary folder (made on first use, removed at exit)."""
    global _root  # noqa: PLW0603 - one folder per process, made once
    with _lock:
        if _root is None or not _root.is_dir():
            _root = Path(tempfile.mkdtemp(prefix="qa-variants-"))
            atexit.register(shutil.rmtree, _root, ignore_errors=True)
        return _root


def new_folder(prefix: str) -> Path:
    """A new empty folder in :func:`process_folder`, its name starting with ``prefix``."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=process_folder()))
