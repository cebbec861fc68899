"""A pruned model stored compacted, sharing its teacher's embeddings: a quarter of the dense file, losslessly.

The pruned model is shipped dense with zeros (45 MB in FP16) so that any tool loads it. Most of
that is zeros and a copy of the baseline's embeddings (11.7M of 22.6M parameters) when training
kept them frozen (``--freeze-embeddings``). This format keeps only what differs:

* ``model.safetensors`` holds the compacted weights (removed heads and FFN neurons cut out) without
  the embeddings;
* ``compact.json`` holds the cut (removed heads and kept FFN neurons per layer, in the dense
  model's indices) and, when shared, the folder whose ``model.safetensors`` has the embeddings,
  relative to this one, with the SHA-256 of those tensors, so that a retrained baseline is caught
  instead of silently changing the pruned model.

:func:`load` gives the compacted model, or (``dense=True``) the dense-with-zeros model the
``pruned-dense`` variant shows, bit-identical to the weights that were saved.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from variants.answering.qa import CALIBRATED_THRESHOLD
from variants.building import prune as pruning
from variants.building.prune import Cut, apply_cut

LAYOUT = "compact.json"
EMBEDDINGS = "embeddings."  # the prefix of embedding tensors below the base model's prefix


def is_compact(folder: str | Path) -> bool:
    return (Path(folder) / LAYOUT).is_file()


def _embedding_keys(model: nn.Module, state: dict[str, torch.Tensor]) -> list[str]:
    prefix = f"{model.base_model_prefix}.{EMBEDDINGS}"
    return sorted(k for k in state if k.startswith(prefix))


def _digest(state: dict[str, torch.Tensor], keys: list[str]) -> str:
    sha = hashlib.sha256()
    for key in keys:
        sha.update(key.encode())
        sha.update(state[key].to(torch.float16).contiguous().view(torch.uint8).numpy().tobytes())
    return sha.hexdigest()


def save(
    model: nn.Module,
    heads: dict[int, list[int]],
    kept: dict[int, torch.Tensor],
    folder: str | Path,
    share_embeddings_with: str | Path | None = None,
) -> None:
    """Write compacted ``model`` (cut by ``heads`` / ``kept``, dense indices) as FP16 into ``folder``.

    With ``share_embeddings_with`` (a model folder holding the same embeddings, FP16 once rounded),
    they are left out; saving refuses if they differ from that folder's.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    layout: dict = {
        "heads_removed": {str(k): sorted(v) for k, v in heads.items() if v},
        "ffn_kept": {str(k): torch.as_tensor(v).tolist() for k, v in kept.items()},
    }
    if share_embeddings_with is not None:
        base = load_file(str(Path(share_embeddings_with) / "model.safetensors"))
        keys = _embedding_keys(model, state)
        digest = _digest(state, keys)
        if _digest(base, keys) != digest:
            raise ValueError(f"the embeddings differ from {share_embeddings_with}'s: they cannot be shared")
        for key in keys:
            del state[key]
        relative = Path(os.path.relpath(Path(share_embeddings_with).resolve(), folder.resolve()))
        layout["embeddings"] = {"from": relative.as_posix(), "sha256": digest}
    config = copy.deepcopy(model.config)
    config.pruned_heads = {}  # the cut is in compact.json, applied by load()
    config.save_pretrained(folder)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / LAYOUT).write_text(json.dumps(layout, indent=2))


def load(folder: str | Path, dense: bool = False) -> nn.Module:
    """The model saved by :func:`save`: compacted, or dense with zeros where the cut removed structure."""
    from transformers import AutoConfig, AutoModelForQuestionAnswering  # noqa: PLC0415

    folder = Path(folder)
    layout = json.loads((folder / LAYOUT).read_text())
    missing = [key for key in ("heads_removed", "ffn_kept") if not isinstance(layout.get(key), dict)]
    if missing:
        raise ValueError(f"{folder}: {LAYOUT} does not say {' or '.join(missing)}: it was not written by save()")
    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForQuestionAnswering.from_config(copy.deepcopy(config))  # the cut changes its config
    cut = Cut({int(k): v for k, v in layout["heads_removed"].items()},
              {int(k): torch.tensor(v) for k, v in layout["ffn_kept"].items()})  # fmt: skip
    apply_cut(model, cut)
    state = load_file(str(folder / "model.safetensors"))
    if "embeddings" in layout:
        shared = folder / layout["embeddings"]["from"]
        if not (shared / "model.safetensors").is_file():
            raise ValueError(f"{folder}: its embeddings are shared with {shared}, which holds no model.safetensors")
        base = load_file(str(shared / "model.safetensors"))
        keys = _embedding_keys(model, base)
        if _digest(base, keys) != layout["embeddings"]["sha256"]:
            raise ValueError(f"{folder}: the embeddings in {layout['embeddings']['from']} changed since it was saved")
        state.update({k: base[k].to(torch.float16) for k in keys})
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:  # its first line says only "Error(s) in loading state_dict": give the first cause
        causes = [line.strip() for line in str(exc).splitlines()[1:] if line.strip()]
        first = causes[0] if causes else str(exc)
        raise ValueError(f"{folder}: {LAYOUT} does not match model.safetensors ({first[:300]})") from None
    model.eval()
    if dense:
        return pruning.expand_to_dense(model, AutoModelForQuestionAnswering.from_config(config), cut.kept).eval()
    return model


def load_qa_model(folder: str | Path, compacted: bool = False) -> nn.Module:
    """A question-answering model from a local folder in either format, FP32, in eval mode.

    A folder written by :func:`save` loads through :func:`load`; any other through transformers
    (``compacted`` then cuts its zeros out with :func:`variants.building.prune.compact`).
    """
    if is_compact(folder):
        return load(folder, dense=not compacted).float()
    from transformers import AutoConfig, AutoModelForQuestionAnswering  # noqa: PLC0415

    config = AutoConfig.from_pretrained(folder)
    if getattr(config, "pruned_heads", None):
        model = _load_without_heads(folder, config)
    else:
        model, info = AutoModelForQuestionAnswering.from_pretrained(
            folder, dtype=torch.float32, trust_remote_code=False, output_loading_info=True
        )
        _refuse_a_random_head(folder, model, info["missing_keys"])
    model.eval()
    if compacted:
        pruning.compact(model)
    return model


def _load_without_heads(folder: str | Path, config: object) -> nn.Module:
    """A checkpoint whose ``config.pruned_heads`` names heads that its weights no longer hold (nn_pruning's
    format, the published BERT-large checkpoints and their replicas): transformers 4 cut them out on load,
    transformers 5 no longer does, so the model is built, cut as the config says, then given the weights."""
    from transformers import AutoModelForQuestionAnswering  # noqa: PLC0415

    heads = {int(layer): sorted(map(int, removed)) for layer, removed in config.pruned_heads.items()}
    config.pruned_heads = {}
    model = AutoModelForQuestionAnswering.from_config(config, dtype=torch.float32)
    pruning.prune_heads(model, heads)
    weights = Path(folder) / "model.safetensors"
    if weights.is_file():
        state = load_file(str(weights))
    else:  # the published nn_pruning checkpoints are older than safetensors
        state = torch.load(Path(folder) / "pytorch_model.bin", map_location="cpu", weights_only=True)
    missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    _refuse_a_random_head(folder, model, missing)
    if unexpected or [k for k in missing if "position_ids" not in k]:
        raise ValueError(f"{folder}: its weights do not match its config ({[*unexpected, *missing][:3]})")
    return model


def _refuse_a_random_head(folder: str | Path, model: nn.Module, missing_keys: list[str] | set[str]) -> None:
    head = [key for key in missing_keys if not key.startswith(model.base_model_prefix + ".")]
    if head:  # transformers gave it a random head and only warned: its answers would be noise
        raise ValueError(
            f"{folder} is not a question-answering model: its weights have no {', '.join(sorted(head))} "
            "(a base or other-task model, to which transformers adds an untrained head)"
        )


def mark_float32(folder: str | Path) -> None:
    """Say ``"dtype": "float32"`` in ``folder``'s config.json, whatever its weights are stored in.

    The shipped models store FP16 weights to halve their size; transformers records the weights' dtype in
    config.json, and loaders that follow it (``pipeline(...)``, ``dtype="auto"``) would then compute in FP16,
    which a CPU runs several times slower than FP32. Loading casts the FP16 weights up, losslessly.
    """
    path = Path(folder) / "config.json"
    config = json.loads(path.read_text())
    config["dtype"] = "float32"
    config.pop("torch_dtype", None)  # the older name of the same field
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def export_dense(folder: str | Path, dest: str | Path) -> Path:
    """Write the model of ``folder`` (either format) to ``dest`` in the plain transformers format: dense, the
    removed heads and FFN neurons as zeros (as nn_pruning checkpoints), FP32, with its tokenizer; for tools
    that load models with transformers alone (``AutoModelForQuestionAnswering.from_pretrained(dest)``)."""
    from transformers import AutoTokenizer  # noqa: PLC0415

    dest = Path(dest)
    model = load_qa_model(folder, compacted=False)
    model.config.pruned_heads = {}  # the removed heads are zeros in full-size matrices, not pruned away
    model.save_pretrained(dest, safe_serialization=True)
    AutoTokenizer.from_pretrained(folder).save_pretrained(dest)
    mark_float32(dest)
    return dest


SHIPPED_FROM_RUN = ("README.md", "train_config.json", "recipes.json")


def ship(run: str | Path, dest: str | Path, embeddings_from: str | Path | None = None) -> Path:
    """Put a training run's model in ``dest`` with the run's card, its training record and its calibrated null
    threshold: a pruned run's compact store (``<run>/compact``), a plain run's folder as it is.

    ``dest``'s old files go (it is a model folder, e.g. ``assets/models/minilm-squad2-pruned``). A compact
    store's shared embeddings are read from ``embeddings_from`` when given (the shipped teacher's folder: the
    same embeddings, checked by their SHA-256), else from the run's own teacher folder; either is named
    relative to ``dest``. The card's paths name ``dest``. The result is loaded back once, so a mismatch with
    the embeddings' folder fails here, not in the app.
    """
    from transformers import AutoConfig  # noqa: PLC0415

    run, dest = Path(run), Path(dest)
    compact = is_compact(run / "compact")
    src = run / "compact" if compact else run  # the folder whose files are the model
    if not compact and not (run / "model.safetensors").is_file():
        raise FileNotFoundError(f"{run} has neither a compact store (compact/) nor a model.safetensors to ship")
    if dest.exists():
        for old in dest.iterdir():
            if old.is_file():
                old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file() and f.name != LAYOUT:
            shutil.copy2(f, dest / f.name)
    if compact:
        layout = json.loads((src / LAYOUT).read_text())
        if "embeddings" in layout:
            shared = Path(embeddings_from) if embeddings_from else src / layout["embeddings"]["from"]
            layout["embeddings"]["from"] = Path(os.path.relpath(shared.resolve(), dest.resolve())).as_posix()
        (dest / LAYOUT).write_text(json.dumps(layout, indent=2))
        for name in SHIPPED_FROM_RUN:
            if (run / name).is_file():
                shutil.copy2(run / name, dest / name)
    card = dest / "README.md"
    if card.is_file():  # the card's "Load it" names the folder it was written in, its ship line the one used
        text = card.read_text().replace(f"assets/models/{run.name}", f"assets/models/{dest.name}")
        text = text.replace(f"--to {run.name}-dense", f"--to {dest.name}-dense")
        used = f"python -m variants train ship --out {run.as_posix()} --to {dest.as_posix()}"
        if embeddings_from:
            used += f" --embeddings-from {Path(embeddings_from).as_posix()}"
        lines = text.splitlines(keepends=True)
        card.write_text("".join(used + "\n" if ln.startswith("python -m variants train ship ") else ln for ln in lines))
    threshold = getattr(AutoConfig.from_pretrained(run), CALIBRATED_THRESHOLD, None)
    if threshold is not None and compact:  # a plain run's config.json, copied, has it already
        config = AutoConfig.from_pretrained(dest)
        setattr(config, CALIBRATED_THRESHOLD, threshold)
        config.save_pretrained(dest)
    load_qa_model(dest)  # either format
    return dest
