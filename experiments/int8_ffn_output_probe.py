"""Which products to leave FP32 in dynamic INT8: F1 cost on held-out questions. A JSON record.

    python -m experiments.int8_ffn_output_probe --model assets/models/minilm-squad2-pruned \\
        --data train.json --out assets/results/int8-ffn-output-probe-cpu-<cpu>-<date>.json

From one ORT-optimized FP32 graph of the model, in this CPU's INT8 weight format: every product INT8,
each layer's MatMuls left FP32 in turn (attention output and both FFN products; the fused
Attention nodes carry no layer name and stay INT8), the FFN output products (``variants.building.export.
ffn_output_products``) left FP32, and the QA head (``head_products``) left FP32. They answer the questions of the
model's held-out training articles (not the test file) in turns at batch 1, decided at threshold 0; each is
compared with the FP32 graph and with every product INT8, question by question (paired bootstrap). Latency
here is only indicative: the bench measures the build it ships.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import onnx

from experiments.common import save_probe_record
from experiments.probe import (
    cpu_fp32_graph,
    data_facts,
    f1_against,
    graphs_in_turns,
    held_out_start,
)
from variants.building.export import ffn_output_products, head_products, quantize_int8
from variants.core.hardware import int8_settings


def main(argv: list[str] | None = None) -> dict:
    args, titles, examples, threads, tokenizer = held_out_start(argv, __doc__)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = cpu_fp32_graph(args.model, tokenizer, Path(tmp) / "fp32")
        products = [n.name for n in onnx.load(str(fp32)).graph.node if n.op_type in ("MatMul", "Attention")]
        choices = {"every product INT8": []}
        layers = sorted({name.split("layer.")[1].split("/")[0] for name in products if "layer." in name}, key=int)
        choices |= {f"layer {k} FP32": [n for n in products if f"layer.{k}/" in n] for k in layers}
        choices["FFN output products FP32"] = ffn_output_products(fp32)
        choices["QA head FP32"] = head_products(fp32)
        graphs = {"FP32": fp32} | {
            name: quantize_int8(fp32, Path(tmp) / f"int8-{i}", fp32_products=kept)
            for i, (name, kept) in enumerate(choices.items())
        }
        results, per_question = graphs_in_turns(graphs, tokenizer, examples, threads)
    f1_against(results, per_question, "FP32", "f1_vs_fp32")
    f1_against(results, per_question, "every product INT8", "f1_vs_every_product_int8")
    for name, result in results.items():
        result["fp32_products"] = choices.get(name)
    record = {
        "kind": "int8-ffn-output-probe",  # not a benchmark record: the app's record list skips it by this key
        "what": "dynamic INT8 of one ORT-optimized graph with some products left FP32, on the same held-out questions",
        "model": args.model,
        "data": data_facts(args.data, titles, examples),
        "int8": int8_settings().as_dict(),
        "settings": {"batch": 1, "null_threshold": 0.0},
        "results": results,
    }
    save_probe_record(record, started, args.out)
    against = ("f1_at_zero", "f1_vs_fp32", "f1_vs_every_product_int8")
    print(json.dumps({n: [r.get(k) for k in against] for n, r in results.items()}, indent=1))
    return record


if __name__ == "__main__":
    main()
