"""A peer in a process of its own: transformers' question-answering pipeline, or optimum's ten-line ONNX Runtime
dynamic INT8 recipe, run from the peers' environment (``bash scripts/setup.sh peers``: transformers 4.57.6,
optimum 2.1.0, optimum-onnx 0.1.0), which cannot be installed beside the product's transformers 5.

Self-contained on purpose: this file imports the standard library and, inside its functions, the peers' own
libraries, never the product. The bench (:mod:`variants.benchmarking.peer`) runs it as a file, ``python -I
peer_worker.py``, so that no ``variants`` package is within its reach, and talks to it in JSON lines:

- ``versions``: prints the peers' environment (Python and the libraries that shape its numbers), imports nothing.
- ``build-int8 --model DIR --isa NAME --out DIR``: optimum's export of the baseline and ``ORTQuantizer``'s dynamic
  INT8 with ``AutoQuantizationConfig.<isa>``, into ``DIR`` (the bench keeps it in its artifact cache).
- ``serve pipeline|optimum-int8 --model DIR [--folder DIR] ...``: loads the peer, says ``{"ready": {...}}`` (or
  ``{"error": "Type: message"}`` and ends), then answers each line ``{"pairs": [[question, context], ...],
  "batch": n}`` with ``{"answers": [{"answer", "score", "start", "end"}, ...], "ms", "cpu_ms", "wait_ms"}``, and
  ``{"memory": true}`` with its own resident memory. It ends when its input closes.

Each call is timed here, by the rule the bench times its own variants with
(``variants.answering.timing.Timing.time_one``): ``time.perf_counter`` around the call, and the process's CPU time
and its threads' wait for a CPU read outside the timed span. So the pipe between the processes is not charged to
the peer, and the bench's busy-machine measure covers the peer's threads as it covers the variants'.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PIPELINE = "pipeline"
OPTIMUM_INT8 = "optimum-int8"
INT8_FILE = "model_quantized.onnx"
# the libraries that shape a peer's numbers (as variants.core.versions.artifact_versions names the product's)
LIBRARIES = ("torch", "transformers", "tokenizers", "optimum", "optimum-onnx", "onnx", "onnxruntime", "numpy")


def versions() -> dict[str, Any]:
    """This environment: its Python, the interpreter's path, and the installed version of each of :data:`LIBRARIES`
    (None where not installed). Reads package metadata only: quick, and nothing is imported."""

    def installed(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        **{name: installed(name) for name in LIBRARIES},
    }


def describe(exc: BaseException) -> str:
    """A one-line ``Type: message`` (as ``variants.answering.timing.describe`` writes a record's errors)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:500]


# --- the timing rule's clock (a copy of variants.answering.timing.cpu_clock; tests/test_peers.py holds them equal) --


def cpu_clock() -> tuple[float, float | None]:
    """This process's CPU time so far and how long its threads have waited for a CPU while ready to run
    (seconds; the wait None where the kernel does not say): each thread's ``/proc/self/task/<tid>/schedstat``
    summed over the process's threads. Elsewhere: ``time.process_time`` and no wait."""
    cpu = wait = 0
    try:
        tasks = list(os.scandir("/proc/self/task"))
    except OSError:
        return time.process_time(), None
    for task in tasks:
        try:
            with open(f"{task.path}/schedstat") as f:
                on_cpu, delay, _ = f.read().split()
        except (OSError, ValueError):
            continue
        cpu, wait = cpu + int(on_cpu), wait + int(delay)
    if cpu == 0:
        return time.process_time(), None
    return cpu / 1e9, wait / 1e9


def cpu_since(start: tuple[float, float | None]) -> tuple[float, float | None]:
    """CPU and wait time (ms) since ``start`` (a :func:`cpu_clock` reading); never below 0."""
    cpu, wait = cpu_clock()
    cpu_ms = round(max(0.0, cpu - start[0]) * 1000, 3)
    if wait is None or start[1] is None:
        return cpu_ms, None
    return cpu_ms, round(max(0.0, wait - start[1]) * 1000, 3)


def memory() -> dict[str, float | None]:
    """This process's resident memory and its peak (MB = 1e6 bytes, Linux's VmRSS and VmHWM)."""
    found: dict[str, float | None] = {"rss_mb": None, "peak_rss_mb": None}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key = {"VmRSS:": "rss_mb", "VmHWM:": "peak_rss_mb"}.get(line.split(maxsplit=1)[0] if line else "")
            if key:
                found[key] = round(int(line.split()[1]) * 1024 / 1e6, 1)
    except OSError:
        pass
    return found


# --- the peers ----------------------------------------------------------------------------------------


def pipeline_kwargs(max_length: int, stride: int, max_answer_length: int) -> dict[str, Any]:
    """The pipeline's options for the engine's limits: its null answer on, the same window, stride and answer
    length (the pipeline refuses a stride of more than half its window)."""
    return {
        "handle_impossible_answer": True,
        "max_answer_len": max_answer_length,
        "max_seq_len": max_length,
        "doc_stride": min(stride, max_length // 2),
    }


def load_pipeline(model: str, device: str, threads: int | None) -> tuple[Any, dict[str, Any]]:
    """transformers' ``pipeline("question-answering")`` on ``model``, FP32 on ``device``, and what it loaded."""
    import torch  # noqa: PLC0415
    from transformers import pipeline  # noqa: PLC0415

    if threads:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    pipe = pipeline("question-answering", model=model, tokenizer=model, device=device, dtype=torch.float32)
    load_seconds = time.perf_counter() - started
    params = list(pipe.model.parameters())
    dtypes = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
    return pipe, {
        "device": str(params[0].device),
        "provider": "PyTorch",
        "dtype": dtypes.get(params[0].dtype, str(params[0].dtype)),
        "size_mb": round(sum(p.numel() * p.element_size() for p in params) / 1e6, 1),
        "parameters": sum(p.numel() for p in params),
        "load_seconds": round(load_seconds, 3),
        "threads": torch.get_num_threads(),
    }


def build_int8(model: str, isa: str, out: str) -> None:
    """optimum's recipe, as its documentation has an engineer write it: export the baseline to ONNX, then dynamic
    INT8 through ``ORTQuantizer`` with ``AutoQuantizationConfig.<isa>`` (this CPU's instruction set)."""
    from optimum.onnxruntime import ORTModelForQuestionAnswering, ORTQuantizer  # noqa: PLC0415
    from optimum.onnxruntime.configuration import AutoQuantizationConfig  # noqa: PLC0415

    config = getattr(AutoQuantizationConfig, isa)(is_static=False, per_channel=False)
    exported = ORTModelForQuestionAnswering.from_pretrained(model, export=True)
    ORTQuantizer.from_pretrained(exported).quantize(quantization_config=config, save_dir=out)


def load_int8(model: str, folder: str, threads: int | None) -> tuple[Any, dict[str, Any]]:
    """The INT8 graph :func:`build_int8` wrote to ``folder``, in ONNX Runtime on ``threads`` intra-op threads,
    answered by transformers' pipeline with the baseline's tokenizer; and what it loaded."""
    import onnxruntime as ort  # noqa: PLC0415
    import torch  # noqa: PLC0415
    from optimum.onnxruntime import ORTModelForQuestionAnswering  # noqa: PLC0415
    from transformers import AutoTokenizer, pipeline  # noqa: PLC0415

    started = time.perf_counter()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or torch.get_num_threads()
    onnx_model = ORTModelForQuestionAnswering.from_pretrained(folder, file_name=INT8_FILE, session_options=options)
    pipe = pipeline(
        "question-answering", model=onnx_model, tokenizer=AutoTokenizer.from_pretrained(model), device="cpu"
    )
    load_seconds = time.perf_counter() - started
    return pipe, {
        "device": "cpu",
        "provider": "CPUExecutionProvider",
        "dtype": "int8",
        "size_mb": round((Path(folder) / INT8_FILE).stat().st_size / 1e6, 1),
        "load_seconds": round(load_seconds, 3),
        "threads": options.intra_op_num_threads,
    }


def answer(pipe: Any, pairs: list[list[str]], batch: int, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
    """The pipeline's answers to ``pairs``: one question as a user asks it, several ``batch`` at a time."""
    if len(pairs) == 1:
        out = [pipe(question=pairs[0][0], context=pairs[0][1], **kwargs)]
    else:
        out = pipe(question=[q for q, _ in pairs], context=[c for _, c in pairs], batch_size=batch, **kwargs)
    return [{"answer": o["answer"], "score": float(o["score"]), "start": o["start"], "end": o["end"]} for o in out]


def timed_answer(pipe: Any, request: dict[str, Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """One request answered and timed by the bench's rule (the module's docstring)."""
    pairs, batch = request["pairs"], int(request.get("batch") or 1)
    clock, started = cpu_clock(), time.perf_counter()
    answers = answer(pipe, pairs, batch, kwargs)
    ms = (time.perf_counter() - started) * 1000
    cpu_ms, wait_ms = cpu_since(clock)
    return {"answers": answers, "ms": ms, "cpu_ms": cpu_ms, "wait_ms": wait_ms}


def serve(args: argparse.Namespace, into: Any, lines: Any) -> int:
    """Load the peer, then answer each request line of ``lines`` on ``into`` until ``lines`` ends."""

    def say(message: dict[str, Any]) -> None:
        into.write(json.dumps(message) + "\n")
        into.flush()

    try:
        if args.peer == PIPELINE:
            pipe, loaded = load_pipeline(args.model, args.device, args.threads)
        else:
            pipe, loaded = load_int8(args.model, args.folder, args.threads)
    except Exception as exc:
        say({"error": describe(exc)})
        return 1
    say({"ready": {**loaded, "environment": versions()}})
    kwargs = pipeline_kwargs(args.max_length, args.stride, args.max_answer_length)
    for line in lines:
        try:
            request = json.loads(line)
            say({"memory": memory()} if request.get("memory") else timed_answer(pipe, request, kwargs))
        except Exception as exc:  # one bad question is that call's error; the peer goes on
            say({"error": describe(exc)})
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="peer_worker.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("versions", help="print this environment's versions as JSON")
    build = commands.add_parser("build-int8", help="optimum's export and dynamic INT8 of --model into --out")
    build.add_argument("--model", required=True)
    build.add_argument("--isa", required=True, choices=["avx512_vnni", "avx512", "avx2", "arm64"])
    build.add_argument("--out", required=True)
    run = commands.add_parser("serve", help="load a peer and answer JSON lines on stdin")
    run.add_argument("peer", choices=[PIPELINE, OPTIMUM_INT8])
    run.add_argument("--model", required=True, help="the baseline's folder")
    run.add_argument("--folder", help="optimum-int8: the folder build-int8 wrote")
    run.add_argument("--device", default="cpu")
    run.add_argument("--threads", type=int, default=None)
    run.add_argument("--max-length", type=int, default=384)
    run.add_argument("--stride", type=int, default=128)
    run.add_argument("--max-answer-length", type=int, default=30)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.command == "versions":
        print(json.dumps(versions()))
        return 0
    # The replies go on a stdout of their own; whatever the libraries print (progress bars, warnings) goes to stderr.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if args.command == "build-int8":
        try:
            build_int8(args.model, args.isa, args.out)
        except Exception as exc:
            replies.write(json.dumps({"error": describe(exc)}) + "\n")
            return 1
        replies.write(json.dumps({"built": args.out}) + "\n")
        return 0
    return serve(args, replies, sys.stdin)


if __name__ == "__main__":
    sys.exit(main())
