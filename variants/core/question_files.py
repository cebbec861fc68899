"""A file of someone's own questions, read and checked: SQuAD v1.1 / v2 JSON, CSV or JSON Lines.

One loader for the app's "Your questions" tab, ``python -m variants evaluate`` and ``python -m variants bench
--data``: rows of ``context``, ``question`` and optionally ``answer`` (one text; empty means "no answer", as
SQuAD v2 scores it) or ``answers`` (a list, or SQuAD's ``{"text": [...], "answer_start": [...]}``) and ``id``.
Whatever is wrong raises :class:`QuestionFileError` with one sentence naming the row and the field, before
any model runs. The questions come back as :class:`~variants.core.squad.QAExample`, as SQuAD files load.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

from variants.core.squad import QAExample
from variants.core.text_check import invalid_text

FIELDS = ("context", "question", "answer", "answers", "id")
SUFFIXES = {".json": "squad", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
# Bounds checked before parsing, whatever the caller's limits: a SQuAD file nests 9 levels deep (a JSON Lines row
# 3), and the parser recurses once per level (100,000 levels raised RecursionError); a CSV cell is at most the
# csv module's own field limit (131,072 characters; the app's passages are 25,000).
MAX_JSON_DEPTH = 64
MAX_CELL_CHARS = csv.field_size_limit()
JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
BRACKET = re.compile(r"[\[\]{}]")


class QuestionFileError(ValueError):
    """A file of questions that cannot be used, with the sentence that says why (row and field named)."""


@dataclass(frozen=True)
class Limits:
    """What one file may hold; None: no limit (the command line's default)."""

    max_bytes: int | None = None
    max_rows: int | None = None
    max_context_chars: int | None = None
    max_question_chars: int | None = None


@dataclass(frozen=True)
class QuestionSet:
    """The questions of one file; ``labelled`` when it gives answers (F1 and EM can be scored), else only
    agreement and latency can be shown."""

    examples: list[QAExample]
    labelled: bool
    format: str  # "squad", "csv" or "jsonl"
    name: str = ""

    @property
    def counts(self) -> dict[str, int | None]:
        no_answer = sum(e.is_impossible for e in self.examples) if self.labelled else None
        n = len(self.examples)
        return {"n_questions": n, "has_answer": None if no_answer is None else n - no_answer, "no_answer": no_answer}


def read_questions(path: str | Path, limits: Limits = Limits()) -> QuestionSet:
    """The questions in the file at ``path`` (its format from its suffix, else from its first character)."""
    path = Path(path)
    if not path.is_file():
        raise QuestionFileError(f"No such file: {path}.")
    size = path.stat().st_size
    if limits.max_bytes is not None and size > limits.max_bytes:
        raise QuestionFileError(
            f"The file is {size / 1e6:,.1f} MB; this app takes files up to {limits.max_bytes / 1e6:,.0f} MB. "
            "Split it, or run `python -m variants evaluate --data FILE` on your own machine."
        )
    return parse_questions(path.read_bytes(), path.name, limits, SUFFIXES.get(path.suffix.lower()))


def parse_questions(
    data: bytes | str, name: str = "", limits: Limits = Limits(), fmt: str | None = None
) -> QuestionSet:
    """The questions in ``data`` (a file's bytes or pasted text); ``fmt`` "squad", "csv" or "jsonl", or None to
    tell from the text: ``{"data": ...}`` is SQuAD, other lines of ``{...}`` JSON Lines, anything else CSV."""
    if not isinstance(data, (bytes, str)):
        raise QuestionFileError(
            f"The data should be the text of a file (a string), not {type(data).__name__}: send the file's contents."
        )
    text = decode(data, limits)
    stripped = text.lstrip()
    if not stripped:
        raise QuestionFileError("The file is empty: no rows to read.")
    if stripped.startswith("["):
        raise QuestionFileError(
            "This is a JSON list, which is not a format this app reads: send SQuAD JSON (an object with a 'data' "
            "list), JSON Lines (one object a line) or CSV with a header."
        )
    if stripped.startswith("{"):
        check_depth(stripped)
    fmt = fmt or sniff(stripped)
    if fmt == "squad" and not stripped.startswith("{"):
        raise QuestionFileError("A .json file should be SQuAD JSON (an object with a 'data' list); this one is not.")
    if fmt == "squad":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise QuestionFileError(f"The JSON does not parse: {exc.msg} at line {exc.lineno}.") from None
        if isinstance(raw, dict) and "data" not in raw:
            fmt, rows = "jsonl", [(1, raw)]  # one JSON Lines row saved as .json
        else:
            rows = squad_rows(raw)
    elif fmt == "jsonl":
        rows = jsonl_rows(text)
    else:
        rows = csv_rows(text)
    examples, labelled = checked_examples(rows, limits, fmt)
    return QuestionSet(examples, labelled, fmt, name)


def json_depth(text: str, stop: int = MAX_JSON_DEPTH) -> int:
    """How deep ``text``'s JSON brackets nest (outside its strings), counted without parsing it; the count stops
    past ``stop``."""
    depth = deepest = 0
    for match in BRACKET.finditer(JSON_STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > stop:
                break
    return deepest


def check_depth(text: str, where: str = "The JSON") -> None:
    """Refuse JSON nested deeper than :data:`MAX_JSON_DEPTH`, before the parser (which recurses per level) sees it."""
    if json_depth(text) > MAX_JSON_DEPTH:
        raise QuestionFileError(
            f"{where} is nested more than {MAX_JSON_DEPTH} levels deep; a file of questions nests 9 at most "
            "(SQuAD JSON), so this is not one."
        )


def decode(data: bytes | str, limits: Limits) -> str:
    if isinstance(data, str):
        if (problem := invalid_text(data)) is not None:
            raise QuestionFileError(f"The text is not valid: {problem}. Send it as UTF-8 text.")
        data = data.encode("utf-8")
    if limits.max_bytes is not None and len(data) > limits.max_bytes:
        raise QuestionFileError(
            f"The text is {len(data) / 1e6:,.1f} MB; this app takes up to {limits.max_bytes / 1e6:,.0f} MB."
        )
    if b"\x00" in data[:65536]:
        raise QuestionFileError(
            "This looks like a binary file (a spreadsheet or an archive?), not text: save it as CSV (UTF-8), "
            "JSON Lines or SQuAD JSON."
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise QuestionFileError(
            f"The file is not UTF-8 text: byte {data[exc.start]:#04x} on line {line} is not UTF-8. "
            "Save it as UTF-8 (in a spreadsheet: CSV UTF-8)."
        ) from None


def sniff(text: str) -> str:
    """SQuAD JSON (one object with a 'data' list, often on one line), JSON Lines (objects, one a line), or CSV."""
    if not text.startswith("{"):
        return "csv"
    try:
        raw = json.loads(text)
    except json.JSONDecodeError:
        return "jsonl"
    return "squad" if isinstance(raw, dict) and "data" in raw else "jsonl"


Row = tuple[int, object]  # (the row's number as the person sees it, the row)


def squad_rows(raw: object) -> list[Row]:
    """SQuAD JSON as rows with answers in the ``answers`` dict form (row numbers count questions from 1)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
        raise QuestionFileError("SQuAD JSON is an object whose 'data' is a list of articles; this file is not.")
    rows: list[Row] = []
    for a, article in enumerate(raw["data"], start=1):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise QuestionFileError(f"Article {a}: the field 'paragraphs' is missing or not a list.")
        for p, paragraph in enumerate(paragraphs, start=1):
            if not isinstance(paragraph, dict) or not isinstance(paragraph.get("qas"), list):
                raise QuestionFileError(f"Article {a}, paragraph {p}: the field 'qas' is missing or not a list.")
            for qa in paragraph["qas"]:
                if not isinstance(qa, dict):
                    raise QuestionFileError(f"Question {len(rows) + 1}: not a JSON object.")
                answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                if not isinstance(answers, list) or not all(isinstance(x, dict) and "text" in x for x in answers):
                    raise QuestionFileError(f"Question {len(rows) + 1}, field 'answers': a list of {{'text': ...}}.")
                row = {
                    "id": qa.get("id"),
                    "question": qa.get("question"),
                    "context": paragraph.get("context"),
                    "answers": {
                        "text": [x["text"] for x in answers],
                        "answer_start": [x.get("answer_start") for x in answers],
                    },
                    "title": article.get("title", ""),
                }
                rows.append((len(rows) + 1, row))
    return rows


def jsonl_rows(text: str) -> list[Row]:
    rows: list[Row] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionFileError(f"Line {line_no} is not JSON: {exc.msg}.") from None
        if not isinstance(row, dict):
            raise QuestionFileError(f"Line {line_no} is not a JSON object with 'context' and 'question'.")
        rows.append((line_no, row))
    return rows


def csv_rows(text: str) -> list[Row]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:  # the header is read here: a cell over the csv module's field limit fails in it too
        header = [h.strip().lower() for h in reader.fieldnames or []]
        missing = [f for f in ("context", "question") if f not in header]
        if missing:
            has = ", ".join(short(h, 30) for h in header[:8] if h) + (", …" if len(header) > 8 else "")
            raise QuestionFileError(
                f"The CSV's first row should name the columns; it lacks {' and '.join(repr(m) for m in missing)} "
                f"(it has {has or 'none'}). Columns: context, question, and optionally answer (or answers) and id."
            )
        reader.fieldnames = header
        rows: list[Row] = []
        for row in reader:
            if None in row:  # more cells than columns
                raise QuestionFileError(f"Row {reader.line_num} has more cells than the header has columns.")
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        if "field limit" in str(exc):
            raise QuestionFileError(
                f"Row {reader.line_num + 1} has a cell over {MAX_CELL_CHARS:,} characters, the longest this app "
                "reads (a passage is at most a few thousand words); is the file's quoting broken?"
            ) from None
        raise QuestionFileError(f"Row {reader.line_num} is not valid CSV: {exc}.") from None
    return rows


def answer_texts(row: dict, where: str) -> tuple[list[str], list[int | None]] | None:
    """The row's gold answers (an empty list: "no answer") and their offsets if given; None without any."""
    if row.get("answers") not in (None, ""):
        value = row["answers"]
        if isinstance(value, str):  # a CSV cell: a JSON list, or one answer
            try:
                if value.lstrip().startswith("["):
                    check_depth(value, f"{where}, field 'answers',")
                value = json.loads(value) if value.lstrip().startswith("[") else [value]
            except json.JSONDecodeError:
                raise QuestionFileError(f"{where}, field 'answers': not a JSON list of texts.") from None
        if isinstance(value, dict):  # SQuAD's {"text": [...], "answer_start": [...]}
            texts, starts = value.get("text"), value.get("answer_start") or []
            if not isinstance(texts, list) or not isinstance(starts, list):
                raise QuestionFileError(f"{where}, field 'answers': 'text' and 'answer_start' should be lists.")
            return [str(t) for t in texts], [*starts, *[None] * (len(texts) - len(starts))][: len(texts)]
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise QuestionFileError(f"{where}, field 'answers': a list of texts, e.g. [\"Paris\"].")
        return value, [None] * len(value)
    if "answer" in row and row["answer"] is not None:
        if not isinstance(row["answer"], str):
            raise QuestionFileError(f"{where}, field 'answer': a text (empty for “no answer”).")
        text = row["answer"]
        return ([text], [None]) if text.strip() else ([], [])
    if isinstance(row.get("answers"), str) or "answers" in row or "answer" in row:
        return [], []  # the column is there and this cell is empty: "no answer"
    return None


def checked_examples(rows: list[Row], limits: Limits, fmt: str) -> tuple[list[QAExample], bool]:
    """The rows as examples, each checked; raises on the first problem, naming its row and field."""
    if not rows:
        raise QuestionFileError("The file has no rows of questions (only a header, or nothing).")
    if limits.max_rows is not None and len(rows) > limits.max_rows:
        raise QuestionFileError(
            f"The file has {len(rows):,} questions; this app takes up to {limits.max_rows:,} at a time. "
            "Split it, or run `python -m variants evaluate --data FILE` on your own machine."
        )
    noun = "Question" if fmt == "squad" else "Line" if fmt == "jsonl" else "Row"
    examples: list[QAExample] = []
    seen: dict[str, int] = {}
    labelled: bool | None = None
    for number, row in rows:
        where = f"{noun} {number}"
        context, question = row.get("context"), row.get("question")
        for field_name, value in (("context", context), ("question", question)):
            if not isinstance(value, str) or not value.strip():
                raise QuestionFileError(f"{where}, field '{field_name}': missing or empty.")
            if (problem := invalid_text(value)) is not None:
                raise QuestionFileError(f"{where}, field '{field_name}': not valid text: {problem}.")
        limit_checks = (
            ("context", context, limits.max_context_chars),
            ("question", question, limits.max_question_chars),
        )
        for field_name, value, limit in limit_checks:
            if limit is not None and len(value) > limit:
                raise QuestionFileError(
                    f"{where}, field '{field_name}': {len(value):,} characters, over this app's limit of {limit:,}."
                )
        gold = answer_texts(row, where)
        if labelled is None:
            labelled = gold is not None
        elif labelled != (gold is not None):
            raise QuestionFileError(
                f"{where}, field 'answer': some rows give answers and this one does not; give every row an answer "
                "(empty for “no answer”) or none."
            )
        texts, starts = gold or ([], [])
        for text in texts:
            if (problem := invalid_text(text)) is not None:
                raise QuestionFileError(f"{where}, field 'answer': not valid text: {problem}.")
            if text.strip() and text not in context:
                raise QuestionFileError(
                    f"{where}, field 'answer': {short(text)} is not in its context. An answer is a span copied "
                    "exactly from its passage (as in SQuAD); leave it empty for “no answer”."
                )
        qid = row.get("id")
        qid = str(qid).strip() if qid not in (None, "") else f"row-{number}"
        if qid in seen:
            raise QuestionFileError(f"{where}, field 'id': {short(qid)} is also the id of {noun.lower()} {seen[qid]}.")
        seen[qid] = number
        # an offset that does not point at its text is replaced by the text's first place (the text is what is scored)
        starts_known = tuple(
            s if isinstance(s, int) and context[s : s + len(t)] == t else context.find(t)
            for t, s in zip(texts, starts, strict=True)
        )
        examples.append(
            QAExample(qid, question, context, tuple(texts), starts_known, title=str(row.get("title") or ""))
        )
    return examples, bool(labelled)


def short(text: str, n: int = 60) -> str:
    return repr(text if len(text) <= n else text[: n - 1] + "…")
