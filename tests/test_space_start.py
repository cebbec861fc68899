"""The app started as a Space's runtime starts it (``python app.py`` with ``SYSTEM=spaces``, ``SPACE_ID``,
``HF_HOME`` in the home folder as the image sets it, persistent storage mounted), in a subprocess: no traceback in
the log, the Hub cache and the built artifacts on the storage (a stand-in folder for ``/data``; the models stand-ins
in the Hub cache's layout, the Hub being out of reach), and a restart that finds both. Off a Space, a writable
``/data`` stand-in stays empty. experiments/space_runtime_probe.py does the same as uid 1000 with the shipped
models."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, free_port

ROOT = Path(__file__).resolve().parent.parent
COMMIT = "0123456789abcdef0123456789abcdef01234567"
pytestmark = pytest.mark.slow


def stand_in_hub_model(hub: Path, repo_id: str, source: Path) -> None:
    """``source``'s files as ``repo_id`` in a Hub cache (``hub/models--OWNER--NAME``, its ``main`` at a snapshot),
    as a first start's download leaves them."""
    folder = hub / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(source, folder / "snapshots" / COMMIT)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(COMMIT)


def clean_environment(tmp: Path) -> dict[str, str]:
    """This process's environment less every setting the app or huggingface_hub reads, a home of its own and a
    private temporary folder (as a Space's container has)."""
    drop = ("VARIANTS_", "HF_", "HUGGINGFACE_", "SPACE_", "GRADIO_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop) and k not in ("SYSTEM", "XDG_CACHE_HOME")}
    (tmp / "home").mkdir(exist_ok=True)
    (tmp / "tmp").mkdir(exist_ok=True)
    return {**env, "HOME": str(tmp / "home"), "TMPDIR": str(tmp / "tmp"), "HF_HUB_OFFLINE": "1"}


def run_until_built(
    args: list[str], env: dict[str, str], log_path: Path, port: int, timeout: float = 600, check=None
) -> str:
    """Start ``python app.py ARGS``, wait for the page and the build's last line, call ``check(url)``, stop it;
    returns its log."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            [sys.executable, "app.py", *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline, page = time.monotonic() + timeout, False
            while time.monotonic() < deadline and proc.poll() is None:
                if not page:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                            page = reply.status == 200
                    except OSError:
                        pass
                if page and "build over" in log_path.read_text():
                    break
                time.sleep(0.2)
            text = log_path.read_text()
            assert proc.poll() is None, text
            assert page and "build over: 2 of 2 variants ready" in text, text
            if check is not None:
                check(f"http://127.0.0.1:{port}/")
        finally:
            proc.terminate()
            proc.wait(30)
    return log_path.read_text()


def answers(url: str) -> None:
    """The page served the Space's way (mounted, its own server) answers through gradio's API and the lean route."""
    from gradio_client import Client  # noqa: PLC0415 - a dev dependency

    results = Client(url, verbose=False).predict(CONTEXT, QUESTION, api_name="/answer")
    assert {r["variant"] for r in results} == {"baseline", "pruned-onnx"}
    assert all("error" in r and r["error"] is None and r["latency_ms"] > 0 for r in results), results
    body = json.dumps({"question": QUESTION, "context": CONTEXT, "variant": "baseline"}).encode()
    request = urllib.request.Request(url + "v1/answer", body, {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        assert reply.status == 200 and json.load(reply)["variant"] == "baseline"


def test_as_a_space_it_keeps_the_hub_cache_and_the_artifacts_on_its_storage(
    tiny_qa_dir: Path, tiny_pruned_dir: Path, tmp_path: Path
) -> None:
    data, port = tmp_path / "data", free_port()
    hub = data / ".huggingface" / "hub"  # where the app puts a Space's Hub download (HF_HOME=/data/.huggingface)
    stand_in_hub_model(hub, "someone/tiny-qa", tiny_qa_dir)
    stand_in_hub_model(hub, "someone/tiny-pruned", tiny_pruned_dir)
    env = clean_environment(tmp_path)
    env |= {
        "SYSTEM": "spaces",
        "SPACE_ID": "someone/qa-demo",
        "SPACE_AUTHOR_NAME": "someone",
        "SPACE_REPO_NAME": "qa-demo",
        "HF_HOME": str(tmp_path / "home" / ".cache" / "huggingface"),  # as the Space's image sets it
        "VARIANTS_SPACE_STORAGE": str(data),  # the stand-in for /data
        "GRADIO_SERVER_NAME": "127.0.0.1",
        "GRADIO_SERVER_PORT": str(port),
        "VARIANTS_PRESET": "embedded",
        "VARIANTS_BASELINE": "someone/tiny-qa",
        "VARIANTS_PRUNED": "someone/tiny-pruned",
        "VARIANTS_NAMES": "baseline,pruned-onnx",
    }
    first = run_until_built([], env, tmp_path / "first.log", port, check=answers)
    for text in (first,):
        assert "Traceback" not in text and "spaces package" not in text, text
    assert f"Hub downloads in {hub}; kept across restarts in {data}" in first
    assert "Reading someone/tiny-qa from the Hub cache (no download)" in first
    assert "pruned-onnx: export to ONNX: built (" in first
    entries = [p for p in (data / "qa-variants").iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert entries, "the built artifacts are on the storage"
    assert not (tmp_path / "home" / ".cache" / "huggingface" / "hub").exists()  # nothing in the ephemeral home

    second = run_until_built([], env, tmp_path / "second.log", port)
    assert "Traceback" not in second, second
    assert "Reading someone/tiny-qa from the Hub cache (no download)" in second
    assert "pruned-onnx: export to ONNX: from the cache (" in second and ": built (" not in second


def test_off_a_space_a_writable_data_folder_is_left_alone(tiny_qa_dir: Path, tiny_pruned_dir: Path, tmp_path: Path):
    data, port = tmp_path / "data", free_port()
    data.mkdir()
    env = clean_environment(tmp_path) | {"VARIANTS_SPACE_STORAGE": str(data)}
    args = ["--preset", "embedded", "--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir),
            "--variants", "baseline,pruned-onnx", "--port", str(port)]  # fmt: skip
    text = run_until_built(args, env, tmp_path / "app.log", port)
    assert "Traceback" not in text and "kept across restarts" not in text, text
    assert list(data.iterdir()) == []
    assert any((tmp_path / "home" / ".cache" / "huggingface" / "qa-variants").iterdir())  # the default place
