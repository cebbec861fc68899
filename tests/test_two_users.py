"""Two users' apps on one machine, for real: started as root, then as uid 1000 (a Space's user) through ``runuser``,
with one ``/tmp`` between them where gradio's default folder (``/tmp/gradio``) was made by root first. Both serve (the
page, an answer through gradio's API) with no traceback in either log, and a file uploaded to one is not readable by
the other's user: each app gives gradio a private folder of its own (:func:`ui.files.gradio_folder`). Before that,
the second app died at start with ``PermissionError`` from gradio's ``DownloadButton``.

Needs root, ``runuser``, a user with uid 1000 and an interpreter that user may run (this one, or the system's of the
same version with this environment's packages on ``PYTHONPATH``); skipped without them.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, free_port

ROOT = Path(__file__).resolve().parent.parent
SPACE_UID = 1000


def _user(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _python_for(user: str) -> str | None:
    """An interpreter of this version that ``user`` may run: this one, else the system's."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin:/bin")):
        if python and subprocess.run(["runuser", "-u", user, "--", python, "-c", ""], check=False).returncode == 0:
            return python
    return None


OTHER = _user(SPACE_UID)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="starts apps as two users: needs root"),
    pytest.mark.skipif(shutil.which("runuser") is None, reason="needs runuser"),
    pytest.mark.skipif(OTHER is None, reason=f"needs a user with uid {SPACE_UID}"),
]


def environment(home: Path, shared_tmp: Path, model: Path, port: int) -> dict[str, str]:
    """An app's environment: its own home and artifact cache, the machine's ``/tmp`` (shared), the tiny model."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "TMPDIR": str(shared_tmp),
        "PYTHONPATH": os.pathsep.join(site.getsitepackages()),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HF_HOME": str(home / ".cache" / "huggingface"),
        "HF_HUB_OFFLINE": "1",
        "VARIANTS_CACHE_DIR": str(home / "artifacts"),
        "VARIANTS_BASELINE": str(model),
        "VARIANTS_PRUNED": "none",
        "VARIANTS_NAMES": "baseline",
        "GRADIO_ANALYTICS_ENABLED": "False",
    }


@contextmanager
def app_as(user: str, python: str, env: dict[str, str], port: int, log: Path) -> Iterator[str]:
    """``python app.py --port PORT`` as ``user`` (a clean environment), until its page answers and its build is over;
    stopped after the block. Yields its address."""
    command = ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items())]
    command += [python, "app.py", "--port", str(port)]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline, page = time.monotonic() + 300, False
        while time.monotonic() < deadline and proc.poll() is None:
            if not page:
                try:
                    with urllib.request.urlopen(url, timeout=5) as reply:
                        page = reply.status == 200
                except OSError:
                    pass
            if page and "build over" in log.read_text(errors="replace"):
                break
            time.sleep(0.3)
        text = log.read_text(errors="replace")
        assert proc.poll() is None, f"the app as {user} stopped:\n{text}"
        assert page and "build over: 1 of 1 variants ready" in text, text
        yield url
    finally:
        proc.terminate()  # as a host stops it: the app exits on SIGTERM, removing its temporary folder
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise


def upload(url: str, name: str, text: str) -> Path:
    """``text`` uploaded as a file through gradio's upload route; where the app keeps it."""
    boundary = uuid.uuid4().hex
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="{name}"\r\n'
        f"Content-Type: text/plain\r\n\r\n{text}\r\n--{boundary}--\r\n"
    ).encode()
    request = urllib.request.Request(
        url + "gradio_api/upload", body, {"content-type": f"multipart/form-data; boundary={boundary}"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return Path(json.load(reply)[0])


def readable_by(user: str, path: Path) -> bool:
    done = subprocess.run(["runuser", "-u", user, "--", "cat", str(path)], check=False, capture_output=True)
    return done.returncode == 0


def answers(url: str) -> None:
    from gradio_client import Client  # noqa: PLC0415 - a dev dependency

    results = Client(url, verbose=False).predict(CONTEXT, QUESTION, api_name="/answer")
    assert [r["variant"] for r in results] == ["baseline"], results
    assert results[0]["error"] is None and results[0]["latency_ms"] > 0, results


def test_two_users_apps_both_serve_and_keep_each_others_uploads_out_of_reach(tiny_qa_dir: Path) -> None:
    assert OTHER is not None
    python = _python_for(OTHER)
    if python is None:
        pytest.skip(f"no Python {sys.version_info.major}.{sys.version_info.minor} that {OTHER} may run")
    work = Path(tempfile.mkdtemp(prefix="two-users-"))  # not pytest's tmp_path: its parents are root's alone
    try:
        work.chmod(0o755)
        shared_tmp = work / "tmp"  # the machine's /tmp: anyone may write, each keeps their own (sticky)
        shared_tmp.mkdir()
        shared_tmp.chmod(0o1777)
        (shared_tmp / "gradio").mkdir(mode=0o755)  # gradio's default folder, made by root's app first
        model = shutil.copytree(tiny_qa_dir, work / "model")  # readable by both (safetensors writes it 0600)
        model.chmod(0o755)
        for path in model.iterdir():
            path.chmod(0o644)
        apps, logs, uploads = {}, {}, {}
        with ExitStack() as stack:
            for user in ("root", OTHER):
                home = work / f"home-{user}"
                home.mkdir()
                shutil.chown(home, user)
                port = free_port()
                logs[user] = work / f"{user}.log"
                env = environment(home, shared_tmp, model, port)
                apps[user] = stack.enter_context(app_as(user, python, env, port, logs[user]))
            for user, url in apps.items():
                answers(url)
                uploads[user] = upload(url, f"from-{user}.txt", f"a question of {user}'s visitor")
                assert uploads[user].read_text() == f"a question of {user}'s visitor"
            # root's visitor's file is out of the other user's reach; the other's out of everyone else's but root's
            assert not readable_by(OTHER, uploads["root"])
            assert readable_by(OTHER, uploads[OTHER])  # the check itself can tell (its own user reads it)
            assert not readable_by("nobody", uploads[OTHER])
            assert not any(path.is_relative_to(shared_tmp / "gradio") for path in uploads.values()), uploads
        for user, log in logs.items():
            text = log.read_text(errors="replace")
            assert "Traceback" not in text and "PermissionError" not in text, f"{user}:\n{text}"
        # each app's folder (gradio's inside) went with it
        assert not any(p.name.startswith("qa-variants-") for p in shared_tmp.iterdir()), list(shared_tmp.iterdir())
    finally:
        shutil.rmtree(work, ignore_errors=True)
