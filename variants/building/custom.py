"""A user's own Hub model, checked before any weights are downloaded.

The checks, in order, each refusal with its own message (:class:`CustomModelRefused`):

1. the id is a plain Hub id ``org/name``, never a path (:func:`check_model_id`);
2. the Hub knows it (``HfApi().model_info(files_metadata=True)``); offline (``HF_HUB_OFFLINE=1`` or no network)
   a copy already in the local Hub cache is used as it is (:func:`inspect_cached`), else the offline message;
3. its ``config.json``, fetched alone, names a ``*ForQuestionAnswering`` architecture of a BERT-family
   ``model_type`` the engine runs, and needs no custom code (``trust_remote_code`` is never used);
4. the files it would download weigh at most ``max_mb`` (default 500 MB, ``$VARIANTS_MAX_CUSTOM_MB``);
5. its chain's build fits in the memory this machine (or container) has free: its FP32 weights, counted from
   ``config.json``, times :data:`variants.core.memory.CHAIN_FACTOR` (:func:`check_memory`).

What passes is built into its no-training chain beside the preset's by :mod:`variants.serving.visitor`. The
feature is off unless switched on (:func:`custom_models_allowed`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from variants.building.sources import IGNORE_PATTERNS, offline_message, unreachable_errors
from variants.core import config, memory

CUSTOM_NAME = "custom"
MAX_MB_ENV = config.MAX_CUSTOM_MB_ENV
ALLOW_ENV = config.ALLOW_CUSTOM_ENV
DEFAULT_MAX_MB = config.MAX_CUSTOM_MB
MAX_CONFIG_BYTES = 1_000_000
EXAMPLE_ID = "deepset/roberta-base-squad2"
# BERT-family encoders whose QA heads, fast tokenizers and windows the engine handles like the presets'.
SUPPORTED_MODEL_TYPES = (
    "albert",
    "bert",
    "camembert",
    "distilbert",
    "electra",
    "mobilebert",
    "roberta",
    "xlm-roberta",
)
_PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9_])?"
HUB_ID = re.compile(rf"{_PART}/{_PART}")
# When a repository has safetensors weights, its other weight formats are not downloaded.
_OTHER_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt")


class CustomModelRefused(ValueError):
    """A model id that will not be loaded; the message says why, in one sentence."""


@dataclass(frozen=True)
class CheckedModel:
    """A Hub model that passed every check, pinned to the commit that was checked."""

    model_id: str
    revision: str
    model_type: str
    architecture: str
    download_mb: float
    extra_ignore: tuple[str, ...] = ()
    cached: Path | None = None  # the snapshot already in the local Hub cache, used as it is (offline)


def custom_models_allowed(flag: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """On with ``--allow-custom-models`` (not on a Space) or ``VARIANTS_ALLOW_CUSTOM_MODELS=1``; else off.

    ``VARIANTS_ALLOW_CUSTOM_MODELS=0`` turns it off even with the flag.
    """
    setting = config.allow_custom_setting(environ)
    if setting is not None:
        return setting
    return flag and not config.on_space(environ)


def max_custom_mb(environ: Mapping[str, str] | None = None) -> float:
    """``$VARIANTS_MAX_CUSTOM_MB`` or 500."""
    return config.max_custom_mb(environ)


def check_model_id(text: str) -> str:
    """The id, stripped, if it is a plain Hub id ``org/name``; :class:`CustomModelRefused` otherwise."""
    model_id = (text or "").strip()
    if not model_id:
        raise CustomModelRefused(f"Type a Hub model id, for example {EXAMPLE_ID}.")
    looks_like_path = (
        model_id.startswith(("/", ".", "~"))
        or "\\" in model_id
        or ":" in model_id
        or model_id.count("/") > 1
        or ".." in model_id
    )
    if looks_like_path:
        raise CustomModelRefused("Only Hugging Face Hub model ids (org/name) can be loaded here, never file paths.")
    if "/" not in model_id:
        raise CustomModelRefused(f"Use the full Hub id org/name (for example {EXAMPLE_ID}).")
    if not HUB_ID.fullmatch(model_id) or "--" in model_id:
        raise CustomModelRefused(
            "That is not a Hub model id: use org/name with letters, digits, '-', '_' and '.' (at most 96 each)."
        )
    return model_id


def inspect_model(model_id: str, max_mb: float | None = None) -> CheckedModel:
    """Every check before download (see the module docstring); only config.json is fetched."""
    model_id = check_model_id(model_id)
    max_mb = max_custom_mb() if max_mb is None else max_mb
    try:
        info = _model_info(model_id)
    except HubUnreachable as exc:
        cached = inspect_cached(model_id, max_mb)
        if cached is None:
            raise CustomModelRefused(str(exc)) from None
        return cached
    revision = getattr(info, "sha", None) or "main"
    siblings = {s.rfilename: s for s in (getattr(info, "siblings", None) or [])}
    config_file = siblings.get("config.json")
    if config_file is None:
        raise CustomModelRefused(f"{model_id} has no config.json: it is not a transformers model.")
    if (config_file.size or 0) > MAX_CONFIG_BYTES:
        raise CustomModelRefused(f"{model_id}'s config.json is implausibly large ({config_file.size:,} bytes).")
    if "compact.json" in siblings:  # this project's compacted format names other folders' files: local use only
        raise CustomModelRefused(
            f"{model_id} holds a compact.json (this project's compacted format): the page loads plain transformers "
            "models only."
        )
    config = _fetch_config(model_id, revision)
    model_type, architecture = _check_config(model_id, config)
    extra_ignore = _OTHER_WEIGHTS if any(name.endswith(".safetensors") for name in siblings) else ()
    total_mb = _download_mb(model_id, list(siblings.values()), extra_ignore)
    if total_mb > max_mb:
        raise CustomModelRefused(
            f"{model_id} is too large to load here: its files are {total_mb:,.0f} MB, and at most {max_mb:,.0f} MB "
            "are allowed."
        )
    check_memory(model_id, config, total_mb)
    return CheckedModel(model_id, revision, model_type, architecture, round(total_mb, 1), extra_ignore)


def inspect_cached(model_id: str, max_mb: float | None = None) -> CheckedModel | None:
    """The checks on the copy of ``model_id`` already in the local Hub cache (its ``refs/main`` snapshot), or
    None when there is none; its size is what the snapshot holds."""
    from huggingface_hub import snapshot_download  # noqa: PLC0415

    model_id = check_model_id(model_id)
    max_mb = max_custom_mb() if max_mb is None else max_mb
    try:
        folder = Path(snapshot_download(model_id, local_files_only=True, cache_dir=config.hub_cache()))
    except Exception:  # not in the cache (LocalEntryNotFoundError, or a broken entry)
        return None
    if not (folder / "config.json").is_file():
        raise CustomModelRefused(f"The cached copy of {model_id} has no config.json: it is not a transformers model.")
    config_data = _read_config(model_id, folder / "config.json")
    model_type, architecture = _check_config(model_id, config_data)
    files = [p for p in folder.rglob("*") if p.is_file()]
    kept = [p for p in files if not any(fnmatch(p.relative_to(folder).as_posix(), g) for g in IGNORE_PATTERNS)]
    total_mb = sum(p.stat().st_size for p in kept) / 1e6
    if total_mb > max_mb:
        raise CustomModelRefused(
            f"{model_id} is too large to load here: its files are {total_mb:,.0f} MB, and at most {max_mb:,.0f} MB "
            "are allowed."
        )
    check_memory(model_id, config_data, total_mb)
    return CheckedModel(model_id, folder.name, model_type, architecture, round(total_mb, 1), (), folder)


def check_memory(model_id: str, config_data: dict, download_mb: float) -> None:
    """Refuse, in one sentence, a model whose chain would not fit in the memory free now: its FP32 weights (from
    its config; its files' size where the config does not say) times :data:`~variants.core.memory.CHAIN_FACTOR`,
    the most a no-training chain's build was measured to add to what the app holds."""
    weights = memory.fp32_bytes(config_data) or int(download_mb * 1e6)
    need, free = memory.build_need_bytes(weights), memory.available_bytes()
    if need > free:
        raise CustomModelRefused(
            f"{model_id} would not fit in this machine's memory: building its chain takes about "
            f"{memory.gigabytes(need)}, and {memory.gigabytes(free)} are free."
        )


# --- the Hub ---------------------------------------------------------------------------------------


class HubUnreachable(CustomModelRefused):
    """The Hub cannot be reached (offline, no network): a copy in the local cache may still do."""


def _model_info(model_id: str) -> Any:
    from huggingface_hub import HfApi  # noqa: PLC0415
    from huggingface_hub.errors import HFValidationError, RepositoryNotFoundError, RevisionNotFoundError  # noqa: PLC0415

    if config.hub_offline():
        raise HubUnreachable(offline_message(model_id, "HF_HUB_OFFLINE=1 is set"))
    try:
        return HfApi().model_info(model_id, files_metadata=True)
    except HFValidationError:
        raise CustomModelRefused(f"{model_id!r} is not a valid Hub model id.") from None
    except (RepositoryNotFoundError, RevisionNotFoundError):
        raise CustomModelRefused(
            f"The Hub has no public model {model_id} (it may be private or gated); check the id."
        ) from None
    except unreachable_errors() as exc:  # no network
        raise HubUnreachable(offline_message(model_id, type(exc).__name__)) from None


def _fetch_config(model_id: str, revision: str) -> dict:
    from huggingface_hub import hf_hub_download  # noqa: PLC0415
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError  # noqa: PLC0415

    try:
        path = hf_hub_download(model_id, "config.json", revision=revision, cache_dir=config.hub_cache())
    except (EntryNotFoundError, RepositoryNotFoundError):
        raise CustomModelRefused(f"{model_id} has no readable config.json.") from None
    except unreachable_errors() as exc:
        raise CustomModelRefused(offline_message(model_id, type(exc).__name__)) from None
    return _read_config(model_id, Path(path))


def _read_config(model_id: str, path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            parsed = json.load(f)
    except (OSError, ValueError):
        raise CustomModelRefused(f"{model_id}'s config.json is not valid JSON.") from None
    if not isinstance(parsed, dict):
        raise CustomModelRefused(f"{model_id}'s config.json is not a JSON object.")
    return parsed


def qa_refusal(model_id: str, config: dict) -> str:
    """Why a model of this config is no extractive question-answering model the engine may run ("" if it is one):
    it needs its own code, or it has no ``*ForQuestionAnswering`` head. The pair check (:mod:`.pair`) asks too."""
    if config.get("auto_map"):
        return f"{model_id} needs its own Python code (auto_map, trust_remote_code), which is never run here."
    architectures = [a for a in config.get("architectures") or [] if isinstance(a, str)]
    if not any(a.endswith("ForQuestionAnswering") for a in architectures):
        kind = ", ".join(architectures) or str(config.get("model_type") or "") or "unknown"
        return (
            f"{model_id} is not an extractive question-answering model (its architecture is {kind}); pick one "
            f"fine-tuned for it, whose architecture ends in ForQuestionAnswering (e.g. {EXAMPLE_ID})."
        )
    return ""


def _check_config(model_id: str, config: dict) -> tuple[str, str]:
    """(model_type, architecture) of a config the engine can run, or the reason it cannot."""
    reason = qa_refusal(model_id, config)
    if reason:
        raise CustomModelRefused(reason)
    model_type = str(config.get("model_type") or "")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise CustomModelRefused(
            f"{model_id} is a {model_type or 'unknown'} model; the models supported here are "
            f"{', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    return model_type, next(a for a in config["architectures"] if a.endswith("ForQuestionAnswering"))


def _download_mb(model_id: str, siblings: list, extra_ignore: tuple[str, ...]) -> float:
    """Megabytes of the files the snapshot will download (the same ignore patterns as the download)."""
    from huggingface_hub.utils import filter_repo_objects  # noqa: PLC0415

    files = list(
        filter_repo_objects(siblings, ignore_patterns=[*IGNORE_PATTERNS, *extra_ignore], key=lambda s: s.rfilename)
    )
    if any(getattr(f, "size", None) is None for f in files):
        raise CustomModelRefused(f"The Hub did not report the file sizes of {model_id}, so it is not loaded.")
    return sum(f.size for f in files) / 1e6
