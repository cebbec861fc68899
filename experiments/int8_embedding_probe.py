"""Whether the INT8 build should quantize the embedding tables too: F1 and speed on held-out questions. A JSON
record.

    python -m experiments.int8_embedding_probe --model assets/models/minilm-squad2-pruned \\
        --data train.json --out experiments/records/int8-embedding-probe-cpu-<cpu>-<date>.json

From one ORT-optimized FP32 graph of the model, in this CPU's INT8 weight format: the engine's INT8 build (every
product INT8 but the QA head, ``variants.building.export.apply_step``) and the same with the fused embedding
node quantized (``quantize_int8(..., embeddings=True)``: ``QEmbedLayerNormalization``). With the FP32 graph they
answer the questions of the model's held-out training articles (not the test file) in turns at batch 1, decided
at threshold 0; each is compared with the FP32 graph and with the engine's build, question by question (paired
bootstrap). The rule that decides is in docs/results.md ("The embedding tables").
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from experiments.common import save_probe_record
from experiments.probe import (
    cpu_fp32_graph,
    data_facts,
    f1_against,
    graphs_in_turns,
    held_out_start,
    speed_against,
)
from variants.building.export import head_products, quantize_int8
from variants.core.hardware import int8_settings

ENGINE = "engine INT8 (QA head FP32)"
EMBEDDINGS = "engine INT8 + embeddings INT8"


def main(argv: list[str] | None = None) -> dict:
    args, titles, examples, threads, tokenizer = held_out_start(argv, __doc__)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = cpu_fp32_graph(args.model, tokenizer, Path(tmp) / "fp32")
        head = head_products(fp32)
        graphs = {
            "FP32": fp32,
            ENGINE: quantize_int8(fp32, Path(tmp) / "int8", fp32_products=head),
            EMBEDDINGS: quantize_int8(fp32, Path(tmp) / "int8-emb", fp32_products=head, embeddings=True),
        }
        results, per_question = graphs_in_turns(graphs, tokenizer, examples, threads)
    f1_against(results, per_question, "FP32", "f1_vs_fp32")
    f1_against(results, per_question, ENGINE, "f1_vs_engine_int8")
    speed_against(results, ENGINE, "speed_vs_engine_int8")
    record = {
        "kind": "int8-embedding-probe",  # not a benchmark record: the app's record list skips it by this key
        "what": "the engine's dynamic INT8 build with and without its embedding tables in INT8, on the same "
        "held-out questions",
        "model": args.model,
        "data": data_facts(args.data, titles, examples),
        "int8": int8_settings().as_dict(),
        "settings": {"batch": 1, "null_threshold": 0.0, "threads": threads},
        "results": results,
    }
    save_probe_record(record, started, args.out)
    keys = ("f1_at_zero", "size_mb", "f1_vs_engine_int8", "speed_vs_engine_int8")
    print(json.dumps({n: [r.get(k) for k in keys] for n, r in results.items()}, indent=1))
    return record


if __name__ == "__main__":
    main()
