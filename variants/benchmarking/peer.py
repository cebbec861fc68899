"""The benchmark's peers: transformers' question-answering pipeline on the baseline, and optimum's ten-line ONNX
Runtime dynamic INT8 of it, timed and scored like the variants, so that every record says how far the project is
ahead of the obvious ways.

They run from an environment of their own (``bash scripts/setup.sh peers``, :func:`peers_python`): transformers
4.57.6 with its pipeline, optimum 2.1.0 and optimum-onnx 0.1.0, none of which installs beside the product's
transformers 5. Each peer is a process of its own (:mod:`variants.benchmarking.peer_worker`) that answers over a
pipe and times its own calls by the bench's rule, so the pipe costs it nothing; the bench runs it in turns with the
variants, on the same questions, as it did in one process. A peer that cannot run (no such environment, a load that
failed, the CPU peer on a GPU) is an entry that carries its error in one line.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from variants.answering.timing import OwnTiming, describe
from variants.benchmarking.options import Runner
from variants.building.cache import ArtifactCache, cache_key
from variants.building.sources import resolve, weights_identity
from variants.core import config, hardware
from variants.core import spec as specs
from variants.core.versions import CHECKOUT
from variants.records.record import OPTIMUM_INT8, PEER, VariantEntry

WORKER = Path(__file__).with_name("peer_worker.py")
PIPELINE_LABEL = "transformers pipeline (PyTorch FP32)"
OPTIMUM_LABEL = "optimum ORT dynamic INT8"
ENVIRONMENT = "peers"  # the name a record gives the environment the peers ran in (VariantEntry.environment)
# what shapes optimum's INT8 build, from the peers' environment: part of its cache key
BUILD_LIBRARIES = ("torch", "transformers", "optimum", "optimum-onnx", "onnx", "onnxruntime")


class PeerError(RuntimeError):
    """A peer could not run or answer; the message is the record's one line (the worker's own, as it wrote it)."""


def baseline_source(engine: Any, args: argparse.Namespace | None = None) -> Path:
    """The local folder of the baseline model (what both peers load)."""

    for spec in engine.specs:
        if spec.name == "baseline":
            return engine.source(spec).path
    source = getattr(args, "baseline", None) or specs.FAMILIES[engine.preset].baseline
    return resolve(source, cache_dir=engine.cache_dir).path


def peers_python() -> Path:
    """The peers' environment's Python; :class:`PeerError` saying how to make it where it is missing."""
    venv = config.peers_venv(CHECKOUT)
    python = venv / "bin" / "python"
    if not python.is_file():
        raise PeerError(f"the peers' environment is not set up ({venv}): run bash scripts/setup.sh peers")
    return python


def peers_missing() -> str | None:
    """The one line the bench says when the peers' environment is missing, else None."""
    try:
        peers_python()
    except PeerError as exc:
        return str(exc)
    return None


def error_line(exc: BaseException) -> str:
    """A peer's error for its record entry: a :class:`PeerError`'s own words, else ``Type: message``."""
    return str(exc) if isinstance(exc, PeerError) else describe(exc)


def _tail(log: Any) -> str:
    """The last line a worker wrote on its error stream (a traceback ends with its exception), or ""."""
    log.seek(0)
    lines = [line.strip() for line in log.read().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _reply(line: str, log: Any) -> dict[str, Any]:
    """A worker's reply line as a dict; :class:`PeerError` for an error reply, or none (the process ended)."""
    if not line.strip():
        tail = _tail(log)
        raise PeerError("the peer's process ended" + (f": {tail}" if tail else ""))
    reply = json.loads(line)
    if "error" in reply:
        raise PeerError(reply["error"])
    return reply


def environment(python: Path) -> dict[str, Any]:
    """The peers' environment as a record names it: ``name`` and the worker's ``versions``."""
    done = subprocess.run(
        [str(python), "-I", str(WORKER), "versions"], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode:
        tail = [line for line in done.stderr.splitlines() if line.strip()]
        raise PeerError(f"the peers' environment does not run ({python}): {tail[-1] if tail else done.returncode}")
    return {"name": ENVIRONMENT, **json.loads(done.stdout)}


class PeerProcess:
    """One peer's worker process and the pipe to it: each request a line out, its reply a line back. The process
    ends when this object is dropped or the bench exits (its input closes, and it is stopped)."""

    def __init__(self, python: Path, argv: list[str]) -> None:
        self.log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # its warnings, and why it died if it does
        self.process = subprocess.Popen(
            [str(python), "-I", str(WORKER), *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            encoding="utf-8",
        )
        weakref.finalize(self, _stop, self.process, self.log)

    def read(self) -> dict[str, Any]:
        return _reply(self.process.stdout.readline(), self.log)

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        try:
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
        except OSError:  # a broken pipe: it died; its reply (none) says why
            pass
        return self.read()

    def memory(self) -> dict[str, Any]:
        """The peer's own process memory (RSS and its peak since it started, MB), for its record entry."""
        try:
            return {**self.ask({"memory": True})["memory"], "process": "the peer's own"}
        except (PeerError, ValueError, KeyError) as exc:
            return {"error": error_line(exc)}


def _stop(process: subprocess.Popen, log: Any) -> None:
    try:
        process.stdin.close()  # the worker ends at the end of its input
        process.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        process.kill()
        process.wait()
    log.close()


class PeerAnswerer:
    """A runner's ``answer`` over a peer's process: the pipeline's answers (decided by the pipeline itself, at its
    threshold 0: no null score), and in ``timed`` the call's own timing, measured in the peer's process."""

    def __init__(self, process: PeerProcess) -> None:
        self.process = process
        self.timed: OwnTiming | None = None

    def __call__(self, pairs: list[tuple[str, str]], batch: int = 1) -> list[tuple[str, float | None]]:
        reply = self.process.ask({"pairs": [list(pair) for pair in pairs], "batch": batch})
        self.timed = OwnTiming(reply["ms"], reply["cpu_ms"], reply["wait_ms"])
        return [(a["answer"], None) for a in reply["answers"]]


def limits(settings: Any) -> list[str]:
    """The worker's options for the engine's window, stride and answer length."""
    return [
        *("--max-length", str(settings.max_length), "--stride", str(settings.stride)),
        *("--max-answer-length", str(settings.max_answer_length)),
    ]


def torch_threads() -> int:
    import torch  # noqa: PLC0415

    return torch.get_num_threads()


def start(python: Path, argv: list[str]) -> tuple[PeerProcess, dict[str, Any]]:
    """A worker started with ``argv`` and what it says it loaded (:class:`PeerError` where it could not)."""
    process = PeerProcess(python, argv)
    return process, process.read()["ready"]


def peer_runner(engine: Any, args: argparse.Namespace | None = None) -> Runner | VariantEntry:
    """transformers' ``pipeline("question-answering", handle_impossible_answer=True)`` on the baseline model.

    Same device, FP32, the engine's window and answer-length limits, PyTorch on the variants' threads. The pipeline
    gives the null score only when the null answer wins, so the peer has the pipeline view only. If it cannot load,
    the returned entry carries the error.
    """
    try:
        python = peers_python()
        path = str(baseline_source(engine, args))
        argv = ["serve", "pipeline", "--model", path, "--device", engine.device, "--threads", str(torch_threads())]
        process, ready = start(python, argv + limits(engine.settings))
    except Exception as exc:
        return VariantEntry(PEER, PIPELINE_LABEL, backend="transformers-pipeline", error=error_line(exc))
    entry = VariantEntry(
        PEER,
        PIPELINE_LABEL,
        backend="transformers-pipeline",
        device=ready["device"],
        provider=ready["provider"],
        dtype=ready["dtype"],
        size_mb=ready["size_mb"],
        parameters=ready["parameters"],
        load_seconds=ready["load_seconds"],
        source=path,
        weights=weights_identity(resolve(path)),
        environment={"name": ENVIRONMENT, **ready["environment"]},
        latency_only=baseline_latency_only(engine),
    )
    return Runner(PEER, PeerAnswerer(process), entry, memory=process.memory)


def baseline_latency_only(engine: Any) -> bool:
    """Whether the baseline the peers run has random weights (a replica): then their answers and F1 mean nothing,
    as the variants' do, and the bench times them without scoring them."""
    return any(s.latency_only for s in engine.specs if s.name == "baseline")


def instruction_set() -> str:
    """The name of optimum's dynamic INT8 configuration for this CPU: what its documentation has an engineer pick
    (``AutoQuantizationConfig.<isa>(is_static=False)``)."""
    flags = hardware.cpu_features()
    if not hardware.is_x86():
        return "arm64"
    if "avx512_vnni" in flags:
        return "avx512_vnni"
    return "avx512" if "avx512f" in flags else "avx2"


def build_int8(python: Path, model: Path, isa: str, out: Path) -> None:
    """optimum's export and dynamic INT8 of ``model`` into ``out``, run in the peers' environment."""
    argv = [str(python), "-I", str(WORKER), "build-int8", "--model", str(model), "--isa", isa, "--out", str(out)]
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as log:
        done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, text=True, encoding="utf-8", check=False)
        _reply(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "", log)


def optimum_int8_runner(engine: Any, args: argparse.Namespace | None = None, threads: int | None = None) -> Any:
    """The second peer, the one an engineer would pick in ten lines: optimum's ``ORTModelForQuestionAnswering``
    exported from the same baseline, ONNX Runtime's dynamic INT8 through ``ORTQuantizer`` with the config for
    this CPU, answered by transformers' pipeline. Built once into the artifact cache (keyed by the baseline and
    the peers' library versions). CPU only; on a GPU the entry says so. ``threads``: ONNX Runtime's intra-op
    threads (default: PyTorch's, as the variants get)."""

    def failed(error: str) -> VariantEntry:
        return VariantEntry(OPTIMUM_INT8, OPTIMUM_LABEL, backend="optimum", error=error)

    if not engine.device.startswith("cpu"):
        return failed("a CPU peer: not run on " + engine.device)
    try:
        python = peers_python()
        env = environment(python)
        source = resolve(str(baseline_source(engine, args)))
        isa = instruction_set()
        versions = {name: env.get(name) for name in BUILD_LIBRARIES}
        key = "optimum-int8-" + cache_key({"source": source.identity, "isa": isa, "versions": versions})
        started = time.perf_counter()
        folder = ArtifactCache(engine.cache_dir).get_or_build(
            key, lambda tmp: build_int8(python, source.path, isa, tmp)
        )
        built_seconds = time.perf_counter() - started
        n = threads or torch_threads()
        argv = ["serve", "optimum-int8", "--model", str(source.path), "--folder", str(folder), "--threads", str(n)]
        process, ready = start(python, argv + limits(engine.settings))
    except Exception as exc:
        return failed(error_line(exc))
    entry = VariantEntry(
        OPTIMUM_INT8,
        f"{OPTIMUM_LABEL} ({isa})",
        backend="optimum",
        device=ready["device"],
        provider=ready["provider"],
        dtype=ready["dtype"],
        size_mb=ready["size_mb"],
        load_seconds=round(built_seconds + ready["load_seconds"], 3),
        source=str(source.path),
        weights=weights_identity(source),
        build={"quantization": isa, "is_static": False, "per_channel": False, "threads": ready["threads"]},
        environment={"name": ENVIRONMENT, **ready["environment"]},
        latency_only=baseline_latency_only(engine),
    )
    # dynamic INT8: activation scales come from the whole call, so its accuracy is measured one question a call
    return Runner(OPTIMUM_INT8, PeerAnswerer(process), entry, batch_invariant=False, memory=process.memory)
