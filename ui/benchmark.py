"""The Benchmark tab: every stored record and this session's quick runs, each selectable, shown as header,
charts, table and CSV, with the accuracy view (which no-answer threshold) chosen in the tab; at its foot the
newest GPU record (:mod:`ui.gpu_view`), read once when the page is built."""

import logging
import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import gradio as gr

from variants.answering.timing import busy
from variants.building.replica import LATENCY_ONLY
from variants.core import safe_csv
from variants.core.hardware import hardware_label
from variants.core.squad import load_squad_json
from variants.records import results
from variants.records.record import ANSWERABLE, VIEW_TITLES, Record, accuracy_column, record_view
from variants.serving.engine import Engine
from variants.serving.guard import ModelLine, Refused

from .bench_details import (
    LONG_COLUMNS,
    PROFILE_COLUMNS,
    long_inputs_frame,
    long_inputs_note,
    profile_frame,
    profile_note,
)
from .charts import accuracy_figure, no_answer_floor, seq_len_figure
from .cost_view import (
    COST_COLUMNS,
    cost_cell,
    cost_note,
    machine_name,
    picked_price,
    price_choices,
    price_controls,
    with_costs,
)
from .cost_view import usd_per_hour as read_price
from .files import new_folder
from .gpu_view import gpu_section, newest_gpu_bench
from .headline import headline_html
from .questions import Runs, status_html
from .record_choice import (
    choices_for,
    find_record,
    lineup_html,
    older_info,
    older_note,
    record_key,
    stored_record,
    stored_records,
    weights_note,
)
from .styles import fixed_widths, html_block, table_look
from .text import count, esc, fmt_params

log = logging.getLogger(__name__)

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
QUICK_DEFAULT = 50  # questions; at fewer, F1 differences of several points are chance


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
    record: Record | None, note: str, view: str = DEFAULT_VIEW, price: float | None = None, machine: str = ""
) -> str:
    if record is None:
        return (
            f'<div class="qa-notice">{esc(note)} Run <code>python -m variants bench</code> to add one, '
            "or press <b>Run quick benchmark</b> below.</div>"
        )
    frame = record_frame(record, view)
    questions = record.n_questions
    if view == "answerable" and len(frame) and frame["has_ans_n"].notna().any():
        questions = int(frame["has_ans_n"].max())  # the F1 shown rests on these
    timed = frame["n_latency"].dropna().max() if len(frame) else None
    passes = frame["latency_passes"].dropna().max() if len(frame) else None
    hardware = hardware_label(record.hardware, record.device)
    source = "Quick benchmark (this session, not saved)" if record.is_quick else "Stored benchmark record"
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


def benchmark_outputs(
    record: Record | None, note: str, view: str = DEFAULT_VIEW, price: float | None = None, key: str | None = None
) -> tuple:
    """(header, scatter, table, the table with every column, seq-len chart, profile note, profile table,
    long-passage note, long-passage table, CSV path) for a record or none, accuracy as ``view`` has it, cost at
    ``price`` dollars per hour (of the published machine ``key``) where set. A record that cannot be shown (edited
    by hand, cut short) gives the outputs of none, with a note saying which and why: never a page that does not
    build."""
    try:
        return _record_outputs(record, note, view, price, key)
    except Exception as exc:  # any field of a stored file may be off: the page still builds
        name = (record.file or record.created) if record is not None else ""
        log.warning("the benchmark record %s cannot be shown: %r", name, exc)
        reason = f"The benchmark record {name} cannot be shown ({type(exc).__name__}: {exc}): choose another."
        return _record_outputs(None, reason, view)


def _record_outputs(
    record: Record | None, note: str, view: str, price: float | None = None, key: str | None = None
) -> tuple:
    frame = with_costs(record_frame(record, view), record, price) if record is not None else None
    csv = write_csv(frame, record, record_view(view)) if record is not None else None
    floor = None if view == "answerable" else no_answer_floor(record)  # answerable: refusing scores 0
    header = cost_note(record, price, key) + record_header(record, note, view, price, machine_name(record, price, key))
    return (
        header,
        accuracy_figure(frame, floor, CHART_TITLES.get(view, view), y=accuracy_column(view)),
        table_frame(frame, view, every=False),
        table_frame(frame, view),
        seq_len_figure(record),
        profile_note(record),
        profile_frame(record),
        long_inputs_note(record),
        long_inputs_frame(record),
        csv,
    )


# What starts a quick benchmark: (engine, questions, how many) -> a run to step chunk by chunk (step, stop,
# finished, record, position, total, seconds). app.py hands in variants.benchmarking.quick.QuickRun: the UI imports
# no benchmarking code. The run goes as the Your questions tab's does, each chunk its own event in the model queue
# (its Runs registry and status line, ui.questions), so a question asked on the Ask tab meanwhile waits for one
# chunk, not for the whole run.
QuickStart = Callable[..., Any]
QUICK_SHOWN = 10  # the values select_outputs gives: what a chunk that changes nothing skips


def make_quick_handlers(
    engine: Engine,
    sample_file: Path,
    start: QuickStart,
    runs: Runs,
    stored: list[Record] | None = None,
    line: ModelLine | None = None,
    engine_for: Callable[[str], Engine] | None = None,
) -> dict[str, Callable]:
    """Start a quick benchmark, run it one chunk per call, stop it; when it ends, its record is added beside the
    stored records (never instead of them), selected. Each chunk takes a turn in ``line`` (the models' line of the
    Ask tab and ``/answer``), so it never runs beside their questions."""

    def begin(n: float, tick: int, request: gr.Request) -> tuple:
        try:
            measured = engine_for(request.session_hash or "") if engine_for else engine  # with the visitor's chain
            run = start(measured, load_squad_json(sample_file), int(n))
            runs.start(request.session_hash or "", run)
        except (ValueError, Refused) as exc:  # variants answered by a backend, a run already going: the reason
            raise gr.Error(str(exc)) from None
        return quick_status(run), (tick or 0) + 1  # the counter's change runs the first chunk

    def quick_step(tick: int, view: str, quick_runs: list[Record], older: bool, request: gr.Request) -> tuple:
        key = request.session_hash or ""
        run, unchanged = runs.get(key), (gr.skip(),) * (QUICK_SHOWN + 2)
        if run is None:
            return *unchanged, gr.skip(), gr.skip()
        if engine_for:
            engine_for(key)  # a use of the visitor's chain the run measures: its idle time starts again
        with line.queued_turn() if line else nullcontext():
            run.step()
        if not run.finished:
            return *unchanged, quick_status(run), tick + 1
        runs.end(key)
        if not run.position:  # stopped before every variant answered one question: no record
            return *unchanged, quick_status(run), gr.skip()
        record = run.record()
        quick_runs = [*(quick_runs or []), record]
        choices = gr.Dropdown(choices=choices_for(stored or [], quick_runs, older), value=record_key(record))
        return *select_outputs(record, "", view), quick_runs, choices, quick_status(run), gr.skip()  # the loop ends

    def stop(request: gr.Request) -> None:
        run = runs.get(request.session_hash or "")
        if run is not None:
            run.stop("stopped")

    return {"begin": begin, "step": quick_step, "stop": stop}


def quick_status(run: Any | None) -> str:
    """Where a quick benchmark stands (the Your questions tab's status line); once it ends, where its numbers are."""
    html = status_html(run, "", bar_id="bench-progress") if run is not None else ""
    if run is not None and run.finished:
        where = "the numbers above are theirs" if run.position else "nothing to show"
        html += f'<div class="qa-muted">{esc("Quick benchmark: " + where + ".")}</div>'
    return html


def select_outputs(record: Record | None, note: str, view: str, price=None, key: str | None = None) -> tuple:
    """What the tab shows for ``record``: header, scatter, the tables (with their column widths), sweep and the
    download button, the cost at ``price`` (the number box's value) where set."""
    header, scatter, table, every, *shown, csv = benchmark_outputs(record, note, view, read_price(price), key)
    table = gr.Dataframe(table, column_widths=table_widths(table), label=table_label(view))
    every = gr.Dataframe(every, column_widths=table_widths(every), label=table_label(view))
    return (header, scatter, table, every, *shown, gr.DownloadButton(value=csv, interactive=csv is not None))


# What makes a report of a record: (engine, record, view, note, dollars per hour or None) -> the file's path.
# app.py hands in ui.report.benchmark_report_file (it imports this module, so this one may not import it).
MakeReport = Callable[[Engine, Record, str, str, float | None], str]


def benchmark_tab(
    engine: Engine,
    results_dir: Path | None,
    group: dict,
    sample_file: Path,
    start_quick: QuickStart,
    make_report: MakeReport | None = None,
    line: ModelLine | None = None,
    engine_for: Callable[[str], Engine] | None = None,
):
    stored = stored_records(results_dir)
    record, note = stored_record(engine, results_dir)
    weights = engine.weights()

    def notes(picked: Record | None) -> str:
        said = (note if picked is record else "", weights_note(picked, weights), older_note(picked, stored))
        return " ".join(text for text in said if text)

    header0, scatter0, table0, every0, sweep0, profile_note0, profile0, long_note0, long0, csv0 = benchmark_outputs(
        record, notes(record)
    )
    quick_runs = gr.State([])
    with gr.Row(equal_height=True):
        with gr.Column(scale=1, min_width=320):  # below that (a phone) the two controls stack
            choice = gr.Dropdown(
                choices_for(stored, []),
                value=record_key(record) if record else None,
                label="Benchmark record",
                info="The current record of each machine, and the quick runs of this session.",
                elem_id="bench-record",
            )
            older = gr.Checkbox(
                False,
                label="Show older records too",
                info=older_info(stored),
                interactive=len(choices_for(stored, [], True)) > len(choices_for(stored, [])),
                elem_id="bench-older",
            )
        view = gr.Radio(
            VIEW_CHOICES,
            value=DEFAULT_VIEW,
            label="Accuracy on which questions",
            info="Answerable: the passage holds the answer, as when people ask. SQuAD v2: its full test mix, "
            "half of it unanswerable, at one of three no-answer thresholds.",
            scale=1,
            min_width=320,
            elem_id="bench-view",
        )
    price_choice, price = price_controls(record)
    header = html_block(header0, elem_id="bench-header")
    # without a record the header says what to do; two empty charts would only contradict each other
    with gr.Row(visible=record is not None) as charts:
        with gr.Column(min_width=480):
            scatter = gr.Plot(scatter0, show_label=False, elem_id="bench-scatter")
        with gr.Column(min_width=480):
            sweep = gr.Plot(sweep0, show_label=False, elem_id="bench-seqlen")
    table = gr.Dataframe(
        table0,
        label=table_label(DEFAULT_VIEW),
        interactive=False,
        wrap=True,
        column_widths=table_widths(table0),
        pinned_columns=1,  # the variant's name stays in view while a phone scrolls the numbers sideways
        elem_id="bench-table",
    )
    with gr.Accordion("Every column", open=False, elem_id="bench-every"):
        every = gr.Dataframe(
            every0, label=table_label(DEFAULT_VIEW), **table_look(table_widths(every0)), elem_id="bench-every-table"
        )
    with gr.Accordion("Where the time goes", open=False, elem_id="bench-profile"):
        why = gr.Markdown(profile_note0)
        widths = fixed_widths(PROFILE_COLUMNS, wider={"GFLOP per question": "88px"})
        profile = gr.Dataframe(profile0, label="Time per question, split", **table_look(widths))
    with gr.Accordion("Long passages", open=False, elem_id="bench-long"):
        long_note = gr.Markdown(long_note0)
        widths = fixed_widths(LONG_COLUMNS, first="150px", default="96px")  # as the main table: a phone's width
        long_table = gr.Dataframe(long0, label="What a long passage costs", **table_look(widths))
    with gr.Row(equal_height=True):
        n = gr.Slider(10, 200, value=QUICK_DEFAULT, step=10, label="Questions for a quick benchmark", scale=3)
        run = gr.Button("Run quick benchmark", variant="primary", scale=1)
        stop = gr.Button("Stop", variant="stop", scale=1, elem_id="bench-stop")
        download = gr.DownloadButton("Download CSV", value=csv0, interactive=csv0 is not None, scale=1)
    if make_report is not None:
        with gr.Row(equal_height=True):
            report = gr.Button("Make a report of this record", scale=1, elem_id="bench-make-report")
            report_file = gr.DownloadButton(
                "Download a report (HTML)", interactive=False, scale=1, elem_id="bench-report"
            )
    quick_state = html_block("", elem_id="bench-quick-status")
    gr.Markdown(
        "Stored records come from `python -m variants bench` (the full sample, hundreds of timed runs, sweeps). "
        "A quick benchmark runs here and now on N questions drawn at random from the SQuAD v2 sample, at batch 1; "
        "it is added to the list above, not saved, and runs in short chunks in the same model queue as the Ask tab, "
        "so questions asked meanwhile are answered between them; Stop keeps what is measured. At 50 "
        "questions an F1 is only known to about ±14 points. EM and F1 are percentages; latency is per question "
        "(tokenize, every window, decode)."
    )
    shown = [header, scatter, table, every, sweep, why, profile, long_note, long_table, download]

    def select(key: str, chosen_view: str, runs: list[Record], usd=None, machine: str | None = None) -> tuple:
        picked = find_record(key, stored, runs or [])
        return select_outputs(picked, notes(picked), chosen_view, usd, machine)

    def prices(key: str, runs: list[Record], machine: str | None) -> gr.Dropdown:
        """The published prices of the chosen record's hardware (a price of other hardware is let go)."""
        entries = price_choices(find_record(key, stored, runs or []))
        return gr.Dropdown(choices=entries, value=machine if machine in [k for _, k in entries] else "")

    def pick(machine: str | None, usd):
        """A published price fills the box; "my own" leaves it as it is."""
        found = picked_price(machine)
        return usd if found is None else f"{found:g}"

    def list_records(show_older: bool, key: str | None, runs: list[Record]) -> gr.Dropdown:
        entries = choices_for(stored, runs or [], show_older)
        keys = [k for _label, k in entries]
        if key not in keys:  # an older record was chosen, then hidden: its machine's current one instead
            key = record_key(record) if record is not None else (keys[0] if keys else None)
        return gr.Dropdown(choices=entries, value=key)

    priced = [choice, view, quick_runs, price, price_choice]
    gr.on([choice.change, view.change, price.change], select, priced, shown, api_visibility="private")
    choice.change(prices, [choice, quick_runs, price_choice], price_choice, api_visibility="private")
    # then drawn at once: a box set from empty to 0 (CPU Basic, free) fired no change of its own
    price_choice.change(pick, [price_choice, price], price, api_visibility="private").then(
        select, priced, shown, api_visibility="private"
    )
    if make_report is not None:  # the report answers example questions: it queues with the models

        def make(key: str, chosen_view: str, runs: list[Record], price: float | None) -> gr.DownloadButton:
            picked = find_record(key, stored, runs or [])
            if picked is None:
                raise gr.Error("Choose a record first.")
            path = make_report(engine, picked, chosen_view, notes(picked), read_price(price))
            return gr.DownloadButton(value=path, interactive=True)

        report.click(make, [choice, view, quick_runs, price], report_file, api_visibility="private", **group)

        def stale() -> gr.DownloadButton:  # a report of another record or view
            return gr.DownloadButton(value=None, interactive=False)

        changed = [choice.change, view.change, price.change]
        gr.on(changed, stale, None, report_file, queue=False, api_visibility="private")
    choice.change(lambda key: gr.Row(visible=bool(key)), [choice], [charts], queue=False, api_visibility="private")
    older.change(list_records, [older, choice, quick_runs], choice, api_visibility="private")
    handlers = make_quick_handlers(engine, sample_file, start_quick, Runs(), stored, line, engine_for)
    tick = gr.Number(0, visible=False, elem_id="bench-tick")
    run.click(handlers["begin"], [n, tick], [quick_state, tick], api_visibility="private", concurrency_id="bench-start")
    tick.change(
        handlers["step"],
        [tick, view, quick_runs, older],
        [*shown, quick_runs, choice, quick_state, tick],
        api_visibility="private",
        show_progress="hidden",
        **group,
    )
    stop.click(handlers["stop"], None, None, queue=False, api_visibility="private")
    # the newest GPU record, and the preset's bench on a GPU (the main view above shows it when the app runs
    # on one), read once: no events
    gpu_section(Path(results_dir) / "gpu" if results_dir else None, newest_gpu_bench(stored, engine.preset))
