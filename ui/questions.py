"""The "Your questions" tab: a visitor's own file of questions, every chosen variant scored on it.

The file is read by :mod:`variants.core.question_files` (the loader ``bench --data`` and ``python -m variants
evaluate`` use); the run is an engine-side evaluation handed in by ``app.py`` (``start``:
:class:`variants.benchmarking.evaluate.Evaluation`, which this package may not import). The run goes in chunks,
each chunk its own event in the model queue (a hidden counter's change runs the next one), so a question
asked on the Ask tab meanwhile waits for one chunk, not for the whole file. The runs are booked in the app's one
:class:`~variants.serving.guard.RunBook` (the tab's and ``/evaluate``'s together): one per session, bound to
it, a few on the app at once, idle ones dropped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gradio as gr

from variants.core.question_files import Limits, QuestionFileError, QuestionSet, parse_questions, read_questions
from variants.core.safe_csv import NO_ANSWER
from variants.records.results import records_to_frame
from variants.serving.engine import MAX_QUESTION_CHARS, Engine
from variants.serving.guard import MAX_FILE_BYTES, RUN_IDLE_S, RUN_LIFE_S, ModelLine, Refused, RunBook, excerpt, visitor

from .charts import accuracy_figure, no_answer_floor
from .cost_view import cost_cell, costs_by_variant, price_box, usd_per_hour
from .errors import log_refusal, refused
from .files import new_folder
from .styles import html_block
from .text import esc, fmt_ms, scroll_region

MAX_BYTES = MAX_FILE_BYTES  # a file's size (guard.py: the routes' body limits allow for it)
MAX_ROWS = 2_000  # questions per run
MAX_RUN_S = 300.0  # model time per run; it stops there and shows what is done
API_CALL_S = 2.0  # model time per /evaluate call by default: one call is one turn of the queue
API_MAX_CALL_S = 60.0
REFRESH_S = 3.0  # the table and chart are redrawn at most this often while a run goes (the disagreements at the end)
SHOWN_DISAGREEMENTS = 50

FORMAT_HELP = (
    "CSV or JSON Lines with the columns <code>context</code>, <code>question</code>, optionally <code>answer</code> "
    "(empty: “no answer”) or <code>answers</code> (a list) and <code>id</code>; or a SQuAD v1.1 / v2 JSON file. "
    "An answer is copied exactly from its passage, as in SQuAD: a file with one that is not is refused, naming "
    "the row."
)
PASTE_EXAMPLE = 'context,question,answer\n"Paris is the capital of France.",What is the capital of France?,Paris'

Start = Callable[..., Any]  # (engine, questions, names, *, max_seconds, data_bytes) -> an Evaluation


def limits_for(engine: Engine) -> Limits:
    return Limits(MAX_BYTES, MAX_ROWS, engine.max_context_chars, MAX_QUESTION_CHARS)


def limits_text(engine: Engine) -> str:
    return (
        f"Up to {MAX_ROWS:,} questions and {MAX_BYTES / 1e6:.0f} MB per file, passages up to "
        f"{engine.max_context_chars:,} characters and questions up to {MAX_QUESTION_CHARS:,}; a run stops after "
        f"{MAX_RUN_S / 60:.0f} minutes of model time and keeps what is done. One run per visitor at a time."
    )


Runs = RunBook  # the tab's name for the app's book of runs


def read_input(engine: Engine, file: str | None, pasted: str) -> tuple[QuestionSet, bytes]:
    """The questions of the uploaded file, else of the pasted rows (QuestionFileError says what is wrong)."""
    limits = limits_for(engine)
    if file:
        return read_questions(file, limits), Path(file).read_bytes()
    if pasted and pasted.strip():
        return parse_questions(pasted, "pasted rows", limits), pasted.encode("utf-8", errors="replace")
    raise QuestionFileError("Upload a file of questions or paste some rows first.")


# --- what the tab shows --------------------------------------------------------------------------------


def status_html(run: Any | None, message: str = "", error: bool = False, bar_id: str = "questions-progress") -> str:
    """Where a run in chunks stands (this tab's, and the Benchmark tab's quick run with its own ``bar_id``)."""
    if error:
        return f'<div class="qa-notice" role="alert">{esc(message)}</div>'
    if run is None:
        return f'<div class="qa-summary qa-muted">{esc(message or "No run yet.")}</div>'
    done, total = run.position, run.total
    if run.finished:
        why = {"stopped": "stopped", "time limit": "stopped at the time limit"}.get(run.stopped or "", "done")
        text = f"{why.capitalize()}: {done:,} of {total:,} questions, {run.seconds:.1f} s of model time."
    else:
        text = f"{done:,} of {total:,} questions · {run.seconds:.1f} s of model time · Stop keeps what is done."
    bar = f'<progress id="{esc(bar_id)}" max="{total}" value="{done}" style="width:100%"></progress>'
    return f'<div class="qa-summary">{bar}<div>{esc(text)}</div></div>'


COLUMNS = [  # (VariantScore field, heading, tooltip, labelled files only)
    ("f1", "F1", "SQuAD v2 F1 against your answers, “no answer” included (the official metric)", True),
    ("exact", "EM", "exact match with one of your answers, after SQuAD's normalization", True),
    ("agree_exact", "Same answer as baseline", "share of questions answered with the baseline's very text", False),
    ("agree_f1", "Overlap with baseline", "token F1 against the baseline's answer, averaged over the questions", False),
    ("answered", "Answered", "share of questions given an answer rather than “no answer”", False),
    ("p50_ms", "Median time", "p50 of each question's latency at batch 1, end to end, on your questions", False),
    ("p90_ms", "p90 time", "9 questions in 10 were answered within this", False),
]


COST_TIP = (
    "dollars per million answers at the price per hour you set, from this run's throughput on this machine "
    "(one question at a time: 1,000 / the mean ms), and the saving against the baseline"
)


def scores_html(scores: list[Any], labelled: bool, costs: dict[str, Any] | None = None) -> str:
    """The per-variant table; a column for the timing rule's busy-machine flag appears where one is set, one for
    the cost per million answers where a price is (``costs``: :func:`ui.cost_view.costs_by_variant`)."""
    if not scores:
        return ""
    columns = [c for c in COLUMNS if labelled or not c[3]]
    busy = any(s.busy for s in scores)
    head = "".join(f'<th title="{esc(tip)}">{esc(name)}</th>' for _, name, tip, _ in columns)
    head += f'<th title="{esc(COST_TIP)}">$ per million</th>' if costs else ""
    head += (
        '<th title="the timing rule: how much longer the runs took than their computing time (a busy machine '
        'stretches them)">Machine</th>'
        if busy
        else ""
    )
    rows = []
    for s in scores:
        if s.error:
            rows.append(
                f'<tr><th>{esc(s.label)}</th><td colspan="{len(columns)}" class="qa-bad">{esc(s.error)}</td></tr>'
            )
            continue
        cells = []
        for name, *_ in columns:
            value = getattr(s, name)
            text = fmt_ms(value) if name.endswith("_ms") else "–" if value is None else f"{value:.1f}"
            text += "%" if value is not None and name in ("agree_exact", "agree_f1", "answered") else ""
            cells.append(f"<td>{esc(text)}</td>")
        if costs:
            cost = costs.get(s.variant)
            cells.append(f"<td>{esc(cost_cell(cost.batch1_usd, cost.batch1_saving, s.variant) if cost else '')}</td>")
        # short in the cell (a phone's rows stay one line high), the sentence in the tooltip
        flag = f"busy: {s.stretch:.1f}×" if s.busy and s.stretch else s.busy or ""
        cells += [f'<td title="{esc(s.busy or "")}">{esc(flag)}</td>'] if busy else []
        rows.append(f"<tr><th>{esc(s.label)}</th>{''.join(cells)}</tr>")
    n = max((s.n for s in scores), default=0)
    caption = f"{n:,} questions" + (
        ", scored against your answers" if labelled else "; no answers given: agreement only"
    )
    if busy:  # the timing rule's flag: no speedup on this table or its chart is to be trusted
        caption += "; the machine was busy while timing, so the times and speedups are unreliable: run it again"
    return (  # a phone scrolls the table sideways, not the page
        f'<div class="qa-muted">{esc(caption)}</div>'
        + scroll_region(
            f'<table class="qa-about" id="questions-table"><thead><tr><th>Variant</th>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>",
            "Scores per variant",
        )
    )


def chart(run: Any | None, scores: list[Any], record: Any | None = None):
    """F1 (or, without answers, overlap with the baseline) against median latency: the Benchmark tab's figure
    (``record``: the run's record where the caller has it already)."""
    if run is None or not scores:
        return accuracy_figure(None)
    record = record or run.record()
    frame = records_to_frame(record, "pipeline")
    labelled = run.questions.labelled
    if not labelled:
        overlap = {s.variant: s.agree_f1 for s in scores}
        frame["f1"] = frame["variant"].map(overlap)
    view, unit = f"{run.position:,} of your questions", "F1" if labelled else "overlap"
    # the overlap axis from 0 to past the baseline's 100, set before the labels are placed for it (set after, it
    # moved the points under labels placed for the fitted axis, which then overprinted each other)
    y_range = None if labelled else (0.0, 104.0)
    fig = accuracy_figure(frame, no_answer_floor(record) if labelled else None, view, unit=unit, y_range=y_range)
    if not labelled:
        # short enough for a phone's chart (the longer title was cut on the left); "token F1" is in the table's tooltip
        fig.update_yaxes(title="Overlap with the baseline (%)")
        title = fig.layout.title.text.replace("Accuracy against speed", "Agreement against speed", 1)
        fig.update_layout(title={"text": title})
    else:
        fig.update_yaxes(title="F1 on your questions (%)")
    return fig


def disagreements_html(run: Any | None) -> str:
    """The questions where the variants' answers differ, side by side (the first few)."""
    if run is None or not run.position:
        return ""
    rows = run.disagreements()
    if not rows:
        return '<div class="qa-muted">Every variant gave the same answer to every question so far.</div>'
    labels = {s.variant: s.short_label for s in run.entries}
    names = [n for n in labels if any(n in r["answers"] for r in rows)]
    gold = "<th>Your answer</th>" if run.questions.labelled else ""
    head = f"<th>Question</th>{gold}" + "".join(f"<th>{esc(labels[n])}</th>" for n in names)
    body = []
    for r in rows[:SHOWN_DISAGREEMENTS]:
        answer = " | ".join(dict.fromkeys(r["gold"])) or NO_ANSWER  # SQuAD repeats an answer per annotator
        cells = "".join(f"<td>{esc(r['answers'].get(n) or NO_ANSWER)}</td>" for n in names)
        body.append(f"<tr><td>{esc(r['question'])}</td>{f'<td>{esc(answer)}</td>' if gold else ''}{cells}</tr>")
    more = len(rows) - SHOWN_DISAGREEMENTS
    tail = f'<div class="qa-muted">… and {more:,} more in the answers CSV.</div>' if more > 0 else ""
    title = f"{len(rows):,} of {run.position:,} questions got different answers"
    return (
        f'<div class="qa-muted">{esc(title)}</div>'
        + scroll_region(
            f'<table class="qa-about" id="questions-disagree"><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>",
            "Questions with different answers",
            "overflow:auto; max-height:560px",
        )
        + tail
    )


def downloads(run: Any, record: Any | None = None) -> tuple[str, str]:
    """The answers CSV and the run's record (JSON: the Benchmark tab shows it from its records folder)."""
    folder = new_folder("questions-")
    record = record or run.record()
    json_path = record.save(folder)
    csv_path = run.write_answers_csv(folder / f"{json_path.stem}-answers.csv")
    return str(csv_path), str(json_path)


# --- handlers --------------------------------------------------------------------------------------------


NOT_READY = "None of the chosen variants is ready yet: the top of the page shows the build; run again in a moment."


def make_handlers(
    engine: Engine,
    start: Start,
    runs: Runs,
    make_report: Callable[[Any, Any, float | None], str] | None = None,
    line: ModelLine | None = None,
    engine_for: Callable[[str], Engine] | None = None,
) -> dict[str, Callable]:
    """The tab's handlers; each chunk of a run takes a turn in ``line`` (the models' line that the Ask tab and
    ``/answer`` wait in), so it never runs beside their questions. ``engine_for(session)``: the engine a session's
    run measures (the preset's, and beside it the visitor's own chain, whose variants join the run)."""

    def begin(file: str | None, pasted: str, names: list[str], tick: int, request: gr.Request) -> tuple:
        if not names:
            return status_html(None, "Pick one variant at least.", error=True), *(gr.skip(),) * 4
        names = [n for n in names if n in engine.variants and engine.variants[n].ok]  # not still building or failed
        if not names:
            return status_html(None, NOT_READY, error=True), *(gr.skip(),) * 4
        measured = engine_for(request.session_hash or "") if engine_for else engine
        names += [v.spec.name for v in measured.loaded if v.ok and v.spec.name not in engine.variants]  # theirs
        try:
            questions, raw = read_input(engine, file, pasted)
            names = sorted(names, key=lambda n: n != "baseline")
            run = start(measured, questions, names, max_seconds=MAX_RUN_S, data_bytes=raw)
            runs.start(request.session_hash or "", run, visitor(request))
        except (QuestionFileError, Refused) as exc:
            log_refusal(str(exc), "Your questions")
            return status_html(None, str(exc), error=True), *(gr.skip(),) * 4
        cleared = gr.DownloadButton(value=None, interactive=False)
        # the counter's change runs the first chunk
        return status_html(run), cleared, cleared, cleared, (tick or 0) + 1

    shown: dict[str, float] = {}  # when each session's results were last drawn

    finished: dict[str, tuple[Any, Any]] = {}  # each session's last finished run and its record, to price it again

    def step(tick: int, request: gr.Request, price: float | None = None) -> tuple:
        key = request.session_hash or ""
        run = runs.get(key)
        if run is None:
            return (gr.skip(),) * 8
        if engine_for:
            engine_for(key)  # a use of the visitor's chain the run measures: its idle time starts again
        with line.queued_turn() if line else nullcontext():
            run.step()
        status = status_html(run)
        if not run.finished:
            if time.monotonic() - shown.get(key, 0.0) < REFRESH_S:
                return status, *(gr.skip(),) * 6, tick + 1
            shown[key] = time.monotonic()
            return status, *results(run, price=price)[:2], *(gr.skip(),) * 4, tick + 1
        shown.pop(key, None)
        runs.end(key)
        record = run.record()  # once, for the table, the chart and the download
        finished[key] = (run, record)
        csv_path, json_path = downloads(run, record)
        answers_file = gr.DownloadButton(value=csv_path, interactive=True)
        record_file = gr.DownloadButton(value=json_path, interactive=True)
        report = make_report(run, record, usd_per_hour(price)) if make_report is not None else None
        report_file = gr.DownloadButton(value=report, interactive=report is not None)
        # the counter stays: the loop ends
        return status, *results(run, record, price), answers_file, record_file, report_file, gr.skip()

    def reprice(price: float | None, request: gr.Request):
        """The finished run's table at another price (a run still going shows it at its next refresh)."""
        done = finished.get(request.session_hash or "")
        if done is None:
            return gr.skip()
        run, record = done
        return scores_html(run.scores(record), run.questions.labelled, costs_by_variant(record, usd_per_hour(price)))

    def stop(request: gr.Request) -> None:
        run = runs.get(request.session_hash or "")
        if run is not None:
            run.stop("stopped")

    def check(file: str | None) -> str:
        """Read the uploaded file at once, so that one the tab cannot use says so now, not after Run."""
        if not file:
            return status_html(None)
        try:
            questions = read_questions(file, limits_for(engine))
        except QuestionFileError as exc:
            log_refusal(str(exc), "Your questions")
            return status_html(None, str(exc), error=True)
        kind = "with answers" if questions.labelled else "without answers: agreement only"
        return status_html(None, f"{len(questions.examples):,} questions ({kind}), ready to run.")

    return {"begin": begin, "step": step, "stop": stop, "reprice": reprice, "check": check}


def results(run: Any, record: Any | None = None, price: float | None = None) -> tuple:
    """The table (with the cost per million answers at ``price`` dollars per hour, where set), the chart and the
    disagreements, from one record of the run (it scores every question)."""
    record = record or run.record()
    scores = run.scores(record)
    costs = costs_by_variant(record, usd_per_hour(price))
    return scores_html(scores, run.questions.labelled, costs), chart(run, scores, record), disagreements_html(run)


def make_evaluate_api(
    engine: Engine, start: Start, runs: Runs | None = None, line: ModelLine | None = None
) -> Callable[..., dict]:
    api_runs = runs if runs is not None else Runs()  # an empty book is falsy

    def evaluate(
        data: str = "",
        variants: list[str] | None = None,
        run: str = "",
        max_seconds: float = API_CALL_S,
        request: gr.Request = None,
    ) -> dict:
        """Score the variants on your own questions, as the "Your questions" tab does. `data`: the text of a CSV,
        JSON Lines or SQuAD JSON file (columns context, question, optionally answer or answers, and id; the tab's
        limits). `variants`: names (default: the three headline ones). A call runs about `max_seconds` of model time
        (default 2, at most 60) in chunks of a fraction of a second, each its own turn at the models, so that a
        question asked meanwhile waits for one chunk: it starts a run
        and returns its `run` id; call again with that `run` (and no data), from the same session, until `done` is
        true. A run belongs to the session that started it (a gradio client's; over plain HTTP, send the same
        `session_hash` with each call): another session's calls with its id find nothing. The app takes a few runs
        at once, the tab's and these together, one per visitor; a run not called for in 2 minutes, or 15 minutes
        after it started, is dropped.
        Returns run, done, questions, answered (questions done so far), labelled, stopped, scores (per variant,
        on every question so far: f1 and exact where answers are given, agree_exact, agree_f1, answered, p50_ms,
        p90_ms, n, error, busy) and, when done, answers (variant -> id -> text, "" for no answer) and record (the
        run as a benchmark record)."""
        owner = "api:" + ((request.session_hash if request is not None else None) or "")
        seconds = api_arguments(data, variants, run, max_seconds)
        if run:
            evaluation = api_runs.get(owner, run)
            if evaluation is None:
                raise refused(
                    f"No run {excerpt(run)} is going in this session (it ended, was started by another session, or "
                    f"waited over {RUN_IDLE_S:.0f} s or ran over {RUN_LIFE_S / 60:.0f} minutes): start it again.",
                    "/evaluate",
                )
        else:
            try:
                questions = parse_questions(data or "", "api", limits_for(engine))
                names = variants or [v.spec.name for v in engine.loaded if v.spec.headline]
                evaluation = start(engine, questions, names, max_seconds=MAX_RUN_S, data_bytes=(data or "").encode())
                run = api_runs.start(owner, evaluation, visitor(request))
            except (ValueError, Refused) as exc:  # a bad file (QuestionFileError), an unknown variant, too many runs
                raise refused(str(exc), "/evaluate") from None
        until = evaluation.seconds + seconds
        going = True
        while going:  # a turn per chunk, never beside the Ask tab's or /answer's questions: one waits for one chunk
            with line.queued_turn() if line else nullcontext():
                going = evaluation.step() and evaluation.seconds < until
        out = {
            "run": run,
            "done": evaluation.finished,
            "questions": evaluation.total,
            "answered": evaluation.position,
            "labelled": evaluation.questions.labelled,
            "stopped": evaluation.stopped,
        }
        record = evaluation.record()  # once: the scores and, when done, the record itself
        out["scores"] = [asdict(s) for s in evaluation.scores(record)]
        if evaluation.finished:
            api_runs.end(owner, run)
            out |= {"answers": evaluation.answers(), "record": record.to_dict()}
        return out

    return evaluate


def api_arguments(data: Any, variants: Any, run: Any, max_seconds: Any) -> float:
    """Refuse ``/evaluate`` arguments of the wrong type (a client may send anything), in one sentence; the call's
    model time, within its bounds."""
    names_ok = variants is None or (isinstance(variants, list) and all(isinstance(v, str) for v in variants))
    number = isinstance(max_seconds, (int, float)) and not isinstance(max_seconds, bool)
    wrong = (
        ("data", data, isinstance(data, str) or data is None, "the text of a file"),
        ("variants", variants, names_ok, "a list of names"),
        ("run", run, isinstance(run, str) or run is None, "a run id"),
        ("max_seconds", max_seconds, number and math.isfinite(max_seconds), "a number of seconds"),
    )
    for name, value, ok, what in wrong:
        if not ok:
            raise refused(f"/evaluate's {name} should be {what}, not {excerpt(value)}.", "/evaluate")
    return min(max(float(max_seconds), 0.0), API_MAX_CALL_S)


# --- the tab ----------------------------------------------------------------------------------------------


def questions_tab(
    engine: Engine,
    group: dict,
    start: Start,
    runs: Runs | None = None,
    make_report: Callable[[Any, Any, float | None], str] | None = None,
    line: ModelLine | None = None,
    engine_for: Callable[[str], Engine] | None = None,
) -> None:
    """The tab's layout and events; ``group`` is the model queue's concurrency group (each chunk queues in it);
    ``runs`` the app's book of runs (shared with ``/evaluate``). ``make_report`` (run, its record, the price per
    hour or None) -> a report's path: app.py hands in ui.report.questions_report_file."""
    runs = runs if runs is not None else Runs()
    handlers = make_handlers(engine, start, runs, make_report, line, engine_for)
    gr.Markdown(
        "Bring your own questions: every variant you pick answers each of them once, timed, and the table shows "
        "what each optimization costs on *your* data. " + limits_text(engine),
        elem_id="questions-intro",
    )
    with gr.Row(equal_height=False):
        with gr.Column(scale=1, min_width=320):
            file = gr.File(
                label="A file of questions",
                file_types=[".csv", ".jsonl", ".json"],
                type="filepath",
                elem_id="questions-file",
            )
            gr.HTML(f'<div class="qa-muted" style="font-size:0.9em">{FORMAT_HELP}</div>')
        with gr.Column(scale=1, min_width=320):
            pasted = gr.Textbox(
                label="…or paste rows (CSV with a header, or JSON Lines)",
                lines=5,
                max_lines=10,
                placeholder=PASTE_EXAMPLE,
                elem_id="questions-paste",
            )
    choices = [(s.label, s.name) for s in engine.specs]  # known before they build; a run takes those ready
    names = gr.CheckboxGroup(
        choices,
        value=[s.name for s in engine.specs if s.headline],
        label="Variants",
        info="The card's three by default; the baseline is what agreement is measured against.",
        elem_id="questions-variants",
    )
    with gr.Row():
        run = gr.Button("Run every variant on my questions", variant="primary", scale=3)
        stop = gr.Button("Stop", variant="stop", scale=1, elem_id="questions-stop")
    price = price_box(
        "Dollars per hour of this machine (optional)",
        "Adds what a million answers cost at this run's throughput; the Benchmark tab lists published prices.",
        "questions-price",
    )
    status = html_block(status_html(None), elem_id="questions-status")
    table = html_block("", elem_id="questions-scores")
    # hidden until a run: before it, an empty chart would only be a box saying there is nothing yet
    plot = gr.Plot(accuracy_figure(None), show_label=False, elem_id="questions-chart", visible=False)
    with gr.Accordion("Where the variants disagree", open=True):
        disagree = html_block("", elem_id="questions-disagreements")
    with gr.Row():
        answers_file = gr.DownloadButton("Download the answers (CSV)", interactive=False, elem_id="questions-csv")
        record_file = gr.DownloadButton(
            "Download the run as a record (JSON)", interactive=False, elem_id="questions-record"
        )
        report_file = gr.DownloadButton("Download a report (HTML)", interactive=False, elem_id="questions-report")
    gr.Markdown(
        "The record is a benchmark record as `python -m variants bench` writes them: put it in the app's records "
        "folder (`--results-dir`) and the Benchmark tab lists it. F1 and EM use the official SQuAD v2 metric at the "
        "app's “no answer” rule (threshold 0); `python -m variants evaluate --data FILE` and `bench --data FILE` "
        "score the same way. While a run goes, questions on the Ask tab take their turn between its chunks."
    )
    tick = gr.Number(0, visible=False, elem_id="questions-tick")
    run.click(lambda: gr.Plot(visible=True), None, [plot], queue=False, api_visibility="private")
    run.click(
        handlers["begin"],
        [file, pasted, names, tick],
        [status, answers_file, record_file, report_file, tick],
        api_visibility="private",
        concurrency_id="questions-start",
    )
    tick.change(
        handlers["step"],
        [tick, price],
        [status, table, plot, disagree, answers_file, record_file, report_file, tick],
        api_visibility="private",
        show_progress="hidden",
        **group,
    )
    stop.click(handlers["stop"], None, None, queue=False, api_visibility="private")
    price.change(handlers["reprice"], [price], [table], api_visibility="private")
    file.upload(handlers["check"], [file], [status], api_visibility="private", concurrency_id="questions-check")
