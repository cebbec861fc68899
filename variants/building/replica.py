"""Random-weight models with the exact shape of a published chain (BERT-large's, deepset's RoBERTa pair): latency only.

The published pruned checkpoint (nn_pruning's x2.63 hybrid of BERT-large on SQuAD v2) cannot be
downloaded here, but its shape is known (assets/replica/): per layer, which attention heads were
removed and how many FFN neurons are non-zero. :func:`resolve` builds, from a fixed seed, a model
folder of that shape (heads physically absent as in ``config.pruned_heads``, FFN neurons stored as
zeros, exactly as the checkpoint is stored) or the dense BERT-large baseline, caches it, and hands
it to the engine like any local checkpoint. Compaction, export and the ORT steps then run on it as
on the real models, so it measures what the chain costs at full size; its answers mean nothing.

Sources: ``replica:bert-large`` (dense), ``replica:bert-large-x2.63`` (and ``-x2.15``); ``replica:roberta-base``
and ``replica:roberta-base-l6``, deepset's ``roberta-base-squad2`` and its distilled ``tinyroberta-squad2`` (6 of
its 12 layers, nothing pruned), from the shapes their model cards and configs publish (:data:`ROBERTA_CONFIG`),
with a byte-level BPE tokenizer of RoBERTa's 50,265 tokens (assets/replica/roberta-base-tokenizer/, made by
``experiments/roberta_tokenizer.py`` from GPT-2's BPE files: the same tokens, so the same lengths).
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import lzma
import shutil
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from variants.building.cache import ArtifactCache, cache_key
from variants.core.spec import ASSETS, EMBEDDED_MODELS

log = logging.getLogger("variants.building.replica")

SCHEME = "replica:"
LATENCY_ONLY = "random weights: latency only"
STRUCTURE_FILE = ASSETS / "replica" / "madlag-bert-large-squadv2-structure.json"
# The embedded models' uncased WordPiece vocabulary is BERT-base/large uncased's (30,522 tokens).
TOKENIZER_DIR = EMBEDDED_MODELS / "minilm-squad2"
ROBERTA_TOKENIZER_DIR = ASSETS / "replica" / "roberta-base-tokenizer"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
# deepset/roberta-base-squad2's config (RobertaForQuestionAnswering): its model card and config.json, as copied into
# the project's notes; tinyroberta-squad2 is the same with 6 layers. Positions: 514 (RoBERTa counts them from the
# padding index 1 + 1), one token type.
ROBERTA_CONFIG = {
    "model_type": "roberta",
    "vocab_size": 50265,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "max_position_embeddings": 514,
    "type_vocab_size": 1,
    "layer_norm_eps": 1e-05,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "initializer_range": 0.02,
}
ROBERTA_IDS = {"roberta-base": "deepset/roberta-base-squad2", "roberta-base-l6": "deepset/tinyroberta-squad2"}
BASELINE_ID = "madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2"
CHECKPOINTS = {
    "x2.63": "madlag/bert-large-uncased-wwm-squadv2-x2.63-f82.6-d16-hybrid-v1",
    "x2.15": "madlag/bert-large-uncased-wwm-squadv2-x2.15-f83.2-d25-hybrid-v1",
}
SEED = 0
BUILDER_VERSION = 1  # bump when write_model's output changes, so cached folders are rebuilt
CONFIG_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "max_position_embeddings",
    "type_vocab_size",
    "layer_norm_eps",
    "pad_token_id",
    "initializer_range",
)


@dataclass(frozen=True)
class Structure:
    """The shape of a BERT QA model: its config and, per layer, removed heads and non-zero FFN neurons."""

    name: str
    config: dict[str, Any]
    pruned_heads: tuple[tuple[int, ...], ...]
    ffn_kept: tuple[int, ...]

    @classmethod
    def published(cls, checkpoint: str = "x2.63", path: Path = STRUCTURE_FILE) -> Structure:
        """The structure of a published pruned checkpoint (``x2.63`` or ``x2.15``), from the copied file."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))[CHECKPOINTS[checkpoint]]
        layers = sorted(data["layers"], key=lambda layer: layer["layer"])
        return cls(
            name=CHECKPOINTS[checkpoint],
            config={k: data["config"][k] for k in CONFIG_KEYS if k in data["config"]},
            pruned_heads=tuple(tuple(sorted(layer["pruned_heads"])) for layer in layers),
            ffn_kept=tuple(int(layer["ffn_kept"]) for layer in layers),
        )

    @classmethod
    def roberta(cls, layers: int = 12) -> Structure:
        """deepset's RoBERTa-base SQuAD v2 model (12 layers) or its distilled partner (6), unpruned."""
        name = ROBERTA_IDS["roberta-base" if layers == 12 else "roberta-base-l6"]
        config = {**ROBERTA_CONFIG, "num_hidden_layers": layers}
        return cls(name, config, ((),) * layers, (config["intermediate_size"],) * layers)

    @property
    def model_type(self) -> str:
        """The config's ``model_type``: "bert" (the BERT-large structures carry none) or "roberta"."""
        return self.config.get("model_type", "bert")

    @property
    def tokenizer_dir(self) -> Path:
        return unpacked(ROBERTA_TOKENIZER_DIR) if self.model_type == "roberta" else TOKENIZER_DIR

    @property
    def num_layers(self) -> int:
        return self.config["num_hidden_layers"]

    @property
    def num_heads(self) -> int:
        return self.config["num_attention_heads"]

    @property
    def hidden(self) -> int:
        return self.config["hidden_size"]

    @property
    def intermediate(self) -> int:
        return self.config["intermediate_size"]

    @property
    def head_size(self) -> int:
        return self.hidden // self.num_heads

    @property
    def heads_per_layer(self) -> list[int]:
        return [self.num_heads - len(p) for p in self.pruned_heads]

    @property
    def is_pruned(self) -> bool:
        return any(self.pruned_heads) or any(k < self.intermediate for k in self.ffn_kept)

    def dense(self, name: str = BASELINE_ID) -> Structure:
        """The unpruned model of the same config (the baseline)."""
        return replace(
            self, name=name, pruned_heads=((),) * self.num_layers, ffn_kept=(self.intermediate,) * self.num_layers
        )

    def scaled(self, num_layers: int, hidden_size: int, num_heads: int, intermediate_size: int) -> Structure:
        """A small model with the same per-layer proportions (layers picked evenly), for fast tests."""
        picks = [round(i * (self.num_layers - 1) / max(1, num_layers - 1)) for i in range(num_layers)]
        heads, ffn = [], []
        for layer, idx in enumerate(picks):
            removed = round(len(self.pruned_heads[idx]) * num_heads / self.num_heads)
            removed = min(removed, num_heads - 1)  # keep at least one head, as the published layers do
            heads.append(tuple(sorted((layer + j) % num_heads for j in range(removed))))
            ffn.append(max(1, round(self.ffn_kept[idx] * intermediate_size / self.intermediate)))
        config = {
            **self.config,
            "num_hidden_layers": num_layers,
            "hidden_size": hidden_size,
            "num_attention_heads": num_heads,
            "intermediate_size": intermediate_size,
        }
        return Structure(f"{self.name} (scaled)", config, tuple(heads), tuple(ffn))

    # --- counts ---------------------------------------------------------------------------------

    def parameters(self, zeros_cut: bool = True) -> int:
        """Parameters of the model as stored (``zeros_cut=False``: FFN at full width) or compacted."""
        h, d = self.hidden, self.head_size
        c = self.config
        total = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * h + 2 * h  # embeddings
        for heads, kept in zip(self.heads_per_layer, self.ffn_kept, strict=True):
            width = kept if zeros_cut else self.intermediate
            total += 3 * (h * heads * d + heads * d) + heads * d * h + h + 2 * h  # Q, K, V, output, LayerNorm
            total += h * width + width + width * h + h + 2 * h  # FFN in, out, LayerNorm
        return total + 2 * h + 2  # qa_outputs

    def matmul_flops(self, seq_len: int, zeros_cut: bool = True) -> int:
        """Floating-point operations (2 per multiply-add) of the matrix products at ``seq_len``, batch 1.

        Softmax, LayerNorm, GELU and the additions are left out: they are a few percent of the total
        and do not shrink in proportion with the pruning.
        """
        s, h, d = seq_len, self.hidden, self.head_size
        total = 0
        for heads, kept in zip(self.heads_per_layer, self.ffn_kept, strict=True):
            width = kept if zeros_cut else self.intermediate
            inner = heads * d
            total += 2 * s * h * inner * 3  # Q, K, V projections
            total += 2 * s * s * inner * 2  # QK^T and attention x V
            total += 2 * s * inner * h  # attention output projection
            total += 2 * s * h * width * 2  # FFN in and out
        return total + 2 * s * h * 2  # qa_outputs


def structure_for(source: str) -> Structure:
    """The structure a ``replica:`` source names."""
    name = source.removeprefix(SCHEME)
    if name in ROBERTA_IDS:
        return Structure.roberta(12 if name == "roberta-base" else 6)
    published = Structure.published()
    if name == "bert-large":
        return published.dense()
    for tag in CHECKPOINTS:
        if name == f"bert-large-{tag}":
            return published if tag == "x2.63" else Structure.published(tag)
    known = ["bert-large", *(f"bert-large-{t}" for t in CHECKPOINTS), *ROBERTA_IDS]
    raise ValueError(f"unknown replica {source!r}; known: {[SCHEME + k for k in known]}")


def write_model(structure: Structure, folder: Path, seed: int = SEED) -> None:
    """Write a loadable model folder of ``structure`` with random weights from ``seed`` (+ tokenizer).

    The dense model is drawn with transformers' own initialization; removed heads are then sliced
    out of Q/K/V and the attention output (``config.pruned_heads`` tells ``from_pretrained`` so),
    and the FFN neurons not kept (a seed-fixed random choice per layer) are zeroed: rows of
    ``intermediate.dense`` with their bias and columns of ``output.dense``, as nn_pruning stores them.
    """
    import torch  # noqa: PLC0415
    from safetensors.torch import save_file  # noqa: PLC0415
    from transformers import BertConfig, BertForQuestionAnswering, RobertaConfig, RobertaForQuestionAnswering  # noqa: PLC0415

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    roberta = structure.model_type == "roberta"
    kind, model_class = (
        (RobertaConfig, RobertaForQuestionAnswering) if roberta else (BertConfig, BertForQuestionAnswering)
    )
    settings = {k: v for k, v in structure.config.items() if k != "model_type"}
    config = kind(**settings, architectures=[model_class.__name__])
    state = model_class(config).state_dict()
    generator = torch.Generator().manual_seed(seed)
    d = structure.head_size
    for i, (removed, kept) in enumerate(zip(structure.pruned_heads, structure.ffn_kept, strict=True)):
        prefix = f"{structure.model_type}.encoder.layer.{i}."
        if removed:
            rows = torch.tensor(
                [r for h in range(structure.num_heads) if h not in removed for r in range(h * d, (h + 1) * d)]
            )
            for name in ("query", "key", "value"):
                for kind in ("weight", "bias"):
                    key = f"{prefix}attention.self.{name}.{kind}"
                    state[key] = state[key][rows].contiguous()
            key = f"{prefix}attention.output.dense.weight"
            state[key] = state[key][:, rows].contiguous()
        dead = torch.randperm(structure.intermediate, generator=generator)[kept:]
        state[f"{prefix}intermediate.dense.weight"][dead] = 0
        state[f"{prefix}intermediate.dense.bias"][dead] = 0
        state[f"{prefix}output.dense.weight"][:, dead] = 0
    config.pruned_heads = {i: list(p) for i, p in enumerate(structure.pruned_heads) if p}
    config.replica = {"of": structure.name, "seed": seed, "note": LATENCY_ONLY}
    config.to_json_file(folder / "config.json")
    save_file({k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors", metadata={"format": "pt"})
    for name in TOKENIZER_FILES:
        if (structure.tokenizer_dir / name).is_file():  # the RoBERTa tokenizer has no vocab.txt
            shutil.copy2(structure.tokenizer_dir / name, folder / name)
    log.info("wrote replica of %s (%s parameters) to %s", structure.name, f"{structure.parameters(False):,}", folder)


@functools.cache
def unpacked(folder: Path) -> Path:
    """``folder`` as a tokenizer loads it: its files, any ``NAME.xz`` unpacked to ``NAME`` (the RoBERTa tokenizer's
    2 MB ``tokenizer.json`` ships xz-compressed, 0.4 MB), in a folder of this process's, removed at exit."""
    if not any(folder.glob("*.xz")):
        return folder
    out = Path(tempfile.mkdtemp(prefix="qa-variants-tokenizer-"))
    atexit.register(shutil.rmtree, out, True)
    for path in folder.iterdir():
        if path.suffix == ".xz":
            (out / path.stem).write_bytes(lzma.decompress(path.read_bytes()))
        else:
            shutil.copy2(path, out / path.name)
    return out


def cached_model(source: str, cache_dir: Path | None = None) -> tuple[Path, str]:
    """A ``replica:`` source as a cached local model folder (built in seconds on first use), and its cache key."""
    structure = structure_for(source)
    key = model_key(structure)
    return ArtifactCache(cache_dir).get_or_build(key, lambda tmp: write_model(structure, tmp)), key


def model_place(source: str, cache_dir: Path | None = None) -> tuple[Path, str]:
    """Where :func:`cached_model` keeps ``source``'s folder, and its key, without building anything."""
    key = model_key(structure_for(source))
    return ArtifactCache(cache_dir).path(key), key


def model_key(structure: Structure) -> str:
    return "replica-" + cache_key({"structure": asdict(structure), "seed": SEED, "builder": BUILDER_VERSION})
