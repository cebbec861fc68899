"""A benchmark record as the Benchmark tab shows it: its header (what was measured, on what, how busy the machine
was), its table (the columns each accuracy view shows, short for a phone) and its CSV. Pure functions of a record:
:mod:`ui.benchmark` lays them out with the charts and wires the tab."""

import math
import time
from pathlib import Path

from variants.answering.timing import busy
from variants.building.replica import LATENCY_ONLY
from variants.core import safe_csv
from variants.core.hardware import hardware_label
from variants.records import results
from variants.records.record import ANSWERABLE, VIEW_TITLES, Record, accuracy_column, record_view

from .charts import no_answer_floor
from .cost_view import COST_COLUMNS, cost_cell
from .files import new_folder
from .headline import headline_html
from .record_choice import lineup_html
from .text import count, esc, fmt_params

TABLE_COLUMNS = {  # records_to_frame column -> table header (short: a phone shows three or four at a time)
    "short_label": "Variant",
    "f1": "F1",
    "exact": "EM",
    "has_ans_f1": "F1 answerable",
    "no_ans_f1": "F1 unanswerable",
    "has_ans_answered": "% answerable answered",
    "has_ans_exact": "EM answerable",
    "threshold": "threshold",
    "p50_ms": "median ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "throughput_qps": "q/s",
    "speedup_vs_baseline": "× baseline",
    "speedup_vs_peer": "× pipeline",
    "speedup_vs_optimum_int8": "× optimum INT8",
    "speedup_vs_baseline_spread": "× baseline, range over passes",
    "size_mb": "MB",
    "parameters": "params",
    "usd_per_million": "$ per million answers",
    "usd_per_million_best": "$ per million, best batch",
}
PEER_RATIOS = ["speedup_vs_peer", "speedup_vs_optimum_int8"]  # the README's headline ratios, beside × baseline
SPEED_COLUMNS = ["p50_ms", "p90_ms", "speedup_vs_baseline", *PEER_RATIOS, "speedup_vs_baseline_spread"]
SQUAD_COLUMNS = ["short_label", "f1", "exact", "has_ans_f1", "no_ans_f1", "has_ans_answered"]
SIZE_COLUMNS = ["size_mb", "parameters"]
VIEW_COLUMNS = {  # each view's table, in order: all of it in a desktop's width (the CSV has every column)
    "answerable": ["short_label", "has_ans_f1", "has_ans_answered", "speedup_vs_baseline", *PEER_RATIOS, "p50_ms",
                   "has_ans_exact",
                   "p90_ms", "p99_ms", "throughput_qps", "speedup_vs_baseline_spread", *SIZE_COLUMNS],
    "pipeline": [*SQUAD_COLUMNS, *SPEED_COLUMNS, *SIZE_COLUMNS],  # the threshold: 0 for all, in the header
    "best": [*SQUAD_COLUMNS, "threshold", *SPEED_COLUMNS, *SIZE_COLUMNS],
    "calibrated": [*SQUAD_COLUMNS, "threshold", *SPEED_COLUMNS, *SIZE_COLUMNS],
}  # fmt: skip
# The table on the page: what a phone can swipe through (the name pinned, six or seven numbers); every column is one
# click away ("Every column") and in the CSV. It showed 4 of 15 columns on a phone.
SHORT_COLUMNS = {
    "answerable": ["short_label", "has_ans_f1", "has_ans_answered", "speedup_vs_baseline", *PEER_RATIOS, "p50_ms",
                   "size_mb"],
    "pipeline": ["short_label", "f1", "has_ans_f1", "speedup_vs_baseline", *PEER_RATIOS, "p50_ms", "size_mb"],
    "best": ["short_label", "f1", "threshold", "speedup_vs_baseline", *PEER_RATIOS, "p50_ms", "size_mb"],
    "calibrated": ["short_label", "f1", "threshold", "speedup_vs_baseline", *PEER_RATIOS, "p50_ms", "size_mb"],
}  # fmt: skip
# The answerable view's headers are short: its table's label says the accuracy is on the answerable questions.
ANSWERABLE_HEADERS = {"has_ans_f1": "F1", "has_ans_answered": "% answered", "has_ans_exact": "EM"}
# Column widths by header (others 72px): a phone (324 px of table) shows the name and the first three numbers, the
# rest a swipe away; a desktop every column. Fixed, so that a header wraps between words, never within one.
COLUMN_WIDTHS = {
    "Variant": "108px",
    "F1": "60px",
    "% answered": "80px",
    "× baseline": "72px",
    "× pipeline": "76px",
    "× optimum INT8": "84px",
    "threshold": "84px",
    **dict.fromkeys(["F1 answerable", "F1 unanswerable", "% answerable answered", "EM answerable"], "104px"),
    "× baseline, range over passes": "104px",
    "$ per million answers": "120px",
    "$ per million, best batch": "150px",
}
VIEW_CHOICES = [  # (what the tab's control says, the view); the records keep the three SQuAD v2 views
    ("Answerable questions (what the app does)", "answerable"),
    ("SQuAD v2, threshold 0", "pipeline"),
    ("SQuAD v2, best threshold", "best"),
    ("SQuAD v2, calibrated threshold", "calibrated"),
]
# The default view: people ask questions their passage answers, so the tab leads with F1 on SQuAD v2's answerable
# questions at the app's rule (threshold 0: the record's "pipeline" view) and the share of them answered.
DEFAULT_VIEW = ANSWERABLE  # reads the record's threshold-0 view (variants.records.record.record_view)
SHOWN_TITLES = {  # the header's words for the SQuAD v2 views (the answerable one has a sentence of its own)
    "pipeline": "all of SQuAD v2, " + VIEW_TITLES["pipeline"],
    "best": "all of SQuAD v2, " + VIEW_TITLES["best"].removeprefix("official SQuAD v2 "),
    "calibrated": "all of SQuAD v2, " + VIEW_TITLES["calibrated"],
}
CHART_TITLES = {  # the chart's line naming the view: at most 50 characters (a phone's plot shows about 55)
    "answerable": "answerable questions, threshold 0 (the app's rule)",
    "pipeline": "all of SQuAD v2, threshold 0 (the app's rule)",
    "best": "all of SQuAD v2, best threshold (chosen on it)",
    "calibrated": "all of SQuAD v2, each model's calibrated threshold",
}


def record_frame(record: Record | None, view: str = DEFAULT_VIEW):
    """One row per variant (and the transformers-pipeline peer, if measured) of ``record``, with the accuracy
    columns of ``view`` (the answerable view reads the record's threshold-0 view)."""
    if record is None:
        return None
    return results.records_to_frame([record], view=record_view(view))


def missing_numbers(frame, view: str) -> str:
    """What ``view`` needs that the record does not hold, said plainly (empty when nothing is missing)."""
    if frame is None or not len(frame) or view != "answerable":
        return ""
    measured = frame[~frame["latency_only"].fillna(False).astype(bool)]
    if not len(measured):
        return ""
    if measured["has_ans_f1"].isna().all():
        return (
            "This record does not hold F1 on the answerable questions alone (older records kept one score over "
            "all of SQuAD v2): choose a SQuAD v2 view, or run a quick benchmark."
        )
    if measured["has_ans_answered"].isna().all():
        return "This record does not hold the share of answerable questions answered (records from before it was kept)."
    return ""


def view_sentence(record: Record, frame, view: str) -> str:
    """What the accuracy shown means, in plain words (HTML-escaped)."""
    if view == "answerable":
        answerable = frame["has_ans_n"].dropna().max() if frame is not None and len(frame) else None
        n = f"the {count(answerable)} " if answerable else "the "
        return (
            f"Accuracy shown: F1 on {esc(n)}questions whose passage holds the answer (what people ask the app), "
            "at threshold 0, the app's rule, and the share of them given an answer rather than “no answer”."
        )
    text = f"Accuracy shown: {esc(SHOWN_TITLES.get(view, view))}."
    floor = no_answer_floor(record)
    if floor is not None:
        text += (
            f" About half of SQuAD v2's questions have no answer in their passage, so answering “no answer” to "
            f"every one already scores {floor:.1f} (the dotted line): this mix rewards refusing as much as answering."
        )
    return text


def noise_points(n: int | None) -> float | None:
    """Half-width of a 95% interval for an F1 (or EM) on ``n`` questions, in points, at its widest (per-question
    scores in [0, 1] have a standard deviation of at most 0.5): 1.96 * 0.5 / sqrt(n) * 100."""
    return 98 / math.sqrt(n) if n else None


def record_header(
    record: Record | None,
    note: str,
    view: str = DEFAULT_VIEW,
    price: float | None = None,
    machine: str = "",
    frame=None,
) -> str:
    """The record's header: where and how it was measured, what the accuracy shown means, its warnings and the
    headline. ``frame``: the record's rows for ``view`` where the caller has them already (else read here)."""
    if record is None:
        return (
            f'<div class="qa-notice">{esc(note)} Run <code>python -m variants bench</code> to add one, '
            "or press <b>Run quick benchmark</b> below.</div>"
        )
    frame = record_frame(record, view) if frame is None else frame
    questions = record.n_questions
    if view == "answerable" and len(frame) and frame["has_ans_n"].notna().any():
        questions = int(frame["has_ans_n"].max())  # the F1 shown rests on these
    timed = frame["n_latency"].dropna().max() if len(frame) else None
    passes = frame["latency_passes"].dropna().max() if len(frame) else None
    hardware = hardware_label(record.hardware, record.device)
    source = "Quick benchmark (this session, not saved)" if record.is_quick else "Stored benchmark record"
    source = "Measured on this machine by this app (kept with its built models)" if record.is_own else source
    file = Path(record.data.get("file") or "").name
    random_weights = [e.short_label for e in record.entries if e.latency_only]
    measured = "Latency" if random_weights and len(random_weights) == len(record.entries) else "Accuracy"
    sample = f"{measured} on {count(record.n_questions)} SQuAD v2 questions" + (f" ({file})" if file else "")
    noise = noise_points(questions) if measured == "Accuracy" else None
    if noise:
        which = f"on {count(questions)} questions " if questions != record.n_questions else ""
        noisy = "noisy at this size: " if record.noisy else ""
        sample += f" ({noisy}an F1 {which}is known to ±{noise:.0f} points at most)"
    lines = [
        f"<b>{esc(source)}</b> · {lineup_html(record)} · device <code>{esc(record.device)}</code>"
        f" · measured {esc(record.created)}",
        f"Hardware: {esc(hardware)}",
        esc(sample)
        + (f" · latency over {esc(count(timed))} timed runs per variant" if timed else "")
        + (
            f", in {int(passes)} passes one after another (× baseline: the median of the passes' ratios)"
            if passes and passes > 1
            else ""
        ),
    ]
    if record.data.get("resumed_at"):  # the app's own measurement, taken across a restart
        lines.append(esc(f"Taken across a restart: the app went on from question {count(record.data['resumed_at'])}"))
    if record.data.get("stopped"):  # a quick run stopped early: its numbers are on the questions it finished
        lines.append(esc(f"Stopped after {count(record.n_questions)} of {count(record.data.get('n_total'))} questions"))
    if measured == "Accuracy":
        lines.append(view_sentence(record, frame, view))
    if random_weights:
        which = "every variant" if measured == "Latency" else ", ".join(random_weights)
        lines.append(f'<span class="qa-latency-only">{esc(LATENCY_ONLY)}</span>: {esc(which)} (no accuracy measured)')
    failed = [f"{e.short_label}: {e.error}" for e in record.entries if e.error]
    if failed:
        lines.append(esc("Not measured (no numbers in the table or chart): " + "; ".join(failed)))
    missing = missing_numbers(frame, view)
    warn = "".join(f'<div class="qa-notice">{esc(text)}</div>' for text in (note, busy_note(record), missing) if text)
    questions = "answerable questions" if view == "answerable" else "all of SQuAD v2"
    headline = (
        headline_html(record, frame, accuracy_column(view), questions, price, machine, view)
        if measured == "Accuracy"
        else ""
    )
    return warn + headline + '<div class="qa-record">' + "<br>".join(lines) + "</div>"


def busy_note(record: Record) -> str:
    """The timing rule's flag for a record (its variants' runs stretched by waiting for a CPU), or "": a disturbed
    run crowns no winner here either. Records from before the measure was kept say nothing."""
    stretched = [(e.short_label, e.stretch) for e in record.entries if busy(e.stretch)]
    if not stretched:
        return ""
    which = ", ".join(f"{label} {value:.1f}×" for label, value in stretched)
    return (
        f"The machine was busy while this was timed: runs took longer than their computing time ({which}), so "
        "its latencies and speedups are unreliable. Run it again when the machine is quieter."
    )


def spread(low: float | None, high: float | None) -> str:
    """A speedup's lowest and highest per-pass ratio as text, e.g. 3.90–4.60; empty where there is none
    (a single pass, or a record from before passes)."""
    import pandas as pd  # noqa: PLC0415

    return "" if pd.isna(low) or pd.isna(high) else f"{low:.2f}–{high:.2f}"


def table_frame(frame, view: str = DEFAULT_VIEW, every: bool = True):
    """The table of ``view``: its columns (:data:`VIEW_COLUMNS`, or the few of :data:`SHORT_COLUMNS` where not
    ``every``) under their short headers, numbers rounded, and the cost columns where a price set them."""
    import pandas as pd  # noqa: PLC0415

    columns = (VIEW_COLUMNS if every else SHORT_COLUMNS).get(view, VIEW_COLUMNS["pipeline"])
    if frame is not None and "usd_per_million" in frame and frame["usd_per_million"].notna().any():
        at = max(columns.index(c) for c in ("speedup_vs_baseline", *PEER_RATIOS) if c in columns) + 1  # by the speeds
        best = ["usd_per_million_best"] if frame["usd_per_million_best"].notna().any() else []
        columns = [*columns[:at], "usd_per_million", *best, *columns[at:]]
    if frame is None or not len(frame):
        return pd.DataFrame(columns=[TABLE_COLUMNS[c] for c in columns])
    bounds = zip(frame["speedup_vs_baseline_low"], frame["speedup_vs_baseline_high"], strict=True)
    frame = frame.assign(speedup_vs_baseline_spread=[spread(low, high) for low, high in bounds])
    shown = [c for c in columns if c in frame.columns]
    if "speedup_vs_baseline_spread" in shown and not frame["speedup_vs_baseline_spread"].astype(bool).any():
        shown.remove("speedup_vs_baseline_spread")  # one pass: no range to show
    shown = [c for c in shown if c not in PEER_RATIOS or frame[c].notna().any()]  # a peer the run did not measure
    table = frame[shown].copy()
    random_weights = frame["latency_only"].fillna(False).astype(bool)
    table.loc[random_weights, "short_label"] += f" ({LATENCY_ONLY})"
    for column in table.columns:
        if column in COST_COLUMNS:
            saved = "saving_vs_baseline" + column.removeprefix("usd_per_million")
            batch = frame["best_batch"] if column == "usd_per_million_best" else [None] * len(frame)
            table[column] = [
                cost_cell(v, sv, str(n), b)
                for v, sv, n, b in zip(frame[column], frame[saved], frame["variant"], batch, strict=True)
            ]
        elif column == "parameters":
            table[column] = table[column].map(fmt_params)
        elif column not in ("short_label", "speedup_vs_baseline_spread", *COST_COLUMNS):
            table[column] = table[column].astype(float).round(2)
    return table.rename(columns={**TABLE_COLUMNS, **(ANSWERABLE_HEADERS if view == "answerable" else {})})


def table_widths(table) -> list[str]:
    """Fixed column widths for ``table`` (:data:`COLUMN_WIDTHS`); without them a long name took a third of a
    phone and a header one letter a line."""
    return [COLUMN_WIDTHS.get(h, "72px") for h in table.columns]


def table_label(view: str) -> str:
    """The table's title, which says on which questions its accuracy columns are."""
    if view == "answerable":
        return "Per variant · F1, EM and % answered on the answerable questions"
    return "Per variant · accuracy on all of SQuAD v2"


def write_csv(frame, record: Record, view: str = DEFAULT_VIEW) -> str | None:
    """The record's per-variant rows as a CSV file in this process's temporary folder (the download button's)."""
    if frame is None or not len(frame):
        return None
    folder = new_folder("benchmark-")
    stamp = (record.created or time.strftime("%Y%m%dT%H%M%S")).replace(":", "").replace(" ", "_")
    path = folder / f"benchmark-{record.preset or 'preset'}-{stamp}-{view}.csv"
    safe_csv.write_frame(frame, path)  # a record's labels and names can be a visitor's text (a Hub model id)
    return str(path)
