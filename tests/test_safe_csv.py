"""Every CSV the app and the command line write from a visitor's text (variants.core.safe_csv): read back as a
spreadsheet reads it, no cell is a formula, numbers stay numbers, and a model's "no answer" says so."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from app_helpers import tiny_engine
from hypothesis import given
from hypothesis import strategies as st

from ui import benchmark as bench_tab
from variants.benchmarking import evaluate as evaluation
from variants.core import safe_csv
from variants.core.question_files import read_questions
from variants.records import results
from variants.records.record import Record

OLD_RECORD = Path(__file__).resolve().parent / "data" / "record-schema1.json"
ATTACKS = [  # issue 69's four, and OWASP's other starts
    '=HYPERLINK("http://example.com","click")',
    "+SUM(1,1)",
    "-1+2",
    "@SUM(1,1)",
    "\t=1+1",
    "\r=1+1",
]
HEADLINE = ["baseline", "pruned", "pruned-onnx-opt-int8"]


def number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def spreadsheet_cells(path: Path) -> list[list[tuple[str, bool]]]:
    """Each cell as a spreadsheet opening the file sees it: its text, and whether it was written quoted (quoted
    text is text; an unquoted number is a number)."""
    with path.open(encoding="utf-8", newline="") as handle:  # a CR inside a cell stays a CR
        raw = handle.read()
    rows = list(csv.reader(io.StringIO(raw)))
    quoted = list(csv.reader(io.StringIO(raw), quoting=csv.QUOTE_NONNUMERIC, quotechar='"'))
    return [
        [(cell, not isinstance(q, float)) for cell, q in zip(row, qrow, strict=True)]
        for row, qrow in zip(rows, quoted, strict=True)
    ]


def formulas(path: Path) -> list[str]:
    """The cells a spreadsheet would evaluate: text that, leading blanks set aside, starts with = + - or @ and is
    not a plain number."""
    cells = [cell for row in spreadsheet_cells(path) for cell, _ in row]
    return [c for c in cells if c.lstrip(" \t\r\n")[:1] in {"=", "+", "-", "@"} and not number(c)]


@given(st.text())
def test_neutralized_text_never_starts_a_formula(text: str) -> None:
    out = safe_csv.neutralize(text)
    assert not out.startswith(("=", "+", "-", "@", "\t", "\r"))
    assert out == text or out == "'" + text  # nothing else changes
    assert (out != text) == text.startswith(("=", "+", "-", "@", "\t", "\r"))


def test_numbers_stay_numbers(tmp_path: Path) -> None:
    path = safe_csv.write_rows(tmp_path / "n.csv", [["name", "delta", "n"], ["-1+2", -2.5, 3], ["x", None, 0]])
    cells = spreadsheet_cells(path)
    assert cells[1] == [("'-1+2", True), ("-2.5", False), ("3", False)]
    assert cells[2][1] == ("", True)  # an empty cell, not "None"
    assert not formulas(path)


@pytest.fixture(scope="module")
def hostile_run(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path, squad_file: Path, tmp_path_factory):
    """A visitor's file whose ids, questions and gold answers are the attacks, run by every headline variant."""
    engine = tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))
    example = read_questions(squad_file).examples[0]
    path = tmp_path_factory.mktemp("hostile") / "hostile.jsonl"
    rows = [
        {"id": f"{a} {i}", "context": f"{example.context} {a}", "question": a, "answer": a}
        for i, a in enumerate(ATTACKS)
    ]  # an answer is a span of its passage
    path.write_text("\n".join(map(json.dumps, rows)), encoding="utf-8")
    return evaluation.evaluate(engine, read_questions(path), HEADLINE)


def test_the_answers_csv_has_no_formula_and_says_no_answer(hostile_run, tmp_path: Path, monkeypatch) -> None:
    answers = hostile_run.answers()
    answers["pruned"][hostile_run.done[0].id] = ""  # one "no answer" for sure (the tiny models answer at random)
    monkeypatch.setattr(hostile_run, "answers", lambda: answers)
    path = hostile_run.write_answers_csv(tmp_path / "answers.csv")
    assert not formulas(path)
    header, *rows = spreadsheet_cells(path)
    assert [c for c, _ in header[:5]] == ["id", "question", "gold answers", "Baseline", "Baseline ms"]
    asked = hostile_run.done
    assert [r[0][0] for r in rows] == ["'" + e.id for e in asked]  # the text is all there, behind an apostrophe
    assert [r[1][0] for r in rows] == ["'" + e.question for e in asked]
    assert [r[2][0] for r in rows] == ["'" + e.answers[0] for e in asked]
    pruned = [c for c, _ in header].index("Pruned")
    assert rows[0][pruned] == ("(no answer)", True)  # the page's wording, not an empty cell
    for row in rows:  # every variant's milliseconds: a bare number
        assert all(not quoted and float(cell) > 0 for cell, quoted in row[4::2])


def hostile_record() -> Record:
    record = Record.load(OLD_RECORD)
    record.variants[0].label, record.variants[0].variant = ATTACKS[0], ATTACKS[2]  # where a Hub model id goes
    record.preset = ATTACKS[3]
    return record


def test_the_benchmark_download_and_the_record_csv_have_no_formula(tmp_path: Path) -> None:
    record = hostile_record()
    frame = results.records_to_frame(record, "pipeline")
    downloaded = Path(bench_tab.write_csv(frame, record))
    _, saved = results.save_record(record, tmp_path)
    for path in (downloaded, saved):
        assert not formulas(path)
        header, first, *_ = spreadsheet_cells(path)
        named = dict(zip([c for c, _ in header], first, strict=True))
        assert named["label"] == ("'" + ATTACKS[0], True) and named["variant"] == ("'-1+2", True)
        assert not named["p50_ms"][1] and number(named["p50_ms"][0])  # the record's numbers stay numeric
