"""One GPU report: the embedded preset and the BERT-large replica on CUDA, every backend, one record.

    python -m variants gpu-report                       # on a GPU machine (scripts/gpu_report.sh sets it up)
    python -m variants gpu-report --device cpu --quick  # anywhere: the same code paths on the CPU (CI)

For each preset it loads every chain variant through the engine, answers one question with each
(recording the device, provider and dtype each really ran on), then times one batch-1 window per
sequence length (32..384) for:

* PyTorch FP32, FP16 (weights cast) and AMP (FP32 weights, FP16 autocast), baseline and pruned;
* ``torch.compile`` (FP16) and a captured CUDA graph (FP16), which remove Python and launch
  overhead, the larger part of a BERT forward at short lengths on a fast GPU;
* ONNX Runtime sessions of the optimized graph (FP32) and of its FP16 (CUDA) / INT8 (CPU) version,
  run through IOBinding with inputs and outputs resident on the session's device (OrtValues on its
  ``device_id``), so host copies are not timed. On CUDA, ``onnxruntime.preload_dlls()`` runs first and
  the sessions are made with ``session.disable_cpu_ep_fallback``; a profiled run then counts the
  nodes per provider and the report asserts that every node of the FP16 session ran on CUDA.

Last, the chain's last headline variant is served over HTTP (:mod:`variants.benchmarking.served_latency`) where
fastapi and uvicorn are installed. Torch timings synchronize the device around each call.
Latencies are per-call wall times (p50, p90, p99, min, max, n). Random-weight replicas: latency only.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from variants.answering.runtime import TorchQAModel
from variants.answering.timing import describe, summarize
from variants.benchmarking import chainbench
from variants.benchmarking.served_latency import measure
from variants.building.replica import Structure, write_model
from variants.core import spec as specs
from variants.records.results import GPU_DIR
from variants.serving.engine import load_engine
from variants.serving.http import default_variant

log = logging.getLogger("variants.benchmarking.gpu_report")

LENGTHS = (32, 64, 128, 256, 384)
QUICK_LENGTHS = (32,)
PRESETS = ("embedded", "bert-large-replica")
QUESTION = "What is the capital of France?"
CONTEXT = "Paris is the capital and largest city of France, on the Seine in the north of the country."
FALLBACK_OFF = "session.disable_cpu_ep_fallback"
SCALED = {"num_layers": 4, "hidden_size": 64, "num_heads": 4, "intermediate_size": 256}


class Budget:
    """A wall-clock budget: steps past it are skipped (and say so) so the report always finishes."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    @property
    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self, reserve: float = 0.0) -> None:
        if self.left < reserve:
            raise TimeoutError(f"skipped: the report's time budget is spent ({self.left:.0f} s left)")


# --- environment --------------------------------------------------------------------------------


def cuda_facts(device: str) -> dict[str, Any]:
    """GPU name, driver, CUDA/cuDNN versions as torch and NVML see them (empty dict on the CPU)."""
    import torch  # noqa: PLC0415

    facts: dict[str, Any] = {"torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
    if not device.startswith("cuda") or not torch.cuda.is_available():
        return facts
    index = torch.device(device).index or 0
    props = torch.cuda.get_device_properties(index)
    facts.update(
        gpu=props.name,
        capability=f"{props.major}.{props.minor}",
        gpu_memory_gb=round(props.total_memory / 2**30, 1),
        cudnn=torch.backends.cudnn.version(),
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
    )
    with contextlib.suppress(Exception):
        import pynvml  # noqa: PLC0415 - nvidia-ml-py

        pynvml.nvmlInit()
        facts["driver"] = pynvml.nvmlSystemGetDriverVersion()
        facts["driver_cuda"] = pynvml.nvmlSystemGetCudaDriverVersion()  # e.g. 13000 = CUDA 13.0
        pynvml.nvmlShutdown()
    return facts


def ort_facts(device: str) -> dict[str, Any]:
    """ONNX Runtime's version and providers; on CUDA, its CUDA/cuDNN libraries preloaded first."""
    import onnxruntime as ort  # noqa: PLC0415

    facts: dict[str, Any] = {"version": ort.__version__, "available_providers": ort.get_available_providers()}
    if device.startswith("cuda") and "CUDAExecutionProvider" in facts["available_providers"]:
        try:
            ort.preload_dlls()  # CUDA/cuDNN from torch's or the nvidia-* wheels, before any session
            facts["preload_dlls"] = "ok"
        except Exception as exc:
            facts["preload_dlls"] = describe(exc)
    return facts


# --- timing -------------------------------------------------------------------------------------


def time_calls(fn: Callable[[], Any], runs: int, warmup: int, sync: Callable[[], None]) -> dict[str, Any]:
    """Wall time of ``runs`` calls of ``fn`` after ``warmup``, the device synchronized around each."""
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - started) * 1000)
    stats = summarize(times)
    return {f"{k}_ms" if k != "n" else k: v for k, v in stats.items() if k not in ("mean", "std")}


def sweep(
    make: Callable[[int], Callable[[], Any]], lengths: tuple[int, ...], runs: int, warmup: int, sync, budget: Budget
) -> list[dict[str, Any]]:
    """One row per length: ``make(length)`` returns the call to time; a failure stays on its row."""
    rows = []
    for length in lengths:
        try:
            budget.check()
            rows.append({"seq_len": length, **time_calls(make(length), runs, warmup, sync)})
        except Exception as exc:
            rows.append({"seq_len": length, "error": describe(exc)})
    return rows


# --- PyTorch ------------------------------------------------------------------------------------


def torch_inputs(length: int, device: str, vocab: int = 30522) -> dict[str, Any]:
    """A batch-1 window of ``length`` random token ids (all real tokens: no mask needed)."""
    import torch  # noqa: PLC0415

    generator = torch.Generator().manual_seed(length)
    ids = torch.randint(1000, min(vocab, 29000), (1, length), generator=generator)
    types = torch.zeros_like(ids)
    types[:, length // 4 :] = 1
    return {"input_ids": ids.to(device), "token_type_ids": types.to(device)}


def torch_modes(model, device: str) -> dict[str, Callable[[int], Callable[[], Any]]]:
    """Name -> factory(length) -> call, for each PyTorch way of running ``model`` on ``device``."""
    import torch  # noqa: PLC0415

    cuda = device.startswith("cuda")
    vocab = model.config.vocab_size

    def plain(m, autocast: bool = False):
        def make(length: int):
            feed = torch_inputs(length, device, vocab)

            def call():
                with torch.inference_mode(), torch.autocast("cuda", torch.float16, enabled=autocast):
                    return m(**feed).start_logits

            return call

        return make

    modes = {"torch-fp32": plain(model)}
    if not cuda:
        return modes
    half = copy.deepcopy(model).half().eval()
    modes["torch-fp16"] = plain(half)
    modes["torch-amp"] = plain(model, autocast=True)

    def graphed(length: int):
        # A 3-D mask of ones is taken as given; a 2-D (or no) mask makes transformers check it on the host
        # (torch.all(mask == 1)), a synchronization that a CUDA graph capture does not allow.
        feed = {**torch_inputs(length, device, vocab), "attention_mask": torch.ones((1, length, length), device=device)}
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode():
            with torch.cuda.stream(stream):
                for _ in range(3):  # warm up on a side stream, as capture requires
                    half(**feed)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                half(**feed)
        return graph.replay

    modes["torch-cudagraph-fp16"] = graphed
    # Last: compiling takes the longest (a minute or more for BERT-large), so a short budget skips it first.
    modes["torch-compile-fp16"] = plain(torch.compile(half, dynamic=True))
    return modes


def torch_sync(device: str) -> Callable[[], None]:
    import torch  # noqa: PLC0415

    if device.startswith("cuda"):
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


# --- ONNX Runtime -------------------------------------------------------------------------------


def ort_session(path: Path, device: str, strict: bool, profile_dir: Path | None = None):
    """A session on ``device``; on CUDA with ``strict``, creation fails if any node would fall back to the CPU."""
    import onnxruntime as ort  # noqa: PLC0415

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    if profile_dir is not None:
        options.enable_profiling = True
        options.profile_file_prefix = str(profile_dir / "ort")
    providers: list = ["CPUExecutionProvider"]
    if device.startswith("cuda"):
        providers = [("CUDAExecutionProvider", {"device_id": device_id(device)}), "CPUExecutionProvider"]
        if strict:
            options.add_session_config_entry(FALLBACK_OFF, "1")
    return ort.InferenceSession(str(path), sess_options=options, providers=providers)


def device_id(device: str) -> int:
    return int(device.split(":")[1]) if ":" in device else 0


def nodes_per_provider(path: Path, device: str, length: int) -> tuple[dict[str, int], list[str]]:
    """How many graph nodes ran on each execution provider (from one profiled run of ``length`` tokens),
    and the names of those that ran on the CPU provider."""
    with tempfile.TemporaryDirectory() as tmp:
        session = ort_session(path, device, strict=False, profile_dir=Path(tmp))
        session.run(None, ort_feed(session, length))
        events = json.loads(Path(session.end_profiling()).read_text())
    counts: dict[str, int] = {}
    seen: set[str] = set()
    on_cpu: list[str] = []
    for event in events:
        provider = event.get("args", {}).get("provider")
        if event.get("cat") == "Node" and provider and event["name"] not in seen:
            seen.add(event["name"])
            counts[provider] = counts.get(provider, 0) + 1
            if provider == "CPUExecutionProvider":
                on_cpu.append(event["name"].removesuffix("_kernel_time"))
    return counts, on_cpu


def ort_feed(session, length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(length)
    values = {
        "input_ids": rng.integers(1000, 29000, (1, length)),
        "attention_mask": np.ones((1, length)),
        "token_type_ids": (np.arange(length) >= length // 4)[None],
    }
    return {i.name: values[i.name].astype(np.int64) for i in session.get_inputs()}


_NUMPY_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def iobinding_call(session, device: str, length: int) -> Callable[[], Any]:
    """A call that runs ``session`` on inputs and outputs already on its device (nothing copied per call)."""
    import onnxruntime as ort  # noqa: PLC0415

    kind = "cuda" if device.startswith("cuda") else "cpu"
    index = device_id(device) if kind == "cuda" else 0
    binding = session.io_binding()
    keep = []  # OrtValues must outlive the binding
    for name, array in ort_feed(session, length).items():
        value = ort.OrtValue.ortvalue_from_numpy(array, kind, index)
        keep.append(value)
        binding.bind_ortvalue_input(name, value)
    for out in session.get_outputs():
        value = ort.OrtValue.ortvalue_from_shape_and_type([1, length], _NUMPY_TYPES[out.type], kind, index)
        keep.append(value)
        binding.bind_ortvalue_output(out.name, value)

    def call():
        session.run_with_iobinding(binding)
        binding.synchronize_outputs()
        return keep

    return call


def ort_entries(engine, device: str, lengths, runs: int, warmup: int, budget: Budget) -> list[dict[str, Any]]:
    """The optimized graph and its last precision step, in strict sessions timed through IOBinding."""
    cuda = device.startswith("cuda")
    import onnxruntime as ort  # noqa: PLC0415

    if cuda and "CUDAExecutionProvider" not in ort.get_available_providers():
        return [{"mode": "ort-cuda", "error": "onnxruntime has no CUDA provider here (CPU build)"}]
    entries = []
    for loaded in engine.loaded:
        if loaded.spec.name not in ("pruned-onnx-opt", "pruned-onnx-opt-fp16", "pruned-onnx-opt-int8"):
            continue
        if not loaded.ok:
            entries.append({"variant": loaded.spec.name, "error": loaded.error})
            continue
        dtype = loaded.model.dtype
        entry: dict[str, Any] = {"variant": loaded.spec.name, "mode": f"ort-{'cuda' if cuda else 'cpu'}-{dtype}"}
        try:
            budget.check(reserve=20)
            path = loaded.artifact
            strict = cuda and dtype == "fp16"  # the FP16 graph must run whole on the GPU; FP32 may leave shape ops
            entry["cpu_fallback_disabled"] = strict
            # Counted first (fallback allowed), so the record names the nodes even if the strict session refuses.
            entry["nodes_per_provider"], on_cpu = nodes_per_provider(path, device, 32)
            if cuda:
                entry["nodes_on_cpu"] = on_cpu[:50]
            session = ort_session(path, device, strict=strict)
            entry["providers"] = session.get_providers()
            if cuda:
                entry["all_nodes_on_cuda"] = set(entry["nodes_per_provider"]) == {"CUDAExecutionProvider"}
            if strict and not entry["all_nodes_on_cuda"]:
                raise AssertionError(f"FP16 session ran nodes off CUDA: {entry['nodes_per_provider']}")
            make = lambda n, s=session: iobinding_call(s, device, n)  # noqa: E731
            entry["sweep"] = sweep(make, lengths, runs, warmup, _noop, budget)
        except Exception as exc:
            entry["error"] = describe(exc)
        entries.append(entry)
    return entries


def _noop() -> None:
    return None


# --- one preset ---------------------------------------------------------------------------------


def preset_chain(name: str, device: str, quick: bool, folder: Path) -> list[specs.VariantSpec]:
    """The preset's chain; in quick mode the replica is the scaled-down one (built in ``folder``)."""
    if name != "bert-large-replica" or not quick:
        return specs.preset(name, device)

    structure = Structure.published().scaled(**SCALED)
    write_model(structure.dense(), folder / "dense")
    write_model(structure, folder / "pruned")
    return specs.preset(name, device, {"baseline": str(folder / "dense"), "pruned": str(folder / "pruned")})


def report_preset(name: str, args: argparse.Namespace, budget: Budget) -> dict[str, Any]:
    """Answers with every variant, then the PyTorch and ONNX Runtime sweeps, for preset ``name``."""

    started = time.perf_counter()
    out: dict[str, Any] = {"preset": name}
    lengths = QUICK_LENGTHS if args.quick else LENGTHS
    with tempfile.TemporaryDirectory() as tmp:
        chain = preset_chain(name, args.device, args.quick, Path(tmp))
        out["latency_only"] = any(s.latency_only for s in chain)
        with load_engine(variant_specs=chain, device=args.device, cache_dir=args.cache_dir) as engine:
            out["load_seconds"] = chainbench.elapsed(started)
            out["answers"] = [r.to_json() for r in engine.ask(QUESTION, CONTEXT)]
            out["torch"] = []
            for variant in ("baseline", "pruned"):
                loaded = engine.variants.get(variant)
                if loaded is None or not isinstance(loaded.model, TorchQAModel):
                    out["torch"].append({"variant": variant, "error": getattr(loaded, "error", "not loaded")})
                    continue
                for mode, make in torch_modes(loaded.model.model, args.device).items():
                    rows = sweep(make, lengths, args.runs, args.warmup, torch_sync(args.device), budget)
                    out["torch"].append({"variant": variant, "mode": mode, "sweep": rows})
            out["onnxruntime"] = ort_entries(engine, args.device, lengths, args.runs, args.warmup, budget)
            if args.served_requests:
                out["served"] = served(engine, lengths, args.served_requests, budget)
    out["speedups_at_max_length"] = speedups(out, max(lengths))
    out["seconds"] = chainbench.elapsed(started)
    return out


def served(engine, lengths: tuple[int, ...], requests: int, budget: Budget) -> dict[str, Any]:
    """Served latency of the chain's last headline variant over HTTP (needs fastapi and uvicorn)."""
    try:
        budget.check(reserve=30)

        return measure(engine, default_variant(engine), lengths, requests, warmup=3)
    except Exception as exc:  # e.g. no fastapi/uvicorn on this machine: say so, the report goes on
        return {"error": describe(exc)}


def speedups(out: dict[str, Any], length: int) -> dict[str, float]:
    """p50 of PyTorch FP32 baseline over each entry's p50 at ``length``."""

    def p50(entry: dict) -> float | None:
        return next((r.get("p50_ms") for r in entry.get("sweep", []) if r["seq_len"] == length), None)

    entries = [*out["torch"], *out["onnxruntime"]]
    base = next((p50(e) for e in entries if e.get("variant") == "baseline" and e.get("mode") == "torch-fp32"), None)
    result = {}
    for e in entries:
        ms = p50(e)
        if base and ms:
            result[f"{e['variant']} {e['mode']}"] = round(base / ms, 2)
    return result


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m variants.benchmarking.gpu_report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--device", default="cuda", help="cuda[:N] (default) or cpu")
    parser.add_argument("--quick", action="store_true", help="32 tokens, few runs, the scaled-down replica (CI)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per length (default 20; quick 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 5; quick 1)")
    parser.add_argument("--presets", default=",".join(PRESETS), help=f"comma-separated (default {','.join(PRESETS)})")
    parser.add_argument(
        "--served-requests", type=int, default=None, help="HTTP requests per length, 0 for none (default 100; quick 5)"
    )
    parser.add_argument("--budget-s", type=float, default=540, help="stop timing after this long (default 540)")
    parser.add_argument("--out", type=Path, default=None, help="folder for the record (default assets/results)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="artifact cache (default: the shared one)")
    args = parser.parse_args(argv)
    args.runs = args.runs or (2 if args.quick else 20)
    args.served_requests = args.served_requests if args.served_requests is not None else (5 if args.quick else 100)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 5)
    return args


def main(argv: list[str] | None = None) -> Path:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse(argv)
    budget = Budget(args.budget_s)
    started = time.perf_counter()
    record: dict[str, Any] = {"kind": "gpu-report", "quick": args.quick, "note": chainbench.latency_only_note()}
    record.update(chainbench.environment(args.device))
    record["cuda"] = cuda_facts(args.device)
    record["onnxruntime"] = ort_facts(args.device)
    record["settings"] = {"batch": 1, "lengths": list(QUICK_LENGTHS if args.quick else LENGTHS), "runs": args.runs}
    record["settings"]["warmup"] = args.warmup
    record["presets"] = []
    for name in args.presets.split(","):
        try:
            record["presets"].append(report_preset(name, args, budget))
        except Exception as exc:
            record["presets"].append({"preset": name, "error": describe(exc)})
        print(summary_line(record["presets"][-1]), flush=True)
    record["total_seconds"] = chainbench.elapsed(started)

    hardware = record["hardware"]
    slug = (hardware.get("gpu_slug") if args.device.startswith("cuda") else None) or hardware["cpu_slug"]
    stem = f"gpu-report-{'cuda' if args.device.startswith('cuda') else 'cpu'}-{slug}" + ("-quick" if args.quick else "")
    path = chainbench.write_record(record, args.out or GPU_DIR, stem)
    print(f"wrote {path}")
    return path


def summary_line(entry: dict[str, Any]) -> str:
    if entry.get("error"):
        return f"{entry['preset']}: ERROR {entry['error']}"
    answers = ", ".join(f"{a['variant']} {a['device']}/{a['provider']}/{a['dtype']}" for a in entry["answers"])
    speed = entry["speedups_at_max_length"]
    return f"{entry['preset']} ({entry['seconds']} s): speedups {speed}; answered by {answers}"


if __name__ == "__main__":
    main(sys.argv[1:])
