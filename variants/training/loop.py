"""The training loop shared by every stage: losses (gold spans, the teacher's logits), the optimizer and
schedule, interruptible steps with checkpoints, and saving a trained model with its record."""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from variants.answering.runtime import limit_native_memory
from variants.building.storage import mark_float32
from variants.core.hardware import current_hardware
from variants.core.squad import data_files
from variants.training.checkpoint import Checkpointer, Interrupted, rng_state, set_rng_state
from variants.training.features import UNLABELLED, _sha256, collate, data_name, length_grouped_batches
from variants.training.settings import TrainConfig, base_model_of


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def qa_loss(start: torch.Tensor, end: torch.Tensor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of the gold start and end over the batch's labelled features (zero when it has none)."""
    labelled = batch["start_positions"] != UNLABELLED
    if not labelled.any():
        return start.sum() * 0.0
    ce = nn.functional.cross_entropy
    gold_start, gold_end = batch["start_positions"][labelled], batch["end_positions"][labelled]
    return (ce(start[labelled], gold_start) + ce(end[labelled], gold_end)) / 2


def distill_loss(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    log_p = nn.functional.log_softmax(student / temperature, dim=-1)
    q = nn.functional.softmax(teacher / temperature, dim=-1)
    return nn.functional.kl_div(log_p, q, reduction="batchmean") * temperature**2


def masked_logits(out, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """FP32 start/end logits with padding pushed to -1e4 so no probability lands there."""
    pad = (batch["attention_mask"] == 0) * -1e4
    return out.start_logits.float() + pad, out.end_logits.float() + pad


def autocast(enabled: bool, device: str = "cpu") -> torch.autocast:
    """BF16 autocast on ``device`` ("cpu" or "cuda") when ``enabled``: matmuls in BF16, weights, losses and
    optimizer in FP32."""
    return torch.autocast(device, dtype=torch.bfloat16, enabled=enabled)


def training_device(cfg: TrainConfig) -> torch.device:
    """Where a stage trains: ``cfg.device`` when given ("cpu", "cuda", "cuda:1"), else the first CUDA GPU when
    torch sees one, else the CPU. A GPU asked for and not there is refused in one sentence."""
    if cfg.device and cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {cfg.device}: this torch sees no CUDA GPU ({torch.__version__}); use --device cpu")
    return torch.device(cfg.device or ("cuda" if torch.cuda.is_available() else "cpu"))


# glibc's mmap threshold during the teacher's pass over every feature, then for the training steps
# (variants.answering.runtime.limit_native_memory). Under glibc's moving threshold the heap kept growing through
# the pass, whose batches come in order of length (a distillation run over 48k features: 11 GB after 14
# minutes and the OOM killer, 2026-11-27; 1,000 features of the baseline at batch 64: +311 MB resident, +54 MB
# at 4 MiB). But 4 MiB in the steps mmapped their buffers afresh each step: 36% of the CPU time in page faults,
# 3.6 s a step against 2.2. So the steps get 32 MiB, the most glibc's moving threshold reaches: their buffers
# stay on the heap and are reused.
TEACHER_PASS_MMAP_THRESHOLD = 4 << 20
STEPS_MMAP_THRESHOLD = 32 << 20


@torch.no_grad()
def teacher_logits(
    teacher: nn.Module, features: list[dict], batch_size: int, bf16: bool = False, device: str = "cpu"
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The teacher's start/end logits for every feature, computed once for all epochs: views into one tensor
    allocated up front, rather than two small tensors per feature allocated between each batch's large
    buffers (1,000 features at batch 64: +400 MB resident before, +311 MB after; glibc's fixed mmap threshold,
    :data:`TEACHER_PASS_MMAP_THRESHOLD`, took it to +54 MB)."""
    limit_native_memory(TEACHER_PASS_MMAP_THRESHOLD)  # process-wide, until train_loop sets the steps' threshold
    teacher.eval().to(device)
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    lengths = [len(f["input_ids"]) for f in features]
    where = [0, *itertools.accumulate(lengths)]  # feature j's logits: [where[j], where[j + 1])
    store = torch.empty(2, where[-1])
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        batch = {k: v.to(device) for k, v in collate(features, idx).items()}
        with autocast(bf16, torch.device(device).type):
            out = teacher(**{k: v for k, v in batch.items() if "positions" not in k})
        start, end = (logits.cpu() for logits in masked_logits(out, batch))  # kept in host memory
        for row, j in enumerate(idx):
            store[0, where[j] : where[j + 1]] = start[row, : lengths[j]]
            store[1, where[j] : where[j + 1]] = end[row, : lengths[j]]
    return [(store[0, where[j] : where[j + 1]], store[1, where[j] : where[j + 1]]) for j in range(len(features))]


def pad_teacher(logits: list, idx: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    start = torch.full((len(idx), width), -1e4)
    end = torch.full((len(idx), width), -1e4)
    for row, j in enumerate(idx):
        s, e = logits[j]
        start[row, : len(s)] = s
        end[row, : len(e)] = e
    return start, end


def batch_device(batch: dict[str, torch.Tensor]) -> str:
    """The device type a batch is on ("cpu", "cuda"): the one its autocast runs on."""
    return batch["input_ids"].device.type


LossFn = Callable[[nn.Module, dict[str, torch.Tensor], list[int]], tuple[torch.Tensor, dict[str, float]]]


def logits_loss(cfg: TrainConfig, teacher: list | None = None) -> LossFn:
    """The usual QA loss, mixed (``alpha``) with KL to precomputed teacher logits when ``teacher`` is given."""

    def loss_fn(model: nn.Module, batch: dict[str, torch.Tensor], idx: list[int]) -> tuple[torch.Tensor, dict]:
        with autocast(cfg.bf16, batch_device(batch)):
            out = model(**{k: v for k, v in batch.items() if "positions" not in k})
        start, end = masked_logits(out, batch)
        loss = qa_loss(start, end, batch)
        if teacher is None:
            return loss, {}
        t_start, t_end = (t.to(start.device) for t in pad_teacher(teacher, idx, start.shape[1]))
        kd = (distill_loss(start, t_start, cfg.temperature) + distill_loss(end, t_end, cfg.temperature)) / 2
        return cfg.alpha * loss + (1 - cfg.alpha) * kd, {}

    return loss_fn


def optimizer(model: nn.Module, cfg: TrainConfig, total: int) -> tuple[torch.optim.Optimizer, object]:
    """AdamW over the trainable parameters (no decay on biases and LayerNorm), linear warm-up and decay."""
    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [
        {"params": [p for n, p in named if not any(k in n for k in no_decay)], "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in named if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=cfg.lr)
    warm = int(cfg.warmup * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / max(1, warm) if s < warm else max(0.0, (total - s) / max(1, total - warm))
    )
    return opt, sched


def train_loop(
    model: nn.Module,
    features: list[dict],
    cfg: TrainConfig,
    teacher: list | None = None,
    loss_fn: LossFn | None = None,
    checkpoint: Checkpointer | None = None,
    resumed: dict | None = None,
    tag: dict | None = None,
) -> list[dict]:
    """AdamW with linear warm-up and decay over length-grouped batches; returns the loss log.

    With ``checkpoint``, the loop saves its whole state (plus ``tag``, what the caller needs to
    rebuild ``model``'s shape) every ``checkpoint.every_s`` seconds and at the end, and stops with
    :class:`Interrupted` when asked to; ``resumed`` (a loaded checkpoint) continues from there with
    the same data order and dropout draws as an uninterrupted run.
    """
    limit_native_memory(STEPS_MMAP_THRESHOLD)  # process-wide (teacher_logits lowers it for its pass)
    device = training_device(cfg)
    model.to(device)  # before the optimizer is made: its state lives where the parameters do
    loss_fn = loss_fn or logits_loss(cfg, teacher)
    rng = random.Random(cfg.seed)
    lengths = [len(f["input_ids"]) for f in features]
    total = max(1, int(math.ceil(len(features) / cfg.batch_size) * cfg.epochs))
    opt, sched = optimizer(model, cfg, total)
    step, pos, elapsed, running, log = 0, 0, 0.0, {"loss": 0.0}, []
    epoch_rng = rng.getstate()
    if resumed is not None:
        model.load_state_dict(resumed["model"])
        opt.load_state_dict(resumed["optimizer"])
        sched.load_state_dict(resumed["scheduler"])
        set_rng_state(resumed["rng"])
        step, pos, epoch_rng = resumed["step"], resumed["batch_in_epoch"], resumed["epoch_rng"]
        elapsed, running, log = resumed["elapsed_s"], resumed["running"], resumed["log"]
    rng.setstate(epoch_rng)
    batches = length_grouped_batches(lengths, cfg.batch_size, rng)
    started = time.time() - elapsed

    def state() -> dict:
        return {**(tag or {}), "model": model.state_dict(), "optimizer": opt.state_dict(),
                "scheduler": sched.state_dict(), "rng": rng_state(), "step": step, "batch_in_epoch": pos,
                "epoch_rng": epoch_rng, "elapsed_s": time.time() - started, "running": running, "log": log}  # fmt: skip

    model.train()
    while step < total:
        if pos == len(batches):  # a new epoch: a new shuffle
            epoch_rng = rng.getstate()
            batches, pos = length_grouped_batches(lengths, cfg.batch_size, rng), 0
        idx = batches[pos]
        pos += 1
        loss, parts = loss_fn(model, {k: v.to(device) for k, v in collate(features, idx).items()}, idx)
        loss.backward()
        nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        for key, value in {"loss": loss.item(), **parts}.items():
            running[key] = running.get(key, 0.0) + value
        if step % 50 == 0 or step == total:
            count = 50 if step % 50 == 0 else step % 50 or 1
            entry = {"step": step, "of": total, **{k: v / count for k, v in running.items()},
                     "lr": sched.get_last_lr()[0], "elapsed_s": round(time.time() - started, 1)}  # fmt: skip
            log.append(entry)
            print(json.dumps(entry), flush=True)
            running = {"loss": 0.0}
        if checkpoint is not None:
            save_now, stop = checkpoint.after_step()
            if save_now or step == total:
                checkpoint.save(state())
            if stop and step < total:
                raise Interrupted(f"stopped at step {step} of {total}; checkpoint in {checkpoint.folder}")
    return log


def save(
    model: nn.Module, tokenizer, cfg: TrainConfig, log: list[dict], seconds: float, extra: dict | None = None
) -> None:
    """FP16 safetensors (half the size), a config that says FP32 (what every loader should compute in on a
    CPU: :func:`variants.building.storage.mark_float32`), tokenizer, log."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    model.to("cpu", torch.float16).save_pretrained(out, safe_serialization=True)
    mark_float32(out)
    tokenizer.save_pretrained(out)
    record = {
        "config": {**asdict(cfg), "data": data_name(cfg.data)},
        "data_sha256": _sha256(cfg.data) if data_files(cfg.data) else None,
        "training_seconds": round(seconds, 1),
        "base_model": base_model_of(cfg.stage, cfg.base, cfg.teacher),
        "hardware": {
            "cpu": current_hardware()["cpu"],
            "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(training_device(cfg)) if training_device(cfg).type == "cuda" else None,
        },
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
        "log": log,
        **(extra or {}),
    }
    (out / "train_config.json").write_text(json.dumps(record, indent=2))
