"""The loader of a visitor's own questions (variants.core.question_files): every format it reads, and a sentence
naming the row and the field for each bad file, before any model runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from squad_data import write_tiny_squad

from variants.core.question_files import Limits, QuestionFileError, parse_questions, read_questions
from variants.core.squad import load_squad_json

APP = Limits(max_bytes=5_000_000, max_rows=2_000, max_context_chars=25_000, max_question_chars=1_000)
CSV = (
    'id,context,question,answer\na,"Paris is the capital of France.",What is the capital?,Paris\nb,"It rains.",Who?,\n'
)


def test_a_squad_v2_file_reads_as_the_bench_reads_it(tmp_path: Path) -> None:
    path = write_tiny_squad(tmp_path)
    questions = read_questions(path, APP)
    assert questions.format == "squad" and questions.labelled
    assert questions.examples == load_squad_json(path)  # the same examples, answers and offsets


def test_a_squad_v1_file_without_is_impossible(tmp_path: Path) -> None:
    qa = {"id": "x", "question": "Where is Paris?", "answers": [{"text": "France", "answer_start": 12}]}
    data = {"data": [{"title": "T", "paragraphs": [{"context": "Paris is in France.", "qas": [qa]}]}]}
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(data))
    (example,) = read_questions(path, APP).examples
    assert example.answers == ("France",) and example.answer_starts == (12,)


def test_csv_with_answers_and_an_empty_one_for_no_answer() -> None:
    questions = parse_questions(CSV, "q.csv", APP)
    assert questions.format == "csv" and questions.labelled
    first, second = questions.examples
    assert (first.id, first.answers, first.answer_starts) == ("a", ("Paris",), (0,))
    assert second.is_impossible  # SQuAD v2: the empty answer is "no answer"
    assert questions.counts == {"n_questions": 2, "has_answer": 1, "no_answer": 1}


def test_csv_without_answers_or_ids_is_unlabelled() -> None:
    questions = parse_questions("Context,Question\nParis is in France.,Where is Paris?\n", limits=APP)
    assert not questions.labelled
    assert questions.examples[0].id == "row-2"  # the row's line, as a spreadsheet numbers it
    assert questions.counts["no_answer"] is None


def test_json_lines_with_answers_lists_and_squad_dicts() -> None:
    rows = [
        {"context": "Paris is in France.", "question": "Where?", "answers": ["France", "in France"]},
        {"context": "Paris is in France.", "question": "What?", "answers": {"text": ["Paris"], "answer_start": [0]}},
        {"context": "Paris is in France.", "question": "Who?", "answers": []},
    ]
    questions = parse_questions("\n".join(map(json.dumps, rows)), limits=APP)
    assert questions.format == "jsonl" and questions.labelled
    assert [e.answers for e in questions.examples] == [("France", "in France"), ("Paris",), ()]


@pytest.mark.parametrize(
    ("text", "sentence"),
    [
        ("", "The file is empty"),
        ("   \n", "The file is empty"),
        ("context,question\n", "no rows of questions"),
        ("passage,query\nParis.,Where?\n", "lacks 'context' and 'question' (it has 'passage', 'query')"),
        ("context,answer\nParis.,Paris\n", "lacks 'question'"),
        ("context,question\n,Where?\n", "Row 2, field 'context': missing or empty."),
        ("context,question\nParis.,\n", "Row 2, field 'question': missing or empty."),
        ("context,question\nParis.,Where?,extra\n", "Row 2 has more cells than the header has columns."),
        ('{"context": "Paris.", "question": "Where?"}\n{"context": "Paris."}\n', "Line 2, field 'question'"),
        ('{"context": "Paris.", "question": "Where?"}\nnot json\n', "Line 2 is not JSON"),
        ('{"context": "P.", "question": "W?", "answer": "P"}\n{"context": "P.", "question": "X?"}', "Line 2, field"),
        ("id,context,question\na,Paris.,Where?\na,Rome.,Where?\n", "Row 3, field 'id': 'a' is also the id of row 2."),
        ("context,question,answer\nParis.,Where?,Spain\n", "Row 2, field 'answer': 'Spain' is not in its context."),
        ('{"data": [{"paragraphs": [{"context": "P."}]}]}', "Article 1, paragraph 1: the field 'qas'"),
    ],
)
def test_a_bad_file_gets_a_sentence_naming_the_row_and_the_field(text: str, sentence: str) -> None:
    with pytest.raises(QuestionFileError, match=sentence.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        parse_questions(text, "q", APP)


def test_a_context_over_the_apps_limit() -> None:
    text = f"context,question\nParis.,Where?\n{'word ' * 6000},Where?\n"
    sentence = "Row 3, field 'context': 30,000 characters, over this app's limit of 25,000"
    with pytest.raises(QuestionFileError, match=sentence):
        parse_questions(text, "q", APP)
    assert len(parse_questions(text).examples) == 2  # the command line has no limit


def test_a_question_over_the_limit() -> None:
    with pytest.raises(QuestionFileError, match="Row 2, field 'question': 1,500 characters"):
        parse_questions(f"context,question\nParis.,{'w' * 1500}\n", "q", APP)


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes("context,question\nParis.,Where?\nMünchen.,Wo?\n".encode("latin-1"))
    with pytest.raises(QuestionFileError, match="not UTF-8 text: byte 0xfc on line 3"):
        read_questions(path, APP)


def test_a_utf8_byte_order_mark_is_fine() -> None:
    assert parse_questions("\ufeffcontext,question\nParis.,Where?\n".encode(), limits=APP).examples


def test_a_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "book.csv"
    path.write_bytes(b"PK\x03\x04\x14\x00\x00\x00\x08\x00" + bytes(range(256)) * 4)  # a zip (an .xlsx is one)
    with pytest.raises(QuestionFileError, match="binary file"):
        read_questions(path, APP)


def test_a_50_mb_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    with path.open("wb") as handle:
        handle.truncate(50_000_000)  # sparse: its size is what is checked, before any byte is read
    with pytest.raises(QuestionFileError, match=r"The file is 50\.0 MB; this app takes files up to 5 MB"):
        read_questions(path, APP)


def test_pasted_text_over_the_size_limit() -> None:
    with pytest.raises(QuestionFileError, match="this app takes up to 1 MB"):
        parse_questions("x" * 1_000_001, "pasted", Limits(max_bytes=1_000_000))


def test_100000_rows_are_refused_with_the_count() -> None:
    text = "context,question\n" + "Paris.,Where?\n" * 100_000
    with pytest.raises(QuestionFileError, match="The file has 100,000 questions; this app takes up to 2,000"):
        parse_questions(text, "q", APP)


def test_a_json_file_that_is_not_squad(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[1, 2]")
    with pytest.raises(QuestionFileError, match="SQuAD JSON"):
        read_questions(path, APP)
