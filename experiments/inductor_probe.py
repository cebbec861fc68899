"""Would PyTorch's compiler, with oneDNN's INT8 and BF16 kernels (AMX where the CPU has it), run the pruned model
faster than the engine's ONNX Runtime INT8 graph? A JSON record.

    pip install torchao          # not a project dependency: this probe only (PT2E quantization moved there)
    python -m experiments.inductor_probe --out experiments/records/inductor-probe-cpu-<cpu>-<date>.json

Why: issue 44's 6x the pipeline and 2.5x optimum's INT8 ask about 1.6x the shipped INT8 graph's speed on the
Intel Xeon with AMX (results.md, "What a cut would need here"). oneDNN's INT8 products reach about twice ONNX
Runtime's throughput at the model's shapes there, and OpenVINO (also oneDNN) tied once its padding and per-call
cost were paid. ``torch.compile`` (Inductor, weights frozen) runs the model at its own shape with no padding, so
it is the other way to reach those kernels from this project's PyTorch models.

What is timed: the compacted pruned model's forward pass on one window of ``--lengths`` tokens at batch 1, the
graphs taking turns in rounds, each compiled for that one shape (the compiler's best case: a server would also
pay for shapes it has not seen). Graphs:

- ``ORT INT8``: the engine's INT8 build (ORT-optimized, dynamic INT8 in this CPU's weight format), the reference;
- ``Inductor FP32``: ``torch.compile`` of the model, ``freezing`` on;
- ``Inductor BF16``: the same with the weights in BF16 (only where the CPU has AVX-512 BF16);
- ``Inductor INT8``: PT2E dynamic INT8 (``X86InductorQuantizer``, torchao), then ``torch.compile``.

Each graph's logits are compared with the eager FP32 model's (largest absolute difference), so that a fast graph
that computes something else would show. Kernel-level only: no tokenizing, windows or decoding, no F1.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer

from experiments.common import save_probe_record
from variants.answering.runtime import OrtQAModel
from variants.building.export import build_onnx_chain, quantize_int8
from variants.building.storage import load_qa_model
from variants.core.hardware import current_hardware

REFERENCE = "ORT INT8"


class Logits(torch.nn.Module):
    """The QA model as a function of three tensors returning (start, end): what export and compile trace."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, token_type_ids):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.start_logits, out.end_logits


def window(length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 20000, (1, length), generator=generator)
    ids[0, 0], ids[0, -1] = 101, 102
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


def compiled_graphs(model: torch.nn.Module, args: tuple, bf16: bool) -> tuple[dict[str, Callable], dict[str, float]]:
    import torch._inductor.config as inductor_config  # noqa: PLC0415

    inductor_config.freezing = True
    torch._dynamo.reset()  # one shape's graphs at a time: no recompile limit reached, no eager fallback
    graphs, compile_s = {}, {}

    def add(name: str, module: torch.nn.Module, cast: Callable = lambda t: t) -> None:
        compiled = torch.compile(module, dynamic=False)
        started = time.time()
        compiled(*args)
        compile_s[name] = round(time.time() - started, 1)
        graphs[name] = lambda: tuple(cast(t) for t in compiled(*args))

    add("Inductor FP32", Logits(model).eval())
    if bf16:
        add("Inductor BF16", Logits(copy.deepcopy(model)).eval().to(torch.bfloat16), lambda t: t.float())
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e  # noqa: PLC0415
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86  # noqa: PLC0415

    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config(is_dynamic=True))
    prepared = prepare_pt2e(torch.export.export(Logits(model).eval(), args).module(), quantizer)
    prepared(*args)
    add("Inductor INT8", convert_pt2e(prepared))
    return graphs, compile_s


def largest_diff(got: tuple, want: tuple) -> float:
    return max(float((a - b).abs().max()) for a, b in zip(got, want, strict=True))


def in_turns(graphs: dict[str, Callable], rounds: int, per_round: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in graphs}
    for fn in graphs.values():
        for _ in range(10):
            fn()
    order = list(graphs)
    for r in range(rounds):
        for name in order[r % len(order) :] + order[: r % len(order)]:
            for _ in range(per_round):
                started = time.perf_counter()
                graphs[name]()
                times[name].append((time.perf_counter() - started) * 1e3)
    return times


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="assets/models/minilm-squad2-pruned")
    parser.add_argument("--lengths", default="64,164,384", help="window lengths in tokens")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--per-round", type=int, default=25)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    started = time.time()
    bf16 = "avx512_bf16" in (current_hardware().get("cpu_isa") or [])
    model = load_qa_model(args.model, compacted=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    shapes = []
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        fp32 = build_onnx_chain(model, tokenizer, ["optimize"], Path(tmp) / "fp32", for_gpu=False)
        ort_int8 = OrtQAModel(quantize_int8(fp32, Path(tmp) / "int8"), "cpu", args.threads)  # the engine's own
        for length in (int(n) for n in args.lengths.split(",")):
            inputs = window(length)
            names = ("input_ids", "attention_mask", "token_type_ids")
            feed = dict(zip(names, (t.numpy() for t in inputs), strict=True))
            graphs = {REFERENCE: lambda feed=feed: tuple(torch.from_numpy(a) for a in ort_int8.run(feed))}
            made, compile_s = compiled_graphs(model, inputs, bf16)
            graphs |= made
            eager = Logits(model)(*inputs)
            diff = {n: largest_diff(f(), eager) for n, f in graphs.items()}
            times = in_turns(graphs, args.rounds, args.per_round)
            p50 = {n: statistics.median(t) for n, t in times.items()}
            shapes.append(
                {
                    "tokens": length,
                    "runs_each": args.rounds * args.per_round,
                    "compile_seconds": compile_s,
                    "max_abs_logit_diff_vs_eager_fp32": {n: round(d, 4) for n, d in diff.items()},
                    "graphs": {
                        n: {
                            "p50_ms": round(p50[n], 3),
                            "p90_ms": round(float(np.percentile(t, 90)), 3),
                            "speed_vs_ort_int8": round(p50[REFERENCE] / p50[n], 3),
                        }
                        for n, t in times.items()
                    },
                }
            )
            print(length, {n: g["p50_ms"] for n, g in shapes[-1]["graphs"].items()}, flush=True)
    record = {
        "kind": "inductor-probe",
        "model": Path(args.model).name,
        "threads": args.threads,
        "method": "one window at batch 1, random tokens, graphs in turns; each compiled for that shape only",
        "torchao": importlib.metadata.version("torchao"),
        "shapes": shapes,
    }
    return save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
