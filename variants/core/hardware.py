"""What the CPU can do, read once, and the INT8 quantization that suits it.

Why it matters: ONNX Runtime's x86 INT8 kernels multiply u8 activations by s8 weights. Without VNNI
(AVX2-only, and AVX512 CPUs before Cascade Lake) they use ``vpmaddubsw``, which adds two u8 x s8
products into a saturating int16: large activations times large weights clip, and answers drift
(on an emulated Haswell, the tiny test model's logits moved by 19-29 % of their range). VNNI
(``vpdpbusd``: AVX512-VNNI, AVX-VNNI, AMX) accumulates in int32 and never saturates. So:

* with VNNI, or off x86: s8 weights (``QInt8``, "U8S8"), the fastest and ORT's default;
* on x86 without VNNI: s8 weights in 7 bits (``QInt8`` with ``reduce_range``: |w| <= 64, "U8S7").
  A pair of u8 x s7 products adds to at most 2 x 255 x 64 = 32,640 in size, inside int16, so
  nothing saturates, and the fast u8 x s8 kernel still runs: faster than u8 weights at the same F1
  on a CPU without VNNI (``experiments/int8_format_probe.py``, its record in ``experiments/records/``).
  Its drift on the tiny test models is within the INT8 tests' bound;
* when the flags cannot be read: u8 weights (``QUInt8``, "U8U8"), whose kernels widen to int16
  before multiplying, so nothing saturates on any x86 CPU.

Sources: ONNX Runtime's quantization guide ("When and why do I need to try U8U8?") and MLAS's
kernel dispatch (``platform.cpp``).
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")
# Flags that let MLAS use int32-accumulating INT8 instructions (no u8 x s8 saturation).
VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
# The instruction-set facts a benchmark record keeps (those that change which kernels run).
RECORDED_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_int8",
    "amx_bf16",
)


def first_processor(cpuinfo: str) -> dict[str, str]:
    """The ``name: value`` lines of the first processor's block in a ``/proc/cpuinfo`` text (the first
    value of each name), up to the first blank line: lines after the blocks (ppc64le's machine
    ``model``, say) are not the processor's."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    return fields


def parse_cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The ``flags`` of the first processor in a ``/proc/cpuinfo`` text (x86 Linux), else empty."""
    return frozenset(first_processor(cpuinfo).get("flags", "").split())


def parse_cpu_id(cpuinfo: str) -> dict[str, object]:
    """Vendor, family, model and stepping of the first processor in a ``/proc/cpuinfo`` text (x86
    Linux), else empty. A VM's model name can hide the generation (this project's records hold two
    "AMD EPYC" CPUs whose INT8 speeds differ twofold), and speeds differ between generations."""
    fields = first_processor(cpuinfo)
    wanted = {"vendor_id": "vendor", "cpu family": "family", "model": "model", "stepping": "stepping"}
    return {key: int(fields[name]) if fields[name].isdigit() else fields[name]
            for name, key in wanted.items() if name in fields}  # fmt: skip


@functools.cache
def cpuinfo_text() -> str:
    """``/proc/cpuinfo``, read once ("" where it is missing or unreadable)."""
    try:
        return CPUINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@functools.cache
def cpu_id() -> dict[str, object]:
    """This machine's CPU vendor, family, model and stepping (empty where unknown)."""
    return parse_cpu_id(cpuinfo_text())


@functools.cache
def cpu_features() -> frozenset[str]:
    """This machine's CPU flags (read once; empty where ``/proc/cpuinfo`` is missing or unreadable)."""
    return parse_cpu_flags(cpuinfo_text())


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def has_vnni() -> bool:
    """Whether the CPU has an int32-accumulating INT8 dot product (AVX512-VNNI, AVX-VNNI or AMX)."""
    return bool(cpu_features() & VNNI_FLAGS)


@dataclass(frozen=True)
class Int8Settings:
    """How :func:`variants.building.export.quantize_int8` quantizes weights, and why."""

    weight_type: str  # "QInt8" (s8) or "QUInt8" (u8), names of onnxruntime.quantization.QuantType
    reduce_range: bool  # weights in [-64, 64] (ORT's "7-bit"); ``format`` names the combination
    reason: str

    @property
    def format(self) -> str:
        if self.weight_type == "QUInt8":
            return "U8U8"
        return "U8S7" if self.reduce_range else "U8S8"

    def as_dict(self) -> dict[str, object]:
        return {**asdict(self), "format": self.format}


def int8_settings() -> Int8Settings:
    """The INT8 weight format for this CPU (see the module docstring)."""
    if not is_x86():
        return Int8Settings("QInt8", False, "not x86: no u8 x s8 saturation")
    if has_vnni():
        return Int8Settings("QInt8", False, "VNNI: int32 accumulation, no saturation")
    if not cpu_features():
        return Int8Settings("QUInt8", False, "CPU flags unknown: U8U8, safe without VNNI")
    return Int8Settings("QInt8", True, "no VNNI: 7-bit s8 weights keep u8 x s8 pairs inside int16")


def cpu_facts() -> dict[str, object]:
    """For benchmark records: the CPU's family and model, the ISA flags that pick kernels, and the
    INT8 format chosen from them."""
    flags = cpu_features()
    return {
        "cpu_id": cpu_id(),
        "cpu_isa": [f for f in RECORDED_FLAGS if f in flags],
        "int8": int8_settings().as_dict(),
    }


# --- the machine a record describes ---


def _cpu_model() -> str:
    for line in cpuinfo_text().splitlines():
        if line.lower().startswith(("model name", "hardware", "cpu model")):
            return " ".join(line.split(":", 1)[1].split())
    return platform.processor() or platform.machine() or "unknown CPU"


@dataclass(frozen=True)
class NvidiaDriver:
    """This machine's NVIDIA GPUs as NVML sees them: their names, the driver's version and the newest CUDA version
    that driver runs (NVML's ``12090`` -> ``"12.9"``)."""

    gpus: tuple[str, ...]
    driver: str  # e.g. "575.57.08"
    cuda: str  # e.g. "12.9"

    @property
    def cuda_major(self) -> int:
        return int(self.cuda.split(".")[0])


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@contextlib.contextmanager
def _nvml() -> Iterator[Any]:
    """nvidia-ml-py's ``pynvml``, initialised for the block; raises where there is no NVML library or driver."""
    import pynvml  # noqa: PLC0415 - from nvidia-ml-py (the gpu extra)

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def nvidia_driver() -> NvidiaDriver | None:
    """The NVIDIA driver and its GPUs by NVML, not by torch: a torch build that cannot use the GPU (built for a
    newer CUDA than the driver runs, or a CPU build) does not hide it. None where there is no NVML, no driver or
    no GPU."""
    try:
        with _nvml() as nvml:
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
            if not handles:
                return None
            cuda = int(nvml.nvmlSystemGetCudaDriverVersion())  # 1000 x major + 10 x minor
            return NvidiaDriver(
                gpus=tuple(_text(nvml.nvmlDeviceGetName(h)) for h in handles),
                driver=_text(nvml.nvmlSystemGetDriverVersion()),
                cuda=f"{cuda // 1000}.{cuda % 1000 // 10}",
            )
    except Exception:  # no library, no driver, a driver NVML cannot question: no NVIDIA GPU as far as we can tell
        return None


def _gpus() -> list[dict[str, Any]]:
    """Name and memory of each visible GPU: NVML first, torch if it is already imported."""
    try:
        with _nvml() as nvml:
            gpus = []
            for i in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                total = nvml.nvmlDeviceGetMemoryInfo(handle).total
                gpus.append({"name": _text(nvml.nvmlDeviceGetName(handle)), "memory_gb": round(total / 2**30, 1)})
            return gpus
    except Exception:  # no driver / no library: no GPU as far as NVML knows
        pass
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return [
            {
                "name": torch.cuda.get_device_name(i),
                "memory_gb": round(torch.cuda.get_device_properties(i).total_memory / 2**30, 1),
            }
            for i in range(torch.cuda.device_count())
        ]
    return []


def slugify(text: str, length: int = 40) -> str:
    """``Intel(R) Xeon(R) Platinum 8480C @ 2.0GHz`` -> ``intel-xeon-platinum-8480c``."""
    text = re.sub(r"\((r|tm|c)\)|@.*$|\bcpu\b|\bprocessor\b", " ", text.lower())
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:length].strip("-") or "unknown"


def current_hardware() -> dict[str, Any]:
    """The machine this process runs on: CPU model, cores, memory and GPUs (``gpu`` None without one)."""
    import psutil  # noqa: PLC0415

    gpus = _gpus()
    cpu = _cpu_model()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "gpu": gpus[0]["name"] if gpus else None,
        "gpu_count": len(gpus),
        "gpu_memory_gb": gpus[0]["memory_gb"] if gpus else None,
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu_slug": slugify(cpu),
        "gpu_slug": slugify(gpus[0]["name"]) if gpus else None,
        **cpu_facts(),  # ISA flags and the INT8 weight format chosen from them
    }


def device_kind(device: str | None) -> str:
    """``cuda:0`` -> ``cuda``; ``cpu`` -> ``cpu``."""
    return "cuda" if (device or "").startswith("cuda") else "cpu"


def hardware_slug(hardware: dict[str, Any], device: str) -> str:
    """The part of the machine that runs ``device``: the GPU for CUDA, the CPU otherwise."""
    if device_kind(device) == "cuda" and hardware.get("gpu_slug"):
        return hardware["gpu_slug"]
    return hardware.get("cpu_slug") or slugify(hardware.get("cpu") or "")


def hardware_label(hardware: dict[str, Any], device: str) -> str:
    if device_kind(device) == "cuda" and hardware.get("gpu"):
        return hardware["gpu"]
    cores = hardware.get("usable_cores") or hardware.get("cores")
    ident = hardware.get("cpu_id") or {}
    details = [f"family {ident['family']} model {ident['model']}"] if "family" in ident and "model" in ident else []
    details += [f"{cores} cores"] if cores else []
    name = hardware.get("cpu", "unknown CPU")
    return f"{name} ({', '.join(details)})" if details else name


def same_cpu_generation(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same vendor, family and model where both name them (steppings of one model run the same
    kernels); else the same recorded instruction set where both have one (records from before
    ``cpu_id``); else nothing tells them apart."""
    ids = [h.get("cpu_id") or {} for h in (a, b)]
    if all(ids):
        return all(ids[0].get(k) == ids[1].get(k) for k in ("vendor", "family", "model"))
    if a.get("cpu_isa") is not None and b.get("cpu_isa") is not None:
        return set(a["cpu_isa"]) == set(b["cpu_isa"])
    return True
