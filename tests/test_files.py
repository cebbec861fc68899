"""The files the page hands out live in a private temporary folder of the process's own, gone when it exits."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from ui import files

ROOT = Path(__file__).resolve().parent.parent


def test_each_download_gets_a_new_folder_in_the_processs_private_one() -> None:
    first, second = files.new_folder("report-"), files.new_folder("report-")
    root = files.process_folder()
    assert first != second and first.parent == root == second.parent and first.name.startswith("report-")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700  # no one else reads a visitor's answers
    assert root.name.startswith("qa-variants-") and root != Path("/tmp/qa-variants")


def test_the_processs_folder_is_removed_when_it_exits(tmp_path: Path) -> None:
    code = "from ui.files import new_folder; f = new_folder('csv-'); (f / 'a.csv').write_text('x'); print(f.parent)"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    folder = Path(out.stdout.strip())
    assert folder.parent == tmp_path and not folder.exists()
