"""Rule-made unanswerable questions: each kind, their labels, and their place in training data."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from variants.core.squad import QAExample
from variants.training import augment
from variants.training import features as train_features
from variants.training.features import load_examples
from variants.training.settings import TrainConfig

PARIS = "Paris is the capital of France. In 1871 the Commune held Paris for two months."
ROME = "Rome is the capital of Italy. In 1946 Italy became a republic."


def example(qid: str, question: str, context: str, answer: str, title: str = "cities") -> QAExample:
    return QAExample(qid, question, context, (answer,), (context.index(answer),), title)


def test_names_and_numbers_are_found_without_the_words_that_start_a_sentence():
    found = augment.entities("In what year did the Duke of Normandy invade England? In 1066.")
    assert found == ["Duke of Normandy", "England", "1066"]


def test_an_entity_swap_brings_in_a_name_of_the_same_kind_the_paragraph_lacks():
    rng = random.Random(0)
    pool = ["Italy", "Rome", "France", "1946", "12"]
    swapped = augment.entity_swap("Which city is the capital of France?", PARIS, pool, rng)
    assert swapped in ("Which city is the capital of Italy?", "Which city is the capital of Rome?")
    year = augment.entity_swap("Who held Paris in 1871?", "In 1871 they held the city.", pool, rng)
    assert year == "Who held Paris in 1946?"  # a four-digit number for a four-digit one, never "12"
    assert augment.entity_swap("Who held it?", PARIS, pool, rng) is None


def test_an_antonym_swap_keeps_case_and_needs_a_listed_word():
    rng = random.Random(0)
    assert augment.antonym_swap("What was the largest city?", rng) == "What was the smallest city?"
    assert augment.antonym_swap("First of all, who?", rng) == "Last of all, who?"
    assert augment.antonym_swap("Who held it?", rng) is None


def test_synthetic_questions_are_unanswerable_copies_of_answerable_ones():
    examples = [
        example("q1", "What is the capital of France?", PARIS, "Paris"),
        example("q2", "Who held it for two months?", PARIS, "the Commune"),
        example("q3", "What is the capital of Italy?", ROME, "Rome"),
        QAExample("q4", "Who founded it?", ROME, title="cities"),
    ]
    made = augment.synthetic_unanswerable(examples, share=1.0, seed=0)
    assert len(made) == 3 and all(m.is_impossible for m in made)
    by_kind = {m.id.rsplit("-", 1)[1]: m for m in made}
    assert by_kind["ent"].context == examples[int(by_kind["ent"].id[1]) - 1].context
    other = by_kind["par"]  # q2 has no name or listed word: another paragraph that lacks its answer
    assert other.id == "q2-syn-par" and other.context == ROME and other.question == examples[1].question
    assert augment.synthetic_unanswerable(examples, 1.0, 0) == made  # seeded


def test_training_data_gains_the_synthetic_share_after_holding_articles_out(tmp_path):
    def article(title: str) -> dict:
        qas = [
            {"id": f"{title}{i}", "question": q, "is_impossible": False, "answers": [{"text": a, "answer_start": 0}]}
            for i, (q, a) in enumerate([("What is the capital of France?", "Paris"), ("Which is in Italy?", "Rome")])
        ]
        qas.append({"id": f"{title}x", "question": "Who founded it?", "is_impossible": True, "answers": []})
        return {"title": title, "paragraphs": [{"context": PARIS, "qas": qas[:1]}, {"context": ROME, "qas": qas[1:]}]}

    path = tmp_path / "squad.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [article("a"), article("b"), article("c")]}))
    plain, held = load_examples(TrainConfig("finetune", "b", str(path), "o", holdout_articles=1))
    config = TrainConfig("finetune", "b", str(path), "o", holdout_articles=1, synthetic_unanswerable=0.5)
    more, held_again = load_examples(config)
    added = more[len(plain) :]
    assert held == held_again and more[: len(plain)] == plain
    assert len(added) == 2  # half of the four answerable questions left in training
    assert all(e.is_impossible and "-syn-" in e.id and e.title not in held for e in added)


def test_pairs_for_the_teacher_have_no_gold_answer_and_change_the_question_or_the_paragraph():
    examples = [
        example("q1", "What is the capital of France?", PARIS, "Paris"),
        example("q2", "Who held Paris for two months?", PARIS, "the Commune"),
        example("q3", "What is the capital of Italy?", ROME, "Rome"),
        example("q3", "What is the capital of Italy?", ROME, "Rome"),  # a repeat counts once
    ]
    made = augment.teacher_only_pairs(examples, share=5.0, seed=0)
    assert len(made) == 15 and all(m.is_impossible and "-tea-" in m.id for m in made)
    assert len({m.id for m in made}) == 15
    sources = {e.id: e for e in examples}
    for m in made:
        source, how = sources[m.id.split("-")[0]], m.id.split("-")[2]
        if how == "shu":  # the same sentences in another order
            assert m.question == source.question and m.context != source.context
            assert sorted(augment.SENTENCE.split(m.context)) == sorted(augment.SENTENCE.split(source.context))
        elif how == "swp":  # one word of the question (never its first) from the paragraph, or dropped
            before, after = source.question.split(), m.question.split()
            assert m.context == source.context and before[0] == after[0] and after != before
            assert len(set(before) - set(after)) == 1
        else:
            assert how == "par" and m.question == source.question and m.context != source.context
    assert {m.id.split("-")[2] for m in made} == {"shu", "swp", "par"}
    assert augment.teacher_only_pairs(examples, 5.0, 0) == made  # seeded
    assert augment.shuffled_sentences("One sentence only.", random.Random(0)) is None


def test_short_context_copies_keep_each_answer_inside_its_sentence():
    one_sentence = "Lyon lies where the Rhone meets the Saone."
    examples = [
        example("q1", "What is the capital of France?", PARIS, "Paris"),
        example("q2", "Who held it for two months?", PARIS, "the Commune"),
        example("q3", "When did Italy become a republic?", ROME, "1946"),
        example("q4", "Which rivers meet in Lyon?", one_sentence, "the Rhone"),  # nothing to cut: no copy
        QAExample("q5", "Who founded it?", ROME, title="cities"),  # unanswerable: no copy
    ]
    two_golds = ("the Commune", "Paris"), (PARIS.index("the Commune"), 0)  # the second lies in the sentence before
    examples[1] = replace(examples[1], answers=two_golds[0], answer_starts=two_golds[1])
    made = augment.short_context_copies(examples + examples[:1], share=1.0, seed=0)  # q1 twice: one copy
    by_id = {m.id: m for m in made}
    assert set(by_id) == {"q1-sen", "q2-sen", "q3-sen"}
    assert by_id["q1-sen"].context == "Paris is the capital of France."
    assert by_id["q2-sen"].context == "In 1871 the Commune held Paris for two months."
    assert by_id["q2-sen"].answers == ("the Commune",) and len(made) == 3
    assert by_id["q3-sen"].context == "In 1946 Italy became a republic."
    for m in made:
        assert not m.is_impossible and len(m.context) < len(PARIS)
        for answer, start in zip(m.answers, m.answer_starts, strict=True):
            assert m.context[start : start + len(answer)] == answer
    assert len(augment.short_context_copies(examples, share=0.5, seed=0)) <= 2  # half of the four answerable
    assert augment.short_context_copies(examples + examples[:1], 1.0, 0) == made  # seeded


def test_short_context_features_are_labelled_and_left_out_of_the_importance_sample(tmp_path):
    from transformers import BertTokenizerFast  # noqa: PLC0415

    vocab = tmp_path / "vocab.txt"
    words = {w.strip(".").lower() for w in (PARIS + " " + ROME).split()} | {"who", "held", "?", "."}
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted(words)]))
    tokenizer = BertTokenizerFast(str(vocab))
    examples = [example("q1", "who held paris?", PARIS, "the Commune"), example("q2", "who held it?", ROME, "Rome")]
    cfg = TrainConfig("prune", "b", "d", "o", max_length=64, stride=16, short_contexts=1.0)
    copies = train_features.short_context_features(tokenizer, examples, cfg)
    assert len(copies) == 2 and all(f["calibrate"] is False for f in copies)
    assert all(f["start_positions"] > 0 for f in copies)  # the answer is inside the sentence: a real span, not [CLS]
    assert train_features.short_context_features(tokenizer, examples, replace(cfg, short_contexts=0.0)) == []
    plain = train_features.build_train_features(tokenizer, examples, 64, 16)
    unlabelled = [f | {"start_positions": train_features.UNLABELLED} for f in plain]  # pairs for the teacher only
    assert train_features.calibration_pool(plain + unlabelled + copies) == list(range(len(plain)))


def test_long_context_copies_set_each_paragraph_among_its_neighbours_with_its_answers_moved():
    titles = {"a": [PARIS, ROME, "Berlin is the capital of Germany."], "b": ["Madrid is in Spain."]}
    examples = [
        QAExample(f"{t}{i}", "What is it?", context, ("capital",), (context.index("capital"),), t)
        if "capital" in context
        else QAExample(f"{t}{i}", "Who built it?", context, (), (), t)
        for t, contexts in titles.items()
        for i, context in enumerate(contexts)
    ]
    made = augment.long_context_copies(examples, 1.0, 0, paragraphs=2)
    assert {e.id for e in made} == {"a0-art", "a1-art", "a2-art"}  # b has one paragraph: no copy
    for copy in made:
        source = next(e for e in examples if f"{e.id}-art" == copy.id)
        assert source.context in copy.context and copy.context.count("\n\n") == 1
        for text, start in zip(copy.answers, copy.answer_starts, strict=True):
            assert copy.context[start : start + len(text)] == text
            assert start >= copy.context.index(source.context)  # its own paragraph's occurrence
    assert augment.long_context_copies(examples, 1.0, 0, paragraphs=2) == made  # seeded


def test_training_reads_several_files_and_named_held_out_articles(tmp_path):
    first, second = tmp_path / "one.json", tmp_path / "two.json"
    for path, title in ((first, "a"), (second, "b")):
        qas = [{"id": f"{title}0", "question": "Which?", "is_impossible": False,
                "answers": [{"text": "Paris", "answer_start": 0}]}]  # fmt: skip
        path.write_text(json.dumps({"version": "v2.0", "data": [{"title": title, "paragraphs": [
            {"context": PARIS, "qas": qas}]}]}))  # fmt: skip
    both = f"{first},{second}"
    examples, held = load_examples(TrainConfig("finetune", "x", both, "o", holdout_titles="b"))
    assert [e.id for e in examples] == ["a0"] and held == ["b"]
    assert train_features.data_name(both) == "one.json,two.json"
    assert len(train_features._sha256(both).split(",")) == 2
    with pytest.raises(ValueError, match="no article"):
        load_examples(TrainConfig("finetune", "x", both, "o", holdout_titles="c"))
