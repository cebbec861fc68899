"""Would OpenVINO run the pruned model faster than ONNX Runtime on this CPU, and at what cost in F1? A JSON record.

    pip install openvino nncf          # not project dependencies: this probe only
    python -m experiments.openvino_probe --model assets/models/minilm-squad2-pruned --data train.json \\
        --out experiments/records/openvino-probe-cpu-<cpu>-<date>.json

Why: on an Intel Xeon with AMX, ONNX Runtime's INT8 products reach about 550 to 750 GOP/s on 2 cores at
the pruned model's shapes (164 × 384 × 1,536), where oneDNN's dynamic INT8 through PyTorch reaches about
1,150 (exploratory, no record), so a runtime built on oneDNN might buy the speed issue 44 asks for.
OpenVINO is that runtime, and reads the same ONNX export.

Graphs, all from the same compacted model, answering the held-out training articles' questions (not the test
file) in turns at batch 1 through the engine's own windows, passes and decoder, decided at threshold 0:

- ``ORT INT8``: the engine's INT8 variant (ORT-optimized, dynamic INT8 in this CPU's weight format);
- ``ORT FP32``: the ORT-optimized graph it is built from (the F1 reference);
- ``OpenVINO FP32`` and ``OpenVINO BF16``: the plain ONNX export compiled by OpenVINO's CPU plugin with that
  inference precision (BF16 only where the CPU has it);
- ``OpenVINO INT8``: the plain export quantized by NNCF (static INT8, ``ModelType.TRANSFORMER``, calibrated
  on windows of training questions outside the held-out articles), compiled with OpenVINO's default precision.

OpenVINO runs a model compiled for one input shape faster than its dynamic-shape path, so each OpenVINO
graph is compiled once per shape of ``--bucket``-token steps (1 or 2 windows a pass, the CPU's cap), inputs
are padded (attention mask 0) to the next step, and every compiled shape runs once before timing: answers
do not change, and each question costs what a warm server would pay.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

from experiments.common import save_probe_record
from experiments.probe import data_facts, f1_against, graphs_in_turns, held_out_arguments, held_out_setup, speed_against
from variants.answering.qa import DecodeSettings, tokenize
from variants.answering.runtime import CPU_PASS_TOKENS
from variants.building.export import build_onnx_chain, quantize_int8
from variants.building.storage import load_qa_model
from variants.core.hardware import current_hardware
from variants.core.squad import load_squad

REFERENCE = "ORT FP32"


class OpenVinoQAModel:
    """A compiled OpenVINO model behind the engine's ``LogitsModel`` interface (``run``, ``input_names``,
    ``pass_tokens``), its inputs padded to a multiple of ``bucket`` tokens."""

    def __init__(self, path: Path, threads: int, precision: str | None, bucket: int, max_length: int) -> None:
        import openvino as ov  # noqa: PLC0415

        core = ov.Core()
        config = {"PERFORMANCE_HINT": "LATENCY", "INFERENCE_NUM_THREADS": threads}
        if precision:
            config["INFERENCE_PRECISION_HINT"] = precision
        source = core.read_model(str(path))
        self.input_names = tuple(i.get_any_name() for i in source.inputs)
        self.outputs = [o.get_any_name() for o in source.outputs]
        # One model compiled per shape (OpenVINO's dynamic-shape path ran this model 2 to 3 times slower than
        # the same model compiled for a fixed shape: exploratory), for 1 and 2 windows a pass (the CPU's cap).
        self.requests = {}
        for width in range(bucket, max_length + bucket, bucket):
            for rows in (1, 2):
                shaped = source.clone()
                shaped.reshape({n: [rows, min(width, max_length)] for n in self.input_names})
                compiled = core.compile_model(shaped, "CPU", config)
                self.requests[rows, min(width, max_length)] = compiled.create_infer_request()
        self.precision = compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        self.path = Path(path)
        self.size_bytes = sum(f.stat().st_size for f in self.path.parent.glob(self.path.stem + ".onnx*"))
        self.pass_tokens = CPU_PASS_TOKENS  # the engine's passes on the CPU, as for ONNX Runtime
        self.bucket, self.max_length = bucket, max_length
        for rows, width in self.requests:  # each compiled model run once before any timing
            self.run({n: np.ones((rows, width), dtype=np.int64) for n in self.input_names})

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        rows, width = next(iter(inputs.values())).shape
        padded = min(-(-width // self.bucket) * self.bucket, self.max_length)
        feeds = {n: np.pad(v, ((0, 0), (0, padded - width))) for n, v in inputs.items()}  # pads with 0: masked
        result = self.requests[rows, padded].infer(feeds)
        start, end = (np.asarray(result[o])[:, :width] for o in self.outputs[:2])
        return start, end


def calibration_windows(tokenizer, data: str, titles: list[str], count: int) -> list[dict[str, np.ndarray]]:
    """One window's inputs for each of ``count`` training questions outside the held-out articles."""
    examples = [e for e in load_squad(data, split="train") if e.title not in titles][:count]
    windows = [tokenize(tokenizer, [(e.question, e.context)], DecodeSettings()) for e in examples]
    names = ("input_ids", "attention_mask", "token_type_ids")
    return [w.inputs(names, slice(0, 1)) for w in windows]


def nncf_int8(plain: Path, out: Path, calibration: list[dict[str, np.ndarray]]) -> Path:
    import nncf  # noqa: PLC0415
    import onnx  # noqa: PLC0415

    model = onnx.load(str(plain))
    names = {i.name for i in model.graph.input}
    dataset = nncf.Dataset(calibration, lambda item: {k: v for k, v in item.items() if k in names})
    quantized = nncf.quantize(model, dataset, model_type=nncf.ModelType.TRANSFORMER, subset_size=len(calibration))
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(quantized, str(out / "model.onnx"))
    return out / "model.onnx"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    held_out_arguments(parser)
    parser.add_argument("--calibration", type=int, default=128, help="training windows NNCF calibrates on")
    parser.add_argument("--bucket", type=int, default=32, help="OpenVINO's inputs padded to a multiple of this")
    args = parser.parse_args(argv)
    import nncf  # noqa: PLC0415
    import openvino as ov  # noqa: PLC0415

    titles, examples, threads = held_out_setup(args)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = load_qa_model(args.model, compacted=True)
    max_length = DecodeSettings().max_length
    bf16 = "avx512_bf16" in (current_hardware().get("cpu_isa") or [])
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        plain = build_onnx_chain(model, tokenizer, [], Path(tmp) / "plain", for_gpu=False)
        fp32 = build_onnx_chain(model, tokenizer, ["optimize"], Path(tmp) / "fp32", for_gpu=False)
        int8 = quantize_int8(fp32, Path(tmp) / "int8")
        calibration = calibration_windows(tokenizer, args.data, titles, args.calibration)
        ov_int8 = nncf_int8(plain, Path(tmp) / "ov-int8", calibration)
        models = {REFERENCE: fp32, "ORT INT8": int8}
        made = {"OpenVINO FP32": (plain, "f32"), "OpenVINO INT8": (ov_int8, None)}
        if bf16:
            made["OpenVINO BF16"] = (plain, "bf16")
        precisions = {}
        for name, (path, precision) in made.items():
            models[name] = OpenVinoQAModel(path, threads, precision, args.bucket, max_length)
            precisions[name] = models[name].precision
        results, per_question = graphs_in_turns(models, tokenizer, examples, threads)
    speed_against(results, "ORT INT8", "speed_vs_ORT_INT8")
    f1_against(results, per_question, REFERENCE, f"f1_vs_{REFERENCE.replace(' ', '_')}")
    record = {
        "kind": "openvino-probe",  # not a benchmark record: the app's record list skips it by this key
        "what": "the pruned model under ONNX Runtime (FP32, the engine's INT8) and OpenVINO (FP32, BF16, NNCF INT8)",
        "model": args.model,
        "data": data_facts(args.data, titles, examples),
        "settings": {
            "threads": threads or f"all cores ({os.cpu_count()})",
            "batch": 1,
            "null_threshold": 0.0,
            "openvino_bucket_tokens": args.bucket,
            "openvino_precisions": precisions,
            "nncf_calibration_windows": len(calibration),
            "openvino": ov.__version__,
            "nncf": nncf.__version__,
        },
        "results": results,
    }
    save_probe_record(record, started, args.out)
    print(json.dumps(results, indent=1))
    return record


if __name__ == "__main__":
    main()
