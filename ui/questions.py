"""The "Your questions" tab: a visitor's own file of questions, every chosen variant scored on it.

The file is read by :mod:`variants.core.question_files` (the loader ``bench --data`` and ``python -m variants
evaluate`` use); the run is an engine-side evaluation handed in by ``app.py`` (``start``:
:class:`variants.benchmarking.evaluate.Evaluation`, which this package may not import). The run goes in chunks,
each chunk its own event in the model queue (a hidden counter's change runs the next one), so a question
asked on the Ask tab meanwhile waits for one chunk, not for the whole file. One run per visitor (browser
session) at a time, :data:`MAX_RUNS` on the app at once.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gradio as gr

from variants.core.question_files import Limits, QuestionFileError, QuestionSet, parse_questions, read_questions
from variants.core.safe_csv import NO_ANSWER
from variants.records.results import records_to_frame
from variants.serving.engine import MAX_QUESTION_CHARS, Engine

from .charts import accuracy_figure, no_answer_floor
from .styles import html_block
from .text import esc, fmt_ms, scroll_region

MAX_BYTES = 5_000_000  # a file's size
MAX_ROWS = 2_000  # questions per run
MAX_RUN_S = 300.0  # model time per run; it stops there and shows what is done
MAX_RUNS = 2  # runs on the app at once (each visitor one)
API_CALL_S = 2.0  # model time per /evaluate call by default: one call is one turn of the queue
API_MAX_CALL_S = 60.0
REFRESH_S = 3.0  # the table and chart are redrawn at most this often while a run goes (the disagreements at the end)
SHOWN_DISAGREEMENTS = 50
STALE_S = 120.0  # a run no chunk has asked for this long was left (its page closed): dropped

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


class Runs:
    """The runs going on, one per browser session (thread-safe)."""

    def __init__(self, max_runs: int = MAX_RUNS) -> None:
        self.max_runs = max_runs
        self._runs: dict[str, tuple[Any, float]] = {}
        self._lock = threading.Lock()

    def start(self, key: str, run: Any) -> None:
        """Register ``run`` for ``key``; raise ``gr.Error`` if this visitor, or too many, already run one."""
        with self._lock:
            now = time.monotonic()
            self._runs = {k: v for k, v in self._runs.items() if now - v[1] < STALE_S and not v[0].finished}
            if key in self._runs:
                raise gr.Error("Your run is still going: stop it, or wait for it to finish, before starting another.")
            if len(self._runs) >= self.max_runs:
                raise gr.Error(f"{len(self._runs)} runs are going on this app already; try again in a minute.")
            self._runs[key] = (run, now)

    def get(self, key: str) -> Any | None:
        with self._lock:
            found = self._runs.get(key)
            if found is not None:
                self._runs[key] = (found[0], time.monotonic())
            return found[0] if found else None

    def end(self, key: str) -> None:
        with self._lock:
            self._runs.pop(key, None)


def read_input(engine: Engine, file: str | None, pasted: str) -> tuple[QuestionSet, bytes]:
    """The questions of the uploaded file, else of the pasted rows (QuestionFileError says what is wrong)."""
    limits = limits_for(engine)
    if file:
        return read_questions(file, limits), Path(file).read_bytes()
    if pasted and pasted.strip():
        return parse_questions(pasted, "pasted rows", limits), pasted.encode("utf-8", errors="replace")
    raise QuestionFileError("Upload a file of questions or paste some rows first.")


# --- what the tab shows --------------------------------------------------------------------------------


def status_html(run: Any | None, message: str = "", error: bool = False) -> str:
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
    bar = f'<progress id="questions-progress" max="{total}" value="{done}" style="width:100%"></progress>'
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


def scores_html(scores: list[Any], labelled: bool) -> str:
    """The per-variant table; a column for the timing rule's busy-machine flag appears where one is set."""
    if not scores:
        return ""
    columns = [c for c in COLUMNS if labelled or not c[3]]
    busy = any(s.busy for s in scores)
    head = "".join(f'<th title="{esc(tip)}">{esc(name)}</th>' for _, name, tip, _ in columns)
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
    fig = accuracy_figure(frame, no_answer_floor(record) if labelled else None, view, unit=unit)
    if not labelled:
        # short enough for a phone's chart (the longer title was cut on the left); "token F1" is in the table's tooltip
        fig.update_yaxes(title="Overlap with the baseline (%)", range=[0, 104])  # the baseline: 100
        fig.update_layout(title={"text": "Agreement against speed<br><sup>up and left is better</sup>"})
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
    folder = Path(tempfile.mkdtemp(prefix="questions-"))
    record = record or run.record()
    json_path = record.save(folder)
    csv_path = run.write_answers_csv(folder / f"{json_path.stem}-answers.csv")
    return str(csv_path), str(json_path)


# --- handlers --------------------------------------------------------------------------------------------


def make_handlers(engine: Engine, start: Start, runs: Runs) -> dict[str, Callable]:
    def begin(file: str | None, pasted: str, names: list[str], tick: int, request: gr.Request) -> tuple:
        if not names:
            return status_html(None, "Pick one variant at least.", error=True), gr.skip(), gr.skip(), gr.skip()
        try:
            questions, raw = read_input(engine, file, pasted)
        except QuestionFileError as exc:
            return status_html(None, str(exc), error=True), gr.skip(), gr.skip(), gr.skip()
        names = sorted(names, key=lambda n: n != "baseline")
        run = start(engine, questions, names, max_seconds=MAX_RUN_S, data_bytes=raw)
        runs.start(request.session_hash or "", run)
        cleared = gr.DownloadButton(value=None, interactive=False)
        return status_html(run), cleared, cleared, (tick or 0) + 1  # the counter's change runs the first chunk

    shown: dict[str, float] = {}  # when each session's results were last drawn

    def step(tick: int, request: gr.Request) -> tuple:
        key = request.session_hash or ""
        run = runs.get(key)
        if run is None:
            return (gr.skip(),) * 7
        run.step()
        status = status_html(run)
        if not run.finished:
            if time.monotonic() - shown.get(key, 0.0) < REFRESH_S:
                return status, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), tick + 1
            shown[key] = time.monotonic()
            return status, *results(run)[:2], gr.skip(), gr.skip(), gr.skip(), tick + 1
        shown.pop(key, None)
        runs.end(key)
        record = run.record()  # once, for the table, the chart and the download
        csv_path, json_path = downloads(run, record)
        answers_file = gr.DownloadButton(value=csv_path, interactive=True)
        record_file = gr.DownloadButton(value=json_path, interactive=True)
        return status, *results(run, record), answers_file, record_file, gr.skip()  # the counter stays: the loop ends

    def stop(request: gr.Request) -> None:
        run = runs.get(request.session_hash or "")
        if run is not None:
            run.stop("stopped")

    return {"begin": begin, "step": step, "stop": stop}


def results(run: Any, record: Any | None = None) -> tuple:
    """The table, the chart and the disagreements, from one record of the run (it scores every question)."""
    record = record or run.record()
    scores = run.scores(record)
    return scores_html(scores, run.questions.labelled), chart(run, scores, record), disagreements_html(run)


def make_evaluate_api(engine: Engine, start: Start, runs: Runs | None = None) -> Callable[..., dict]:
    api_runs = runs or Runs()

    def evaluate(
        data: str = "", variants: list[str] | None = None, run: str = "", max_seconds: float = API_CALL_S
    ) -> dict:
        """Score the variants on your own questions, as the "Your questions" tab does. `data`: the text of a CSV,
        JSON Lines or SQuAD JSON file (columns context, question, optionally answer or answers, and id; the tab's
        limits). `variants`: names (default: the three headline ones). A call is one turn of the model queue, about
        `max_seconds` of model time (default 2, at most 60), so that the page stays responsive: it starts a run
        and returns its `run` id; call again with that `run` (and no data) until `done` is true.
        Returns run, done, questions, answered (questions done so far), labelled, stopped, scores (per variant,
        on every question so far: f1 and exact where answers are given, agree_exact, agree_f1, answered, p50_ms,
        p90_ms, n, error, busy) and, when done, answers (variant -> id -> text, "" for no answer) and record (the
        run as a benchmark record)."""
        if run:
            evaluation = api_runs.get(run)
            if evaluation is None:
                raise gr.Error(f"No run {run!r} is going (it ended, or waited over {STALE_S:.0f} s): start it again.")
        else:
            try:
                questions = parse_questions(data or "", "api", limits_for(engine))
                names = variants or [v.spec.name for v in engine.loaded if v.spec.headline]
                evaluation = start(engine, questions, names, max_seconds=MAX_RUN_S, data_bytes=(data or "").encode())
            except ValueError as exc:  # a bad file (QuestionFileError), an unknown variant
                raise gr.Error(str(exc)) from None
            run = uuid.uuid4().hex
            api_runs.start(run, evaluation)
        until = evaluation.seconds + min(max(float(max_seconds), 0.0), API_MAX_CALL_S)
        while evaluation.step() and evaluation.seconds < until:
            pass
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
            api_runs.end(run)
            out |= {"answers": evaluation.answers(), "record": record.to_dict()}
        return out

    return evaluate


# --- the tab ----------------------------------------------------------------------------------------------


def questions_tab(engine: Engine, group: dict, start: Start) -> None:
    """The tab's layout and events; ``group`` is the model queue's concurrency group (each chunk queues in it)."""
    runs = Runs()
    handlers = make_handlers(engine, start, runs)
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
    choices = [(v.spec.label, v.spec.name) for v in engine.loaded if v.ok]
    names = gr.CheckboxGroup(
        choices,
        value=[v.spec.name for v in engine.loaded if v.ok and v.spec.headline],
        label="Variants",
        info="The card's three by default; the baseline is what agreement is measured against.",
        elem_id="questions-variants",
    )
    with gr.Row():
        run = gr.Button("Run every variant on my questions", variant="primary", scale=3)
        stop = gr.Button("Stop", variant="stop", scale=1)
    status = html_block(status_html(None), elem_id="questions-status")
    table = html_block("", elem_id="questions-scores")
    plot = gr.Plot(accuracy_figure(None), show_label=False, elem_id="questions-chart")
    with gr.Accordion("Where the variants disagree", open=True):
        disagree = html_block("", elem_id="questions-disagreements")
    with gr.Row():
        answers_file = gr.DownloadButton("Download the answers (CSV)", interactive=False, elem_id="questions-csv")
        record_file = gr.DownloadButton(
            "Download the run as a record (JSON)", interactive=False, elem_id="questions-record"
        )
    gr.Markdown(
        "The record is a benchmark record as `python -m variants bench` writes them: put it in the app's records "
        "folder (`--results-dir`) and the Benchmark tab lists it. F1 and EM use the official SQuAD v2 metric at the "
        "app's “no answer” rule (threshold 0); `python -m variants evaluate --data FILE` and `bench --data FILE` "
        "score the same way. While a run goes, questions on the Ask tab take their turn between its chunks."
    )
    tick = gr.Number(0, visible=False, elem_id="questions-tick")
    run.click(
        handlers["begin"],
        [file, pasted, names, tick],
        [status, answers_file, record_file, tick],
        api_visibility="private",
        concurrency_id="questions-start",
    )
    tick.change(
        handlers["step"],
        [tick],
        [status, table, plot, disagree, answers_file, record_file, tick],
        api_visibility="private",
        show_progress="hidden",
        **group,
    )
    stop.click(handlers["stop"], None, None, queue=False, api_visibility="private")
