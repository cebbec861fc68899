"""One GPU report: the embedded preset and the BERT-large replica on CUDA, every backend, one record.

    python -m variants gpu-report                       # on a GPU machine (scripts/gpu_measure.sh sets it up)
    python -m variants gpu-report --device cpu --quick  # anywhere: the same code paths on the CPU (CI)

For each preset it loads every chain variant through the engine, answers one question with each
(recording the device, provider and dtype each really ran on), then, each step inside a time budget,
the user's chain first:

1. ONNX Runtime (:mod:`variants.benchmarking.gpu.ort`), the pruned model's graphs and the baseline's
   graphs of the same steps, the chain's last step first: FP16 (CUDA) / INT8 (CPU), ORT-optimized FP32
   (fused attention with each layer's own head count) and unoptimized FP32, all through IOBinding on
   buffers on the session's device, and on CUDA the FP16 graphs again replaying ORT's CUDA graphs on
   length buckets (as the engine runs its FP16 variant). Each row says which provider the session really
   got (a CPU fallback is marked, never counted as CUDA); on CUDA a graph is timed in a session with CPU
   fallback turned off (the CUDA provider alone) where ORT creates one, else a profiled run names the
   nodes ORT put on the CPU; only a graph that runs whole on CUDA gets the CUDA-graph rows. Batch-1
   latency per sequence length (32..384);
2. served latency (``POST /v1/answer``) through the chain's last step, as the route serves it by
   default: the client's time, the engine's and the HTTP hop's, and the model's own run; then the ONNX
   Runtime graphs' questions per second at batch 1, 8, 32 and 128 and 128 and 384 tokens;
3. PyTorch (:mod:`variants.benchmarking.gpu.torch_modes`): eager FP32 (what people run), FP16, AMP and
   a captured FP16 CUDA graph, latency and questions per second;
4. last, only with time left: ``torch.compile`` in its default, "reduce-overhead" and "max-autotune"
   modes.

``where_pruning_pays``: per mode, graph step and shape, the baseline's and the pruned model's questions per second
and their ratio.

Latencies are per-call wall times (p50, p90, p99, min, max, n), the device synchronized around each
call. Random-weight replicas: latency only.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from variants.answering.runtime import TorchQAModel
from variants.answering.timing import describe
from variants.benchmarking import chainbench
from variants.benchmarking.gpu import ort as gpu_ort
from variants.benchmarking.gpu import torch_modes as gpu_torch
from variants.benchmarking.gpu.timing import (
    THROUGHPUT_BATCHES,
    THROUGHPUT_LENGTHS,
    Budget,
    no_sync,
    sweep,
    throughput_rows,
    throughput_table,
    time_calls,
)
from variants.benchmarking.served_latency import measure
from variants.building.replica import Structure, write_model
from variants.core import spec as specs
from variants.records.results import GPU_DIR
from variants.serving.engine import LoadedVariant, load_engine

log = logging.getLogger("variants.benchmarking.gpu.report")

LENGTHS = (32, 64, 128, 256, 384)
QUICK_LENGTHS = (32,)
QUICK_BATCHES = (1, 2)
PRESETS = ("embedded", "bert-large-replica")
QUESTION = "What is the capital of France?"
CONTEXT = "Paris is the capital and largest city of France, on the Seine in the north of the country."
SCALED = {"num_layers": 4, "hidden_size": 64, "num_heads": 4, "intermediate_size": 256}
ORT_VARIANTS = ("pruned-onnx", "pruned-onnx-opt", "pruned-onnx-opt-fp16", "pruned-onnx-opt-int8")
THROUGHPUT_TORCH_MODES = ("torch-fp32", "torch-fp16", "torch-cudagraph-fp16")
# Seconds of budget a compile mode's row needs before it starts (its first call compiles).
COMPILE_RESERVE = {"torch-compile-fp16": 60, "torch-compile-reduce-overhead-fp16": 60}
COMPILE_RESERVE_DEFAULT = 120
# Seconds of budget the baseline's ONNX graph needs to be built and timed: a base plus some per million
# parameters (about 30 s for MiniLM, 120 s for BERT-large, whose export and checks take minutes on few cores).
BASELINE_BUILD_RESERVE_S, BASELINE_BUILD_S_PER_M = 20, 0.3
# Seconds of budget served latency needs: a loopback server's start and a few hundred requests of milliseconds.
SERVED_RESERVE_S = 12


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


# --- ONNX Runtime -------------------------------------------------------------------------------


def ort_graphs(engine, budget: Budget) -> list[tuple[str, Any]]:
    """(model, loaded variant) for each of the pruned model's ONNX variants and the baseline's graph of the
    same step (added to the engine through its artifact cache), the chain's last step first, each pruned
    graph beside the baseline's: so both models meet in each mode, and should the budget run short it is
    the unoptimized FP32 rows that go. The baseline's last step builds (and caches) every step before it;
    that takes minutes for BERT-large on a few cores: without the budget it needs
    (:data:`BASELINE_BUILD_RESERVE_S` and more per parameter) the baseline's graphs are skipped, and say so."""
    pruned = [("pruned", v) for v in engine.loaded if v.spec.name in ORT_VARIANTS][::-1]
    base = engine.variants.get("baseline")
    if not pruned or base is None:
        return pruned
    try:
        budget.check(BASELINE_BUILD_RESERVE_S + BASELINE_BUILD_S_PER_M * base.model.num_parameters / 1e6)
    except TimeoutError as exc:
        spec = dataclasses.replace(base.spec, name="baseline-onnx")
        return [*pruned, ("baseline", LoadedVariant(spec, error=str(exc)))]
    # the baseline's own graph chain (spec.graph_chain, the chain rule's), each step named as it is everywhere
    own = {s.name: s for last in ("int8", "fp16") for s in specs.graph_chain("baseline", base.spec.source, (), last)}
    graphs: list[tuple[str, Any]] = []
    for model, loaded in pruned:
        spec = own["baseline" + loaded.spec.name.removeprefix("pruned")]
        spec = dataclasses.replace(
            spec, headline=False, revision=base.spec.revision, latency_only=base.spec.latency_only
        )
        graphs += [(model, loaded), ("baseline", engine.add_variant(spec))]
    return graphs


def ort_entries(engine, device: str, lengths, runs: int, warmup: int, budget: Budget) -> list[dict[str, Any]]:
    """One IOBinding entry per graph (and, on CUDA, a CUDA-graph entry per FP16 graph). Each entry keeps
    its call factory under ``"_make"`` for the throughput step (dropped before the record is written)."""
    import onnxruntime as ort  # noqa: PLC0415 - imported when the report runs ONNX Runtime

    cuda = device.startswith("cuda")
    if cuda and gpu_ort.CUDA not in ort.get_available_providers():
        return [{"mode": "ort-cuda", "error": "onnxruntime has no CUDA provider here (CPU build)"}]
    entries = []
    for model, loaded in ort_graphs(engine, budget):
        entry: dict[str, Any] = {"model": model, "variant": loaded.spec.name}
        if not loaded.ok:
            entries.append({**entry, "error": loaded.error})
            continue
        dtype = loaded.model.dtype
        entry["mode"] = f"ort-{'cuda' if cuda else 'cpu'}-{dtype}-iobinding"
        try:
            budget.check(reserve=20)
            strict = False
            if cuda:  # a session that may not fall back: that ORT creates it shows every node runs on CUDA
                try:
                    make, check = gpu_ort.bound(loaded.artifact, device, strict=True)
                    strict = entry["all_nodes_on_cuda"] = True
                except Exception as exc:
                    entry["strict_refused"] = describe(exc)[:300]
            if not strict:  # the CPU, or some node on the CPU (shape arithmetic, say): which, from a profiled run
                entry["nodes_per_provider"], on_cpu = gpu_ort.nodes_per_provider(loaded.artifact, device, 32)
                if cuda:
                    entry["nodes_on_cpu"], entry["all_nodes_on_cuda"] = on_cpu[:50], False
                make, check = gpu_ort.bound(loaded.artifact, device)
            entry["cpu_fallback_disabled"] = strict
            entry.update(check, mode=gpu_ort.mode_name(dtype, check))
            entry["sweep"] = sweep(make, lengths, runs, warmup, no_sync, budget)
            entry["_make"] = make
        except Exception as exc:
            entry["error"] = describe(exc)
        entries.append(entry)
        if entry.get("all_nodes_on_cuda") and dtype == "fp16" and "error" not in entry:
            entries.append(graph_entry(model, loaded, device, lengths, runs, warmup, budget))
    return entries


def graph_entry(model: str, loaded, device: str, lengths, runs: int, warmup: int, budget: Budget) -> dict[str, Any]:
    """ORT's CUDA graphs on ``loaded``'s graph, inputs padded to :data:`gpu_ort.BUCKETS`."""
    entry: dict[str, Any] = {"model": model, "variant": loaded.spec.name, "mode": "ort-cuda-fp16-cudagraph"}
    entry["buckets"] = list(gpu_ort.BUCKETS)
    try:
        make = gpu_ort.graphed(loaded.artifact, device)
    except Exception as exc:  # capture refused: the row says why; the engine falls back the same way
        return {**entry, "error": describe(exc)}
    entry["sweep"] = sweep(make, lengths, runs, warmup, no_sync, budget)
    for row in entry["sweep"]:
        row["padded_to"] = gpu_ort.bucket_for(row["seq_len"])
    entry["_make"] = make
    return entry


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
    """Answers with every variant, then, inside the budget and in this order: the user's chain in ONNX
    Runtime (latency and questions per second), served latency through the chain's last step, PyTorch
    (latency, then questions per second), and the compile modes, for preset ``name``."""
    started = time.perf_counter()
    out: dict[str, Any] = {"preset": name}
    sync = gpu_torch.torch_sync(args.device)
    with tempfile.TemporaryDirectory() as tmp:
        chain = preset_chain(name, args.device, args.quick, Path(tmp))
        out["latency_only"] = any(s.latency_only for s in chain)
        with load_engine(variant_specs=chain, device=args.device, cache_dir=args.cache_dir) as engine:
            out["load_seconds"] = chainbench.elapsed(started)
            out["answers"] = [r.to_json() for r in engine.ask(QUESTION, CONTEXT)]
            # 1. The user's chain first: ONNX Runtime FP32, optimized, FP16 and FP16 with CUDA graphs.
            out["onnxruntime"] = ort_entries(engine, args.device, args.lengths, args.runs, args.warmup, budget)
            # 2. Served latency through the chain's last step, as POST /v1/answer serves it by default.
            if args.served_requests:
                out["served"] = served(engine, args.lengths, args.served_requests, budget)
            for entry in out["onnxruntime"]:  # then the chain's questions per second
                if "_make" in entry:
                    entry["throughput"] = throughput(entry["_make"], args, no_sync, budget)
            # 3. PyTorch: eager FP32 (what people run), FP16, AMP, a captured FP16 CUDA graph.
            out["torch"], compile_entries = [], []
            for model in ("baseline", "pruned"):
                loaded = engine.variants.get(model)
                if loaded is None or not isinstance(loaded.model, TorchQAModel):
                    out["torch"].append({"model": model, "variant": model, "error": getattr(loaded, "error", "?")})
                    continue
                for mode, make in gpu_torch.torch_modes(loaded.model.model, args.device).items():
                    entry = {"model": model, "variant": model, "mode": mode, "_make": make}
                    if mode in gpu_torch.COMPILE_MODES:
                        compile_entries.append(entry)
                        continue
                    entry["sweep"] = sweep(make, args.lengths, args.runs, args.warmup, sync, budget)
                    out["torch"].append(entry)
            for entry in [e for e in out["torch"] if e.get("mode") in THROUGHPUT_TORCH_MODES and "_make" in e]:
                entry["throughput"] = throughput(entry["_make"], args, sync, budget)
            # 4. torch.compile only with time left: its first calls compile for minutes.
            for entry in compile_entries:
                reserve = COMPILE_RESERVE.get(entry["mode"], COMPILE_RESERVE_DEFAULT)
                entry["sweep"] = sweep(entry["_make"], args.lengths, args.runs, args.warmup, sync, budget, reserve)
                entry["throughput"] = throughput(entry["_make"], args, sync, budget, reserve)
                out["torch"].append(entry)
    for entry in [*out["torch"], *out["onnxruntime"]]:
        entry.pop("_make", None)
    out["where_pruning_pays"] = throughput_table([*out["onnxruntime"], *out["torch"]])
    out["speedups_at_max_length"] = speedups(out, max(args.lengths))
    out["seconds"] = chainbench.elapsed(started)
    return out


def throughput(make, args: argparse.Namespace, sync, budget: Budget, reserve: float = 0.0) -> list[dict[str, Any]]:
    runs, warmup = args.throughput_runs, min(args.warmup, 2)
    return throughput_rows(make, args.batches, args.throughput_lengths, runs, warmup, sync, budget, reserve)


def chain_default(engine) -> str:
    from variants.serving.http import default_variant  # noqa: PLC0415 - fastapi stays optional until served

    return default_variant(engine)


def served(engine, report_lengths, requests: int, budget: Budget) -> dict[str, Any]:
    """Served latency (``POST /v1/answer``, needs fastapi and uvicorn) through the chain's last step (the
    FP16 variant on CUDA, replaying its CUDA graphs; INT8 on the CPU), at 32 tokens and the report's longest
    length: the client's time, the engine's and the hop's, and the model's own run at the same length."""
    try:
        budget.check(reserve=SERVED_RESERVE_S)
        variant = chain_default(engine)
        lengths = tuple(sorted({32, max(report_lengths)}))
        result = measure(engine, variant, lengths, requests, warmup=3)
        model = engine.variants[variant].model
        for row in result["rows"]:
            feed = gpu_ort.random_feed(list(model.input_names), 1, row["seq_len"], seed=row["seq_len"])
            row["model_run_p50_ms"] = time_calls(lambda f=feed: model.run(f), 20, 3, no_sync)["p50_ms"]
        return {
            **result,
            "why": "the chain's last step, which POST /v1/answer serves by default",
            "execution": getattr(model, "execution", ""),
        }
    except Exception as exc:  # e.g. no fastapi/uvicorn on this machine: say so, the report goes on
        return {"error": describe(exc)}


def speedups(out: dict[str, Any], length: int) -> dict[str, float]:
    """p50 of PyTorch FP32 baseline over each entry's p50 at ``length`` (batch 1)."""

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
        prog="python -m variants.benchmarking.gpu.report", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--device", default="cuda", help="cuda[:N] (default) or cpu")
    parser.add_argument("--quick", action="store_true", help="32 tokens, batches 1 and 2, few runs, scaled replica")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per length (default 20; quick 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed runs first (default 5; quick 1)")
    parser.add_argument("--presets", default=",".join(PRESETS), help=f"comma-separated (default {','.join(PRESETS)})")
    parser.add_argument("--batches", default=None, help="throughput batch sizes (default 1,8,32,128; quick 1,2)")
    parser.add_argument("--throughput-lengths", default=None, help="throughput lengths (default 128,384; quick 32)")
    parser.add_argument("--throughput-runs", type=int, default=None, help="timed runs per shape (default 10; quick 2)")
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
    args.throughput_runs = args.throughput_runs or (2 if args.quick else 10)
    args.lengths = QUICK_LENGTHS if args.quick else LENGTHS
    args.batches = numbers(args.batches) or (QUICK_BATCHES if args.quick else THROUGHPUT_BATCHES)
    args.throughput_lengths = numbers(args.throughput_lengths) or (QUICK_LENGTHS if args.quick else THROUGHPUT_LENGTHS)
    return args


def numbers(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",")) if text else ()


def weights_note(presets: list[dict[str, Any]]) -> str:
    """The record's note: random weights where a preset ran them (``latency_only``), else the trained models."""
    random = [p["preset"] for p in presets if p.get("latency_only")]
    trained = [p["preset"] for p in presets if p.get("latency_only") is False]
    notes = [f"{', '.join(random)}: {chainbench.latency_only_note()}"] if random else []
    if trained:
        notes.append(f"{', '.join(trained)}: the trained models; speed only, no accuracy is measured")
    return "; ".join(notes) or "no preset ran"


def main(argv: list[str] | None = None) -> Path:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse(argv)
    budget = Budget(args.budget_s)
    started = time.perf_counter()
    record: dict[str, Any] = {"kind": "gpu-report", "quick": args.quick, "note": ""}
    record.update(chainbench.environment(args.device))
    record["cuda"] = cuda_facts(args.device)
    record["onnxruntime"] = ort_facts(args.device)
    record["settings"] = {
        "batch": 1,
        "lengths": list(args.lengths),
        "runs": args.runs,
        "warmup": args.warmup,
        "throughput": {"batches": list(args.batches), "lengths": list(args.throughput_lengths)},
        "throughput_runs": args.throughput_runs,
        "budget_s": args.budget_s,
    }
    record["presets"] = []
    for name in args.presets.split(","):
        try:
            record["presets"].append(report_preset(name, args, budget))
        except Exception as exc:
            record["presets"].append({"preset": name, "error": describe(exc)})
        print(summary_line(record["presets"][-1]), flush=True)
    record["note"] = weights_note(record["presets"])
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
    pays = [
        f"{r['mode']} {r.get('step') or ''} b{r['batch']}@{r['seq_len']}: {r['pruned_over_baseline']}x"
        for r in entry["where_pruning_pays"]
        if r["pruned_over_baseline"]
    ]
    served_row = (entry.get("served") or {}).get("rows", [{}])[0]
    served_text = f"{entry.get('served', {}).get('variant')} {served_row.get('client_p50_ms')} ms at 32"
    return (
        f"{entry['preset']} ({entry['seconds']} s): speedups {speed}; answered by {answers}; "
        f"pruned/baseline qps {pays}; served {served_text}"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
