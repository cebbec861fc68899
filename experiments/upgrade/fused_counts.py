"""ONNX Runtime's fused operators in the chain's graphs, on whichever stack runs this (the old one's export by
optimum-onnx, or ours by torch.onnx): the shipped pruned MiniLM (compacted), the shipped baseline and, with
``--replica``, the BERT-large x2.63 replica's structure (random weights, compacted).

    python experiments/upgrade/fused_counts.py --out experiments/records/upgrade-fused-<stack>.json [--replica]

Each model goes through the chain's own calls (``export_onnx`` -> ``optimize_onnx`` -> ``quantize_int8`` with the
QA head FP32, as :func:`variants.building.export.apply_step` does); the counts are the graphs' nodes by operator
type, so the two stacks are compared on the files themselves.
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

OPS = (
    "EmbedLayerNormalization",
    "Attention",
    "SkipLayerNormalization",
    "BiasGelu",
    "FastGelu",
    "Gelu",
    "LayerNormalization",
    "MatMul",
    "QAttention",
    "MatMulInteger",
    "DynamicQuantizeLinear",
)


def counts(path: Path) -> dict[str, int]:
    import onnx  # noqa: PLC0415

    graph = onnx.load(str(path), load_external_data=False).graph
    ops = collections.Counter(node.op_type for node in graph.node)
    return {"nodes": len(graph.node), **{op: ops.get(op, 0) for op in OPS}}


def measure(name: str, model, tokenizer, work: Path) -> dict:
    from variants.building import export  # noqa: PLC0415

    started = time.perf_counter()
    onnx_path = export.export_onnx(model, tokenizer, work / name / "export")
    optimized = export.optimize_onnx(onnx_path, work / name / "optimize", for_gpu=False)
    int8 = export.quantize_int8(optimized, work / name / "int8", fp32_products=export.head_products(optimized))
    for_gpu = export.optimize_onnx(onnx_path, work / name / "optimize-gpu", for_gpu=True)  # SkipLayerNorm fused
    report = json.loads((optimized.parent / "optimization.json").read_text())
    return {
        "export": counts(onnx_path),
        "optimized": counts(optimized),
        "int8": counts(int8),
        "optimized_for_gpu": counts(for_gpu),
        "attention_heads": report["attention_heads"],
        "max_abs_diff_vs_input": report["max_abs_diff_vs_input"],
        "seconds": round(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--replica", action="store_true", help="also the BERT-large x2.63 replica (minutes)")
    args = parser.parse_args()

    import onnxruntime  # noqa: PLC0415
    import torch  # noqa: PLC0415
    import transformers  # noqa: PLC0415
    from transformers import AutoTokenizer  # noqa: PLC0415

    from variants.building.storage import load_qa_model  # noqa: PLC0415
    from variants.core.spec import EMBEDDED_MODELS  # noqa: PLC0415

    try:
        import optimum.version  # noqa: PLC0415

        exporter = f"optimum {optimum.version.__version__} (optimum-onnx)"
    except ImportError:
        exporter = f"torch.onnx {torch.__version__}"
    record = {
        "exporter": exporter,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "onnxruntime": onnxruntime.__version__,
        },
        "python": platform.python_version(),
        "models": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shipped = {"pruned-minilm": ("minilm-squad2-pruned", True), "baseline-minilm": ("minilm-squad2", False)}
        for name, (folder, compacted) in shipped.items():
            path = EMBEDDED_MODELS / folder
            model = load_qa_model(path, compacted=compacted)
            record["models"][name] = measure(name, model, AutoTokenizer.from_pretrained(path), work)
            print(name, json.dumps(record["models"][name]), flush=True)
        if args.replica:
            from variants.building.replica import Structure, write_model  # noqa: PLC0415

            folder = work / "replica-src"
            write_model(Structure.published("x2.63"), folder)
            model = load_qa_model(folder, compacted=True)
            record["models"]["replica-bert-large-x2.63"] = measure(
                "replica", model, AutoTokenizer.from_pretrained(folder), work
            )
            print("replica", json.dumps(record["models"]["replica-bert-large-x2.63"]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
