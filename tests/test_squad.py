"""The SQuAD v2 metric in variants.core.squad, against the official evaluation script's definition: every
expected value is worked out by hand from it (normalization, EM, F1, no-answer handling, the best-threshold
search), with no other implementation as the reference (transformers 5 no longer ships ``squad_metrics``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from variants.core.squad import (
    QAExample,
    compute_exact,
    compute_f1,
    load_squad,
    normalize_answer,
    paired_bootstrap,
    question_exact,
    question_f1,
    squad_v2_scores,
)


def ex(qid: str, *answers: str) -> QAExample:
    return QAExample(id=qid, question=f"question {qid}?", context="some context", answers=answers)


# --- normalization, EM, F1 ----------------------------------------------------------------------
#
# The official SQuAD v2 evaluation script (evaluate-v2.0.py) defines the metric; every expected value below is
# worked out by hand from its definition, not taken from another implementation:
# - normalize: lower case; drop each character of string.punctuation (ASCII only: other punctuation stays); drop
#   the whole words a, an, the (regex \b(a|an|the)\b); collapse whitespace (str.split: Unicode spaces too);
# - EM: the normalized strings are equal;
# - F1: tokens = the normalized answer split on whitespace; common = Counter(gold) & Counter(pred); P = common /
#   len(pred), R = common / len(gold), F1 = 2PR / (P + R); where either has no tokens, F1 = 1 if both have none;
# - a question's gold answers: those that normalize to something, else the single gold "" (so an unanswerable
#   question scores 1 for a prediction that normalizes to "", else 0); its EM and F1 are the best over its golds.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The  Cat's hat!", "cats hat"),  # lower, punctuation dropped (not spaced), article removed
        ("An apple a day", "apple day"),
        ("theatre anthem", "theatre anthem"),  # articles only as whole words
        ("  Paris,\tFrance. ", "paris france"),
        ("a-b", "ab"),
        ("The", ""),
        ("The the THE", ""),
        ("A", ""),
        ("", ""),
        ("1,066", "1066"),
        ("$100", "100"),
        ("50%", "50"),
        ("U.S.A.", "usa"),
        ("A.N. Other", "other"),  # "a.n." loses its dots and becomes the article "an"
        ("the(the)the", "thethethe"),  # no word boundary is left between them
        ("state-of-the-art", "stateoftheart"),
        ("rock 'n' roll", "rock n roll"),
        ("Dr. Who's an enigma", "dr whos enigma"),
        ("ANNA and Ian", "anna and ian"),
        ("caf\u00e9 \u2013 bar", "caf\u00e9 \u2013 bar"),  # non-ASCII punctuation is kept, as in the official script
        ("\u201cQuoted\u201d", "\u201cquoted\u201d"),  # curly quotes too
        ("Wait\u2026", "wait\u2026"),  # and the ellipsis character
        ("\u00c9COLE Normale", "\u00e9cole normale"),  # Unicode lower case
        ("\u0391\u0398\u0397\u039d\u0391", "\u03b1\u03b8\u03b7\u03bd\u03b1"),  # Greek
        ("\n\tNew\u00a0York ", "new york"),  # a no-break space splits words like any whitespace
    ],
)
def test_normalize_answer(text: str, expected: str) -> None:
    assert normalize_answer(text) == expected


@pytest.mark.parametrize(
    ("golds", "prediction", "exact", "f1"),
    [
        # one gold answer, partial overlap: P and R by hand
        (["Denver Broncos"], "The Broncos", 0, 2 / 3),  # [denver broncos] vs [broncos]: P 1, R 1/2
        (["1066"], "in 1066", 0, 2 / 3),  # P 1/2, R 1
        (["New York City"], "York", 0, 1 / 2),  # P 1, R 1/3
        (["Norman conquest of England"], "the conquest", 0, 2 / 5),  # P 1, R 1/4
        (["10th and 11th centuries"], "10th century", 0, 1 / 3),  # 1 common: P 1/2, R 1/4
        (["red green blue black"], "blue black white grey yellow pink", 0, 2 / 5),  # 2 common: P 1/3, R 1/2
        (["x x y"], "x y y", 0, 2 / 3),  # Counter overlap: min(2,1) x + min(1,2) y = 2 of 3 each
        (["x"], "x x", 0, 2 / 3),  # a repeated token counts once per gold occurrence: P 1/2, R 1
        (["2\u20133 days"], "2-3 days", 0, 1 / 2),  # the en dash stays, the hyphen goes: "2\u20133" is not "23"
        (["Paris"], "Rome", 0, 0.0),
        # equal once normalized
        (["Paris"], "PARIS!", 1, 1.0),
        (["the the cat"], "cat", 1, 1.0),
        (["M\u00fcnchen"], "m\u00fcnchen", 1, 1.0),
        (["Z\u00fcrich, Switzerland"], "Zurich", 0, 0.0),  # no accent folding
        (["caf\u00e9"], "cafe", 0, 0.0),
        # several gold answers: the best of them, for EM and F1 apart
        (["Paris", "the city of Paris"], "city of Paris", 1, 1.0),
        (["Denver Broncos", "Broncos"], "The Broncos", 1, 1.0),
        (["Seine", "river Seine", "the Seine river"], "Seine River in Paris", 0, 2 / 3),  # 1/4+1 -> 0.4; 2/4+1 -> 2/3
        (["in 1066", "1066 AD"], "1066", 0, 2 / 3),  # each: P 1, R 1/2
        (["New York City", "NYC"], "nyc", 1, 1.0),
        # no answer
        ([], "", 1, 1.0),
        ([], "Paris", 0, 0.0),
        ([], "the", 1, 1.0),  # normalizes to ""
        ([], "...", 1, 1.0),
        (["Paris"], "", 0, 0.0),
        (["the", "."], "", 1, 1.0),  # golds that normalize to nothing leave the single gold ""
        (["the", "."], "Paris", 0, 0.0),
        (["the", "Paris"], "", 0, 0.0),  # "Paris" is left, and "" does not match it
    ],
)
def test_question_exact_and_f1_from_the_official_definition(golds, prediction, exact, f1) -> None:
    example = ex("q", *golds)
    assert question_exact(example, prediction) == exact
    assert question_f1(example, prediction) == pytest.approx(f1, abs=1e-12)


def test_exact_match() -> None:
    assert compute_exact("Paris", "the paris.") == 1
    assert compute_exact("Paris", "Paris France") == 0
    assert compute_exact("", "") == 1
    assert compute_exact("", "the") == 1  # normalizes to the empty answer


def test_f1_token_overlap() -> None:
    # gold [big, red, dog], pred [red, dog, barked]: 2 common, P = R = 2/3.
    assert compute_f1("the big red dog", "red dog barked") == pytest.approx(2 / 3)
    # gold [1066], pred [in, 1066]: P = 1/2, R = 1, F1 = 2/3.
    assert compute_f1("1066", "in 1066") == pytest.approx(2 / 3)
    # Repeated tokens count once per occurrence: common = min(2,1) x + min(1,2) y = 2 of 3 each.
    assert compute_f1("x x y", "x y y") == pytest.approx(2 / 3)
    # gold [new, york, city] (3), pred [york] (1): P = 1, R = 1/3, F1 = 0.5.
    assert compute_f1("New York City", "York") == pytest.approx(0.5)
    assert compute_f1("Paris", "Rome") == 0.0
    assert compute_f1("Paris", "PARIS!") == 1.0


def test_f1_no_answer() -> None:
    assert compute_f1("", "") == 1.0
    assert compute_f1("", "Paris") == 0.0
    assert compute_f1("Paris", "") == 0.0
    assert compute_f1("", "the") == 1.0  # "the" has no tokens once normalized


# --- squad_v2_scores ----------------------------------------------------------------------------


EXAMPLES = [
    ex("q1", "Paris", "the city of Paris"),
    ex("q2", "1066"),
    ex("q3"),  # unanswerable
    ex("q4"),  # unanswerable
]
PREDICTIONS = {"q1": "city of Paris", "q2": "in 1066", "q3": "", "q4": "Normandy"}
NA_PROBS = {"q1": 0.1, "q2": 0.05, "q3": 0.9, "q4": 0.3}


def test_scores_by_hand() -> None:
    # Per question: q1 EM 1 F1 1 (second gold), q2 EM 0 F1 2/3, q3 EM 1 F1 1, q4 EM 0 F1 0.
    s = squad_v2_scores(EXAMPLES, PREDICTIONS)
    assert s.total == 4
    assert s.exact == pytest.approx(50.0)
    assert s.f1 == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert (s.has_ans_total, s.no_ans_total) == (2, 2)
    assert s.has_ans_exact == pytest.approx(50.0)
    assert s.has_ans_f1 == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert s.no_ans_exact == pytest.approx(50.0)
    assert s.no_ans_f1 == pytest.approx(50.0)
    assert s.best_exact is None and s.best_f1 is None  # no no-answer probabilities given


def test_best_threshold_by_hand() -> None:
    # Official search: start with every question predicted "no answer" (score = 2 unanswerable),
    # then answer questions in order of rising na_prob: q2 (0.05), q1 (0.1), q4 (0.3), q3 (0.9).
    #   EM: q2 +0 -> 2, q1 +1 -> 3 (best, thresh 0.1), q4 -1 -> 2, q3 +0 -> 2      => 75.0 at 0.1
    #   F1: q2 +2/3 -> 2.67 (best, 0.05), q1 +1 -> 3.67 (best, 0.1), q4 -1, q3 +0 => 91.67 at 0.1
    s = squad_v2_scores(EXAMPLES, PREDICTIONS, NA_PROBS)
    assert s.best_exact == pytest.approx(75.0)
    assert s.best_exact_thresh == pytest.approx(0.1)
    assert s.best_f1 == pytest.approx(100 * (3 + 2 / 3) / 4)
    assert s.best_f1_thresh == pytest.approx(0.1)
    # The raw scores are not thresholded (the official default threshold is 1.0).
    assert s.exact == pytest.approx(50.0)


def test_best_threshold_keeps_all_null_when_nothing_helps() -> None:
    examples = [ex("a", "Paris"), ex("b")]
    s = squad_v2_scores(examples, {"a": "Rome", "b": "Rome"}, {"a": 0.2, "b": 0.4})
    # All null scores 1 of 2 (b right); answering a adds 0, answering b takes 1 away.
    assert s.best_exact == pytest.approx(50.0)
    assert s.best_exact_thresh == 0.0
    assert s.exact == 0.0


def test_gold_answers_that_normalize_to_nothing() -> None:
    # Official script: golds that normalize to "" are dropped; if none is left the only gold is "".
    # The question still counts as HasAns (qa["answers"] is not empty).
    s = squad_v2_scores([ex("a", "the", "."), ex("b", "The", "Rome")], {"a": "", "b": "rome"})
    assert s.exact == 100.0 and s.has_ans_total == 2 and s.no_ans_total == 0
    assert s.no_ans_exact is None and s.no_ans_f1 is None


def test_all_unanswerable_and_all_answerable() -> None:
    s = squad_v2_scores([ex("a"), ex("b")], {"a": "", "b": "x"})
    assert s.exact == 50.0 and s.has_ans_exact is None and s.no_ans_exact == 50.0
    s = squad_v2_scores([ex("a", "x")], {"a": "x"})
    assert s.exact == 100.0 and s.no_ans_total == 0


def test_missing_prediction_raises() -> None:
    with pytest.raises(ValueError, match="no prediction"):
        squad_v2_scores(EXAMPLES, {"q1": "Paris"})


def test_as_dict_keys() -> None:
    d = squad_v2_scores(EXAMPLES, PREDICTIONS, NA_PROBS).as_dict()
    for key in ("exact", "f1", "total", "has_ans_f1", "no_ans_exact", "best_f1", "best_f1_thresh"):
        assert key in d


# --- loading ------------------------------------------------------------------------------------


def test_load_squad_json(tmp_path) -> None:
    data = {
        "version": "v2.0",
        "data": [
            {
                "title": "T",
                "paragraphs": [
                    {
                        "context": "Paris is in France.",
                        "qas": [
                            {
                                "id": "1",
                                "question": "Where is Paris?",
                                "answers": [{"text": "France", "answer_start": 12}],
                                "is_impossible": False,
                            },
                            {
                                "id": "2",
                                "question": "Where is Rome?",
                                "answers": [],
                                "plausible_answers": [{"text": "France", "answer_start": 12}],
                                "is_impossible": True,
                            },
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "mini.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    loaded = load_squad(path)
    assert [e.id for e in loaded] == ["1", "2"]
    assert loaded[0].answers == ("France",) and loaded[0].answer_starts == (12,)
    assert loaded[1].is_impossible and loaded[1].answers == ()
    assert loaded[0].title == "T"


def test_shipped_sample_loads() -> None:
    from variants.core.spec import ASSETS  # noqa: PLC0415

    examples = load_squad(ASSETS / "data" / "squad_v2_dev_sample.json")
    assert len(examples) == 501
    assert sum(e.is_impossible for e in examples) == 250
    assert len({e.id for e in examples}) == 501


# --- a whole file, by hand -------------------------------------------------------------------------

FILE = [
    ex("a", "Denver Broncos"),  # "The Broncos": EM 0, F1 2/3
    ex("b", "Paris", "the city of Paris"),  # "city of Paris": 1, 1
    ex("c"),  # "": 1, 1
    ex("d"),  # "Normandy": 0, 0
    ex("e", "10th and 11th centuries"),  # "10th century": 0, 1/3
    ex("f"),  # "the": 1, 1 (it normalizes to "")
]
FILE_PREDICTIONS = {"a": "The Broncos", "b": "city of Paris", "c": "", "d": "Normandy", "e": "10th century", "f": "the"}
FILE_NA_PROBS = {"a": 0.2, "b": 0.1, "c": 0.9, "d": 0.4, "e": 0.3, "f": 0.8}


def test_a_file_of_every_kind_by_hand() -> None:
    s = squad_v2_scores(FILE, FILE_PREDICTIONS, FILE_NA_PROBS)
    assert (s.total, s.has_ans_total, s.no_ans_total) == (6, 3, 3)
    assert s.exact == pytest.approx(100 * 3 / 6) and s.f1 == pytest.approx(100 * (2 / 3 + 1 + 1 + 0 + 1 / 3 + 1) / 6)
    assert s.has_ans_exact == pytest.approx(100 / 3) and s.has_ans_f1 == pytest.approx(100 * 2 / 3)
    assert s.no_ans_exact == pytest.approx(100 * 2 / 3) and s.no_ans_f1 == pytest.approx(100 * 2 / 3)
    # The official search starts from "no answer" everywhere (3 of 6 right), then answers in rising na_prob:
    #   F1: b +1 -> 4 (0.1), a +2/3 -> 4.67 (0.2), e +1/3 -> 5 (best, 0.3), d -1, f -1, c 0
    #   EM: b +1 -> 4 (best, 0.1), a 0, e 0, d -1, f -1, c 0
    # f's "the" costs 1 there: the search asks whether the raw prediction is empty, not its normalized form.
    assert s.best_f1 == pytest.approx(100 * 5 / 6) and s.best_f1_thresh == pytest.approx(0.3)
    assert s.best_exact == pytest.approx(100 * 4 / 6) and s.best_exact_thresh == pytest.approx(0.1)


def test_the_threshold_search_takes_equal_probabilities_in_the_order_given() -> None:
    """As the official script's stable sort: a wrong answer between two right ones at one probability ends the
    gain there in that order, not in another."""
    examples = [ex("a", "x"), ex("b"), ex("c", "z")]
    predictions = {"a": "x", "b": "y", "c": "z"}
    s = squad_v2_scores(examples, predictions, {"a": 0.5, "b": 0.5, "c": 0.5})
    assert s.best_f1 == pytest.approx(100 * 2 / 3) and s.best_f1_thresh == 0.5  # 1 -> a 2 -> b 1 -> c 2
    s = squad_v2_scores(examples, predictions, {"a": 0.5, "c": 0.5, "b": 0.5})
    assert s.best_f1 == pytest.approx(100.0) and s.best_exact == pytest.approx(100.0)  # 1 -> a 2 -> c 3 -> b 2


def test_the_paired_bootstrap_interval_holds_the_mean_and_excludes_zero_only_for_a_clear_gain() -> None:
    assert paired_bootstrap(np.zeros(50)) == (0.0, 0.0)
    noisy = np.array([10.0, -10.0] * 50)  # no gain, much noise
    low, high = paired_bootstrap(noisy)
    assert low < 0 < high
    clear = np.array([5.0] * 90 + [-5.0] * 10)  # mean +4
    low, high = paired_bootstrap(clear)
    assert 0 < low < 4 < high
