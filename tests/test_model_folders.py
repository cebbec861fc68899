"""Model folders that cannot give answers are refused with a sentence that says why: a base or other-task model
(transformers would add a random head), a compact store that does not match its weights or lost the folder it
shares embeddings with, a folder without a tokenizer, and a Hub repo in this project's compact format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from app_helpers import SMALL, FakeHub
from transformers import AutoModel, AutoModelForQuestionAnswering

from variants.building import custom, storage
from variants.building import prune as pruning
from variants.core.spec import VariantSpec
from variants.serving.engine import load_engine


def _compact_store(tiny_qa_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "baseline"
    AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).half().save_pretrained(base)
    student = AutoModelForQuestionAnswering.from_pretrained(base, dtype=torch.float32).eval()
    cut = pruning.Cut({0: [1, 3], 1: [0]}, {0: torch.arange(0, 64, 2), 1: torch.arange(20, 64)})
    pruning.apply_cut(student, cut)
    stored = tmp_path / "pruned"
    storage.save(student, cut.heads, cut.kept, stored, share_embeddings_with=base)
    return base, stored


def test_a_model_without_a_qa_head_is_refused_not_given_a_random_one(tiny_qa_dir, tmp_path):
    AutoModel.from_pretrained(tiny_qa_dir).save_pretrained(tmp_path / "base-model")  # the encoder alone
    with pytest.raises(ValueError, match=r"not a question-answering model: its weights have no qa_outputs"):
        storage.load_qa_model(tmp_path / "base-model")
    assert storage.load_qa_model(tiny_qa_dir).qa_outputs.out_features == 2  # a QA model loads as before


def test_a_compact_store_that_does_not_match_its_weights_says_where(tiny_qa_dir, tmp_path):
    base, stored = _compact_store(tiny_qa_dir, tmp_path)
    layout = json.loads((stored / storage.LAYOUT).read_text())
    (stored / storage.LAYOUT).write_text(json.dumps({**layout, "heads_removed": {"0": [1]}}))
    with pytest.raises(ValueError, match=r"compact.json does not match model.safetensors \(size mismatch"):
        storage.load(stored)
    (stored / storage.LAYOUT).write_text(json.dumps({"ffn_kept": layout["ffn_kept"]}))
    with pytest.raises(ValueError, match="does not say heads_removed"):
        storage.load(stored)
    (stored / storage.LAYOUT).write_text(json.dumps(layout))
    storage.load(stored)  # intact again
    shutil.rmtree(base)
    with pytest.raises(ValueError, match=r"embeddings are shared with .*baseline, which holds no model.safetensors"):
        storage.load(stored)


def test_a_folder_without_a_tokenizer_says_so(tiny_qa_dir, tmp_path, artifacts_dir):
    folder = tmp_path / "weights-only"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_qa_dir / name, folder / name)
    specs = [VariantSpec("baseline", "b", str(folder)), VariantSpec("other", "o", str(tiny_qa_dir))]
    engine = load_engine("embedded", "cpu", variant_specs=specs, fallback=False, cache_dir=artifacts_dir)
    assert "has no tokenizer" in engine.variants["baseline"].error and engine.variants["other"].ok


def test_a_hub_repo_in_the_compact_format_is_refused_before_any_download(tiny_qa_dir, tmp_path, monkeypatch):
    FakeHub(tiny_qa_dir / "config.json", {**SMALL, "compact.json": 900}).install(monkeypatch, tmp_path)
    with pytest.raises(custom.CustomModelRefused, match=r"compact\.json"):
        custom.inspect_model("someone/packed-model")
