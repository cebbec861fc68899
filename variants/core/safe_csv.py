"""Every CSV the project writes goes through here: a cell of text that a spreadsheet would run as a formula is
written as text, as OWASP's "CSV injection" page advises.

A visitor's question, a gold answer, a model's answer (a span of the visitor's passage), a Hub model id or a file's
name can start with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return; a spreadsheet opening the file then runs it
(``=HYPERLINK(...)``, ``-1+2``). :func:`neutralize` puts an apostrophe before such a cell, and every text cell is
quoted, so that a separator inside it cannot start a new cell in a spreadsheet that splits on another character.
Numbers are written as numbers (Python ints and floats, never formatted strings), so that they stay numeric and a
negative one keeps its sign; only text is neutralized.

Hand-written rather than ``defusedcsv``: that package replaces the ``csv`` module's writer, while two of the three
writers here are pandas' ``DataFrame.to_csv``; the rule itself is six characters and one apostrophe.
"""

from __future__ import annotations

import csv
import math
import numbers
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP's list: what a spreadsheet reads as the start of a formula
NO_ANSWER = "(no answer)"  # a model found no answer: the page says so, and an empty cell reads as "not asked"
QUOTING = csv.QUOTE_NONNUMERIC  # every text cell in quotes, numbers bare


def neutralize(value: Any) -> Any:
    """The one neutralizing function: text that starts a formula gets a leading apostrophe; numbers, None and
    other text pass as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def answer_cell(text: str | None) -> str:
    """A model's answer as a file writes it: "" (the model's "no answer") becomes :data:`NO_ANSWER`."""
    return NO_ANSWER if text == "" else (text or "")


def write_rows(path: str | Path, rows: Iterable[Iterable[Any]]) -> Path:
    """Write ``rows`` (the header first) to ``path`` with every cell neutralized."""
    path = Path(path)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=QUOTING)
        for row in rows:
            writer.writerow([_cell(c) for c in row])
    return path


def write_frame(frame, path: str | Path) -> Path:
    """Write a pandas DataFrame (header and index-free rows) to ``path`` with every cell neutralized."""
    header = [str(c) for c in frame.columns]
    cells = frame.astype(object).where(frame.notna(), None)  # NaN, None and pandas' NA: one empty cell
    return write_rows(path, [header, *cells.itertuples(index=False, name=None)])


def _cell(value: Any) -> Any:
    """A cell as :func:`write_rows` hands it to the writer: numbers as numbers (NaN as an empty cell), booleans and
    other objects as their text, all of it neutralized."""
    if value is None or (isinstance(value, numbers.Real) and math.isnan(value)):
        return ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's numbers are Real too
        return neutralize(str(value))
    return value
