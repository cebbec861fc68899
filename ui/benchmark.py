"""The Benchmark tab: every stored record and this session's quick runs, each selectable, shown as header,
charts, table and CSV, with the accuracy view (which no-answer threshold) chosen in the tab; at its foot the
newest GPU record (:mod:`ui.gpu_view`), read once when the page is built. A record's header, table and CSV are
:mod:`ui.record_table`'s; this module lays them out with the charts, runs the quick benchmark and wires the tab."""

import logging
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import gradio as gr

from variants.core.squad import load_squad_json
from variants.records.record import Record, accuracy_column, record_view
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
    cost_note,
    machine_name,
    picked_price,
    price_choices,
    price_controls,
    with_costs,
)
from .cost_view import usd_per_hour as read_price
from .errors import refused
from .gpu_view import gpu_section, newest_gpu_bench
from .own_record import POLL_S, OwnSource, own_html, own_record, with_own
from .questions import Runs, status_html
from .record_choice import (
    choices_for,
    find_record,
    older_info,
    older_note,
    record_key,
    stored_record,
    stored_records,
    weights_note,
)
from .record_table import (
    CHART_TITLES,
    DEFAULT_VIEW,
    VIEW_CHOICES,
    record_frame,
    record_header,
    table_frame,
    table_label,
    table_widths,
    write_csv,
)
from .styles import fixed_widths, html_block
from .tables import table_block, table_html
from .text import esc

log = logging.getLogger(__name__)

QUICK_DEFAULT = 50  # questions; at fewer, F1 differences of several points are chance


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
    machine = machine_name(record, price, key)
    header = cost_note(record, price, key) + record_header(record, note, view, price, machine, frame=frame)
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
            raise refused(str(exc), "Quick benchmark") from None
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
    """What the tab shows for ``record``: header, scatter, the tables (as HTML, :func:`shown_tables`), sweep and
    the download button, the cost at ``price`` (the number box's value) where set."""
    header, scatter, table, every, sweep, why, profile, long_note, long, csv = benchmark_outputs(
        record, note, view, read_price(price), key
    )
    table, every, profile, long = shown_tables(view, table, every, profile, long)
    download = gr.DownloadButton(value=csv, interactive=csv is not None)
    return (header, scatter, table, every, sweep, why, profile, long_note, long, download)


PROFILE_WIDTHS = fixed_widths(PROFILE_COLUMNS, wider={"GFLOP per question": "88px"})
LONG_WIDTHS = fixed_widths(LONG_COLUMNS, first="150px", default="96px")  # as the main table: a phone's width


def shown_tables(view: str, table, every, profile, long) -> tuple[str, str, str, str]:
    """The tab's four tables (DataFrames from :func:`benchmark_outputs`) as the page shows them: read-only HTML
    tables (:func:`ui.tables.table_html`) with the widths each had, the variant's name leading each row."""
    label = table_label(view)
    return (
        table_html(table, label, table_widths(table)),
        table_html(every, label + " · every column", table_widths(every)),
        table_html(profile, "Time per question, split", PROFILE_WIDTHS),
        table_html(long, "What a long passage costs", LONG_WIDTHS),
    )


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
    own: OwnSource | None = None,
    page: gr.Blocks | None = None,
):
    """The tab. ``own``: where the app's measurement of its own chain on this machine stands (app.py hands in
    ``SelfBench.status``); while it runs the tab says so with its progress, and once it ends its record is the one
    shown (on ``page``'s load too)."""
    own_status = own() if own is not None else None
    stored = with_own(stored_records(results_dir), own_record(own_status))
    record, note = stored_record(engine, results_dir)
    if own_record(own_status) is not None:  # measured here, of this very chain: the record this machine has
        record, note = own_record(own_status), ""
    elif own_status is not None and own_status.measuring and note:
        note += " This app measures this machine itself (above), and shows that record once it is done."
    weights = engine.weights()

    def notes(picked: Record | None) -> str:
        said = (note if picked is record else "", weights_note(picked, weights), older_note(picked, stored))
        return " ".join(text for text in said if text)

    header0, scatter0, table0, every0, sweep0, profile_note0, profile0, long_note0, long0, csv0 = benchmark_outputs(
        record, notes(record)
    )
    quick_runs = gr.State([])
    own_line = html_block(own_html(own_status), elem_id="bench-own", visible=own_status is not None)
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
    table0, every0, profile0, long0 = shown_tables(DEFAULT_VIEW, table0, every0, profile0, long0)
    # the variant's name stays in view while a phone scrolls the numbers sideways (a sticky first column)
    table = table_block(table0, elem_id="bench-table")
    with gr.Accordion("Every column", open=False, elem_id="bench-every"):
        every = table_block(every0, elem_id="bench-every-table")
    with gr.Accordion("Where the time goes", open=False, elem_id="bench-profile"):
        why = gr.Markdown(profile_note0)
        profile = table_block(profile0, elem_id="bench-profile-table")
    with gr.Accordion("Long passages", open=False, elem_id="bench-long"):
        long_note = gr.Markdown(long_note0)
        long_table = table_block(long0, elem_id="bench-long-table")
    with gr.Row(equal_height=True):
        n = gr.Slider(
            10,
            200,
            value=QUICK_DEFAULT,
            step=10,
            label="Questions for a quick benchmark",
            scale=3,
            elem_id="bench-quick-n",
        )
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
                raise refused("Choose a record first.", "Benchmark report")
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
    if own is not None:
        watch_own(own, stored, record, page, own_line, [choice, quick_runs, older])
    # the newest GPU record, and the preset's bench on a GPU (the main view above shows it when the app runs
    # on one), read once: no events
    gpu_section(Path(results_dir) / "gpu" if results_dir else None, newest_gpu_bench(stored, engine.preset))


def watch_own(
    own: OwnSource, stored: list[Record], default: Record | None, page: gr.Blocks | None, line, inputs: list
) -> None:
    """Keep ``line`` saying where the app's own measurement stands (every :data:`POLL_S` while it runs, and when a
    page opens); once it has a record, that record joins the chooser, chosen (the choice's change shows it) unless
    the visitor chose another than the tab's default meanwhile."""
    choice = inputs[0]
    timer = gr.Timer(POLL_S, active=own().measuring)
    seen = gr.State("")  # the own record this page was given already

    def refresh(shown: str, key: str | None, runs: list[Record], older: bool) -> tuple:
        status = own()
        record = own_record(status)
        if record is None or shown == record.file:
            return own_html(status), gr.Timer(active=status.measuring), shown, gr.skip()
        with_own(stored, record)
        keep = key not in (None, "", record_key(default) if default is not None else None)
        value = key if keep else record_key(record)
        chooser = gr.Dropdown(choices=choices_for(stored, runs or [], older), value=value)
        return own_html(status), gr.Timer(active=False), record.file, chooser

    events = [timer.tick, *([page.load] if page is not None else [])]
    gr.on(
        events,
        refresh,
        [seen, *inputs],
        [line, timer, seen, choice],
        queue=False,
        show_progress="hidden",
        api_visibility="private",
    )
