"""The pruned model card's comparison of pruning recipes (``recipes.json`` beside the weights).

Each ``train card`` of a pruned model adds (or replaces) its own row: recipe, dev.json scores at
threshold 0 and the best-F1 upper bound, the compacted model's speed against its teacher at 384 tokens
(PyTorch, batch 1, CPU, measured then and there), training time and hardware, and the command. Rows
of recipes trained earlier stay, so the card compares them all; each says where it was measured.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from variants.building.storage import load_qa_model
from variants.core.hardware import current_hardware

FILE = "recipes.json"
SPEED_LENGTH = 384  # tokens: the speed check
BUSY_SPREAD = 0.2  # middle half of the pair ratios wider than this share of their median: a busy CPU


def forward_ms(model: Any, length: int = SPEED_LENGTH, runs: int = 15) -> float:
    """Median ms of one batch-1 forward pass of ``length`` tokens (after two untimed ones)."""
    import inspect  # noqa: PLC0415

    import torch  # noqa: PLC0415

    vocab = model.config.vocab_size
    ids = torch.randint(min(1000, vocab // 2), vocab, (1, length), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if "token_type_ids" in inspect.signature(model.forward).parameters:  # DistilBERT has none
        inputs["token_type_ids"] = torch.zeros_like(ids)
    times = []
    with torch.inference_mode():
        for i in range(runs + 2):
            started = time.perf_counter()
            model(**inputs)
            if i >= 2:
                times.append((time.perf_counter() - started) * 1000)
    return float(np.median(times))


def speedup_at_384(folder: str | Path, teacher: str | Path, rounds: int = 15) -> dict[str, Any]:
    """The compacted model's speed against its teacher's: ``rounds`` back-to-back pairs (5 runs each), the
    median of the pairs' ratios and their interquartile range, so that both see the same machine load.

    On a shared VM the baseline's 384-token pass moves more than the pruned one's (measured 44 to 67 ms
    against 19 to 23 within a minute: pair ratios from 1.96 to 3.04), so few pairs are not enough.
    """

    student, base = load_qa_model(folder, compacted=True), load_qa_model(teacher)
    length = min(SPEED_LENGTH, base.config.max_position_embeddings)  # a tiny test model has fewer positions
    pairs = [(forward_ms(base, length, runs=5), forward_ms(student, length, runs=5)) for _ in range(rounds)]
    base_ms, student_ms = float(np.median([b for b, _ in pairs])), float(np.median([s for _, s in pairs]))
    ratios = [b / s for b, s in pairs]
    return {"tokens": length, "baseline_ms": round(base_ms, 2), "pruned_ms": round(student_ms, 2),
            "speedup": round(float(np.median(ratios)), 2), "rounds": rounds,
            "speedup_iqr": [round(float(q), 2) for q in np.percentile(ratios, [25, 75])]}  # fmt: skip


def measured_busy(speed: dict[str, Any]) -> bool:
    """Whether a :func:`speedup_at_384` result spread too wide to trust: other work shared the CPU.

    On an idle 2-core VM the middle half of the 15 pair ratios spans at most a tenth of their median;
    beside a training run it spans several times that.
    """
    low, high = speed.get("speedup_iqr") or (None, None)
    return low is not None and (high - low) > BUSY_SPREAD * speed["speedup"]


def row_for(record: dict[str, Any], name: str, command: str, speed: dict[str, float]) -> dict[str, Any]:
    """A table row from a pruned folder's ``train_config.json`` record (after its evaluation)."""
    ev, hw, cfg = record["evaluation"], record["hardware"], record["config"]
    return {
        "recipe": name,
        "f1": round(ev["f1_at_zero"], 2),
        "has_ans_f1": round(ev["has_ans_f1_at_zero"], 2),
        "no_ans_f1": round(ev["no_ans_f1_at_zero"], 2),
        "best_f1": round(ev["best_f1"], 2),
        "heads_removed": sum(len(v) for v in record.get("heads_removed", {}).values()),
        "heads_total": teacher_heads(cfg),
        "ffn_share": _ffn_removed(record),
        "parameters_compacted": record.get("parameters_compacted"),
        **speed,
        "training_minutes": round((record["training_seconds"] + record.get("init_training_seconds", 0)) / 60),
        "training_hardware": _trained_on(hw, cfg)
        + (f" after {_trained_on(record['init_hardware'], cfg)}" if record.get("init_hardware") else ""),
        "speed_hardware": _this_cpu(),
        "command": command,
    }


def _ffn_removed(record: dict[str, Any]) -> float | None:
    """Share of the teacher's FFN neurons the cut removed (the record's counts; a run from ``--init`` set no share)."""
    kept, cfg = record.get("ffn_kept"), record["config"]
    config = Path(cfg.get("teacher") or "") / "config.json"
    if not kept or not config.is_file():
        return cfg.get("ffn_share")
    values = json.loads(config.read_text())
    size = values.get("intermediate_size") or values["hidden_dim"]  # BERT's name, DistilBERT's
    return round(1 - sum(kept.values()) / (size * len(kept)), 3)


def teacher_heads(cfg: dict[str, Any]) -> int | None:
    """Attention heads in the teacher a run was cut from (layers x heads per layer), from its config.json."""
    path = Path(cfg.get("teacher") or "") / "config.json"
    if not path.is_file():
        return None
    values = json.loads(path.read_text())
    layers = values.get("num_hidden_layers") or values.get("n_layers")
    return layers * (values.get("num_attention_heads") or values.get("n_heads"))


def _trained_on(hw: dict[str, Any], cfg: dict[str, Any]) -> str:
    return f"{hw.get('cpu')}, {hw.get('threads')} threads" + (", BF16" if cfg.get("bf16") else "")


def _this_cpu() -> str:

    hw = current_hardware()
    return f"{hw.get('cpu')}, {hw.get('cores')} cores"


SPEED_FIELDS = ("tokens", "baseline_ms", "pruned_ms", "speedup", "rounds", "speedup_iqr", "speed_hardware")


def update(folder: str | Path, row: dict[str, Any]) -> list[dict[str, Any]]:
    """Add ``row`` to the folder's recipes file, replacing the row of the same recipe; returns all rows.

    A speed measured on a busy CPU does not replace one of the same recipe measured on an idle one.
    """
    path = Path(folder) / FILE
    rows = json.loads(path.read_text()) if path.is_file() else []
    earlier = next((r for r in rows if r["recipe"] == row["recipe"] and "speedup" in r), None)
    if earlier and measured_busy(row) and not measured_busy(earlier):
        row = row | {k: earlier[k] for k in SPEED_FIELDS if k in earlier}
    rows = [r for r in rows if r["recipe"] != row["recipe"]] + [row]
    path.write_text(json.dumps(rows, indent=1))
    return rows


def _heads_total(rows: list[dict[str, Any]]) -> int:
    """The teacher's head count the rows name (72, MiniLM-L6's, in rows written before they said)."""
    return next((r["heads_total"] for r in reversed(rows) if r.get("heads_total")), 72)


def table(rows: list[dict[str, Any]], baseline: dict[str, float] | None = None) -> str:
    """The markdown comparison, the baseline's scores first when given."""
    lines = [
        "| recipe | F1 | HasAns F1 | NoAns F1 | best F1 | heads removed | speed (tokens) | training |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    if baseline:
        lines.append(
            f"| baseline (the teacher) | {baseline['f1']:.2f} | {baseline['has_ans_f1']:.2f} | "
            f"{baseline['no_ans_f1']:.2f} | {baseline['best_f1']:.2f} | 0 of {_heads_total(rows)} | 1.00x | |"
        )
    for r in rows:
        lo, hi = r.get("speedup_iqr") or (None, None)
        spread = f"; middle half of {r['rounds']} pairs {lo:.2f}-{hi:.2f}x" if lo is not None else ""
        if measured_busy(r):
            spread += ", too wide: the CPU was busy, measure again"
        lines.append(
            f"| `{r['recipe']}` | {r['f1']:.2f} | {r['has_ans_f1']:.2f} | {r['no_ans_f1']:.2f} | {r['best_f1']:.2f} | "
            f"{r['heads_removed']} of {r.get('heads_total') or 72} | {r['speedup']:.2f}x ({r['tokens']}: "
            f"{r['pruned_ms']:.1f} vs {r['baseline_ms']:.1f} ms{spread}; {r['speed_hardware']}) | "
            f"{r['training_minutes']} min, {r['training_hardware']} |"
        )
    return "\n".join(lines)
