"""Text for the page: the one HTML-escaping function and the number formats every card, chart and table share.

Every piece of user or model text reaches HTML through :func:`esc`; nothing else in ``ui`` escapes.
"""

import html
import math

SNIPPET_RADIUS = 150  # characters of context shown either side of an answer, cut at a word with an ellipsis


def esc(value: object) -> str:
    """Every piece of user or model text goes through here before it reaches HTML."""
    return html.escape(str(value), quote=True)


def fmt_params(n: int | None) -> str:
    if not n or math.isnan(n):  # None, 0, or NaN (a table's empty cell)
        return "–"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e5 else f"{n:,}"


def fmt_mb(mb: float | None) -> str:
    if mb is None:
        return "–"
    return f"{mb:,.0f} MB" if mb >= 100 else f"{mb:.1f} MB" if mb >= 1 else f"{mb * 1000:.0f} kB"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def fmt_speedup(x: float | None) -> str:
    return "–" if not x else f"{x:.1f}×" if x >= 10 else f"{x:.2f}×"


def fmt_confidence(p: float | None) -> str:
    if p is None:
        return "–"
    if 0 < p < 0.0005:  # would print as 0.0%: a probability, never exactly none
        return "under 0.1%"
    return f"{p:.0%}" if p >= 0.095 else f"{p:.1%}"


def runtime_line(device: str, provider: str, dtype: str) -> str:
    """What it really ran on, e.g. ``cpu · CPUExecutionProvider · INT8``."""
    return " · ".join(p for p in (device, provider, dtype.upper()) if p)


def highlight(context: str, start: int, end: int, radius: int = SNIPPET_RADIUS) -> str:
    """An escaped snippet of ``context`` around [start, end) with the answer in <mark>."""
    if not (0 <= start < end <= len(context)):
        return ""
    lo, hi = max(0, start - radius), min(len(context), end + radius)
    if lo > 0:  # start and stop at word boundaries
        space = context.find(" ", lo, start)
        lo = space + 1 if space != -1 else lo
    if hi < len(context):
        space = context.rfind(" ", end, hi)
        hi = space if space != -1 else hi
    before, answer, after = context[lo:start], context[start:end], context[end:hi]
    return (
        ("…" if lo > 0 else "")
        + esc(before)
        + f"<mark>{esc(answer)}</mark>"
        + esc(after)
        + ("…" if hi < len(context) else "")
    )


def count(value) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "?"


def scroll_region(inner: str, label: str, style: str = "") -> str:
    """``inner`` (HTML) in a box that scrolls sideways on a phone: a focusable, named region, so that a keyboard
    can scroll it and a screen reader says what it holds (WCAG 2.1.1; axe's ``scrollable-region-focusable``)."""
    extra = f' style="{esc(style)}"' if style else ""
    return f'<div class="qa-scroll" role="region" tabindex="0" aria-label="{esc(label)}"{extra}>{inner}</div>'


def notice_html(notice: str, heading: str = "Note") -> str:
    """A banner in plain words with the technical reason one click away: the first sentence of ``notice`` is
    what happened, the rest (an exception's message, a command to run) goes in a closed <details>."""
    plain, _, reason = notice.strip().partition(". ")
    plain = plain if plain.endswith(".") or not reason else plain + "."
    details = f"<details><summary>Why?</summary>{esc(reason)}</details>" if reason.strip() else ""
    return f'<div class="qa-notice"><b>{esc(heading)}:</b> {esc(plain)}{details}</div>'
