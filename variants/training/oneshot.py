"""The two stages every recipe starts from: ``finetune`` (the baseline, from the pretrained base) and the
one-shot prune (one cut by first-order importance, then distillation from the fine-tuned teacher).

The pruned model is saved dense with zeros, like the published nn_pruning checkpoints, so the engine's
compaction (:func:`variants.building.prune.compact`) applies to it as to them."""

from __future__ import annotations

import copy
import json
import random
import time
from pathlib import Path

import torch
from torch import nn

from variants.building import layouts, storage
from variants.building import prune as pruning
from variants.building.prune import Cut, apply_cut
from variants.training.augment import teacher_only_pairs
from variants.training.checkpoint import Checkpointer
from variants.training.features import (
    build_train_features,
    calibration_pool,
    collate,
    load_examples,
    long_context_features,
    short_context_features,
)
from variants.training.loop import save, set_seed, teacher_logits, train_loop, training_device
from variants.training.settings import TrainConfig, resolve_base


def finetune(cfg: TrainConfig, checkpoint: Checkpointer | None = None) -> None:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer  # noqa: PLC0415

    set_seed(cfg.seed)
    base = resolve_base(cfg.base)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForQuestionAnswering.from_pretrained(base, dtype=torch.float32)
    if cfg.freeze_embeddings:  # a pruned model that shares the base's embeddings on disk still loads beside it
        model.base_model.embeddings.requires_grad_(False)
    examples, held_out = load_examples(cfg)
    features = build_train_features(tokenizer, examples, cfg.max_length, cfg.stride)
    features += short_context_features(tokenizer, examples, cfg)
    features += long_context_features(tokenizer, examples, cfg)
    print(f"{len(features)} training features; held out: {held_out}", flush=True)
    started = time.time()
    resumed = checkpoint.load() if checkpoint else None
    log = train_loop(model, features, cfg, checkpoint=checkpoint, resumed=resumed)
    seconds = checkpoint.elapsed() if checkpoint else time.time() - started
    save(model, tokenizer, cfg, log, seconds, {"holdout_titles": held_out})


def teacher_problem(cfg: TrainConfig) -> str | None:
    """Why ``cfg.teacher`` cannot be pruned here, in one sentence, or None; read from its folder's config
    alone, so a model of another layout or task is refused before any data is read or weights are loaded."""
    from transformers import AutoConfig  # noqa: PLC0415

    folder = Path(cfg.teacher)
    if not folder.is_dir():
        return (f"--teacher {cfg.teacher} is not a folder: pass the fine-tuned model's folder (a Hub model: "
                "hf download ID --local-dir DIR, then --teacher DIR)")  # fmt: skip
    if storage.is_compact(folder):
        return (f"--teacher {cfg.teacher} is a compacted pruned model: pass the model it was pruned from, or "
                f"start from it with --recipe refine --init {cfg.teacher}")  # fmt: skip
    if not (folder / "config.json").is_file():
        return f"--teacher {cfg.teacher} holds no config.json: it is not a transformers model folder"
    if cfg.freeze_embeddings and not (folder / "model.safetensors").is_file():
        return (f"--freeze-embeddings shares the teacher's embeddings from its model.safetensors, which "
                f"{cfg.teacher} lacks: save the teacher with save_pretrained(safe_serialization=True), or leave "
                "the flag out")  # fmt: skip
    config = AutoConfig.from_pretrained(folder)
    return layouts.refusal(config.model_type, getattr(config, "architectures", None))


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
    features += long_context_features(tokenizer, examples, cfg)
    extra = teacher_only_pairs(examples, cfg.teacher_inputs, cfg.seed) if cfg.teacher_inputs else []
    if extra:
        features += build_train_features(tokenizer, extra, cfg.max_length, cfg.stride, labelled=False)
    print(f"{len(features)} training features ({len(extra)} pairs for the teacher only); held out: {held_out}",
          flush=True)  # fmt: skip
    return tokenizer, features, held_out


def importance_on(model: nn.Module, features: list[dict], cfg: TrainConfig) -> pruning.Importance:
    """First-order importance on a seeded calibration subset of :func:`calibration_pool`."""
    labelled = calibration_pool(features)
    calib = random.Random(cfg.seed).sample(labelled, min(cfg.calib_examples, len(labelled)))
    batches = (collate(features, calib[i : i + 16]) for i in range(0, len(calib), 16))
    return pruning.score_importance(model.to(training_device(cfg)), batches)


LAYER_CHOICE_EXAMPLES = 256  # calibration questions each candidate layer drop is scored on


@torch.no_grad()
def chosen_layers(model: nn.Module, features: list[dict], cfg: TrainConfig) -> list[int] | None:
    """The teacher's layers the student keeps: ``--keep-layers`` as given, or, for ``--drop-layers N``,
    N layers dropped one at a time, each time the one whose absence raises the QA loss on a seeded
    calibration subset least (the teacher with the layers dropped so far, gold spans). None: all kept.

    Chosen by loss rather than by position because layers differ in what they carry for this task
    (Sajjad et al. 2023, "On the effect of dropping layers of pre-trained transformer models", find the
    top layers the cheapest to drop; MiniLM's six may not follow BERT-base's twelve)."""
    total = len(pruning.encoder_layers(model))
    if cfg.keep_layers:
        return [int(x) for x in cfg.keep_layers.split(",")]
    if not cfg.drop_layers:
        return None
    if not 0 < cfg.drop_layers < total:
        raise ValueError(f"--drop-layers must leave at least one of the teacher's {total} layers")
    labelled = calibration_pool(features)
    calib = random.Random(cfg.seed).sample(labelled, min(LAYER_CHOICE_EXAMPLES, len(labelled)))
    batches = [collate(features, calib[i : i + 16]) for i in range(0, len(calib), 16)]
    kept = list(range(total))
    while len(kept) > total - cfg.drop_layers:
        losses = {}
        for layer in kept:
            trial = copy.deepcopy(model)
            pruning.keep_layers(trial, [k for k in kept if k != layer])
            losses[layer] = sum(pruning.qa_loss(trial, b).item() for b in batches) / len(batches)
        kept.remove(min(losses, key=losses.get))
        print(f"dropping layer {min(losses, key=losses.get)}: calibration loss without each {losses}", flush=True)
    return kept


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
        scorer = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32).eval()
        layers = chosen_layers(scorer, features, cfg)
        if layers is not None:
            pruning.keep_layers(scorer, layers)
        importance = importance_on(scorer, features, cfg)
        del scorer
        cut = Cut(pruning.select_heads(importance.heads, cfg.head_share, cfg.min_heads),
                  pruning.select_neurons(importance.neurons, cfg.ffn_share, cfg.min_neurons))  # fmt: skip
    else:
        cut, layers = resumed["cut"], resumed.get("layers")
    student = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
    dense_template = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
    if layers is not None:  # the cut's layer numbers are the student's
        pruning.keep_layers(student, layers)
        pruning.keep_layers(dense_template, layers)
    apply_cut(student, cut)
    if cfg.freeze_embeddings:
        student.base_model.embeddings.requires_grad_(False)
    print(f"pruned to {pruning.count_parameters(student):,} parameters; heads removed {cut.heads}", flush=True)

    def soft_targets() -> list:  # the teacher's logits: about 20 minutes for 48k features on 2 cores, kept
        teacher = AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)
        return teacher_logits(teacher, features, cfg.batch_size * 2, cfg.bf16, str(training_device(cfg)))

    soft = checkpoint.kept("teacher_logits", soft_targets, resumed is not None) if checkpoint else soft_targets()
    tag = {"cut": cut, "layers": layers}
    log = train_loop(student, features, cfg, teacher=soft, checkpoint=checkpoint, resumed=resumed, tag=tag)
    seconds = checkpoint.elapsed() if checkpoint else time.time() - started
    extra = {**cut_record(student, cut), "holdout_titles": held_out}
    if layers is not None:
        extra["teacher_layers_kept"] = layers
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
    the teacher's, also compacted in :mod:`variants.building.storage`'s format without them (``<out>/compact``)."""
    student.cpu()  # trained on a GPU or not, saved from host memory beside the CPU template
    save(pruning.expand_to_dense(student, dense_template, cut.kept), tokenizer, cfg, log, seconds, extra)
    if cfg.freeze_embeddings:  # the same model a quarter of the size: compacted, embeddings read from the teacher's
        compact = Path(cfg.out) / "compact"
        storage.save(student, cut.heads, cut.kept, compact, share_embeddings_with=cfg.teacher)
        tokenizer.save_pretrained(compact)


def init_training(init: str) -> dict:
    """For a run started from ``--init``: that model's training time (its own start's included) and hardware."""
    record_path = Path(init) / "train_config.json"
    if not init or not record_path.is_file():
        return {}
    first = json.loads(record_path.read_text())
    return {"init_training_seconds": first["training_seconds"] + first.get("init_training_seconds", 0),
            "init_hardware": first["hardware"]}  # fmt: skip
