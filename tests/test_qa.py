"""The one QA decoding path: windows, spans, null answers, offsets (agreement with transformers' pipeline, whose
answers come from the peers' environment, is in tests/test_peers.py)."""

from __future__ import annotations

import math
import random
import re

import numpy as np
import pytest
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from variants.answering.overlap import log_prior, paragraph_prior, sentence_starts, token_sentences, window_overlap
from variants.answering.qa import (
    WINDOW_RULES,
    DecodeSettings,
    InputError,
    answer,
    answer_pairs,
    model_passes,
    parse_null_threshold,
    resolve_null_threshold,
    tokenize,
    window_passes,
    with_null_decision,
)
from variants.answering.runtime import TorchQAModel

FILLER = "the city of rome was founded in the year one and it is the capital of italy . "


class KeywordModel:
    """A logits model that points at one word: start and end logits high on its token.

    It stands in for a trained model when a test needs to know where the answer must be, so the
    windowing and offset logic can be checked exactly. ``null`` raises the [CLS] logits instead.
    """

    input_names = ("input_ids", "attention_mask", "token_type_ids")

    def __init__(self, token_id: int, null: bool = False) -> None:
        self.token_id, self.null = token_id, null
        self.calls = 0

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        self.calls += 1
        ids = inputs["input_ids"]
        logits = np.where(ids == self.token_id, 8.0, 0.0).astype(np.float32)
        logits[:, 0] = 12.0 if self.null else -2.0
        return logits, logits.copy()


@pytest.fixture(scope="module")
def tokenizer(tiny_qa_dir):
    return AutoTokenizer.from_pretrained(tiny_qa_dir)


def test_long_context_is_answered_from_its_last_window(tokenizer):
    context = FILLER * 40 + "the largest river is berlin ."
    settings = DecodeSettings(max_length=64, stride=16)
    windows = tokenize(tokenizer, [("what is the largest river ?", context)], settings)
    assert len(windows.owner) > 5
    model = KeywordModel(tokenizer.convert_tokens_to_ids("berlin"))
    ans = answer(model, tokenizer, "what is the largest river ?", context, settings)
    assert ans.text == "berlin"
    assert context[ans.start : ans.end] == "berlin"
    assert ans.start == context.rindex("berlin")


def test_null_answer_when_cls_wins(tokenizer):
    model = KeywordModel(tokenizer.convert_tokens_to_ids("paris"), null=True)
    ans = answer(model, tokenizer, "where ?", "the capital of france is paris .")
    assert ans.is_null and ans.text == "" and (ans.start, ans.end) == (0, 0)
    assert ans.score == ans.null_score > ans.span_score


def test_null_threshold_moves_the_decision(tokenizer):
    model = KeywordModel(tokenizer.convert_tokens_to_ids("paris"), null=True)
    context = "the capital of france is paris ."
    null = answer(model, tokenizer, "where ?", context)
    # In one window the margin is BERT's logit difference: (12 + 12) - (8 + 8) for [CLS] against "paris".
    assert null.is_null and null.null_margin == pytest.approx(8.0, abs=1e-3)
    assert answer(model, tokenizer, "where ?", context, DecodeSettings(null_threshold=7.9)).is_null
    lenient = answer(model, tokenizer, "where ?", context, DecodeSettings(null_threshold=8.1))
    assert lenient.text == "paris"
    without = answer(model, tokenizer, "where ?", context, DecodeSettings(handle_impossible=False))
    assert without.text == "paris"


def test_deciding_later_gives_the_answers_of_decoding_at_a_threshold(tokenizer):
    paris = tokenizer.convert_tokens_to_ids("paris")
    context = "the capital of france is paris ."
    for model in (KeywordModel(paris), KeywordModel(paris, null=True)):
        spans = answer(model, tokenizer, "where ?", context, DecodeSettings(handle_impossible=False))
        for threshold in (-20.0, 0.0, 7.9, 8.1, 20.0):
            decided = answer(model, tokenizer, "where ?", context, DecodeSettings(null_threshold=threshold))
            assert with_null_decision(spans, threshold) == decided
            # An answer already decided (e.g. at the engine's threshold) is decided again from its guess.
            for earlier in (-20.0, 20.0):
                at_earlier = answer(model, tokenizer, "where ?", context, DecodeSettings(null_threshold=earlier))
                assert with_null_decision(at_earlier, threshold) == decided


def test_threshold_modes_parse_from_text():
    assert parse_null_threshold("0") == 0.0 and parse_null_threshold(" -4.5 ") == -4.5
    assert parse_null_threshold("Calibrated") == "calibrated" and parse_null_threshold(2) == 2.0
    for bad in ("", "auto", "nan", float("nan")):
        with pytest.raises(ValueError, match="null threshold"):
            parse_null_threshold(bad)
    assert resolve_null_threshold("calibrated", -6.5) == -6.5
    assert resolve_null_threshold("calibrated", None) == 0.0  # a model without one: the pipeline rule
    assert resolve_null_threshold(1.5, -6.5) == 1.5


def test_answers_widen_to_whole_words(tokenizer):
    # "germanyx" is split into word pieces; the model points at a piece inside the word.
    context = "the country is germanyx ."
    piece = tokenizer.tokenize("germanyx")[-1]
    ans = answer(KeywordModel(tokenizer.convert_tokens_to_ids(piece)), tokenizer, "what ?", context)
    assert ans.text == "germanyx"


def test_batch_of_pairs_matches_one_by_one(tiny_qa_dir, tokenizer):
    model = TorchQAModel(AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir))
    settings = DecodeSettings(max_length=64, stride=16)
    pairs = [
        ("what is the capital ?", "paris is the capital of france ."),
        ("who built it ?", FILLER * 6 + "it was built by the people of rome ."),
        ("how many ?", "the population is one million people in berlin ."),
    ]
    together = answer_pairs(model, tokenizer, pairs, settings)
    alone = [answer(model, tokenizer, q, c, settings) for q, c in pairs]
    for a, b in zip(together, alone, strict=True):
        assert (a.text, a.start, a.end) == (b.text, b.start, b.end)
        assert a.score == pytest.approx(b.score, abs=1e-5)


class PassRecorder(KeywordModel):
    """A KeywordModel that caps the tokens of a pass, as ONNX Runtime on the CPU does, and records each pass's
    shape."""

    def __init__(self, token_id: int, pass_tokens: int | None) -> None:
        super().__init__(token_id)
        self.pass_tokens, self.shapes = pass_tokens, []

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        self.shapes.append(inputs["input_ids"].shape)
        return super().run(inputs)


@pytest.mark.parametrize(("pass_tokens", "per_pass"), [(None, 32), (128, 2), (64, 1), (10, 1)])
def test_a_models_token_cap_splits_the_windows_into_smaller_passes(tokenizer, pass_tokens, per_pass):
    context = FILLER * 40 + "the largest river is berlin ."
    settings = DecodeSettings(max_length=64, stride=16)
    n = len(tokenize(tokenizer, [("what is the largest river ?", context)], settings).owner)
    model = PassRecorder(tokenizer.convert_tokens_to_ids("berlin"), pass_tokens)
    ans = answer(model, tokenizer, "what is the largest river ?", context, settings)
    assert ans.text == "berlin" and ans.start == context.rindex("berlin")
    assert [s[0] for s in model.shapes] == [min(per_pass, n - lo) for lo in range(0, n, per_pass)]


class UnmaskedRecorder(PassRecorder):
    """A model without an attention-mask input: its passes run at the full padded width, and are packed so."""

    input_names = ("input_ids", "token_type_ids")


def test_a_model_without_a_mask_input_gets_full_width_passes_within_its_cap(tokenizer):
    settings = DecodeSettings(max_length=64, stride=16)
    pairs = [("where ?", "berlin is big ."), ("who ?", "berlin ."), ("when ?", "in berlin today .")]
    pairs += [("what is the largest river ?", FILLER * 6 + "the largest is berlin .")]
    windows = tokenize(tokenizer, pairs, settings)
    width = windows.context_mask.shape[1]
    model = UnmaskedRecorder(tokenizer.convert_tokens_to_ids("berlin"), 2 * width)
    answer_pairs(model, tokenizer, pairs, settings)
    assert all(w == width and n * w <= 2 * width for n, w in model.shapes)
    planned = [(rows.stop - rows.start, w) for rows, w in model_passes(model, windows, settings.batch_size)]
    assert planned == [tuple(shape) for shape in model.shapes]


def test_passes_are_packed_by_each_windows_own_length(tokenizer):
    """Short windows of other questions share a pass that one long window would have limited to two."""
    settings = DecodeSettings(max_length=64, stride=16)
    pairs = [("where ?", "berlin is big ."), ("what is the largest river ?", FILLER * 6 + "the largest is berlin .")]
    pairs += [("who ?", "berlin ."), ("when ?", "in berlin today .")]
    windows = tokenize(tokenizer, pairs, settings)
    lengths = np.asarray(windows.encoding["attention_mask"]).sum(axis=1)
    model = PassRecorder(tokenizer.convert_tokens_to_ids("berlin"), 128)
    answers = answer_pairs(model, tokenizer, pairs, settings)
    assert all(a.text == "berlin" for a in answers)
    rows = 0
    for count, width in model.shapes:  # each pass is cut to its own longest window and holds at most 128 tokens
        assert width == lengths[rows : rows + count].max() and (count == 1 or count * width <= 128)
        rows += count
    assert rows == len(lengths) and len(model.shapes) < len(lengths)
    planned = [(rows.stop - rows.start, width) for rows, width in model_passes(model, windows, settings.batch_size)]
    assert planned == [tuple(shape) for shape in model.shapes]  # what the profile counts is what was run


def test_window_passes():
    assert window_passes(np.array([64] * 5), 32) == [slice(0, 5)]
    assert window_passes(np.array([64] * 5), 2) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert window_passes(np.array([64] * 5), 32, 128) == [slice(0, 2), slice(2, 4), slice(4, 5)]
    assert window_passes(np.array([10, 10, 64, 10, 10, 10]), 32, 64) == [slice(0, 2), slice(2, 3), slice(3, 6)]
    assert window_passes(np.array([200, 10]), 32, 64) == [slice(0, 1), slice(1, 2)]  # longer than the cap: alone
    assert window_passes(np.array([], dtype=int), 32, 64) == []


def test_bad_input_gives_clear_messages(tokenizer):
    model = KeywordModel(5)
    with pytest.raises(InputError, match="Please type a question"):
        answer(model, tokenizer, "  ", "some context")
    with pytest.raises(InputError, match="Please paste a context"):
        answer(model, tokenizer, "why ?", "\n")
    with pytest.raises(InputError, match="question is too long"):
        answer(model, tokenizer, "why " * 400, "context", DecodeSettings(max_length=64))
    assert model.calls == 0


def test_unicode_emoji_and_rtl_text_do_not_break_offsets(tokenizer):
    context = "Ünïcödé 🙂 text — مرحبا بالعالم — the capital is paris ."
    ans = answer(KeywordModel(tokenizer.convert_tokens_to_ids("paris")), tokenizer, "où ?", context)
    assert ans.text == "paris" and context[ans.start : ans.end] == "paris"


class WindowedModel:
    """Logits by token: ``decoy`` everywhere it appears, ``answer`` higher; [CLS] high in windows without
    the answer token (``null_elsewhere``) and low in the window that holds it."""

    input_names = ("input_ids", "attention_mask", "token_type_ids")

    def __init__(self, decoy: int, answer: int, decoy_logit: float, null_elsewhere: float) -> None:
        self.decoy, self.answer, self.decoy_logit, self.null_elsewhere = decoy, answer, decoy_logit, null_elsewhere

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        ids = inputs["input_ids"]
        logits = np.where(ids == self.decoy, self.decoy_logit, 0.0) + np.where(ids == self.answer, 9.0, 0.0)
        has_answer = (ids == self.answer).any(axis=1)
        logits[:, 0] = np.where(has_answer, -2.0, self.null_elsewhere)
        return logits.astype(np.float32), logits.astype(np.float32).copy()


def test_window_rules_differ_where_a_name_repeats_over_windows(tokenizer):
    """A name in every window against the one window with the answer: the pipeline's sum crowns the
    repeated name with a summed score above 1; the best single window finds the answer; what is shown
    is a probability either way."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    quiet = "the people of the city built it in the first year . " * 4  # no "rome": the last window's own
    context = FILLER * 6 + quiet + "the river is in madrid ."  # "rome" in every other window
    model = WindowedModel(decoy, gold, decoy_logit=8.0, null_elsewhere=5.0)
    shown = {}
    for rule in WINDOW_RULES:
        settings = DecodeSettings(max_length=48, stride=16, windows=rule)
        shown[rule] = answer(model, tokenizer, "which river ?", context, settings)
        assert 0.0 <= shown[rule].score <= 1.0
    assert shown["pipeline"].text == "rome" and shown["pipeline"].ranked_score > 1.0
    assert shown["max"].text == shown["window"].text == "madrid"


def test_the_window_rule_takes_the_null_of_the_best_spans_own_window(tokenizer):
    """Where the best span's window says "no answer" strongly, the window rule refuses, while "max" sets
    that span against the lowest null anywhere (a window that holds nothing)."""
    decoy = tokenizer.convert_tokens_to_ids("rome")
    context = "the capital is rome . " + "the city was founded in the year one . " * 8

    class NullBesideTheName:  # [CLS] high in the window with "rome", low (and nothing else high) elsewhere
        input_names = WindowedModel.input_names

        def run(self, inputs):
            ids = inputs["input_ids"]
            logits = np.where(ids == decoy, 7.0, 0.0)
            logits[:, 0] = np.where((ids == decoy).any(axis=1), 9.0, -2.0)
            return logits.astype(np.float32), logits.astype(np.float32).copy()

    model = NullBesideTheName()
    quiet = dict(max_length=48, stride=16)
    by_max = answer(model, tokenizer, "which city ?", context, DecodeSettings(**quiet, windows="max"))
    by_window = answer(model, tokenizer, "which city ?", context, DecodeSettings(**quiet, windows="window"))
    assert by_max.text == "rome"
    assert by_window.text == "" and by_window.guess == "rome"


def test_the_odds_rule_takes_the_window_most_sure_of_its_span_against_no_answer(tokenizer):
    """A window that rates "rome" well but "no answer" nearly as well, against one that rates "madrid" a
    little lower and "no answer" not at all: probabilities and raw logits pick "rome", the odds against each
    window's own null pick "madrid", and its decision is that window's."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    context = "the capital is rome . " + "the city was founded in the year one . " * 8 + "the river is in madrid ."

    class UnsureBesideTheName:  # [CLS] high in the window with "rome", low in every other
        input_names = WindowedModel.input_names

        def run(self, inputs):
            ids = inputs["input_ids"]
            logits = np.where(ids == decoy, 8.0, np.where(ids == gold, 4.0, 0.0))
            logits[:, 0] = np.where((ids == decoy).any(axis=1), 7.5, -2.0)
            return logits.astype(np.float32), logits.astype(np.float32).copy()

    model = UnsureBesideTheName()
    shown = {}
    for rule in WINDOW_RULES:
        shown[rule] = answer(model, tokenizer, "which city ?", context, DecodeSettings(48, 16, windows=rule))
    assert shown["max"].text == shown["window"].text == shown["logits"].text == "rome"
    odds = shown["odds"]
    assert odds.text == "madrid" and 0.0 < odds.score <= 1.0 and odds.null_score < 1e-3
    assert odds.null_margin == pytest.approx(math.log(odds.null_score / odds.span_score))


class SureOfBoth:
    """Rates one token ("rome") a little surer than another ("madrid") as an answer; [CLS] low in every window."""

    input_names = WindowedModel.input_names

    def __init__(self, decoy: int, gold: int) -> None:
        self.decoy, self.gold = decoy, gold

    def run(self, inputs):
        ids = inputs["input_ids"]
        logits = np.where(ids == self.decoy, 8.0, np.where(ids == self.gold, 6.0, 0.0))
        logits[:, 0] = -2.0
        return logits.astype(np.float32), logits.astype(np.float32).copy()


def test_the_focus_rule_takes_the_window_that_reads_like_the_question(tokenizer):
    """Two windows, each sure of its span against its own null: "odds" takes the surer one ("rome", in a
    window that shares no word of the question but "the"), "focus" the one that holds the question's words
    ("madrid", beside "river flows through"), decided against that window's own null; at weight 0 it is
    "odds" again."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    context = "the capital is rome . " + "the city was founded in the year one . " * 8
    context += "the river flows through madrid ."
    question = "which river flows through the city ?"

    def asked(**fields):
        return answer(SureOfBoth(decoy, gold), tokenizer, question, context, DecodeSettings(48, 16, **fields))

    assert asked(windows="odds").text == "rome"
    focus = asked(windows="focus", focus=1.0)
    assert focus.text == "madrid" and 0.0 < focus.score <= 1.0 and focus.null_score < 1e-3
    assert focus.null_margin == pytest.approx(math.log(focus.null_score / focus.span_score))
    assert asked(windows="focus", focus=0.0).text == "rome"


def test_window_overlap_favours_the_window_with_the_questions_rarer_words(tokenizer):
    """BM25 over the windows' token ids: the window with "river flows" scores highest, a question word in
    every window ("the") adds little, and the prior over one pair's windows is a distribution that is flat
    at weight 0 and 0 for a pair of one window."""
    context = "the capital is rome . " + "the city was founded in the year one . " * 8 + "the river flows here ."
    pairs = [("which river flows ?", context), ("which river flows ?", "the river flows here .")]
    windows = tokenize(tokenizer, pairs, DecodeSettings(48, 16))
    ids = np.asarray(windows.encoding["input_ids"])
    scores = window_overlap(ids, windows.question_mask, windows.context_mask, windows.owner)
    first = np.flatnonzero(windows.owner == 0)
    assert len(first) >= 3 and int(np.argmax(scores[first])) == len(first) - 1
    assert scores[first][:-1].max() < 0.5 * scores[first][-1]
    for weight in (0.0, 1.0):
        prior = log_prior(scores, windows.owner, weight)
        assert np.exp(prior[first]).sum() == pytest.approx(1.0)
        assert prior[windows.owner == 1] == pytest.approx(0.0)
    assert log_prior(scores, windows.owner, 0.0)[first] == pytest.approx(-math.log(len(first)))


def test_an_unknown_window_rule_is_refused(tokenizer):
    with pytest.raises(ValueError, match="windows rule"):
        answer(KeywordModel(5), tokenizer, "where ?", "paris", DecodeSettings(windows="sum"))


def test_random_bytes_as_a_context_get_a_clear_message_not_an_answer(tokenizer):
    noise = bytes(random.Random(0).randrange(256) for _ in range(2000)).decode("utf-8", errors="replace")
    with pytest.raises(InputError, match="does not look like text") as raised:
        answer(KeywordModel(5), tokenizer, "what is it ?", noise)
    assert raised.value.field == "context"
    assert answer(KeywordModel(5), tokenizer, "what is it ?", "paris\tis\nthe capital .").text  # layout is text


def test_the_logits_rule_ranks_spans_by_raw_logits_across_windows(tokenizer):
    """A window with nothing good in it puts nearly all its probability on a weak span by normalizing
    alone; BERT's rule (raw start + end logits across windows) keeps the strong span of the window that
    holds the answer, and its null margin is the logits' (lowest null logits - the span's)."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    context = "the capital is rome . " + "the city was founded in the year one . " * 6 + "it is madrid ."

    class Crowded:  # "madrid" strong (8) among many middling tokens (6); "rome" weak (3) among very low ones
        input_names = WindowedModel.input_names

        def run(self, inputs):
            ids = inputs["input_ids"]
            has_gold = (ids == gold).any(axis=1, keepdims=True)
            logits = np.where(has_gold, 6.0, -6.0) + np.zeros(ids.shape)
            logits = np.where(ids == gold, 8.0, np.where(ids == decoy, 3.0, logits))
            logits[:, 0] = -1.0
            return logits.astype(np.float32), logits.astype(np.float32).copy()

    quiet = dict(max_length=48, stride=16)
    by_max = answer(Crowded(), tokenizer, "which city ?", context, DecodeSettings(**quiet, windows="max"))
    by_logits = answer(Crowded(), tokenizer, "which city ?", context, DecodeSettings(**quiet, windows="logits"))
    assert by_max.text == "rome" and by_logits.text == "madrid"
    assert 0.0 < by_logits.score <= 1.0 and by_logits.score == by_logits.span_score
    assert math.isclose(by_logits.null_margin, -1.0 * 2 - 8.0 * 2, abs_tol=1e-3)


def test_the_paragraph_weight_takes_the_answer_in_the_paragraph_the_question_was_asked_of(tokenizer):
    """Two spans in different paragraphs and windows, each sure against its own null: "near" without its
    weights takes the surer one ("rome", in a paragraph that shares no rare word of the question); with a
    paragraph weight the one in the paragraph that holds the question's words ("madrid", though further
    from them than any span radius), decided against its own window's null. Without blank lines the context
    is one paragraph and the weight changes nothing."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    gold_paragraph = "the river flows through the valley . " + "people came in the year one . " * 3 + "it is madrid ."
    parts = ["the capital is rome .", "the city was founded in the year one . " * 6, gold_paragraph]
    question = "which river flows through the valley ?"

    def asked(context, **fields):
        settings = DecodeSettings(48, 16, windows="near", focus=0.0, near=0.0, **fields)
        return answer(SureOfBoth(decoy, gold), tokenizer, question, context, settings)

    paragraphs = "\n\n".join(parts)
    assert asked(paragraphs).text == "rome"
    weighed = asked(paragraphs, paragraph=2.0)
    assert weighed.text == "madrid" and 0.0 < weighed.score <= 1.0 and weighed.null_score < 1e-3
    assert weighed.null_margin == pytest.approx(math.log(weighed.null_score / weighed.span_score))
    assert asked(" ".join(parts), paragraph=2.0).text == "rome"  # one paragraph: no weight to give


def test_paragraph_prior_counts_each_token_once_and_favours_the_questions_paragraph():
    """Two overlapping windows over a context of three paragraphs: the shared tokens count once, the
    paragraph holding both query terms gets the highest prior, the priors are a distribution, and a
    context of one paragraph gets 0."""
    context = "a b\n\nc d\n\ne f"  # paragraphs start at characters 0, 5 and 10
    ids = np.array([[1, 2, 3, 4], [3, 4, 5, 6]])  # a b c d | c d e f: "c d" in both windows
    offsets = np.array([[[0, 1], [2, 3], [5, 6], [7, 8]], [[5, 6], [7, 8], [10, 11], [12, 13]]])
    mask = np.ones((2, 4), dtype=bool)
    starts, prior = paragraph_prior(context, ids, offsets, mask, np.array([0, 1]), np.array([3, 4]), 1.0)
    assert starts.tolist() == [0, 5, 10]
    assert int(np.argmax(prior)) == 1 and np.exp(prior).sum() == pytest.approx(1.0)
    assert prior[0] == pytest.approx(prior[2])
    whole_ids = np.array([[1, 2, 3, 4, 5, 6]])  # the same tokens in one window, each once
    whole_offsets = np.concatenate([offsets[0], offsets[1][2:]])[None]
    once = paragraph_prior(context, whole_ids, whole_offsets, np.ones((1, 6), dtype=bool), np.array([0]),
                           np.array([3, 4]), 1.0)[1]  # fmt: skip
    assert once == pytest.approx(prior)  # the windows' overlap did not count "c d" twice
    assert paragraph_prior("a b c d", ids, offsets, mask, np.array([0, 1]), np.array([3]), 1.0)[1].tolist() == [0.0]


def test_the_near_rule_takes_the_span_beside_the_questions_words(tokenizer):
    """Two spans in the same window (so the same window weight): "focus" takes the surer one ("rome", beside
    "the capital is"), "near" the one whose surroundings are the question's rarer words ("madrid", after
    "river flows through"), decided against that window's own null; at weight 0 it is "focus" again, and on
    a context of one window every rule agrees."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    tail = "the capital is rome . the people built it . the river flows through madrid ."
    context = "the city was founded in the year one . " * 8 + tail
    question = "which river flows through the city ?"

    def asked(text=context, **fields):
        return answer(SureOfBoth(decoy, gold), tokenizer, question, text, DecodeSettings(48, 16, **fields))

    assert asked(windows="focus").text == "rome"
    near = asked(windows="near", near=1.0, near_radius=4, near_sentence=False)
    assert near.text == "madrid" and 0.0 < near.score <= 1.0 and near.null_score < 1e-3
    assert near.null_margin == pytest.approx(math.log(near.null_score / near.span_score))
    assert asked(windows="near", near=0.0, near_radius=4, near_sentence=False).text == "rome"
    one_window = asked(tail, windows="near", near=1.0, near_radius=4, near_sentence=False)
    assert one_window.text == "rome"  # as every rule


def test_near_can_take_a_spans_sentence_as_its_surroundings(tokenizer):
    """The question's words end the sentence before "rome" (within 4 tokens of it) and open the long sentence
    that ends with "madrid" (more than 4 tokens before it): four tokens either side credit "rome", its sentence
    credits "madrid"; on one window every rule agrees, sentence or not."""
    decoy, gold = tokenizer.convert_tokens_to_ids(["rome", "madrid"])
    tail = "the longest river . rome was built . "
    tail += "the longest river of the country was named after people from spain by madrid ."
    context = "the city was founded in the year one . " * 16 + tail
    question = "which river is the longest in the country ?"

    def asked(text=context, **fields):
        return answer(SureOfBoth(decoy, gold), tokenizer, question, text, DecodeSettings(64, 16, **fields))

    assert asked(windows="near", near=4.0, near_radius=4, near_sentence=False).text == "rome"
    by_sentence = asked(windows="near", near=4.0, near_radius=4, near_sentence=True)
    assert by_sentence.text == "madrid" and 0.0 < by_sentence.score <= 1.0
    assert asked(tail, windows="near", near=4.0, near_sentence=True).text == "rome"


def test_sentences_end_at_stops_before_white_space_and_at_blank_lines():
    context = 'He said "go." Then U.S. troops left!  Why?\n\nNew part'
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", context)]
    numbers = token_sentences(sentence_starts(context), np.array(words)).tolist()
    # He said "go." | Then U.S. | troops left! | Why? | New part  ("U.S." ends one: a rule, not a splitter)
    assert numbers == [0, 0, 0, 1, 1, 2, 2, 3, 4, 4]
    # byte-level BPE and SentencePiece tokens carry the space before a word: "ĠThen" is (13, 18), not (14, 18)
    assert token_sentences(sentence_starts(context), np.array([[9, 13], [13, 18]])).tolist() == [0, 1]
    assert sentence_starts("He said “go.” Then")[1] == context.index("Then")
