"""The files the page hands out live in a private temporary folder of the process's own, gone when it exits; gradio's
own folder (uploads, the files it serves) is inside it. Two users' apps on one machine: test_two_users.py."""

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


def test_gradio_gets_a_private_folder_unless_the_host_named_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "host's"))
    assert files.gradio_folder() == tmp_path / "host's"  # the host's, left as it is
    assert os.environ["GRADIO_TEMP_DIR"] == str(tmp_path / "host's")
    monkeypatch.delenv("GRADIO_TEMP_DIR")
    folder = files.gradio_folder()
    assert folder.parent == files.process_folder() and folder.is_dir()
    assert os.environ["GRADIO_TEMP_DIR"] == str(folder)
    assert stat.S_IMODE(files.process_folder().stat().st_mode) == 0o700  # no one else may look inside


def test_the_app_sets_gradios_folder_before_gradio_is_imported() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GRADIO_TEMP_DIR"}
    code = "import app, gradio.route_utils as r, ui.files as f; print(r.DEFAULT_TEMP_DIR); print(f.process_folder())"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    read_at_import, ours = out.stdout.split()
    assert Path(read_at_import) == Path(ours) / "gradio"  # what gradio read when imported is the app's own
