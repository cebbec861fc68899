"""Model sources: local folders, and Hub ids that cannot be reached."""

from __future__ import annotations

import json
import shutil

import pytest

from variants.building.sources import SourceUnavailable, resolve, weights_identity


@pytest.fixture
def offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hf" / "hub"))


def test_local_folder_resolves_with_a_fingerprint(tiny_qa_dir):
    first = resolve(str(tiny_qa_dir))
    assert first.is_local and first.path == tiny_qa_dir.resolve()
    assert first.identity.startswith("local:")
    assert resolve(str(tiny_qa_dir)).identity == first.identity


def test_uncached_hub_id_offline_gives_one_clear_sentence(offline):
    with pytest.raises(SourceUnavailable) as info:
        resolve("madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2")
    message = str(info.value)
    assert "madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2" in message
    assert "HF_HUB_OFFLINE" in message and "local" in message
    assert "Traceback" not in message and "\n" not in message
    assert info.value.__cause__ is None  # raised "from None": no chained traceback to show


def test_missing_folder_and_bad_ids(tmp_path, offline):
    with pytest.raises(SourceUnavailable, match="does not exist"):
        resolve(str(tmp_path / "nope"))
    with pytest.raises(SourceUnavailable, match="not a model folder"):
        resolve(str(tmp_path))
    with pytest.raises(SourceUnavailable, match="valid Hub model id"):
        resolve("not a valid id!!")


def test_weights_identity_follows_the_weights_not_the_folder_or_its_card(tiny_qa_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_qa_dir, copy, copy_function=shutil.copy)  # new modification times, as in a clone
    first, second = resolve(str(tiny_qa_dir)), resolve(str(copy))
    assert first.identity != second.identity
    assert weights_identity(first) == weights_identity(second)
    assert weights_identity(first).startswith("sha256:")

    (copy / "README.md").write_text("a card edited\n")
    config = json.loads((copy / "config.json").read_text())
    (copy / "config.json").write_text(json.dumps({**config, "qa_note": "edited"}))
    assert weights_identity(resolve(str(copy))) == weights_identity(first)  # what it computes is unchanged

    weights = next(p for p in copy.iterdir() if p.suffix in (".safetensors", ".bin"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert weights_identity(resolve(str(copy))) != weights_identity(first)
