"""``python -m variants train STAGE``: the command line of training (finetune, prune, calibrate, card, ship, dense),
with interruptible, resumable runs."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, replace
from pathlib import Path

import torch

from variants.building.storage import export_dense, ship
from variants.training.cards import card
from variants.training.checkpoint import FILE as CHECKPOINT_FILE
from variants.training.checkpoint import Checkpointer, Interrupted
from variants.training.distill import gradual_prune
from variants.training.evaluation import calibrate, held_out_examples
from variants.training.loop import training_device
from variants.training.oneshot import finetune, prune_and_distill, teacher_problem
from variants.training.settings import (
    DEFAULT_BASE,
    RECIPES,
    TrainConfig,
    oneshot_stage,
    unused_by_distilling,
    unused_by_oneshot,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "stage",
        choices=("finetune", "prune", "calibrate", "card", "ship", "dense"),
        help="calibrate: the null threshold of --out on its held-out articles of --data (training does it "
        "too when it holds articles out); card: evaluate --out on --data, write README.md; ship: copy the "
        "model of run --out (a pruned run's compact store), with its card, to --to; dense: write the model of --out "
        "in the plain transformers "
        "format (removed heads and neurons as zeros, FP32) to --to, for tools that load models with transformers alone",
    )
    parser.add_argument(
        "--data",
        default="",
        help="SQuAD v2 JSON file (several: joined by commas), or a Hub dataset name (not for ship)",
    )
    parser.add_argument("--to", default="", help="ship: the model folder to write (its old files go)")
    parser.add_argument(
        "--embeddings-from",
        default="",
        help="ship, a pruned run: the folder its shared embeddings are read from once shipped (the shipped "
        "teacher's, e.g. assets/models/minilm-squad2; default: the run's teacher folder)",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="finetune, prune: the folder to write the trained model to; card, ship, dense: the trained model "
        "folder to read (card writes its README.md there)",
    )
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
        elif name == "device":
            parser.add_argument(flag, default=None, help="cpu, cuda or cuda:N; default a CUDA GPU when torch sees one")
        else:  # None: not given, so the recipe's value or the default applies
            parser.add_argument(flag, type=type(default), default=None, help=f"default {default}")


def config_from(args: argparse.Namespace) -> TrainConfig:
    """Defaults, then the named recipe, then the flags given on the command line."""
    fields = TrainConfig.__dataclass_fields__
    given = {k: v for k, v in vars(args).items() if k in fields and v is not None and v is not False}
    return TrainConfig(**{**RECIPES[given.get("recipe") or "oneshot"], **given})


def run(args: argparse.Namespace) -> None:
    cfg = config_from(args)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.stage == "prune" and not cfg.teacher:
        raise SystemExit("prune needs --teacher (the fine-tuned model folder)")
    if cfg.stage == "prune" and cfg.recipe == "oneshot" and (unused := unused_by_oneshot(cfg)):
        raise SystemExit(f"--recipe oneshot does not use {' '.join(unused)}: --recipe gradual or refine does")
    if cfg.stage == "prune" and cfg.recipe != "oneshot" and (unused := unused_by_distilling(cfg)):
        raise SystemExit(f"--recipe {cfg.recipe} does not use {' '.join(unused)}: the one-shot recipe does")
    if cfg.keep_layers and cfg.drop_layers:
        raise SystemExit("--keep-layers names the layers, --drop-layers chooses them: give one of the two")
    if cfg.keep_layers and not all(x.strip().isdigit() for x in cfg.keep_layers.split(",")):
        raise SystemExit(f"--keep-layers takes layer numbers joined by commas, e.g. 0,1,3,5; got {cfg.keep_layers!r}")
    if cfg.stage == "prune" and (problem := teacher_problem(cfg)):
        raise SystemExit(problem)
    if cfg.stage in ("finetune", "prune"):
        try:
            training_device(cfg)  # a GPU asked for and not there: refused before any data is read
        except ValueError as missing:
            raise SystemExit(str(missing)) from None
    if cfg.stage == "dense":
        if not args.to:
            raise SystemExit("dense needs --to (the folder to write)")
        print(f"wrote {export_dense(cfg.out, args.to)}")
        return
    if cfg.stage == "ship":
        if not args.to:
            raise SystemExit("ship needs --to (the model folder to write)")

        print(f"shipped {cfg.out} to {ship(cfg.out, args.to, args.embeddings_from or None)}")
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
        stage = gradual_prune
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
    titles = json.loads((Path(cfg.out) / "train_config.json").read_text()).get("holdout_titles")
    if titles and held_out_examples(titles, cfg.data):
        calibrate(cfg.out, cfg.data)
    elif titles:  # a teacher trained here on other files held out articles this data lacks: nothing to calibrate on
        print(f"not calibrated: {cfg.data} holds none of the held-out articles {', '.join(titles)} (the null "
              "threshold stays 0; python -m variants train calibrate --data FILE --out OUT with a file that holds "
              "them sets it)", flush=True)  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m variants train", description=__doc__)
    add_arguments(parser)
    run(parser.parse_args(argv))
    return 0
