"""The Benchmark tab's read-only tables as plain HTML: a ``<table>`` with a ``<caption>``, column headers
(``scope="col"``), each row named by its first cell (``scope="row"``, kept in view while a phone scrolls the
numbers sideways), numbers right-aligned, fixed column widths, inside a focusable named scroll region
(:func:`ui.text.scroll_region`). It replaced ``gr.Dataframe``, whose Gradio 6.17 markup failed axe (a ``role=grid``
holding a drop zone, empty cells as nameless buttons: docs/accessibility.md; Gradio 6.31 fixed it, and the plain
table stays, the lighter choice for a read-only view). :func:`table_html` is pure: a
DataFrame in, escaped HTML out; :func:`table_block` is the component that shows it."""

import math
import numbers
from typing import Any

import gradio as gr

from .styles import BANNER_CSS, html_block
from .text import esc, scroll_region

NUM = ' class="num"'
EMPTY = "–"  # a cell with nothing in it (not measured); the dash screen readers say as "dash"
NUMERIC_START = (*"0123456789$–−+-.", "free")  # a text cell that holds a number (a cost, a range, a size)
# Gradio's prose styles draw every cell's border in the text color (.gradio-container .prose td): these
# selectors are more specific, so a table reads as rows with a line under each. No padding: Gradio 6.31's prose tables
# have 10 px, which took a phone's fourth column out of view.
TABLE_CSS = """
.qa-scroll table.qa-table { border-collapse: separate; border-spacing: 0; table-layout: fixed; margin: 0; border: 0;
  padding: 0; font-size: var(--text-sm); color: var(--body-text-color); }
.qa-table-title { font-weight: 600; font-size: var(--text-sm); padding: 4px 0 8px; color: var(--body-text-color); }
.qa-scroll { position: relative; }
.qa-scroll table.qa-table caption { position: absolute; width: 1px; height: 1px; overflow: hidden;
  clip-path: inset(50%); white-space: nowrap; }
.qa-scroll table.qa-table th, .qa-scroll table.qa-table td { padding: 6px 8px; border: 0;
  border-bottom: 1px solid var(--border-color-primary); vertical-align: top; text-align: left;
  word-break: normal; overflow-wrap: normal; background: var(--background-fill-primary); }
.qa-scroll table.qa-table thead th { font-weight: 600; vertical-align: bottom; position: sticky; top: 0; z-index: 2;
  background: var(--background-fill-secondary); }
.qa-scroll table.qa-table tbody th { font-weight: 600; overflow-wrap: anywhere; }
.qa-scroll table.qa-table .num { text-align: right; font-variant-numeric: tabular-nums; }
.qa-scroll table.qa-table tr > :first-child { position: sticky; left: 0; z-index: 1;
  box-shadow: inset -1px 0 0 var(--border-color-primary); }
.qa-scroll table.qa-table thead th:first-child { z-index: 3; }
"""


def _numeric(values: list[Any]) -> bool:
    """A column to right-align: every cell with something in it a number, or text that starts as one does (a
    column of empty cells too: its dashes stand where numbers would)."""
    filled = [v for v in values if not _blank(v)]
    return all(
        (isinstance(v, numbers.Number) and not isinstance(v, bool)) or str(v).startswith(NUMERIC_START) for v in filled
    )


def _blank(value: Any) -> bool:
    if value is None or value == "":
        return True
    try:
        return bool(math.isnan(value))
    except (TypeError, ValueError):
        return False


def cell_text(value: Any) -> str:
    """A cell's text, unescaped: a float as rounded upstream with thousands separated (``1,234.5``, never
    ``1e+06``), an integral number without decimals, nothing as :data:`EMPTY`."""
    if _blank(value):
        return EMPTY
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{value:,}"
    if isinstance(value, numbers.Real):
        return format(float(value), ",.12g")
    return str(value)


def table_html(table, caption: str, widths: list[str] | None = None, region: str = "", max_height: str = "") -> str:
    """``table`` (a DataFrame of the headers shown) as an HTML table captioned ``caption``, the first column's cell
    naming each row, ``widths`` (CSS lengths, one per column) fixed (the table as wide as they add up to: each
    number close to its row's name; without them the region's width), in a scroll region named ``region`` (default:
    the caption) that scrolls sideways on a phone and, with ``max_height``, up and down under a header that stays.
    Every header and cell is escaped: a record's labels can be a visitor's text (a Hub model id)."""
    columns = [] if table is None else [str(c) for c in table.columns]
    rows = [] if table is None else table.itertuples(index=False, name=None)
    rows = [list(r) for r in rows]
    right = [i > 0 and _numeric([r[i] for r in rows]) for i in range(len(columns))]
    widths = widths if widths and len(widths) == len(columns) else []
    cols = "".join(f'<col style="width: {esc(w)}">' for w in widths)
    total = " + ".join(widths)
    style = f' style="width: calc({esc(total)})"' if widths else ' style="width: 100%"'
    head = "".join(f'<th scope="col"{NUM if right[i] else ""}>{esc(name)}</th>' for i, name in enumerate(columns))
    body = ""
    for row in rows:
        cells = f'<th scope="row">{esc(cell_text(row[0]))}</th>' if row else ""
        cells += "".join(f"<td{NUM if right[i] else ''}>{esc(cell_text(v))}</td>" for i, v in enumerate(row) if i)
        body += f"<tr>{cells}</tr>"
    if not rows:
        body = f'<tr><td colspan="{max(len(columns), 1)}" class="qa-muted">Nothing to show.</td></tr>'
    html = (
        f'<table class="qa-table"{style}><caption>{esc(caption)}</caption>'
        + (f"<colgroup>{cols}</colgroup>" if cols else "")
        + (f"<thead><tr>{head}</tr></thead>" if head else "")
        + f"<tbody>{body}</tbody></table>"
    )
    scroll = "overflow-y: auto; max-height: " + max_height if max_height else ""
    # the caption names the table for a screen reader; the eye reads the same words above the region, which stay
    # in view while a phone scrolls the table sideways (a caption scrolls with it)
    title = f'<div class="qa-table-title" aria-hidden="true">{esc(caption)}</div>'
    return title + scroll_region(html, region or caption, scroll)


def table_block(value: str = "", **kwargs) -> gr.HTML:
    """The component that shows a :func:`table_html` (its styles travel with it, as every HTML block's)."""
    return html_block(value, css=BANNER_CSS + TABLE_CSS, elem_classes=["qa-table-block"], **kwargs)
