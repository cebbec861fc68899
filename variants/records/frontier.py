"""The best trade-offs of a record: the variants no other beats on both speed and accuracy (its Pareto frontier).

One definition, :func:`frontier`, which the Benchmark tab's chart and headline, the Your questions chart,
``python -m variants bench`` and the report share. The peers count as any variant does: where optimum's INT8 is
both faster and more accurate than a variant of ours, that variant is off the frontier and
:func:`frontier_sentence` says who beats it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from variants.records.record import Record, accuracy_column, record_view


@dataclass(frozen=True)
class Frontier:
    """``best``: the names no other beats, fastest first; ``beaten``: every other name -> those that beat it."""

    best: list[str]
    beaten: dict[str, list[str]] = field(default_factory=dict)


def beats(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether ``a`` (latency, accuracy) beats ``b``: at least as fast and as accurate, and better at one."""
    return a[0] <= b[0] and a[1] >= b[1] and (a[0] < b[0] or a[1] > b[1])


def frontier(points: Mapping[str, tuple[float, float]]) -> Frontier:
    """The frontier of ``points`` (name -> (latency, accuracy); lower latency and higher accuracy are better).
    Points equal on both stand or fall together (neither beats the other); missing or NaN values are left out."""
    shown = {
        name: (float(lat), float(acc))
        for name, (lat, acc) in points.items()
        if lat is not None and acc is not None and math.isfinite(float(lat)) and math.isfinite(float(acc))
    }
    beaten = {name: [other for other, q in shown.items() if other != name and beats(q, p)] for name, p in shown.items()}
    best = sorted((n for n, by in beaten.items() if not by), key=lambda n: (shown[n][0], -shown[n][1]))
    return Frontier(best, {n: by for n, by in beaten.items() if by})


def record_points(record: Record, view: str = "answerable") -> dict[str, tuple[float, float]]:
    """Each measured entry of ``record``: (median latency, accuracy of the shown ``view``); entries with random
    weights (no accuracy), an error or no latency are left out."""
    column = accuracy_column(view)
    points = {}
    for entry in record.entries:
        scores = entry.view(record_view(view))
        accuracy = getattr(scores, column, None) if scores else None
        if entry.error or entry.latency_ms is None or entry.latency_ms.p50 is None or accuracy is None:
            continue
        points[entry.variant] = (entry.latency_ms.p50, accuracy)
    return points


def record_frontier(record: Record, view: str = "answerable") -> Frontier:
    return frontier(record_points(record, view))


def frontier_sentence(
    record: Record, view: str = "answerable", where: str = "on this machine", names: Mapping[str, str] | None = None
) -> str:
    """E.g. "On this machine the best trade-offs are INT8, Pruned + ONNX and the baseline: each of the others is
    slower and less accurate than one of them (optimum INT8 beats Pruned)." Empty with fewer than two points.
    ``names``: what to call a variant (its short label where not given)."""
    found = record_frontier(record, view)
    if len(found.best) + len(found.beaten) < 2:
        return ""
    label = {e.variant: (names or {}).get(e.variant) or e.short_label for e in record.entries}
    peers = {e.variant for e in record.entries if e.is_peer or any(e is p for p in record.peers)}
    names = [label[n] for n in found.best]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    if len(names) == 1:
        text = f"{where.capitalize()} the best trade-off is {listed}: at least as fast and as accurate as every other"
    else:
        text = f"{where.capitalize()} the best trade-offs are {listed}: each other variant is beaten on both speed "
        text += "and accuracy by one of them"
    by_peer = []  # a peer that beats one of ours is said by name: the optimization it would replace
    for name, by in found.beaten.items():
        peer = next((b for b in by if b in peers), None)
        if name not in peers and peer:
            by_peer.append(f"{label[peer]} beats {label[name]} on both")
    return text + (f" ({'; '.join(by_peer)})" if by_peer else "") + "."
