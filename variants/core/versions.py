"""The versions of the libraries that shape the numbers: what an artifact's cache key and every record name."""

from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def dist_version(*dists: str) -> str | None:
    """The installed version of the first of ``dists`` that is installed, else None."""
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def module_version(module: str, *dists: str) -> str | None:
    """The version of the module this process imports (``module.__version__``), else the installed
    distribution's. The import decides: where two builds are installed (a machine's CPU onnxruntime and an
    onnxruntime-gpu put first on the path), package metadata can name the one that does not run."""
    import importlib  # noqa: PLC0415

    try:
        version = getattr(importlib.import_module(module), "__version__", None)
    except Exception:  # not installed, or broken: the metadata may still say what is there
        version = None
    return str(version) if version else dist_version(*(dists or (module,)))


def artifact_versions() -> dict[str, str | None]:
    """Versions of the libraries that shape a built artifact (None where not installed): part of its cache key."""
    return {
        "torch": module_version("torch"),
        "transformers": module_version("transformers"),
        "optimum": dist_version("optimum"),
        "optimum-onnx": dist_version("optimum-onnx"),
        "onnx": module_version("onnx"),
        "onnxruntime": module_version("onnxruntime", "onnxruntime", "onnxruntime-gpu"),
    }


def code_version(folder: Path = CHECKOUT) -> str | None:
    """The git commit of the code in ``folder`` (12 hex digits, "+changes" when tracked files differ from it);
    None outside a git checkout (a Space's copy, an installed wheel) or without git."""

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["git", "-C", str(folder), *args], check=False, capture_output=True, text=True, timeout=10
        )

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        if commit.returncode:
            return None
        changed = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def record_versions() -> dict[str, str | None]:
    """Versions a record names: Python, the artifact's libraries, tokenizers and numpy, and the code's commit."""
    return {
        "code": code_version(),
        "python": platform.python_version(),
        **artifact_versions(),
        "tokenizers": module_version("tokenizers"),
        "numpy": module_version("numpy"),
    }
