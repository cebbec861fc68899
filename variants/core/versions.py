"""The versions of the libraries that shape the numbers: what an artifact's cache key and every record name."""

from __future__ import annotations

import platform
from importlib import metadata


def dist_version(*dists: str) -> str | None:
    """The installed version of the first of ``dists`` that is installed, else None."""
    for dist in dists:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def artifact_versions() -> dict[str, str | None]:
    """Versions of the libraries that shape a built artifact (None where not installed): part of its cache key."""
    return {
        "torch": dist_version("torch"),
        "transformers": dist_version("transformers"),
        "optimum": dist_version("optimum"),
        "optimum-onnx": dist_version("optimum-onnx"),
        "onnx": dist_version("onnx"),
        "onnxruntime": dist_version("onnxruntime", "onnxruntime-gpu"),
    }


def record_versions() -> dict[str, str | None]:
    """Versions a record names: Python, the artifact's libraries, tokenizers and numpy."""
    return {
        "python": platform.python_version(),
        **artifact_versions(),
        "tokenizers": dist_version("tokenizers"),
        "numpy": dist_version("numpy"),
    }
