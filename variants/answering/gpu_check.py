"""What an NVIDIA GPU gives this process, found once at start: the driver and the newest CUDA it runs (by NVML,
:func:`variants.core.hardware.nvidia_driver`, so a torch that cannot use the GPU does not hide it), whether torch
sees CUDA, and the execution providers an ONNX Runtime session on the GPU really gets (read back from a session,
as the engine reads its own: ORT gives a CPU session without an error when its CUDA provider cannot load).

Where the GPU is there but torch or ONNX Runtime cannot use it, :meth:`GpuCheck.problem` says so in one sentence
in the host's terms: the driver's CUDA version, what the installed builds need, and the lines of
``requirements.txt`` that install the CUDA 12 builds, which run on a driver 525 or newer (docs/gpu.md, "Which build
runs where"). The usual cause: PyPI's torch (2.11 on) and onnxruntime-gpu (1.27 on) are CUDA 13 builds, which need
a driver 580 or newer. On a machine without an NVIDIA GPU there is nothing to say: :func:`gpu_check` is None.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

from variants.answering.runtime import CUDA, session_plan
from variants.core.hardware import NvidiaDriver, nvidia_driver

# What requirements.txt installs on Linux, the CUDA 12 builds (tests/test_gpu_check.py keeps these its lines)
TORCH_CUDA12 = "torch==2.13.0+cu126"
TORCH_CUDA12_INDEX = "--extra-index-url https://download.pytorch.org/whl/cu126"
ORT_CUDA12 = "onnxruntime-gpu==1.26.0"
CUDA12_DRIVER = 525  # the oldest driver CUDA 12 builds run on (CUDA's minor version compatibility)


@dataclass(frozen=True)
class GpuCheck:
    """The driver, torch and ONNX Runtime facts of a machine with an NVIDIA GPU, and what follows from them."""

    driver: NvidiaDriver
    torch_version: str
    torch_cuda: str | None  # the CUDA version the torch build needs (torch.version.cuda); None: a CPU build
    torch_sees_cuda: bool
    ort_version: str
    ort_cuda: str | None  # the CUDA version the ONNX Runtime build needs; None: a build without CUDA
    ort_providers: tuple[str, ...]  # what a session on the GPU really got

    @property
    def ort_uses_cuda(self) -> bool:
        return CUDA in self.ort_providers

    @property
    def usable(self) -> bool:
        """Whether torch and ONNX Runtime can both use the GPU."""
        return self.torch_sees_cuda and self.ort_uses_cuda

    def facts(self) -> str:
        """The GPU, the driver and its CUDA, torch and ONNX Runtime, in one line (the log's and About's words)."""
        gpus = ", ".join(self.driver.gpus)
        torch_build = f"CUDA {self.torch_cuda}" if self.torch_cuda else "a CPU build"
        ort_build = f"CUDA {self.ort_cuda}" if self.ort_cuda else "no CUDA build"
        sees = "sees CUDA" if self.torch_sees_cuda else "sees no CUDA"
        providers = ", ".join(self.ort_providers) or "no session"
        return (
            f"NVIDIA GPU {gpus}, driver {self.driver.driver} (CUDA up to {self.driver.cuda}); "
            f"torch {self.torch_version} ({torch_build}) {sees}; "
            f"ONNX Runtime {self.ort_version} ({ort_build}) runs {providers}"
        )

    def log_line(self) -> str:
        """The one line the app logs at start: the facts, then the problem where there is one."""
        return " ".join(filter(None, [f"GPU check: {self.facts()}.", self.problem()]))

    def problem(self) -> str:
        """One sentence where torch or ONNX Runtime cannot use the GPU, in the host's terms; "" where both can."""
        if self.usable:
            return ""
        why = [w for w in (self._torch_why(), self._ort_why()) if w]
        runs = "every variant runs" if not self.torch_sees_cuda else "the ONNX Runtime variants run"
        head = (
            f"This machine has an NVIDIA {self.driver.gpus[0]} with driver {self.driver.driver} (CUDA up to "
            f"{self.driver.cuda}), but {' and '.join(why)}, so {runs} on the CPU"
        )
        if self.driver.cuda_major < 12:
            return f"{head}: the CUDA 12 builds need a driver {CUDA12_DRIVER} or newer."
        lines = self._lines_to_change()
        if not lines:  # the CUDA 12 builds are installed and still cannot use it: CUDA's own error is in the log
            return f"{head}; the log above this line has CUDA's own error."
        return f"{head}: in requirements.txt, pin {' and '.join(lines)}, the CUDA 12 builds."

    def _torch_why(self) -> str:
        torch = f"torch {self.torch_version}"
        return self._why(self.torch_sees_cuda, self.torch_cuda, torch, f"{torch} is a CPU build", "sees no GPU")

    def _ort_why(self) -> str:
        cpu_package = f"onnxruntime {self.ort_version} has no CUDA provider"
        failed = "could not start its CUDA provider"
        return self._why(self.ort_uses_cuda, self.ort_cuda, f"onnxruntime-gpu {self.ort_version}", cpu_package, failed)

    def _why(self, works: bool, cuda: str | None, name: str, no_cuda: str, failed: str) -> str:
        """Why a library does not use the GPU: a build without CUDA, one for a newer CUDA than the driver runs, or
        a CUDA build that failed all the same; "" where it works."""
        if works:
            return ""
        if not cuda:
            return no_cuda
        if _major(cuda) > self.driver.cuda_major:
            return f"{name} needs CUDA {cuda}"
        return f"{name} (CUDA {cuda}) {failed}"

    def _lines_to_change(self) -> list[str]:
        """The requirements.txt lines that would install what is missing (none where it is installed already)."""
        lines = []
        if not self.torch_sees_cuda and not (self.torch_cuda and _major(self.torch_cuda) == 12):
            lines.append(f"{TORCH_CUDA12} with the line {TORCH_CUDA12_INDEX}")
        if not self.ort_uses_cuda and not (self.ort_cuda and _major(self.ort_cuda) == 12):
            lines.append(ORT_CUDA12 + ("" if self.ort_cuda else " (instead of onnxruntime)"))
        return lines


def _major(version: str) -> int:
    return int(version.split(".", maxsplit=1)[0])


@functools.cache
def gpu_check() -> GpuCheck | None:
    """This machine's :class:`GpuCheck`, made once (its ONNX Runtime session is the one cost, on a GPU machine
    only); None without an NVIDIA GPU."""
    driver = nvidia_driver()
    if driver is None:
        return None
    import onnxruntime as ort  # noqa: PLC0415
    import torch  # noqa: PLC0415 - before the session, as in the engine: the CUDA libraries ORT then finds
    from onnxruntime.capi import build_and_package_info  # noqa: PLC0415

    return GpuCheck(
        driver=driver,
        torch_version=torch.__version__,
        torch_cuda=torch.version.cuda,
        torch_sees_cuda=torch.cuda.is_available(),
        ort_version=ort.__version__,
        ort_cuda=getattr(build_and_package_info, "cuda_version", None),
        # the CPU package has no CUDA provider to try (asked for one, it only warns): its CPU session is the answer
        ort_providers=session_providers("cuda:0" if CUDA in ort.get_available_providers() else "cpu"),
    )


def session_providers(device: str) -> tuple[str, ...]:
    """The providers an ONNX Runtime session on ``device`` really gets (:func:`session_plan`'s request), read back
    from a one-node graph; () where ORT refuses the session."""
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415
    from onnx import TensorProto, helper  # noqa: PLC0415

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "gpu-check", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    try:
        with warnings.catch_warnings():  # the CPU package warns that it has no CUDA provider: the answer says so
            warnings.simplefilter("ignore")
            session = ort.InferenceSession(model.SerializeToString(), providers=session_plan(device).ort_providers())
    except Exception:
        return ()
    return tuple(session.get_providers())
