"""Files the page hands to a visitor (a benchmark's CSV, a report, a run's answers): each in a new folder inside
one temporary folder of this process's own, made private (``tempfile.mkdtemp``: mode 0700, a name no one else
has) on first use and removed when the process exits. Gradio copies a file into its own cache before serving it,
so removing ours at exit takes nothing from a visitor. A fixed ``/tmp/qa-variants`` failed with PermissionError
wherever another user had made it first, and two apps on one machine wrote into each other's.

Gradio's own folder (visitors' uploads, the files it serves) is ``gradio`` inside this one too
(:func:`gradio_folder`), unless the host named one in ``GRADIO_TEMP_DIR``: gradio's default, ``/tmp/gradio``, is one
folder for every user's app on the machine, so the second user's app died at start (``PermissionError`` from a
``DownloadButton``) and each app's uploads sat where the others could read them."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from pathlib import Path

from variants.core import config

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


def gradio_folder() -> Path:
    """Gradio's temporary folder: the host's ``GRADIO_TEMP_DIR``, else ``gradio`` in :func:`process_folder`, put in
    ``GRADIO_TEMP_DIR`` for gradio to read. Call it before gradio is imported: some of its modules read the variable
    once, when imported (:mod:`ui.own_files` does it first thing)."""
    host = config.gradio_temp_dir()
    if host is not None:
        return Path(host)
    folder = process_folder() / "gradio"
    folder.mkdir(exist_ok=True)
    os.environ[config.GRADIO_TEMP_ENV] = str(folder)
    return folder
