"""Property-based tests of the decoding path (variants.answering.qa) with a stub model returning random logits.

For any context (Unicode, emoji, right-to-left, combining marks, whitespace runs) and any logits, the
answer's offsets slice the context to exactly the answer's text, a null answer is "" at (0, 0), and the
only exception is InputError, for an empty or too long question or an empty context.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from transformers import BertTokenizerFast, PreTrainedTokenizerFast

from variants.answering.qa import Answer, DecodeSettings, InputError, answer_pairs, check_pair, window_stride
from variants.core.text_check import looks_like_text

SETTINGS = DecodeSettings(max_length=48, stride=12, max_answer_length=8)
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

WORDS = ["paris", "is", "the", "capital", "of", "france", "what", "city", "1867", "largest", "people"]
PIECES = [
    *WORDS,
    "🇫🇷",
    "👩‍👩‍👧",
    "🥖",
    "باريس",
    "عاصمة",
    "פריז",
    "é",
    "e\u0301",
    "\u200b",
    "\u200f",
    "巴黎",
    "Ｐａｒｉｓ",
    "<b>",
    "&amp;",
]
SPACES = st.sampled_from([" ", "  ", "\t", "\n", "\n\n", "\u00a0", "\u2003", " \r\n "])
# Any written text: every character but those no text is made of (controls, surrogates, private use,
# unassigned), which the decoding path refuses as "does not look like text" (test_qa.py checks that).
WRITTEN = st.characters(exclude_categories=("Cc", "Cs", "Co", "Cn"))
TOKENS = st.one_of(st.sampled_from(PIECES), st.text(alphabet=WRITTEN, min_size=1, max_size=6))


def texts(min_size: int = 0, max_size: int = 60) -> st.SearchStrategy[str]:
    """Words, emoji, right-to-left and odd characters, any text, joined by runs of assorted whitespace."""
    parts = st.lists(st.tuples(TOKENS, SPACES), min_size=min_size, max_size=max_size)
    return parts.map(lambda pairs: "".join(a + b for a, b in pairs))


TEXT = texts()
CONTEXTS = st.one_of(TEXT, texts(20, 90))  # short ones and ones that take several windows


def accepted(context: str) -> bool:
    """Whether the one input check takes ``context`` (with a plain question): the strategies below that need
    an answer draw only such contexts, so they never ask the code for what it rightly refuses."""
    try:
        check_pair("what is it?", context)
    except InputError:
        return False
    return True


QUESTIONS = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
    TEXT.map(lambda t: t[:200]),  # anything, including too long for a window
    st.sampled_from(["", "  ", "\u200b?"]),
)


class RandomLogits:
    """A stand-in model: start/end logits of the right shape, random but a function of the input."""

    input_names = ("input_ids", "attention_mask", "token_type_ids")

    def __init__(self, salt: int) -> None:
        self.salt = salt

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        ids = np.ascontiguousarray(inputs["input_ids"])
        seed = int.from_bytes(hashlib.sha256(ids.tobytes() + self.salt.to_bytes(8, "little")).digest()[:8], "little")
        rng = np.random.default_rng(seed)
        scale = rng.choice([0.1, 3.0, 30.0])  # flat, peaked and very peaked distributions
        return (rng.normal(0, scale, ids.shape).astype(np.float32), rng.normal(0, scale, ids.shape).astype(np.float32))


@pytest.fixture(scope="module")
def tokenizer(tiny_qa_dir: Path) -> BertTokenizerFast:
    return BertTokenizerFast.from_pretrained(tiny_qa_dir)


def check_answer(answer: Answer, context: str) -> None:
    assert 0 <= answer.start <= answer.end <= len(context)
    assert context[answer.start : answer.end] == answer.text
    if answer.is_null:
        assert (answer.start, answer.end) == (0, 0)
    assert answer.score >= 0.0 and 0.0 <= answer.null_score <= 1.0 + 1e-6


@PROPERTY
@given(context=CONTEXTS, question=QUESTIONS, salt=st.integers(0, 2**32), align=st.booleans())
def test_offsets_slice_the_context_to_the_answer(tokenizer, context, question, salt, align) -> None:
    options = DecodeSettings(**{**SETTINGS.__dict__, "align_to_words": align})
    try:
        (answer,) = answer_pairs(RandomLogits(salt), tokenizer, [(question, context)], options)
    except InputError as exc:  # it names an input that is really wrong (where both are, either will do)
        bad_question = not question.strip() or not looks_like_text(question)
        bad_context = not context.strip() or not looks_like_text(context)  # e.g. zero-width spaces: nothing visible
        if exc.field == "context":
            assert bad_context
        else:
            assert exc.field == "question" and (bad_question or "too long" in str(exc))
        return
    assert question.strip() and context.strip()
    check_answer(answer, context)


@PROPERTY
@given(pairs=st.lists(st.tuples(st.sampled_from(WORDS), CONTEXTS.filter(accepted)), min_size=1, max_size=4))
def test_batches_answer_each_pair_from_its_own_context(tokenizer, pairs) -> None:
    answers = answer_pairs(RandomLogits(7), tokenizer, pairs, SETTINGS)
    assert len(answers) == len(pairs)
    for answer, (_question, context) in zip(answers, pairs, strict=True):
        check_answer(answer, context)


@PROPERTY
@given(context=CONTEXTS.filter(accepted), salt=st.integers(0, 2**32))
def test_never_answering_gives_the_null_answer(tokenizer, context, salt) -> None:
    """When [CLS] takes all the probability, the answer is the null one, whatever the context."""

    class NullModel(RandomLogits):
        def run(self, inputs):
            start, end = super().run(inputs)
            start[:, 0] = end[:, 0] = 1e4  # [CLS] is at position 0 for BERT
            return start, end

    (answer,) = answer_pairs(NullModel(salt), tokenizer, [("what is it?", context)], SETTINGS)
    assert (answer.text, answer.start, answer.end) == ("", 0, 0)


def _trained(model, trainer, pre_tokenizer, decoder, pair_template: str) -> PreTrainedTokenizerFast:
    """A tokenizer of ``model``'s family trained on the property tests' words, with [CLS]/[SEP] pairs."""
    from tokenizers import Tokenizer, processors  # noqa: PLC0415

    raw = Tokenizer(model)
    raw.pre_tokenizer, raw.decoder = pre_tokenizer, decoder
    corpus = [" ".join(WORDS[i:] + WORDS[:i]) + " ( ) ? , . - 1 2 3 a b c" for i in range(len(WORDS))]
    raw.train_from_iterator(corpus, trainer)
    ids = [("[CLS]", raw.token_to_id("[CLS]")), ("[SEP]", raw.token_to_id("[SEP]"))]
    raw.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair=pair_template, special_tokens=ids)
    return PreTrainedTokenizerFast(tokenizer_object=raw, cls_token="[CLS]", sep_token="[SEP]", unk_token="[UNK]")


@pytest.fixture(scope="module")
def tokenizer_families(tokenizer) -> dict[str, PreTrainedTokenizerFast]:
    """WordPiece (the tiny BERT's), byte-level BPE (GPT-2/RoBERTa style) and Unigram with SentencePiece's
    word-start marker, each with its own count of special tokens in a pair."""
    from tokenizers import decoders, models, pre_tokenizers, trainers  # noqa: PLC0415

    specials = ["[UNK]", "[CLS]", "[SEP]"]
    bytes_alphabet = pre_tokenizers.ByteLevel.alphabet()
    return {
        "wordpiece": tokenizer,
        "byte-level BPE": _trained(
            models.BPE(unk_token="[UNK]"),
            trainers.BpeTrainer(vocab_size=300, special_tokens=specials, initial_alphabet=bytes_alphabet),
            pre_tokenizers.ByteLevel(add_prefix_space=True),
            decoders.ByteLevel(),
            "[CLS] $A [SEP] [SEP] $B [SEP]",
        ),
        "unigram + metaspace": _trained(
            models.Unigram(),
            trainers.UnigramTrainer(vocab_size=120, special_tokens=specials, unk_token="[UNK]"),
            pre_tokenizers.Metaspace(),
            decoders.Metaspace(),
            "[CLS] $A [SEP] $B [SEP]",
        ),
        # DeBERTa-v2/v3's fast tokenizer (split_by_punct): a word-start marker before every piece, "a?b" -> 6 tokens
        "punctuation split + metaspace always": _trained(
            models.Unigram(),
            trainers.UnigramTrainer(vocab_size=120, special_tokens=specials, unk_token="[UNK]"),
            pre_tokenizers.Sequence([pre_tokenizers.Punctuation(), pre_tokenizers.Metaspace(prepend_scheme="always")]),
            decoders.Metaspace(),
            "[CLS] $A [SEP] $B [SEP]",
        ),
    }


ASCII_QUESTIONS = st.text(alphabet=st.sampled_from("abcdefghij xyz?()-.,1\t'"), max_size=40)
PUNCTUATION_DENSE = st.text(alphabet=st.sampled_from("a?(.-"), min_size=8, max_size=30)  # two tokens a character


@PROPERTY
@example(question="a?b?c?d?e?f?g?h?i?j", stride=12)  # 19 characters, 37 tokens after a punctuation split
@given(question=st.one_of(ASCII_QUESTIONS, PUNCTUATION_DENSE, QUESTIONS), stride=st.sampled_from([2, 6, 12]))
def test_the_stride_known_without_tokenizing_is_the_stride_counted(tokenizer_families, question, stride) -> None:
    """window_stride skips tokenizing short ASCII questions; it gives the stride (or the error) that
    counting the question's tokens gives, for every tokenizer family, around the length where it changes."""
    options = DecodeSettings(max_length=48, stride=stride)
    for name, family in tokenizer_families.items():
        counted = len(family([question], add_special_tokens=False)["input_ids"][0])
        room = options.max_length - counted - family.num_special_tokens_to_add(pair=True)
        if room < 8:
            with pytest.raises(InputError, match="too long"):
                window_stride(family, [question], options)
        else:
            assert window_stride(family, [question], options) == min(stride, room // 2), name
