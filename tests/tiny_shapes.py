"""Tiny question-answering models of other shapes than the conftest's BERT (and MiniLM-L6's), saved as folders.

A BERT of 3 layers with a wider FFN and hidden size, a DistilBERT (``transformer.layer[i]``, ``q_lin``...,
``ffn.lin1``) and a RoBERTa (``roberta.encoder.layer[i]``, byte-level BPE tokenizer): each built offline,
seed-fixed, with its tokenizer, so that the training commands take it as a user's fine-tuned model.
"""

from __future__ import annotations

from pathlib import Path

import torch
from squad_data import CONTEXT, CONTEXTS, QUESTIONS
from transformers import (
    BertConfig,
    BertForQuestionAnswering,
    BertTokenizerFast,
    DistilBertConfig,
    DistilBertForQuestionAnswering,
    DistilBertTokenizerFast,
    RobertaConfig,
    RobertaForQuestionAnswering,
    RobertaTokenizerFast,
)

from conftest import WORDS, write_vocab

SHAPES = ("bert-3-layers", "distilbert", "roberta")


def _wordpiece(folder: Path, cls):
    write_vocab(folder / "vocab.txt")
    return cls.from_pretrained(folder, do_lower_case=True)


def _byte_level_bpe(folder: Path) -> RobertaTokenizerFast:
    """A byte-level BPE tokenizer (RoBERTa's kind) trained on the fixture words and the test contexts."""
    from tokenizers import ByteLevelBPETokenizer  # noqa: PLC0415

    bpe = ByteLevelBPETokenizer()
    texts = [" ".join(WORDS), CONTEXT, *CONTEXTS, *(q for q, _, _ in QUESTIONS)] * 3
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    bpe.train_from_iterator(texts, vocab_size=400, min_frequency=1, special_tokens=specials, show_progress=False)
    bpe.save_model(str(folder))
    return RobertaTokenizerFast.from_pretrained(folder)  # from the folder: transformers 5 ignores vocab_file=


def make_tiny(shape: str, folder: Path, seed: int = 0):
    """Build, save to ``folder`` and return a tiny QA model of ``shape`` (one of :data:`SHAPES`)."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    if shape == "bert-3-layers":  # 3 layers, hidden 48, 4 heads of 12, FFN 96 (MiniLM-L6: 6, 384, 12 of 32, 1536)
        tokenizer = _wordpiece(folder, BertTokenizerFast)
        config = BertConfig(vocab_size=len(tokenizer), hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                            intermediate_size=96, max_position_embeddings=128, initializer_range=0.2)  # fmt: skip
        model = BertForQuestionAnswering(config)
    elif shape == "distilbert":  # 2 layers, dim 32, 4 heads of 8, FFN 48
        tokenizer = _wordpiece(folder, DistilBertTokenizerFast)
        config = DistilBertConfig(vocab_size=len(tokenizer), dim=32, n_layers=2, n_heads=4, hidden_dim=48,
                                  max_position_embeddings=128, initializer_range=0.2)  # fmt: skip
        model = DistilBertForQuestionAnswering(config)
    elif shape == "roberta":  # 2 layers, hidden 32, 2 heads of 16, FFN 80
        tokenizer = _byte_level_bpe(folder)
        config = RobertaConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=80, max_position_embeddings=130, type_vocab_size=1, pad_token_id=1,
                               initializer_range=0.2)  # fmt: skip
        model = RobertaForQuestionAnswering(config)
    else:
        raise ValueError(f"unknown shape {shape!r}: one of {SHAPES}")
    model.eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model, tokenizer
