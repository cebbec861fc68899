"""Does another ONNX Runtime build the same graphs from the same model? A JSON record.

    python -m experiments.ort_version_probe --python /path/to/other/venv/bin/python \\
        --out experiments/records/ort-version-probe-<cpu>-<date>.json

The Space's GPU install takes the last CUDA 12 build of onnxruntime-gpu on PyPI (1.26.0) while the CPU
install takes onnxruntime 1.31.1 (docs/gpu.md, "Which build runs where"). ONNX Runtime's version
shapes a built graph twice: its Python transformer optimizer decides the fusions, its converter the FP16
graph and its quantizer the INT8 one. So each interpreter (this one and each ``--python``, an environment
with the other ONNX Runtime and this project's other pins) builds the shipped pruned model's chains
exactly as the engine does, on the CPU: export, ORT-optimize for the GPU and then FP16 (the GPU chain),
ORT-optimize for the CPU and then INT8 (what a GPU Space runs when its GPU is unusable). For every graph
it records the operators by type, the fused-operator counts and each fused attention node's head count,
and, on its own CPU provider, the logits on a fixed right-padded batch (the FP16 graph where the CPU
provider has kernels for it). The record sets each interpreter's facts side by side and says, graph by
graph, whether the operators match and how far the logits are apart; then each interpreter runs every
interpreter's graphs, so that a difference is put where it arises: in the graph built (the same runtime
gives the two graphs different logits) or in the runtime's kernels (one graph, two runtimes apart).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "assets" / "models" / "minilm-squad2-pruned"
GRAPHS = ("export", "optimize-gpu", "fp16", "optimize-cpu", "int8")


def graph_facts(path: Path, feed: dict[str, Any]) -> dict[str, Any]:
    """A built graph's operators, fused attention heads, IR and opsets, and its logits on ``feed`` (CPU)."""
    import onnx  # noqa: PLC0415
    import onnxruntime as ort  # noqa: PLC0415

    from variants.building.export import attention_heads  # noqa: PLC0415

    model = onnx.load(str(path), load_external_data=False)
    ops = Counter(f"{n.domain + ':' if n.domain else ''}{n.op_type}" for n in model.graph.node)
    facts: dict[str, Any] = {
        "operators": dict(sorted(ops.items())),
        "nodes": len(model.graph.node),
        "attention_heads": attention_heads(path),
        "ir_version": model.ir_version,
        "opsets": {o.domain or "ai.onnx": o.version for o in model.opset_import},
    }
    report = path.parent / "optimization.json"
    if report.is_file():
        facts["fused_operators"] = json.loads(report.read_text())["fused_operators"]
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        facts["logits"] = [o.astype("float32").round(6).tolist() for o in session.run(None, feed)]
    except Exception as exc:  # an FP16 graph the CPU provider has no kernel for: said, not fatal
        facts["cpu_run_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return facts


def this_interpreter(model_dir: Path, keep: Path) -> dict[str, Any]:
    """The chains built here, from ``model_dir``, with this interpreter's ONNX Runtime, kept in ``keep``."""
    import onnxruntime as ort  # noqa: PLC0415
    from onnxruntime.capi import build_and_package_info as built  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    from variants.building.export import (  # noqa: PLC0415
        apply_step,
        export_onnx,
    )
    from variants.building.storage import load_qa_model  # noqa: PLC0415
    from variants.core.versions import artifact_versions  # noqa: PLC0415

    model = load_qa_model(model_dir, compacted=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    paths = {"export": export_onnx(model, tokenizer, keep / "export")}
    chain = {"optimize-gpu": ("optimize", "export", True), "fp16": ("fp16", "optimize-gpu", True),
             "optimize-cpu": ("optimize", "export", False), "int8": ("int8", "optimize-cpu", False)}  # fmt: skip
    for name, (step, src, for_gpu) in chain.items():
        paths[name] = apply_step(step, paths[src], keep / name, for_gpu)
    feed = fixed_feed(keep)
    graphs = {name: graph_facts(paths[name], feed) for name in GRAPHS}
    return {
        "python": sys.executable,
        "onnxruntime": ort.__version__,
        "onnxruntime_build": {k: getattr(built, k) for k in dir(built) if not k.startswith("_")},
        "artifact_versions": artifact_versions(),
        "graphs": graphs,
    }


def fixed_feed(keep: Path) -> dict[str, Any]:
    """The batch every graph answers: 2 x 24 tokens, right-padded, ids from the exported model's vocabulary."""
    from variants.building.export import dummy_inputs  # noqa: PLC0415

    return dummy_inputs(keep / "export" / "model.onnx", batch=2, seq_len=24)


def logits_of(folders: list[Path]) -> dict[str, Any]:
    """This interpreter's CPU logits for the FP32 and INT8 graphs kept in each of ``folders``, by folder."""
    import onnxruntime as ort  # noqa: PLC0415

    out: dict[str, Any] = {}
    for folder in folders:
        feed = fixed_feed(folder)
        for name in ("optimize-cpu", "int8"):
            session = ort.InferenceSession(str(folder / name / "model.onnx"), providers=["CPUExecutionProvider"])
            out[f"{folder.name}/{name}"] = [o.astype("float32").tolist() for o in session.run(None, feed)]
    return out


def run_in(python: str, *args: str) -> dict[str, Any]:
    """This module in another interpreter (this checkout first on its path) with ``args``; its JSON answer."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        command = [python, "-m", "experiments.ort_version_probe", "--answer", out.name, *args]
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            return {"python": python, "error": done.stderr[-2000:]}
        return json.loads(Path(out.name).read_text())


def kernels_or_graphs(runtimes: list[dict[str, Any]], versions: list[str]) -> dict[str, Any]:
    """Largest logit difference, per graph kind, between the two graphs in one runtime and between the two
    runtimes on one graph (the first two interpreters)."""
    import numpy as np  # noqa: PLC0415

    def diff(a: list, b: list) -> float:
        return max(float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in zip(a, b, strict=True))

    first, second = (f"run-{i}" for i in range(2))
    result = {}
    for name in ("optimize-cpu", "int8"):
        result[name] = {
            f"graphs apart in runtime {versions[i]}": diff(r[f"{first}/{name}"], r[f"{second}/{name}"])
            for i, r in enumerate(runtimes)
        } | {
            f"runtimes apart on the graph built by {versions[i]}": diff(
                runtimes[0][f"run-{i}/{name}"], runtimes[1][f"run-{i}/{name}"]
            )
            for i in range(2)
        }
    return result


def compare(reference: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """Graph by graph: the same operators (and which differ), the same fusions and heads, the logits' largest
    difference where both ran it on the CPU."""
    import numpy as np  # noqa: PLC0415

    result = {}
    for name in GRAPHS:
        a, b = reference["graphs"][name], other["graphs"][name]
        ops = set(a["operators"]) | set(b["operators"])
        differ = {op: [a["operators"].get(op, 0), b["operators"].get(op, 0)] for op in sorted(ops)
                  if a["operators"].get(op, 0) != b["operators"].get(op, 0)}  # fmt: skip
        row: dict[str, Any] = {
            "same_operators": not differ,
            "operators_that_differ": differ,
            "same_fusions": a.get("fused_operators") == b.get("fused_operators"),
            "same_attention_heads": a["attention_heads"] == b["attention_heads"],
        }
        if "logits" in a and "logits" in b:
            pairs = zip(a["logits"], b["logits"], strict=True)
            diff = max(float(np.abs(np.asarray(x) - np.asarray(y)).max()) for x, y in pairs)
            scale = max(float(np.abs(np.asarray(x)).max()) for x in a["logits"])
            row |= {"logits_max_abs_diff": diff, "logits_scale": scale}
        result[name] = row
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[], help="another interpreter to compare (repeat)")
    parser.add_argument("--model", default=str(MODEL), help="the model folder (default: the shipped pruned MiniLM)")
    parser.add_argument("--out", help="write the record here")
    # run by the probe itself in each interpreter: build into KEEP, or run the graphs kept in FOLDERs
    parser.add_argument("--answer", metavar="FILE", help=argparse.SUPPRESS)
    parser.add_argument("--keep", help=argparse.SUPPRESS)
    parser.add_argument("--logits-of", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.answer:
        if args.keep:
            answer = this_interpreter(Path(args.model), Path(args.keep))
        else:
            answer = logits_of([Path(f) for f in args.logits_of])
        Path(args.answer).write_text(json.dumps(answer))
        return answer
    from experiments.common import save_probe_record  # noqa: PLC0415

    started = time.time()
    pythons = [sys.executable, *args.python]
    with tempfile.TemporaryDirectory() as tmp:
        kept = [Path(tmp) / f"run-{i}" for i in range(len(pythons))]
        runs = [run_in(py, "--model", args.model, "--keep", str(k)) for py, k in zip(pythons, kept, strict=True)]
        ok = all("error" not in r for r in runs)
        runtimes = [run_in(py, "--logits-of", *map(str, kept)) for py in pythons] if ok else []
    reference = runs[0]
    record = {
        "kind": "ort-version-probe",  # not a benchmark record: the app's record list skips it by this key
        "model": os.path.relpath(Path(args.model).resolve(), ROOT),
        "feed": "variants.building.export.dummy_inputs, batch 2 x 24 tokens, seed 0, right-padded",
        "runs": runs,
        "against_first": {
            r.get("onnxruntime", r["python"]): compare(reference, r) for r in runs[1:] if "error" not in r
        }
        if "error" not in reference
        else {},
    }
    if len(runtimes) > 1 and all("error" not in r for r in runtimes):
        record["kernels_or_graphs"] = kernels_or_graphs(runtimes, [r["onnxruntime"] for r in runs])
    record = save_probe_record(record, started, args.out)
    print(json.dumps({k: record.get(k) for k in ("against_first", "kernels_or_graphs")}, indent=1))
    return record


if __name__ == "__main__":
    main()
