"""Shared fixtures: a tiny BERT question-answering model and a dense-with-zeros pruned copy.

Both are saved folders (config, weights, tokenizer) built offline with fixed seeds, so any test can
load them with ``from_pretrained`` exactly like a real checkpoint.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hypothesis import settings
from squad_data import write_tiny_squad
from transformers import BertConfig, BertForQuestionAnswering, BertTokenizerFast

# Hypothesis: in CI (CI=true) no example database in the checkout and the same examples on every run, so a
# clean clone is never failed by an example another run saved; elsewhere a fresh draw each run, examples kept.
settings.register_profile("ci", database=None, derandomize=True, print_blob=True)
if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
    settings.load_profile("ci")

WORDS = (
    "the a an of in on to is was what who where when which how many year city river capital country "
    "france paris germany berlin italy rome spain madrid largest longest first built founded named after "
    "and or by for with from it its this that are were has had have people population million"
).split()

# Pruned fixture: heads (per layer) and FFN neurons (per layer) stored as zeros, removed by compact().
PRUNED_HEADS = {0: [1, 3], 1: [0]}
PRUNED_NEURONS = {0: list(range(0, 64, 4)), 1: list(range(40))}


def write_vocab(path: Path) -> Path:
    """A small WordPiece vocabulary: specials, some words, letters, digits and ## continuations."""
    chars = list("abcdefghijklmnopqrstuvwxyz0123456789.,?!'-")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *chars, *(f"##{c}" for c in chars)]
    path.write_text("\n".join(dict.fromkeys(tokens)) + "\n", encoding="utf-8")
    return path


def tiny_config(vocab_size: int) -> BertConfig:
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=128,
        initializer_range=0.2,  # large enough that logits are not all ~0 (makes comparisons meaningful)
    )


def make_tiny_qa(folder: Path, seed: int = 0) -> tuple[BertForQuestionAnswering, BertTokenizerFast]:
    """Build, save to ``folder`` and return a seed-fixed tiny BertForQuestionAnswering + tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    write_vocab(folder / "vocab.txt")  # loaded from the folder: transformers 5 ignores vocab_file=
    tokenizer = BertTokenizerFast.from_pretrained(folder, do_lower_case=True)
    torch.manual_seed(seed)
    model = BertForQuestionAnswering(tiny_config(len(tokenizer))).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer


@torch.no_grad()
def zero_out(model: BertForQuestionAnswering, heads: dict[int, list[int]], neurons: dict[int, list[int]]) -> None:
    """Store pruning as zeros (like nn_pruning checkpoints) so that ``variants.building.prune.compact`` removes it."""
    for idx, layer in enumerate(model.bert.encoder.layer):
        size = layer.attention.self.attention_head_size
        for h in heads.get(idx, []):
            rows = slice(h * size, (h + 1) * size)
            for lin in (layer.attention.self.query, layer.attention.self.key, layer.attention.self.value):
                lin.weight[rows] = 0
                lin.bias[rows] = 0
            layer.attention.output.dense.weight[:, rows] = 0
        dead = neurons.get(idx, [])
        layer.intermediate.dense.weight[dead] = 0
        layer.intermediate.dense.bias[dead] = 0
        layer.output.dense.weight[:, dead] = 0


@pytest.fixture(scope="session")
def tiny_qa_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder with a saved tiny FP32 BertForQuestionAnswering (hidden 32, 2 layers, 4 heads) + tokenizer."""
    folder = tmp_path_factory.mktemp("tiny-qa")
    make_tiny_qa(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_pruned_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Like ``tiny_qa_dir`` but dense-with-zeros: ``compact`` removes heads ``PRUNED_HEADS`` and FFN neurons."""
    folder = tmp_path_factory.mktemp("tiny-pruned")
    model, _ = make_tiny_qa(folder, seed=1)
    zero_out(model, PRUNED_HEADS, PRUNED_NEURONS)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One artifact cache for the session, so the tiny models' ONNX variants are built once."""
    return tmp_path_factory.mktemp("artifacts")


@pytest.fixture(scope="module")
def squad_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQuAD v2 file of six questions (two unanswerable) on short contexts in the fixture vocabulary."""
    return write_tiny_squad(tmp_path_factory.mktemp("squad"))
