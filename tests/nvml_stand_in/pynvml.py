"""A stand-in for nvidia-ml-py's ``pynvml``: one NVIDIA T4 on a driver 575.57.08, which runs CUDA up to 12.9 (the
driver a Space's own commit reported). Put this folder first on ``PYTHONPATH`` (or the module in
``sys.modules["pynvml"]``) and the app finds that GPU by NVML while torch and ONNX Runtime see whatever they see:
on a machine without a GPU, a GPU that neither can use. Only the calls this project makes."""

from __future__ import annotations

from types import SimpleNamespace

GPU = "Tesla T4"
DRIVER = "575.57.08"
CUDA = 12090  # NVML's 1000 x major + 10 x minor: CUDA 12.9
MEMORY = 15360 * 2**20


class NVMLError(Exception):
    pass


def nvmlInit() -> None:
    pass


def nvmlShutdown() -> None:
    pass


def nvmlDeviceGetCount() -> int:
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> int:
    if index != 0:
        raise NVMLError(f"no GPU {index}")
    return index


def nvmlDeviceGetName(handle: int) -> str:
    return GPU


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:
    return SimpleNamespace(total=MEMORY, free=MEMORY, used=0)


def nvmlSystemGetDriverVersion() -> str:
    return DRIVER


def nvmlSystemGetCudaDriverVersion() -> int:
    return CUDA
