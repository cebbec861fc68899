"""Which dynamic INT8 weight format is fastest on this CPU, and what does it cost in F1? A JSON record.

    python -m experiments.int8_format_probe --model assets/models/minilm-squad2-pruned \\
        --data train.json --out assets/results/int8-format-probe-cpu-<cpu>-<date>.json

ONNX Runtime's x86 INT8 kernels multiply u8 activations by weights in one of three formats
(:mod:`variants.core.hardware` explains why each exists): u8 weights ("U8U8", widened to int16, safe
everywhere), s8 weights ("U8S8", the fast ``vpmaddubsw`` path, which saturates without VNNI) and
s8 weights in 7 bits ("U8S7", ``reduce_range``: the fast path, inside int16). All three are built
from the same ORT-optimized FP32 graph, which answers beside them. They answer the questions of
the model's held-out training articles (the articles it was calibrated on, left out of its
training), not the test file, in turns at batch 1 with the bench's session settings, decided at
threshold 0. Each format's F1 is compared with U8U8's question by question (paired bootstrap).
Each is built as the engine builds it: every product INT8 (as in the committed record of
2026-11-25; the engine left the FFN output products FP32 from late on 25 Nov to 26 Nov).
"""

from __future__ import annotations

import json
import os
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
from variants.building.export import quantize_int8, quantized_weights
from variants.core.hardware import Int8Settings, int8_settings

FORMATS = {  # name -> how quantize_int8 builds it
    "U8U8": Int8Settings("QUInt8", False, "u8 weights"),
    "U8S7": Int8Settings("QInt8", True, "s8 weights in 7 bits (reduce_range)"),
    "U8S8": Int8Settings("QInt8", False, "s8 weights (saturates in int16 without VNNI)"),
}
REFERENCE = "U8U8"


def main(argv: list[str] | None = None) -> dict:
    args, titles, examples, threads, tokenizer = held_out_start(argv, __doc__)
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = cpu_fp32_graph(args.model, tokenizer, Path(tmp) / "fp32")
        graphs = {"FP32 (ORT-optimized)": fp32}
        graphs |= {name: quantize_int8(fp32, Path(tmp) / name, settings=s) for name, s in FORMATS.items()}
        results, per_question = graphs_in_turns(graphs, tokenizer, examples, threads)
        for name in FORMATS:
            if "error" not in results[name]:
                results[name]["weights"] = quantized_weights(graphs[name])
    speed_against(results, REFERENCE, f"speed_vs_{REFERENCE}")
    f1_against(results, per_question, REFERENCE, f"f1_vs_{REFERENCE}")
    record = {
        "kind": "int8-format-probe",  # not a benchmark record: the app's record list skips it by this key
        "what": "dynamic INT8 weight formats of one ORT-optimized graph, answering the same held-out questions",
        "model": args.model,
        "data": data_facts(args.data, titles, examples),
        "formats": {name: s.as_dict() for name, s in FORMATS.items()},
        "this_cpu_builds": int8_settings().as_dict(),
        "settings": {"threads": threads or f"all cores ({os.cpu_count()})", "batch": 1, "null_threshold": 0.0},
        "results": results,
    }
    save_probe_record(record, started, args.out)
    print(json.dumps(results, indent=1))
    return record


if __name__ == "__main__":
    main()
