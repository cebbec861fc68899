"""Recipe "gradual": prune in steps, distilling from the teacher between them (``train prune --recipe gradual``).

The one-shot recipe (``train.prune_and_distill``) cuts 55% of the heads and 70% of the FFN at once
and distills on the teacher's start/end logits only; its pruned model loses 14 HasAns F1 at
threshold 0, partly because it puts "no answer" elsewhere than its teacher. This recipe changes
what the issue (16) lists, each behind its own flag so that recipes can be compared:

* ``prune_steps`` cuts that grow linearly to ``head_share`` / ``ffn_share``; before each, heads and
  neurons are scored again (first-order, :func:`variants.building.prune.score_importance`) on the student as
  it is then, so later cuts see what earlier distillation moved; the last step trains twice as long;
* ``min_heads`` / ``min_neurons``: every layer keeps that many, a less uneven cut than the one-shot
  model's (which left layer 1 with 2 heads and 44 neurons);
* ``hidden_weight``: MSE between the student's and the teacher's hidden states after every layer
  (TinyBERT's hidden-state loss; same width, so no projection), with the teacher run on each batch;
* ``null_weight``: smooth L1 between the student's and the teacher's null margin, the [CLS]
  start+end logit less the best start and end logits elsewhere, which is what the null decision at
  threshold 0 compares (``null_loss="decision"``: cross-entropy of the decision instead);
* ``attention_weight``: KL from the teacher's attention distributions to the student's, head by head
  for the heads the student kept (it was cut from the teacher, so its heads are the teacher's),
  over real query tokens, every layer (TinyBERT's attention loss, on probabilities); both models run
  eager attention, which returns them, and the student's attention dropout is off so that the
  distributions it returns are the ones it computes;
* ``freeze_embeddings``: the student keeps the teacher's embeddings (11.7M of 22.6M parameters), so
  the pair can share them on disk: the result is also written to ``<out>/compact`` in
  :mod:`variants.building.storage`'s format (compacted, embeddings read from the teacher's folder).

nn_pruning learns movement scores during training instead; first-order scores on the current student
before each cut are a cheaper stand-in that needs no masked layers in the model.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from variants.building import prune as pruning
from variants.building import storage
from variants.building.layouts import part
from variants.building.prune import Cut, apply_cut
from variants.training.checkpoint import Checkpointer
from variants.training.loop import (
    autocast,
    batch_device,
    distill_loss,
    masked_logits,
    qa_loss,
    set_seed,
    train_loop,
    training_device,
)
from variants.training.oneshot import cut_record, importance_on, init_training, prune_inputs, save_pruned
from variants.training.settings import TrainConfig


def stage_shares(cfg: TrainConfig) -> list[tuple[float, float, float]]:
    """(head share, FFN share, epochs) of each step: shares grow linearly, the last step trains twice as long."""
    steps = max(1, cfg.prune_steps)
    weights = [1.0] * (steps - 1) + [2.0]
    return [(cfg.head_share * (s + 1) / steps, cfg.ffn_share * (s + 1) / steps, cfg.epochs * w / sum(weights))
            for s, w in enumerate(weights)]  # fmt: skip


def hidden_state_loss(student: tuple, teacher: tuple, mask: torch.Tensor) -> torch.Tensor:
    """Mean over layers of the per-token MSE between hidden states, padding left out (embeddings skipped)."""
    weight = mask.unsqueeze(-1).float()
    losses = [(((s.float() - t.float()) ** 2) * weight).sum() / (weight.sum() * s.shape[-1])
              for s, t in zip(student[1:], teacher[1:], strict=True)]  # fmt: skip
    return torch.stack(losses).mean()


def attention_loss(student: tuple, teacher: tuple, kept: dict[int, list[int]], mask: torch.Tensor) -> torch.Tensor:
    """Mean over layers of KL(teacher || student) between the attention distributions of the heads the student
    kept (``kept[layer]``: their indices among the teacher's heads, in order), over real query tokens."""
    rows = mask[:, None, :, None].float()  # [batch, 1, query, 1]
    losses = []
    for layer, (ours, theirs) in enumerate(zip(student, teacher, strict=True)):
        target = theirs[:, kept[layer]].float()
        log_ratio = target.clamp_min(1e-9).log() - ours.float().clamp_min(1e-9).log()
        kl = (target * log_ratio).sum(-1, keepdim=True)
        losses.append((kl * rows).sum() / (rows.sum() * ours.shape[1]))
    return torch.stack(losses).mean()


def null_margin(start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """[CLS] start+end logit less the best start and best end logit elsewhere (padding is at -1e4)."""
    return start[:, 0] + end[:, 0] - start[:, 1:].max(dim=-1).values - end[:, 1:].max(dim=-1).values


def null_term(student: torch.Tensor, teacher: torch.Tensor, kind: str) -> torch.Tensor:
    """How far the student's null margins are from the teacher's: smooth L1 on the margins ("margin"), or
    cross-entropy of the null decision, P(no answer) = sigmoid(margin), against the teacher's ("decision")."""
    if kind == "decision":
        return nn.functional.binary_cross_entropy_with_logits(student, torch.sigmoid(teacher))
    if kind == "margin":
        return nn.functional.smooth_l1_loss(student, teacher)
    raise ValueError(f"null loss {kind!r}: 'margin' or 'decision'")


def teacher_loss(teacher: nn.Module, cfg: TrainConfig, cut: Cut | None = None, layers: list[int] | None = None):
    """The recipe's loss: ``alpha`` x labels + (1 - alpha) x KL on logits, plus the hidden-state, attention
    and null terms (``cut``: the student's, for the attention term).

    ``layers``: the teacher's layer that each student layer learns from, in order (a student with fewer layers:
    the ones it kept, ``teacher_layers_kept``); default one to one. The teacher runs on each batch (its hidden
    states are too big to keep for every feature).
    """
    teacher.eval()
    hidden, attention = cfg.hidden_weight > 0, cfg.attention_weight > 0
    teacher_layers = pruning.encoder_layers(teacher)
    layers = list(range(len(teacher_layers))) if layers is None else layers
    if attention:
        removed = cut.heads if cut else {}
        kept = {i: [h for h in range(pruning.head_count(teacher_layers[t])) if h not in removed.get(i, [])]
                for i, t in enumerate(layers)}  # fmt: skip

    def loss_fn(model: nn.Module, batch: dict[str, torch.Tensor], idx: list[int]) -> tuple[torch.Tensor, dict]:
        inputs = {k: v for k, v in batch.items() if "positions" not in k}
        with torch.no_grad(), autocast(cfg.bf16, batch_device(batch)):
            t_out = teacher(**inputs, output_hidden_states=hidden, output_attentions=attention)
        with autocast(cfg.bf16, batch_device(batch)):
            out = model(**inputs, output_hidden_states=hidden, output_attentions=attention)
        start, end = masked_logits(out, batch)
        t_start, t_end = masked_logits(t_out, batch)
        hard = qa_loss(start, end, batch)
        kd = (distill_loss(start, t_start, cfg.temperature) + distill_loss(end, t_end, cfg.temperature)) / 2
        loss = cfg.alpha * hard + (1 - cfg.alpha) * kd
        parts = {"hard": hard.item(), "kd": kd.item()}
        if hidden:  # the embeddings' output, then after each layer the student's teacher layer's
            theirs = (t_out.hidden_states[0], *(t_out.hidden_states[t + 1] for t in layers))
            hs = hidden_state_loss(out.hidden_states, theirs, batch["attention_mask"])
            loss = loss + cfg.hidden_weight * hs
            parts["hidden"] = hs.item()
        if attention:
            theirs = tuple(t_out.attentions[t] for t in layers)
            att = attention_loss(out.attentions, theirs, kept, batch["attention_mask"])
            loss = loss + cfg.attention_weight * att
            parts["attention"] = att.item()
        if cfg.null_weight:
            null = null_term(null_margin(start, end), null_margin(t_start, t_end), cfg.null_loss)
            loss = loss + cfg.null_weight * null
            parts["null"] = null.item()
        return loss, parts

    return loss_fn


def next_cut(student: nn.Module, cut: Cut | None, template: nn.Module, features: list[dict], cfg: TrainConfig,
             head_share: float, ffn_share: float) -> Cut:  # fmt: skip
    """Score the student as it is now (expanded to the full shape) and cut a larger share.

    Removed heads and neurons are zeros in the expanded copy, so they score zero and are chosen
    again; the union with the last cut makes that certain.
    """
    scorer = pruning.expand_to_dense(student, template, cut.kept) if cut else copy.deepcopy(template)
    importance = importance_on(scorer, features, cfg)
    heads = pruning.select_heads(importance.heads, head_share, cfg.min_heads)
    kept = pruning.select_neurons(importance.neurons, ffn_share, cfg.min_neurons)
    if cut:
        heads = {i: sorted(set(heads.get(i, [])) | set(cut.heads.get(i, []))) for i in set(heads) | set(cut.heads)}
        kept = {i: torch.tensor(sorted(set(kept[i].tolist()) & set(cut.kept[i].tolist()))) for i in kept}
    return Cut(heads, kept)


@torch.no_grad()
def cut_in(model: nn.Module) -> Cut:
    """The cut a pruned model stored dense with zeros has: heads whose output columns are all zero, and the
    FFN neurons whose weights are not."""
    heads, kept = {}, {}
    for i, layer in enumerate(pruning.encoder_layers(model)):
        layout = pruning.layer_layout(layer)
        out = part(layer, layout.out).weight
        size = out.shape[1] // pruning.head_count(layer)
        heads[i] = [h for h in range(pruning.head_count(layer)) if not out[:, h * size : (h + 1) * size].any()]
        alive = part(layer, layout.ffn_in).weight.any(dim=1) & part(layer, layout.ffn_out).weight.any(dim=0)
        kept[i] = torch.nonzero(alive).flatten()
    return Cut(heads, kept)


def layers_learned_from(init: str, student: nn.Module, teacher: nn.Module) -> list[int] | None:
    """The teacher's layers a shorter ``--init`` student kept (its record's ``teacher_layers_kept``), which its
    layers learn from one by one; None when the two have as many layers (one to one)."""
    ours, theirs = len(pruning.encoder_layers(student)), len(pruning.encoder_layers(teacher))
    if ours == theirs:
        return None
    record = Path(init) / "train_config.json"
    kept = json.loads(record.read_text()).get("teacher_layers_kept") if init and record.is_file() else None
    if not kept or len(kept) != ours:
        raise SystemExit(
            f"--init {init} has {ours} layers and the teacher {theirs}, and its train_config.json does not say which "
            "of the teacher's layers it kept (teacher_layers_kept, written by the one-shot recipe's --drop-layers "
            "or --keep-layers)"
        )
    return kept


def gradual_prune(cfg: TrainConfig, checkpoint: Checkpointer | None = None) -> None:
    """Prune in ``cfg.prune_steps`` steps with distillation between them; save the result dense, with zeros.

    With ``cfg.init`` (recipe "refine"), the student is that pruned model, with its cut and, when
    embeddings are frozen, the teacher's embeddings put back: one stage of distillation, no new cut.
    """
    from transformers import AutoModelForQuestionAnswering  # noqa: PLC0415

    def load() -> nn.Module:
        return AutoModelForQuestionAnswering.from_pretrained(cfg.teacher, dtype=torch.float32)

    set_seed(cfg.seed)
    started = time.time()
    tokenizer, features, held_out = prune_inputs(cfg)
    teacher, dense_template = load().to(training_device(cfg)), load()
    resumed = checkpoint.load() if checkpoint else None
    first = resumed["stage"] if resumed else 0
    cut: Cut | None = resumed["cut"] if resumed else None
    logs: list[dict] = resumed["logs_before"] if resumed else []
    student = storage.load_qa_model(cfg.init) if cfg.init else load()
    layers = layers_learned_from(cfg.init, student, teacher)
    if layers is not None:  # a shorter student: saved dense in its own shape
        pruning.keep_layers(dense_template, layers)
    if cut is None and cfg.init:
        cut = cut_in(student)
    if cut is not None:
        apply_cut(student, cut)
    if cfg.init and cfg.freeze_embeddings:  # the teacher's embeddings back, to share them on disk
        student.base_model.embeddings.load_state_dict(teacher.base_model.embeddings.state_dict())
    shares = [(0.0, 0.0, cfg.epochs)] if cfg.init else stage_shares(cfg)
    for stage, (head_share, ffn_share, epochs) in enumerate(shares):
        if stage < first:
            continue
        if not (resumed and stage == first) and not cfg.init:
            new = next_cut(student, cut, dense_template, features, cfg, head_share, ffn_share)
            apply_cut(student, new, cut)
            cut = new
        if cfg.freeze_embeddings:
            student.base_model.embeddings.requires_grad_(False)
        print(f"step {stage + 1}: {pruning.count_parameters(student):,} parameters; heads removed {cut.heads}",
              flush=True)  # fmt: skip
        if cfg.attention_weight:  # attention probabilities returned (eager), as computed (no dropout on them)
            for model in (student, teacher):
                model.set_attn_implementation("eager")
            for layer in pruning.encoder_layers(student):
                part(layer, pruning.layer_layout(layer).attention).dropout.p = 0.0
        stage_cfg = replace(cfg, epochs=epochs, seed=cfg.seed + stage)
        tag = {"stage": stage, "cut": cut, "logs_before": logs}
        log = train_loop(student, features, stage_cfg, loss_fn=teacher_loss(teacher, cfg, cut, layers),
                         checkpoint=checkpoint, resumed=resumed if stage == first else None, tag=tag)  # fmt: skip
        logs = logs + [{"prune_step": stage + 1, **entry} for entry in log]
    seconds = checkpoint.elapsed() if checkpoint else time.time() - started
    extra = {**cut_record(student, cut), "holdout_titles": held_out, **init_training(cfg.init)}
    if layers is not None:
        extra["teacher_layers_kept"] = layers
    save_pruned(student, dense_template, cut, tokenizer, cfg, logs, seconds, extra)
