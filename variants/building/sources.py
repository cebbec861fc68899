"""Model sources: a local folder, or a Hugging Face Hub id resolved to a local snapshot.

Without network (or with ``HF_HUB_OFFLINE=1``) a Hub id that is not in the local cache raises
:class:`SourceUnavailable` with one sentence naming the model and how to supply a local copy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from variants.building import replica
from variants.building.cache import file_sha256, source_fingerprint
from variants.core import config

# Weights in other frameworks, and other exports, are never needed.
IGNORE_PATTERNS = [
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.onnx",
    "onnx/*",
    "*.tflite",
    "flax_model*",
    "tf_model*",
    "rust_model*",
    "coreml/*",
    "*.mlmodel",
    "openvino/*",
    "*.gguf",
]


# The files that hold what a model computes: its weights, and the compacted store's record of what was cut.
# Not config.json, cards or training records, which are edited without changing a single answer's logits.
WEIGHT_FILES = ("*.safetensors", "*.bin", "compact.json")


class SourceUnavailable(RuntimeError):
    """A model source that cannot be loaded; the message says what to do instead."""


@dataclass(frozen=True)
class ResolvedSource:
    """A source as a local folder, with an identity for cache keys."""

    source: str
    path: Path
    identity: str  # "hub:<id>@<commit>" or "local:<folder fingerprint>"
    is_local: bool


def offline_message(source: str, reason: str) -> str:
    """One sentence: the Hub cannot be reached for ``source``, and what to do instead; on a Space in its own
    terms (its Settings and variables: a Space takes no command-line flags)."""
    if config.on_space():
        return (
            f"The model {source!r} is not in this Space's Hugging Face cache and the Hub cannot be reached "
            f"({reason}); restart the Space once the Hub answers (Settings → Restart this Space), or name models it "
            f"can reach in the Space's variables (Settings → Variables and secrets: {config.BASELINE_ENV}, "
            f"{config.PRUNED_ENV})."
        )
    return (
        f"The model {source!r} is not in the local Hugging Face cache and the Hub cannot be reached "
        f"({reason}); download it where there is network (`hf download {source} --local-dir DIR`) "
        "and pass that folder instead (for example --baseline DIR / --pruned DIR), or use the "
        "offline preset `embedded`."
    )


FilesProgress = Callable[[int, "int | None"], None]  # (files done, files in all) of a Hub download


def resolve(
    source: str, revision: str | None = None, cache_dir: Path | None = None, progress: FilesProgress | None = None
) -> ResolvedSource:
    """A local folder as is; a Hub id downloaded (or found in the cache) as a snapshot folder, ``progress``
    following its files; a ``replica:`` source built (or found) in the artifact cache (``cache_dir``, else the
    default)."""
    if source.startswith("replica:"):  # a random-weight model of a published shape (variants.building.replica)
        folder, key = replica.cached_model(source, cache_dir)
        return ResolvedSource(source, folder, key, True)
    folder = Path(source).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise SourceUnavailable(f"The folder {str(folder)!r} has no config.json: it is not a model folder.")
        return ResolvedSource(source, folder.resolve(), "local:" + source_fingerprint(folder), True)
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise SourceUnavailable(f"The folder {source!r} does not exist, and it is not a Hub model id.")
    return resolve_hub(source, revision, progress=progress)


def resolve_known(source: str, revision: str | None = None, cache_dir: Path | None = None) -> ResolvedSource | None:
    """The source if it resolves without a download or a build (a local folder, a replica's folder named by its
    key, a Hub id already in the local cache), else None: what the page may show before the build has run."""
    if source.startswith("replica:"):
        folder, key = replica.model_place(source, cache_dir)
        return ResolvedSource(source, folder, key, True)
    if Path(source).expanduser().is_dir():
        try:
            return resolve(source, revision)
        except SourceUnavailable:
            return None
    from huggingface_hub import snapshot_download  # noqa: PLC0415

    try:
        path = Path(snapshot_download(source, revision=revision, cache_dir=config.hub_cache(), local_files_only=True))
    except Exception:  # not in the local cache (or not a Hub id): known only once downloaded
        return None
    return ResolvedSource(source, path, f"hub:{source}@{path.name}", False)


def resolve_hub(
    source: str,
    revision: str | None = None,
    extra_ignore: tuple[str, ...] = (),
    progress: FilesProgress | None = None,
    cache_dir: Path | None = None,
) -> ResolvedSource:
    """A Hub id as a snapshot folder (never a local path: for ids typed by a user), skipping files that
    match :data:`IGNORE_PATTERNS` or ``extra_ignore``; in ``cache_dir`` when given (a visitor's download, removed
    with their chain), else in the persistent folder's Hub cache when there is one
    (:func:`variants.core.config.hub_cache`)."""
    from huggingface_hub import snapshot_download  # noqa: PLC0415
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError, RepositoryNotFoundError  # noqa: PLC0415

    offline = config.hub_offline()
    options = {"tqdm_class": files_bar(progress)} if progress is not None else {}
    try:
        path = snapshot_download(
            source,
            revision=revision,
            ignore_patterns=[*IGNORE_PATTERNS, *extra_ignore],
            local_files_only=offline,
            cache_dir=cache_dir or config.hub_cache(),
            **options,
        )
    except HFValidationError as exc:
        raise SourceUnavailable(f"{source!r} is neither an existing folder nor a valid Hub model id ({exc}).") from None
    except RepositoryNotFoundError:
        raise SourceUnavailable(f"The Hub has no model {source!r} (or it is private); check the id.") from None
    except LocalEntryNotFoundError:
        reason = "HF_HUB_OFFLINE=1 is set" if offline else "no network"
        raise SourceUnavailable(offline_message(source, reason)) from None
    except unreachable_errors() as exc:
        raise SourceUnavailable(offline_message(source, type(exc).__name__)) from None
    path = Path(path)
    return ResolvedSource(source, path, f"hub:{source}@{path.name}", False)


def unreachable_errors() -> tuple[type[Exception], ...]:
    """What a Hub call raises when the Hub cannot be reached: OSError (requests' connection errors, a socket's) and,
    since huggingface-hub 1.0, httpx's transport errors (huggingface-hub 2 speaks httpx2), which are not OSErrors."""
    import httpx2  # noqa: PLC0415 - huggingface-hub's own client

    return (OSError, httpx2.TransportError)


def files_bar(progress: FilesProgress):
    """A tqdm class for ``snapshot_download``'s files bar that also reports (done, total) to ``progress``."""
    from tqdm.auto import tqdm  # noqa: PLC0415

    class FilesBar(tqdm):
        def update(self, n: float | None = 1) -> bool | None:
            shown = super().update(n)
            progress(int(self.n), int(self.total) if self.total else None)
            return shown

    return FilesBar


def weights_identity(resolved: ResolvedSource) -> str:
    """What a benchmark record names as the weights it measured: for a local folder the SHA-256 of its weight
    files' contents (:data:`WEIGHT_FILES`; the same in every clone, unlike the folder fingerprint, which reads
    modification times), otherwise the source's own identity (a Hub id at its commit, a replica's cache key)."""
    if not resolved.is_local or resolved.source.startswith("replica:"):
        return resolved.identity
    return "sha256:" + _weights_digest(str(resolved.path), resolved.identity)


@lru_cache(maxsize=32)
def _weights_digest(folder: str, fingerprint: str) -> str:
    """The digest of ``folder``'s weight files, read once per folder state (``fingerprint`` changes with any
    rewrite)."""
    digest = hashlib.sha256()
    root = Path(folder)
    for path in sorted({p for pattern in WEIGHT_FILES for p in root.glob(pattern) if p.is_file()}):
        digest.update(f"{path.name}\0".encode() + bytes.fromhex(file_sha256(path)))
    return digest.hexdigest()[:16]
