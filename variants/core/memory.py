"""Memory a build needs and the machine has: resident memory sampled per build step, free memory, a model's size.

A build step (export, graph optimization, INT8) holds the graph it reads and the one it writes at once, and the
libraries that do it keep copies of their own. :class:`PeakSampler` follows the resident memory of this process and
of its children (steps run in a child process where that returns their memory, :mod:`variants.building.steps`)
while a build runs, attributing each sample to the step the build is in, so a record says which step peaked.
:func:`available_bytes` is what this machine (or this container: a Space's limit is its cgroup's, not the host's)
can still give; :data:`CHAIN_FACTOR` times a model's FP32 weights is what its no-training chain needs above what
the app already holds (docs/usage.md, "Memory a build needs"; measured by ``python -m variants build
--memory-record``).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from variants.core.hardware import current_hardware
from variants.core.versions import record_versions

# What a no-training chain's build takes, in multiples of the model's FP32 weights (the records in
# experiments/records/memory/, docs/results.md "Memory a build needs"). STEP_FACTOR: the target for each step above
# what the app holds when it starts; the BERT-large replica's export adds 2.1x and its optimization 2.3x in their
# child processes, its INT8 3.5x (ONNX Runtime's quantizer holds three copies of the graph: over the target).
# CHAIN_FACTOR: what the whole chain, its loaded variants and its largest step together, was measured to add above
# what the app held before it, rounded up (6.52x for the BERT-large replica built as the app builds it:
# `python -m variants build --keep-loaded`). A visitor's model is refused where CHAIN_FACTOR times its weights is
# more than the memory free.
STEP_FACTOR = 3.0
CHAIN_FACTOR = 6.6
GB = 1e9

_CGROUP_V2 = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory.current"))
_CGROUP_V1 = (
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    Path("/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def resident_bytes(process: psutil.Process | None = None) -> int:
    """Resident memory of ``process`` (default this one) and of its live children, together."""
    process = process or psutil.Process()
    total = 0
    for p in (process, *_children(process)):
        try:
            total += p.memory_info().rss
        except psutil.Error:  # a child that ended between the listing and the read
            continue
    return total


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def cgroup_free_bytes(paths: tuple[tuple[Path, Path], ...] = (_CGROUP_V2, _CGROUP_V1)) -> int | None:
    """What this container's memory limit leaves (limit minus usage), or None without a limit.

    A container (a Space) sees the host's memory in ``/proc/meminfo``; its own limit is its cgroup's.
    """
    for limit_file, usage_file in paths:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 1 << 60:  # v1 writes a huge number for no limit
            return max(0, limit - usage)
    return None


def available_bytes() -> int:
    """Memory this process can still have: the machine's available memory, or its container's if less."""
    host = psutil.virtual_memory().available
    container = cgroup_free_bytes()
    return host if container is None else min(host, container)


def fp32_bytes(config: dict[str, Any]) -> int | None:
    """The FP32 weights of a transformer encoder described by a ``config.json`` (its parameter count x 4), or None
    when the config lacks the sizes. Counted as BERT's shapes are (embeddings, then per layer attention, its
    output, the FFN and two LayerNorms), which RoBERTa, DistilBERT's and ALBERT's names map onto."""
    get = lambda *keys: next((config[k] for k in keys if isinstance(config.get(k), int)), None)  # noqa: E731
    hidden = get("hidden_size", "dim", "d_model")
    layers = get("num_hidden_layers", "n_layers", "num_layers")
    vocab = get("vocab_size")
    if not (hidden and layers and vocab):
        return None
    ffn = get("intermediate_size", "hidden_dim", "ffn_dim") or 4 * hidden
    embedding = get("embedding_size") or hidden
    positions = get("max_position_embeddings") or 512
    types = get("type_vocab_size") or 0
    params = (vocab + positions + types) * embedding + 2 * embedding
    params += 0 if embedding == hidden else embedding * hidden + hidden
    params += layers * (4 * (hidden * hidden + hidden) + 2 * hidden * ffn + ffn + hidden + 4 * hidden)
    return 4 * (params + 2 * hidden + 2)  # + the QA head


def build_need_bytes(weights_fp32: int, factor: float = CHAIN_FACTOR) -> int:
    """What building a model's no-training chain needs above what the app holds (:data:`CHAIN_FACTOR`)."""
    return int(weights_fp32 * factor)


def gigabytes(n: float) -> str:
    return f"{n / GB:.1f} GB"


@dataclass
class StepPeak:
    """One build step's memory: resident at its start, its highest sample, and how long it ran."""

    step: str
    start_bytes: int
    peak_bytes: int
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "start_gb": round(self.start_bytes / GB, 3),
            "peak_gb": round(self.peak_bytes / GB, 3),
            "above_start_gb": round((self.peak_bytes - self.start_bytes) / GB, 3),
            "seconds": round(self.seconds, 1),
        }


@dataclass
class PeakSampler:
    """Samples this process's resident memory (its children's included) every ``interval`` seconds in a thread,
    each sample counted to the step ``current()`` names then ("" between steps); used as a context manager.

    Sampling misses what lives shorter than ``interval``; :meth:`result` adds the kernel's own high-water marks
    (``ru_maxrss`` of this process and of its waited-for children), which miss nothing but name no step.
    """

    current: Callable[[], str]
    interval: float = 0.05
    steps: dict[str, StepPeak] = field(default_factory=dict)
    baseline_bytes: int = 0
    peak_bytes: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _began: float = 0.0
    _last: float = 0.0

    def __enter__(self) -> PeakSampler:
        self.baseline_bytes = self.peak_bytes = resident_bytes()
        self._began = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def _run(self) -> None:
        process = psutil.Process()
        while not self._stop.wait(self.interval):
            self.sample(process)

    def sample(self, process: psutil.Process | None = None) -> None:
        rss, step, now = resident_bytes(process), self.current() or "", time.monotonic()
        self.peak_bytes = max(self.peak_bytes, rss)
        peak = self.steps.setdefault(step, StepPeak(step, rss, rss))
        peak.peak_bytes = max(peak.peak_bytes, rss)
        peak.seconds += now - (self._last or now)  # the time since the last sample counts to the step seen now
        self._last = now

    def result(self) -> dict[str, Any]:
        """Per step (in the order they began) and overall, in GB, with the kernel's high-water marks."""
        self_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
        children_max = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
        return {
            "sampling_interval_s": self.interval,
            "before_build_gb": round(self.baseline_bytes / GB, 3),
            "peak_gb": round(self.peak_bytes / GB, 3),
            "peak_above_before_build_gb": round((self.peak_bytes - self.baseline_bytes) / GB, 3),
            "kernel_max_rss_gb": {
                "this_process": round(self_max / GB, 3),
                "largest_child": round(children_max / GB, 3),
            },
            "seconds": round(time.monotonic() - self._began, 1),
            "steps": [p.as_dict() for p in self.steps.values() if p.step],
        }


def memory_facts(versions: bool = False) -> dict[str, Any]:
    """The machine's memory beside a record: total, available now, the container's limit if any, the load; with
    ``versions``, the libraries' and the code's (taken as a build begins: the code may change while it runs)."""
    vm = psutil.virtual_memory()
    facts: dict[str, Any] = {
        "total_gb": round(vm.total / GB, 2),
        "available_gb": round(vm.available / GB, 2),
        "container_free_gb": None if (c := cgroup_free_bytes()) is None else round(c / GB, 2),
        "pid": os.getpid(),
        "load_average": list(os.getloadavg()),
    }
    if versions:
        facts["versions"] = {**record_versions(), "platform": platform.platform()}
    return facts


def build_record(sampler: PeakSampler, names: list[str], configs: list[Path], before: dict[str, Any], argv: list[str]):
    """The record of a sampled build of the variants ``names`` from the models whose ``config.json`` are ``configs``:
    per step peaks, the largest model's FP32 weights and each step's rise above its start as a multiple of them,
    with the machine, its load and the versions (``before``: :func:`memory_facts` taken as the build began)."""

    result = sampler.result()
    weights = [fp32_bytes(json.loads(c.read_text(encoding="utf-8"))) for c in configs if c.is_file()]
    largest = max((w for w in weights if w), default=None)
    if largest:
        for step in result["steps"]:
            step["above_start_x_weights"] = round(step["above_start_gb"] * GB / largest, 2)
        result["peak_above_before_build_x_weights"] = round(result["peak_above_before_build_gb"] * GB / largest, 2)
    return {
        "kind": "build-memory",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python -m variants", *argv[1:]]),
        "variants": names,
        "model_fp32_gb": round(largest / GB, 3) if largest else None,
        "factors": {"step": STEP_FACTOR, "chain": CHAIN_FACTOR},
        **result,
        "memory_before": before,
        "memory_after": memory_facts(),
        "hardware": current_hardware(),
        "versions": before.pop("versions", None),
        "load_average_after": list(os.getloadavg()),
    }


def record_name(preset: str, record: dict[str, Any]) -> str:
    stamp = record["created"].replace(":", "").replace("-", "")[:15]
    return f"build-memory-{preset}-{record['hardware']['cpu_slug']}-{stamp}.json"


def summary(record: dict[str, Any]) -> str:
    """The record as lines: each step's peak and its rise above its start."""
    lines = [
        f"{s['step']:<34} peak {s['peak_gb']:6.2f} GB  (+{s['above_start_gb']:5.2f} GB above its start)  "
        f"{s['seconds']:6.1f} s"
        for s in record["steps"]
    ]
    lines.append(
        f"peak {record['peak_gb']:.2f} GB sampled (this process and its children); kernel high-water marks: "
        f"{record['kernel_max_rss_gb']['this_process']:.2f} GB this process, "
        f"{record['kernel_max_rss_gb']['largest_child']:.2f} GB its largest child"
    )
    return "\n".join(lines)
