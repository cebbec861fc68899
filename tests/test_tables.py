"""The read-only tables as HTML (ui/tables.py): caption, headers with their scope, the row's name, numbers
right-aligned, widths, escaping, an empty table, and the focusable named region around them."""

from html.parser import HTMLParser

import pandas as pd

from ui.tables import EMPTY, cell_text, table_html


class _Table(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.caption, self.headers, self.rows, self.cells, self.attrs = "", [], [], [], []
        self._text, self._in = None, ""

    def handle_starttag(self, tag, attrs):
        self.attrs.append((tag, dict(attrs)))
        if tag in ("th", "td", "caption"):
            self._text, self._in = "", tag
        if tag == "tr":
            self.cells = []

    def handle_data(self, data):
        if self._text is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "caption":
            self.caption, self._text = self._text, None
        elif tag in ("th", "td"):
            self.cells.append(self._text)
            self._text = None
        elif tag == "tr":
            if not self.headers:
                self.headers = self.cells
            else:
                self.rows.append(self.cells)


def read_table(html: str) -> pd.DataFrame:
    """A :func:`table_html` read back as its cells' text (what a reader sees), one column per header."""
    parser = _Table()
    parser.feed(html)
    return pd.DataFrame(parser.rows, columns=parser.headers)


def parsed(html: str) -> _Table:
    parser = _Table()
    parser.feed(html)
    return parser


FRAME = pd.DataFrame(
    {
        "Variant": ["<b>x</b> & co", "INT8"],
        "F1": [85.123, float("nan")],
        "params": ["110.0 M", "66.9 M"],
        "runs on": ["GPU · PyTorch", "CPU"],
        "runs": [12000, 3],
    }
)


def test_a_table_says_what_it_holds_and_names_each_row() -> None:
    html = table_html(FRAME, "Per variant <i>", ["108px", "60px", "72px", "120px", "72px"])
    table = parsed(html)
    assert table.caption == "Per variant <i>" and "<i>" not in html and "<b>" not in html  # all escaped
    assert table.headers == list(FRAME.columns)
    assert table.rows == [
        ["<b>x</b> & co", "85.123", "110.0 M", "GPU · PyTorch", "12,000"],
        ["INT8", EMPTY, "66.9 M", "CPU", "3"],
    ]
    tags = table.attrs
    assert [a.get("scope") for t, a in tags if t == "th"] == ["col"] * 5 + ["row"] * 2  # headers, then row names
    title, region = tags[0][1], tags[1][1]  # the words above the table for the eye, the caption for a reader
    assert title == {"class": "qa-table-title", "aria-hidden": "true"} and "Per variant &lt;i&gt;</div>" in html
    assert tags[1][0] == "div" and region["role"] == "region" and region["tabindex"] == "0"
    assert region["aria-label"] == "Per variant <i>"
    numeric = [a.get("class") == "num" for t, a in tags if t == "th" and a.get("scope") == "col"]
    assert numeric == [False, True, True, False, True]  # numbers (and text that is a number) to the right
    assert [a["style"] for t, a in tags if t == "col"] == [
        f"width: {w}" for w in ("108px", "60px", "72px", "120px", "72px")
    ]


def test_an_empty_table_says_so_and_a_tall_one_scrolls_under_its_header() -> None:
    empty = parsed(table_html(pd.DataFrame(columns=["Variant", "F1"]), "Per variant"))
    assert empty.headers == ["Variant", "F1"] and empty.rows == [["Nothing to show."]]
    assert parsed(table_html(None, "None")).rows == [] and "Nothing to show." in table_html(None, "None")
    assert "max-height: 360px" in table_html(FRAME, "Tall", max_height="360px")
    assert "<col " not in table_html(FRAME, "Widths that do not fit", ["108px"])  # one per column, or none


def test_cells_read_as_numbers_are_written() -> None:
    assert [cell_text(v) for v in (1234.5, 0.125, 2e7, 3, None, float("nan"), "", "free")] == [
        "1,234.5",
        "0.125",
        "20,000,000",
        "3",
        EMPTY,
        EMPTY,
        EMPTY,
        "free",
    ]
