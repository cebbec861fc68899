"""A GPU found by NVML that torch or ONNX Runtime cannot use: one log line at start, one sentence in the header, the
facts in About; nothing on a machine without an NVIDIA GPU. The GPU is a stand-in NVML (tests/nvml_stand_in: a T4
on a driver 575.57.08, CUDA up to 12.9); torch and ONNX Runtime are this machine's real CPU builds."""

from __future__ import annotations

import importlib.util
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

import app
from ui.about import about_html
from ui.startup import gpu_words_html, header_html
from ui.text import esc
from variants.answering import gpu_check as checks
from variants.answering.gpu_check import GpuCheck, gpu_check, session_providers
from variants.core.hardware import NvidiaDriver, nvidia_driver

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = Path(__file__).resolve().parent / "nvml_stand_in" / "pynvml.py"
T4_575 = NvidiaDriver(gpus=("Tesla T4",), driver="575.57.08", cuda="12.9")
# PyPI's builds today, on that driver: both CUDA 13
CUDA_13 = GpuCheck(T4_575, "2.13.0", "13.0", False, "1.31.1", "13.0", ("CPUExecutionProvider",))
WORKING = GpuCheck(
    T4_575, "2.13.0+cu126", "12.6", True, "1.26.0", "12.8", ("CUDAExecutionProvider", "CPUExecutionProvider")
)


def stand_in_nvml() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pynvml", STAND_IN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch):
    """Sets ``sys.modules["pynvml"]`` (the stand-in, or None: no NVML) with the check made afresh around the test."""
    gpu_check.cache_clear()

    def use(module: ModuleType | None) -> None:
        monkeypatch.setitem(sys.modules, "pynvml", module)
        gpu_check.cache_clear()

    yield use
    gpu_check.cache_clear()


def one_sentence(text: str) -> bool:
    return text.endswith(".") and not re.search(r"\.\s", text)


def test_nvml_finds_the_stand_in_gpu_and_nothing_where_it_cannot(nvml) -> None:
    nvml(stand_in_nvml())
    assert nvidia_driver() == T4_575
    nvml(None)  # nvidia-ml-py not installed
    assert nvidia_driver() is None and gpu_check() is None
    broken = stand_in_nvml()
    broken.nvmlInit = lambda: (_ for _ in ()).throw(broken.NVMLError("NVML Shared Library Not Found"))
    nvml(broken)  # installed, no driver
    assert nvidia_driver() is None


def test_the_sentence_says_what_the_driver_runs_what_the_builds_need_and_the_lines_to_change() -> None:
    said = CUDA_13.problem()
    assert one_sentence(said), said
    for words in ("Tesla T4", "driver 575.57.08 (CUDA up to 12.9)", "torch 2.13.0 needs CUDA 13.0",
                  "onnxruntime-gpu 1.31.1 needs CUDA 13.0", "every variant runs on the CPU", "requirements.txt",
                  checks.TORCH_CUDA12, checks.TORCH_CUDA12_INDEX, checks.ORT_CUDA12):  # fmt: skip
        assert words in said, words
    assert WORKING.problem() == "" and WORKING.usable
    # torch can, ONNX Runtime cannot: only its line, and only its variants on the CPU
    ort_only = replace(WORKING, ort_version="1.31.1", ort_cuda="13.0", ort_providers=("CPUExecutionProvider",))
    said = ort_only.problem()
    assert "the ONNX Runtime variants run on the CPU" in said and checks.ORT_CUDA12 in said
    assert checks.TORCH_CUDA12 not in said and one_sentence(said)
    # the CPU package where onnxruntime-gpu should be
    said = replace(ort_only, ort_version="1.31.1", ort_cuda=None).problem()
    assert "onnxruntime 1.31.1 has no CUDA provider" in said and f"{checks.ORT_CUDA12} (instead of onnxruntime)" in said
    # the CUDA 12 builds installed and still no GPU: no line to change, CUDA's own error is in the log
    said = replace(WORKING, torch_sees_cuda=False).problem()
    assert "sees no GPU" in said and "CUDA's own error" in said and "requirements.txt" not in said
    # a driver older than CUDA 12's
    said = replace(CUDA_13, driver=NvidiaDriver(("Tesla T4",), "470.256.02", "11.4")).problem()
    assert "driver 525 or newer" in said and one_sentence(said)


def test_the_advice_is_what_requirements_txt_installs() -> None:
    lines = [line.split(";")[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    assert {checks.TORCH_CUDA12, checks.TORCH_CUDA12_INDEX, checks.ORT_CUDA12} <= set(lines)


def test_the_probe_reads_back_what_onnx_runtime_gave() -> None:
    assert session_providers("cpu") == ("CPUExecutionProvider",)
    # this machine's ONNX Runtime has no usable CUDA provider: the session asked for CUDA is a CPU session
    assert "CUDAExecutionProvider" not in session_providers("cuda:0")


def start(tiny_qa_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> tuple[object, list[str]]:
    """app.py's start (the engine, nothing built) and the lines it printed."""
    args = app.parse_args(["--preset", "embedded", "--baseline", str(tiny_qa_dir), "--variants", "baseline",
                           "--no-fallback", "--cache-dir", str(tmp_path / "cache"), "--device", "auto"])  # fmt: skip
    engine = app.prepare_models(args)
    return engine, capsys.readouterr().out.splitlines()


def test_a_gpu_torch_cannot_use_gets_one_log_line_a_sentence_in_the_header_and_about(
    nvml, tiny_qa_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    nvml(stand_in_nvml())
    engine, lines = start(tiny_qa_dir, tmp_path, capsys)
    assert engine.device == "cpu"  # torch sees no CUDA: the CPU chain, as before
    gpu_lines = [line for line in lines if "575.57.08" in line]
    assert len(gpu_lines) == 1, lines
    for words in ("driver 575.57.08 (CUDA up to 12.9)", "torch 2.13.0", "sees no CUDA", "runs CPUExecutionProvider"):
        assert words in gpu_lines[0], words
    problem = gpu_check().problem()
    assert problem and problem in gpu_lines[0]
    header = header_html(engine.snapshot())
    shown = gpu_words_html(problem)  # escaped, its requirements.txt lines set as code
    assert f'<div class="qa-gpu-problem" id="qa-gpu-problem">{shown}</div>' in header
    assert f"<code>{esc(checks.TORCH_CUDA12_INDEX)}</code>" in shown and re.sub("<[^>]+>", "", shown) == esc(problem)
    about = about_html(engine)
    assert esc(gpu_check().facts()) in about and shown in about
    demo = app.build_demo(engine, results_dir=tmp_path / "no-records")  # the page's header, as served
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert "qa-gpu-problem" in by_id["qa-header"].value
    engine.close()


def test_without_an_nvidia_gpu_nothing_changes(nvml, tiny_qa_dir: Path, tmp_path: Path, capsys) -> None:
    nvml(None)
    engine, lines = start(tiny_qa_dir, tmp_path, capsys)
    assert not [line for line in lines if "GPU" in line], lines
    assert "qa-gpu-problem" not in header_html(engine.snapshot()) and "qa-about-gpu" not in about_html(engine)
    engine.close()


def test_a_gpu_both_can_use_is_one_log_line_and_no_sentence(nvml, monkeypatch, tiny_qa_dir, tmp_path, capsys) -> None:
    monkeypatch.setattr(checks, "gpu_check", lambda: WORKING)  # what a T4 with the CUDA 12 builds reports
    monkeypatch.setattr(app, "gpu_check", lambda: WORKING)
    monkeypatch.setattr("ui.startup.gpu_check", lambda: WORKING)
    monkeypatch.setattr("ui.about.gpu_check", lambda: WORKING)
    engine, lines = start(tiny_qa_dir, tmp_path, capsys)
    assert [line for line in lines if line.startswith("GPU check:")] == [f"GPU check: {WORKING.facts()}."]
    assert "runs CUDAExecutionProvider, CPUExecutionProvider" in WORKING.facts()
    assert "qa-gpu-problem" not in header_html(engine.snapshot()) and "qa-about-gpu" in about_html(engine)
    engine.close()
