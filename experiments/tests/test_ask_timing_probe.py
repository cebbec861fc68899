"""The Ask-tab timing probe's passage: long enough, and its question answered inside it."""

from __future__ import annotations

from experiments.ask_timing_probe import long_passage


def test_the_long_passage_is_one_articles_paragraphs_and_holds_the_answer() -> None:
    passage, question, gold = long_passage("French_and_Indian_War", 16_000)
    assert 16_000 <= len(passage) < 17_500 and passage.count("\n\n") >= 10
    assert question.endswith("?") and gold and all(answer in passage for answer in gold)
