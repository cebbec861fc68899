"""A baseline and its pruned partner, checked before anything is downloaded or built.

Every speedup, agreement and F1 lost on the page is the partner's against the baseline's, so they mean something
only when the partner was made from the baseline. :func:`check_pair` reads each model's ``config.json`` and
tokenizer vocabulary alone (a local folder's files; a Hub model's through ``hf_hub_download``, a few small files
and never the weights; a replica's known structure) and refuses, in one sentence that says what differs:

1. a model without a question-answering head (an architecture ending in ``ForQuestionAnswering``);
2. two model types (``bert`` against ``roberta``);
3. two tokenizer vocabularies (tokens and their ids);
4. a partner larger than its baseline (parameters counted from the config, as stored: a pruned checkpoint stored
   dense with zeros counts as many as its baseline).

A model whose config cannot be read here (a Hub model offline and not in the local cache, a folder without a
readable config.json) is not checked: the build then fails on it with its own sentence, as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from variants.building import replica
from variants.building.cache import file_sha256
from variants.building.custom import qa_refusal
from variants.building.sources import unreachable_errors
from variants.core import config

# The tokenizer files a vocabulary is read from, in order of preference (the first one a model has is used).
VOCAB_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model")
# Config keys other families name differently (DistilBERT's dim, n_layers...), as transformers' attribute maps do.
ALIASES = {
    "hidden_size": ("hidden_size", "dim", "d_model"),
    "num_hidden_layers": ("num_hidden_layers", "n_layers"),
    "num_attention_heads": ("num_attention_heads", "n_heads"),
    "intermediate_size": ("intermediate_size", "hidden_dim"),
    "max_position_embeddings": ("max_position_embeddings",),
    "vocab_size": ("vocab_size",),
}
NO_PARTNER_HINT = "name a partner pruned from this baseline, or none (--pruned none) for the baseline's own chain"


class PairRefused(ValueError):
    """A baseline and partner that are not one model and its pruned version; the message says what differs."""


@dataclass(frozen=True)
class ModelFacts:
    """What the check reads of one model: its config and its vocabulary (token -> id, or a file's digest)."""

    source: str
    config: dict[str, Any]
    vocab: dict[str, int] | str | None
    parameters: int | None  # as stored, counted from the config; None when the config does not say

    @property
    def model_type(self) -> str:
        return str(self.config.get("model_type") or "unknown")


def check_pair(baseline: str, pruned: str | None) -> None:
    """Refuse (:class:`PairRefused`) a pair that is not a model and its pruned partner; None when it is, when
    there is no partner, or when either cannot be read without the network (see the module docstring)."""
    if not pruned:
        return
    base, partner = model_facts(baseline), model_facts(pruned)
    if base is None or partner is None:
        return
    for role, facts in (("baseline", base), ("pruned partner", partner)):
        reason = qa_refusal(f"The {role} {facts.source}", facts.config)
        if reason:
            raise PairRefused(reason)
    b, p = f"the baseline {baseline}", f"the pruned partner {pruned}"
    if base.model_type != partner.model_type:
        raise PairRefused(
            f"The baseline {baseline} is a {base.model_type} model and {p} a {partner.model_type} model; "
            f"{NO_PARTNER_HINT}."
        )
    differs = vocab_difference(base.vocab, partner.vocab)
    if differs:
        raise PairRefused(
            f"The baseline {baseline} and {p} do not share a tokenizer vocabulary ({differs}); {NO_PARTNER_HINT}."
        )
    if base.parameters and partner.parameters and partner.parameters > base.parameters:
        raise PairRefused(
            f"The pruned partner {pruned} is larger than {b} (about {partner.parameters / 1e6:,.0f}M parameters "
            f"against {base.parameters / 1e6:,.0f}M); {NO_PARTNER_HINT}."
        )


def vocab_difference(a: dict[str, int] | str | None, b: dict[str, int] | str | None) -> str:
    """What differs between two vocabularies, in a few words ("" when they are the same or either is unknown)."""
    if a is None or b is None or a == b:
        return ""
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return f"{len(a):,} tokens against {len(b):,}"
        moved = sum(1 for token, i in a.items() if b.get(token) != i)
        return f"{moved:,} of {len(a):,} tokens differ"
    return "their tokenizer files differ"


# --- reading one model ----------------------------------------------------------------------------


def model_facts(source: str, revision: str | None = None) -> ModelFacts | None:
    """``source``'s config, vocabulary and size, from its small files only; None when its config cannot be read
    (a Hub model offline and not cached, a folder without a readable config.json): the build says why."""
    if source.startswith(replica.SCHEME):
        structure = replica.structure_for(source)
        kind = structure.model_type
        settings = {**structure.config, "model_type": kind, "architectures": [f"{kind.title()}ForQuestionAnswering"]}
        return ModelFacts(source, settings, read_vocab(structure.tokenizer_dir), structure.parameters(zeros_cut=False))
    folder = Path(source).expanduser()
    if folder.is_dir():
        settings = read_config(folder / "config.json")
        return ModelFacts(source, settings, read_vocab(folder), parameters(settings)) if settings else None
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        return None  # not a folder and not a Hub id: the build says so in its own sentence
    files = hub_files(source, revision)
    settings = read_config(files.get("config.json")) if files else None
    return ModelFacts(source, settings, vocab_from(files), parameters(settings)) if settings else None


def read_config(path: Path | None) -> dict[str, Any] | None:
    """A config.json's settings; None when there is none or it is not JSON (the build then fails on that
    variant alone, with its own sentence, as any broken checkpoint does)."""
    try:
        settings = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError):
        return None
    return settings if isinstance(settings, dict) else None


def read_vocab(folder: Path) -> dict[str, int] | str | None:
    return vocab_from({name: folder / name for name in VOCAB_FILES if (folder / name).is_file()})


def vocab_from(files: dict[str, Path]) -> dict[str, int] | str | None:
    """Token -> id from the first vocabulary file there is (tokenizer.json's model, vocab.txt's lines, vocab.json),
    else a SentencePiece model's digest; None when there is none."""
    for name in VOCAB_FILES:
        path = files.get(name)
        if path is None:
            continue
        if name == "vocab.txt":
            lines = Path(path).read_text(encoding="utf-8").splitlines()
            return {token: i for i, token in enumerate(lines)}
        if name.endswith(".model"):
            return "sha256:" + file_sha256(Path(path))
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        vocab = data.get("model", {}).get("vocab") if name == "tokenizer.json" else data
        if isinstance(vocab, dict):
            return {str(t): int(i) for t, i in vocab.items()}
        if isinstance(vocab, list):  # Unigram: [token, score] pairs, the id is the position
            return {str(entry[0]): i for i, entry in enumerate(vocab)}
    return None


def parameters(settings: dict[str, Any]) -> int | None:
    """Parameters as stored, from a BERT-family config (DistilBERT's names too), removed heads subtracted; None
    when the config lacks a size."""
    found = {key: next((settings[n] for n in names if isinstance(settings.get(n), int)), None)
             for key, names in ALIASES.items()}  # fmt: skip
    if found["intermediate_size"] is None and found["hidden_size"]:
        found["intermediate_size"] = 4 * found["hidden_size"]
    if any(v is None or v <= 0 for v in found.values()) or found["hidden_size"] % found["num_attention_heads"]:
        return None
    layers = found["num_hidden_layers"]
    removed = settings.get("pruned_heads") or {}
    pruned = tuple(tuple(removed.get(str(i), removed.get(i, ()))) if isinstance(removed, dict) else ()
                   for i in range(layers))  # fmt: skip
    shape = {**found, "type_vocab_size": int(settings.get("type_vocab_size") or 0)}
    structure = replica.Structure("config", shape, pruned, (found["intermediate_size"],) * layers)
    return structure.parameters(zeros_cut=False)


def hub_files(model_id: str, revision: str | None) -> dict[str, Path] | None:
    """config.json and the first vocabulary file a Hub model has, through ``hf_hub_download`` (the local cache
    offline); None when its config cannot be had without the network."""
    from huggingface_hub import hf_hub_download  # noqa: PLC0415

    options = {"revision": revision, "cache_dir": config.hub_cache(), "local_files_only": config.hub_offline()}
    files: dict[str, Path] = {}
    for name in ("config.json", *VOCAB_FILES):
        try:
            files[name] = Path(hf_hub_download(model_id, name, **options))
        except (*unreachable_errors(), ValueError):  # not there, not a Hub id, offline and not cached, no network
            if name == "config.json":
                return None  # the build says why it cannot fetch the model, in its own sentence
            continue
        if name != "config.json":
            break
    return files
