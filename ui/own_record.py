"""The Benchmark tab's line about the app's own measurement of its chain on this machine (``VARIANTS_SELF_BENCH``):
where it stands while it runs, with its progress, and the record it took once it ends, which the tab then shows by
default. The measurement itself runs in the engine's tools (:mod:`variants.benchmarking.self_bench`); app.py hands
the tab its status (:class:`~variants.records.own.OwnStatus`)."""

from collections.abc import Callable

from variants.records import own
from variants.records.own import OwnStatus
from variants.records.record import Record

from .text import esc

OwnSource = Callable[[], OwnStatus]  # SelfBench.status: where the measurement stands now
POLL_S = 2.0  # how often an open page reads it while it runs


def own_record(status: OwnStatus | None) -> Record | None:
    """The record the app took of its own chain, once it has one."""
    return status.record if status is not None and status.state == own.DONE else None


def own_html(status: OwnStatus | None) -> str:
    """One plain sentence, with a progress bar while it measures; empty when the app does not measure itself."""
    if status is None or status.state == own.OFF:
        return ""
    text = esc(status.words())
    if status.state == own.FAILED:
        return f'<div class="qa-notice" role="status">{text}</div>'
    if status.state == own.DONE:
        return f'<div class="qa-summary" role="status">{text} It is the record shown below by default.</div>'
    label = esc("Questions measured so far")
    bar = (
        f'<progress id="bench-own-progress" max="{max(1, status.total)}" value="{status.done}" '
        f'aria-label="{label}" style="width:100%"></progress>'
    )
    return f'<div class="qa-summary" role="status"><div>{text}</div>{bar}</div>'


def with_own(stored: list[Record], record: Record | None) -> list[Record]:
    """``stored`` with the app's own record first (added once, in place: every page shares the list)."""
    if record is not None and all(r.file != record.file or not r.is_own for r in stored):
        stored.insert(0, record)
    return stored
