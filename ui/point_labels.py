"""Labels for the points of the accuracy-against-speed chart: what each says (name, speedup, F1 lost against
the baseline) and where it goes, so that no two collide and none leaves the plot.

Pure arithmetic, no plotting import: the Benchmark tab's plotly figure and the README's matplotlib PNG
(``variants.benchmarking.plot``) place their labels with the same function.

Placement is done in pixels for the narrowest plot the chart is drawn in (a phone's), each label offset from
its point by a fixed number of pixels. A wider plot only moves the points further apart sideways (its height
is fixed), so labels clear of each other on the phone stay clear on a desktop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from variants.core.spec import distilled

# The fewest words that name a variant beside its point (the legend and the hover box give the full name).
TAGS = {
    "baseline": "Baseline",
    "pruned-dense": "Pruned, dense",
    "pruned": "Pruned",
    "pruned-onnx": "+ ONNX",
    "pruned-onnx-opt": "+ ORT-opt.",
    "pruned-onnx-opt-int8": "INT8",
    "pruned-onnx-opt-fp16": "FP16",
    "peer": "pipeline",
    "optimum-int8": "optimum INT8",
}
TAGS |= {"baseline" + k.removeprefix("pruned"): v for k, v in TAGS.items() if k.startswith("pruned-onnx")}
DISTILLED_TAG = "Distilled"
MINUS = "\u2212"  # a real minus sign: "-3.4" reads as a dash in most fonts


def tag(variant: str, fallback: str) -> str:
    """The fewest words for ``variant``; ``fallback``, its short label, where it has none (or where the label is a
    distilled partner's: its chain runs under the pruned chain's names, and "Pruned" would say what it is not)."""
    if variant == "pruned" and distilled(fallback):
        return DISTILLED_TAG
    return TAGS.get(variant) or fallback


def tags(record) -> dict[str, str]:
    """Each variant of ``record`` (a :class:`~variants.records.record.Record`) in the fewest words (:func:`tag`)."""
    return {e.variant: tag(e.variant, e.short_label) for e in record.entries}


def signed(value: float) -> str:
    """+0.4 / −5.7 (one decimal, a real minus sign; 0.0 without a sign)."""
    text = f"{abs(value):.1f}"
    return text if text == "0.0" else ("+" if value > 0 else MINUS) + text


def speed_text(speedup: float | None) -> str:
    if speedup is None or (isinstance(speedup, float) and math.isnan(speedup)):
        return "?×"
    return f"{speedup:.1f}×" if speedup < 10 else f"{speedup:.0f}×"


def size_text(size_mb: float | None) -> str:
    """ "52 MB" (the model's files), "" where not known."""
    if size_mb is None or (isinstance(size_mb, float) and math.isnan(size_mb)):
        return ""
    return f"{size_mb:.0f} MB"


def label_lines(
    variant: str,
    name: str,
    speedup: float | None,
    f1: float,
    baseline_f1: float | None,
    unit: str = "F1",
    size_mb: float | None = None,
    best: bool = True,
) -> list[str]:
    """The name and model size, then its speed and F1 against the baseline's, e.g. ["INT8 · 52 MB",
    "3.7× · −5.7 F1"]: two short lines fit a phone's plot, where one long line per point cannot. The baseline
    gives its own F1 ("1× · F1 66.7"), the reference of every other label. ``unit`` names what the y axis
    measures where it is not F1 against answers given (the "Your questions" tab without answers plots the overlap
    with the baseline's answers). A point off the best trade-offs (``best`` False) gets one short line, its name
    and speed ("+ ONNX 2.1×"): it is drawn fainter, and its numbers are in the hover box and the table."""
    size = size_text(size_mb)
    first = f"{tag(variant, name)} · {size}" if size else tag(variant, name)
    if not best:
        return [tag(variant, name) if variant == "baseline" else f"{tag(variant, name)} {speed_text(speedup)}"]
    if variant == "baseline":
        return [first, f"1× · {unit} {f1:.1f}"]
    if baseline_f1 is None:  # no baseline measured in this record: nothing to take the numbers against
        return [first, f"{unit} {f1:.1f}"]
    return [first, f"{speed_text(speedup)} · {signed(f1 - baseline_f1)} {unit}"]


LARGEST_MARKER_PX = 24.0  # the largest model's marker; the others' areas in proportion to their size in MB
SMALLEST_MARKER_PX = 9.0


def marker_px(size_mb: float | None, largest_mb: float | None) -> float:
    """A marker's diameter in pixels, its area in proportion to the model's size (the largest one's is
    :data:`LARGEST_MARKER_PX`), so that a smaller model is seen smaller; a middling size where not known."""
    if not size_mb or not largest_mb or math.isnan(size_mb) or math.isnan(largest_mb):
        return 14.0
    return max(SMALLEST_MARKER_PX, LARGEST_MARKER_PX * math.sqrt(size_mb / largest_mb))


@dataclass(frozen=True)
class Placed:
    """Where a label goes: its text box's offset from its point in pixels (dx right, dy down) and which of its
    sides sits at that offset ("left": the text runs rightwards from it)."""

    dx: float
    dy: float
    anchor: str  # "left" or "right"


@dataclass(frozen=True)
class Box:
    left: float
    top: float
    right: float
    bottom: float

    def hits(self, other: Box, gap: float = 2.0) -> bool:
        return not (
            self.right + gap <= other.left
            or other.right + gap <= self.left
            or self.bottom + gap <= other.top
            or other.bottom + gap <= self.top
        )

    def inside(self, width: float, height: float) -> bool:
        return self.left >= 0 and self.top >= 0 and self.right <= width and self.bottom <= height


def text_size(lines: list[str], font_px: float) -> tuple[float, float]:
    """A generous estimate of a label's width and height in pixels in a sans-serif font: 0.6 em a character,
    1.3 em a line."""
    return 0.6 * font_px * max(map(len, lines)), 1.3 * font_px * len(lines) + 2


def place_labels(
    points: list[tuple[float, float]],
    labels: list[list[str]],
    x_range: tuple[float, float],
    y_range: tuple[float, float],
    size: tuple[float, float],
    font_px: float = 10,
    marker_px: float | list[float] = 14,
) -> list[Placed]:
    """A position for each label (its lines) of ``points`` (data coordinates, in the order given, the first
    placed first)
    in a plot area of ``size`` (width, height) pixels showing ``x_range`` by ``y_range``: beside its point if
    there is room, else on the nearest free row above or below, clear of every other label and marker and
    inside the plot. A label that fits nowhere goes beside its point, to the side with more room. ``marker_px``:
    every marker's diameter, or each one's."""
    width, height = size
    (x0, x1), (y0, y1) = x_range, y_range
    pixels = [((x - x0) / (x1 - x0) * width, (y1 - y) / (y1 - y0) * height) for x, y in points]
    sizes = marker_px if isinstance(marker_px, list) else [marker_px] * len(points)
    halves = [m / 2 + 1 for m in sizes]
    taken = [Box(px - h, py - h, px + h, py + h) for (px, py), h in zip(pixels, halves, strict=True)]
    markers = [(px, py, h) for (px, py), h in zip(pixels, halves, strict=True)]
    labelled: list[Box] = []  # the labels placed so far
    step = 1.3 * font_px  # rows a line apart
    placed = []
    for (px, py), lines, half in zip(pixels, labels, halves, strict=True):
        w, h = text_size(lines, font_px)
        candidates = [
            Placed(dx, dy, anchor) for dy in _rows(step) for anchor, dx in (("left", half + 3), ("right", -half - 3))
        ]
        # Markers the leader must not cross: not those that overlap this one (any line leaving it crosses them).
        apart = [m for m in markers if math.hypot(m[0] - px, m[1] - py) > half + m[2]]
        chosen = None
        for strict in (True, False):  # second pass: a leader that crosses a marker beats labels on each other
            for c in candidates:
                box = _box(px, py, c, w, h)
                if (
                    box.inside(width, height)
                    and not any(box.hits(t) for t in taken)
                    and not (strict and _leader_crosses((px, py), box, c, apart, labelled))
                ):
                    chosen, found = c, box
                    break
            if chosen is not None:
                break
        if chosen is None:
            anchor = "left" if px < width / 2 else "right"
            chosen = Placed(half + 3 if anchor == "left" else -half - 3, 0.0, anchor)
            found = _box(px, py, chosen, w, h)
        taken.append(found)
        labelled.append(found)
        placed.append(chosen)
    return placed


def _rows(step: float, most: int = 24):
    """Vertical offsets to try, nearest first: beside the point, then a line below, a line above, two below..."""
    yield 0.0
    for k in range(1, most + 1):
        yield k * step
        yield -k * step


def _leader_crosses(point, box: Box, placed: Placed, markers, labels: list[Box]) -> bool:
    """Whether the line from ``point`` to its label (the middle of the box's near side) passes over another
    marker, which would make the label seem to name that one, or through another label."""
    (px, py), tx = point, box.left if placed.anchor == "left" else box.right
    ty = (box.top + box.bottom) / 2
    steps = max(2, int(math.hypot(tx - px, ty - py) / 2))
    line = [(px + (tx - px) * k / steps, py + (ty - py) * k / steps) for k in range(steps + 1)]
    if any(abs(x - mx) <= mh + 1 and abs(y - my) <= mh + 1 for x, y in line for mx, my, mh in markers):
        return True
    return any(b.left < x < b.right and b.top < y < b.bottom for x, y in line for b in labels)


def _box(px: float, py: float, placed: Placed, w: float, h: float) -> Box:
    """The label's box: vertically centred on the point's height plus ``dy``."""
    left = px + placed.dx if placed.anchor == "left" else px + placed.dx - w
    top = py + placed.dy - h / 2
    return Box(left, top, left + w, top + h)


def fitted_range(values: list[float], step: float = 2.0, pad: float = 1.0) -> tuple[float, float]:
    """An axis range around ``values`` on multiples of ``step``, at least ``pad`` clear of them, within 0-100."""
    low, high = min(values) - pad, max(values) + pad
    low = max(0.0, math.floor(low / step) * step)
    high = min(100.0, math.ceil(high / step) * step)
    return (low, high if high > low else low + step)
