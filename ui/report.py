"""A report that travels: one self-contained HTML file for a benchmark record or a run on someone's own questions.

A report is one more view of a record, beside the Benchmark tab and the CLI's table: its header, headline
sentence, chart and table are the tab's own (:func:`ui.benchmark.benchmark_outputs`, :func:`ui.headline.
headline_html`, :func:`ui.charts.accuracy_figure`; for Your questions, :func:`ui.questions.scores_html` and
:func:`ui.questions.chart`), so what those say, the report says. Around them: the machine, the versions, the
method in the record's words, a few example questions answered by every variant, and the date.

Nothing is fetched when the file is opened: plotly.js is inlined (``include_plotlyjs=True``, about 4.8 MB), which
keeps the chart the tab's figure, hover and all, where a static image would need a second drawing of it (plotly's
SVG export needs Chrome through kaleido at the time the report is made, which a Space does not have). The page
is one column of at most 720 px: on a phone it is the phone's width; printed, it fits A4 and Letter, and every
table is cut into groups of a few columns that wrap rather than overflow the page.

``app.py`` hands :func:`benchmark_report_file` and :func:`questions_report_file` to the tabs (this module imports
theirs, so they may not import it); ``python -m variants report`` (:mod:`variants.benchmarking.report`) calls
:func:`benchmark_report`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from variants.answering.qa import InputError
from variants.answering.timing import SERVED
from variants.core.hardware import hardware_label
from variants.core.squad import load_squad_json
from variants.records.record import Record, accuracy_column, record_view
from variants.records.results import other_weights, records_to_frame
from variants.serving.engine import Engine

from . import SAMPLE_FILE
from .ask import load_examples
from .benchmark import benchmark_outputs
from .cost_view import costs_by_variant
from .files import new_folder
from .headline import headline_html
from .questions import chart, scores_html
from .record_table import DEFAULT_VIEW, table_label
from .styles import BANNER_CSS
from .text import count, esc, highlight

EXAMPLE_SNIPPET = 160  # characters of the passage either side of the reference answer shown with an example
QUESTIONS_SHOWN = 5  # of a visitor's own questions, the first this many (where the variants disagree first)
# The table's columns in groups that fit a printed page and a phone (the Variant column leads each); a column the
# tab adds later and no group names (e.g. a cost) lands in a last group of its own.
# At most four numbers a group: a 390 px phone holds the name and four columns.
TABLE_GROUPS = {
    "Accuracy": ["F1", "EM", "% answered", "threshold"],
    "Accuracy by kind of question": ["F1 answerable", "F1 unanswerable", "% answerable answered", "EM answerable"],
    "Speed": ["× baseline", "× pipeline", "× optimum INT8", "median ms"],
    "Latency and throughput": ["p90 ms", "p99 ms", "q/s", "× baseline, range over passes"],
    "Size": ["MB", "params"],
}
REPORT_CSS = """
:root { --background-fill-secondary: #f3f4f6; --body-text-color-subdued: #4b5563; --border-color-primary: #d1d5db; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #111827;
  background: #fff; }
main { max-width: 720px; margin: 0 auto; padding: 16px 14px 32px; }
h1 { font-size: 1.45em; margin: 0 0 4px; line-height: 1.25; }
h2 { font-size: 1.12em; margin: 22px 0 6px; border-bottom: 1px solid var(--border-color-primary); padding-bottom: 3px;
  break-after: avoid; }
h3 { font-size: 0.98em; margin: 14px 0 4px; break-after: avoid; }
p { margin: 6px 0; }
.made { color: var(--body-text-color-subdued); font-size: 0.9em; margin-bottom: 10px; }
.chart { break-inside: avoid; margin: 8px 0; }
.wrap { overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-size: 0.86em; margin: 4px 0 10px; table-layout: auto; }
th, td { border-bottom: 1px solid var(--border-color-primary); padding: 4px 6px; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
thead th { background: var(--background-fill-secondary); overflow-wrap: normal; word-break: normal; }
tbody th { min-width: 6.5em; overflow-wrap: normal; }
.qa-about th { overflow-wrap: normal; }
.qa-about td { white-space: nowrap; }  /* Your questions' table: a number is never cut in two */
@media (max-width: 480px) { table { font-size: 0.8em; } th, td { padding: 4px 3px; } }
caption { text-align: left; font-size: 0.9em; color: var(--body-text-color-subdued); padding: 2px 0; }
tr, .example, dl div { break-inside: avoid; }
thead { display: table-header-group; }
dl { margin: 4px 0; display: grid; grid-template-columns: minmax(110px, 30%) 1fr; gap: 2px 12px; font-size: 0.9em; }
dl div { display: contents; }
dt { color: var(--body-text-color-subdued); }
dd { margin: 0; overflow-wrap: anywhere; }
.example { border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px; margin: 8px 0; }
.example .passage { font-size: 0.85em; color: var(--body-text-color-subdued); }
.example mark { background: #fde68a; }
.method { font-size: 0.84em; }
.method dt { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
@media (max-width: 560px) { dl.method { grid-template-columns: 1fr; } dl.method dd { margin-bottom: 6px; } }
@page { margin: 12mm; }
@media print {
  body { font-size: 11px; }
  main { max-width: none; padding: 0; }
  .wrap { overflow: visible; }
  a { color: inherit; text-decoration: none; }
}
"""


@dataclass
class Example:
    """One question and every variant's answer to it ("" is "no answer")."""

    question: str
    source: str  # where the passage comes from, in words
    passage: str  # the passage (a snippet of it is shown)
    references: list[str] = field(default_factory=list)  # the reference answers, where known
    answers: dict[str, str] = field(default_factory=dict)  # variant label -> answer
    errors: dict[str, str] = field(default_factory=dict)  # variant label -> why it gave none


@dataclass
class Examples:
    """Example questions answered by every variant, and how those answers were produced (one sentence)."""

    how: str
    rows: list[Example] = field(default_factory=list)


# --- where the example answers come from ------------------------------------------------------------------


def engine_examples(engine: Engine, record: Record, sample_file: Path = SAMPLE_FILE) -> Examples:
    """The Ask tab's examples, answered now by the app's own variants that the record measured (one untimed
    run each, at the app's rule): a bench record keeps no answers of its own."""
    labels = {e.variant: e.short_label for e in record.variants}
    names = [v.spec.name for v in engine.loaded if v.ok and v.spec.name in labels]
    rows, titles = load_examples(sample_file)
    try:
        references = {e.question: list(dict.fromkeys(e.answers)) for e in load_squad_json(sample_file)}
    except (OSError, ValueError, KeyError):
        references = {}
    examples = []
    for (context, question), title in zip(rows, titles, strict=True):
        example = Example(question, title, context, references.get(question, []))
        try:
            results = engine.ask(question, context, names, rule=SERVED) if names else []
        except InputError as exc:  # e.g. an app started with a lower --max-context-chars than an example needs
            example.errors = {labels[n]: str(exc) for n in names}
            results = []
        for result in results:
            label = labels.get(result.variant, result.label)
            if result.error:
                example.errors[label] = result.error
            else:
                example.answers[label] = result.answer
        examples.append(example)
    how = (
        "The record keeps no answers of its own: these are the app's examples, answered by the app's own variants "
        f"on {engine.device} when this report was made, one run each, at the app's rule (threshold 0)."
    )
    missing = [labels[n] for n in labels if n not in names]
    if missing:
        how += f" Not loaded in the app, so not shown: {', '.join(missing)}."
    differ = other_weights(record, engine.weights())
    if differ:
        how += f" The app's weights differ from the record's for {', '.join(e.short_label for e in differ)}."
    return Examples(how, examples)


def run_examples(run: Any, shown: int = QUESTIONS_SHOWN) -> Examples:
    """A few of the visitor's own questions with every variant's answer from the run itself (those where the
    variants disagree first)."""
    answers, labels = run.answers(), {e.variant: e.short_label for e in run.entries}
    disagree = {r["id"] for r in run.disagreements()}
    done = sorted(run.done, key=lambda e: e.id not in disagree)[:shown]
    rows = []
    for e in done:
        given = {labels.get(n, n): a[e.id] for n, a in answers.items() if e.id in a}
        rows.append(Example(e.question, e.title or "your file", e.context, list(dict.fromkeys(e.answers)), given))
    how = (
        f"{len(rows)} of the {count(run.position)} questions, those where the variants disagree first "
        f"({count(len(disagree))} did): every variant's answer as the run gave it."
    )
    return Examples(how, rows)


# --- the parts ----------------------------------------------------------------------------------------------


def tab_parts(record: Record, view: str, note: str = "", price: float | None = None) -> tuple[str, Any, Any]:
    """The Benchmark tab's header (headline sentence and busy-machine flag included), chart and table for
    ``record``: the tab's own function, so the report says what the tab says. ``price`` (dollars per hour of
    the machine) adds the cost per million answers, as on the tab."""
    header, figure, _short, table, *_ = benchmark_outputs(record, note, view, price)  # every column: groups fit a page
    if price is None:  # the tab's "pick a machine" line asks for a control the report does not have
        header = re.sub(r'<div class="qa-muted" id="bench-cost-note">.*?</div>', "", header, flags=re.S)
    return header, figure, table


def figure_html(figure: Any) -> str:
    """The plotly figure with plotly.js inlined: it draws offline, fitted to the column's width."""
    config = {"responsive": True, "displayModeBar": False}
    return f'<div class="chart">{figure.to_html(include_plotlyjs=True, full_html=False, config=config)}</div>'


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '<td class="num">–</td>'
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f'<td class="num">{esc(f"{value:g}" if isinstance(value, float) else value)}</td>'
    return f"<td>{esc(value)}</td>"


def table_html(table: Any, caption: str = "") -> str:
    """The tab's table (a DataFrame of its headers) as HTML tables of a few columns each (:data:`TABLE_GROUPS`),
    the variant's name leading each: a page or a phone holds them without cutting any."""
    if table is None or not len(table):
        return '<p class="qa-muted">No numbers in this record.</p>'
    name, columns = table.columns[0], list(table.columns[1:])
    groups = [(title, [c for c in wanted if c in columns]) for title, wanted in TABLE_GROUPS.items()]
    named = {c for _, shown in groups for c in shown}
    groups.append(("More", [c for c in columns if c not in named]))
    out = f'<p class="qa-muted">{esc(caption)}</p>' if caption else ""
    for title, shown in groups:
        if not shown:
            continue
        head = "".join(f"<th>{esc(c)}</th>" for c in [name, *shown])
        body = "".join(
            "<tr>" + f"<th>{esc(row[name])}</th>" + "".join(_cell(row[c]) for c in shown) + "</tr>"
            for _, row in table.iterrows()
        )
        out += (
            f'<div class="wrap"><table class="report-table" data-group="{esc(title)}"><caption>{esc(title)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )
    return out


def _rows(pairs: list[tuple[str, Any]]) -> str:
    rows = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in pairs if v not in (None, "", []))
    return rows or '<div><dt>–</dt><dd class="qa-muted">not in this record</dd></div>'


def machine_html(record: Record) -> str:
    """Where it ran: CPU family and instruction set, cores, memory, GPU, the measured peak and INT8 format."""
    hw = record.hardware or {}
    cpu_id = hw.get("cpu_id") or {}
    family = " ".join(f"{k} {cpu_id[k]}" for k in ("family", "model", "stepping") if cpu_id.get(k) is not None)
    cores = f"{hw.get('usable_cores') or hw.get('cores') or '?'} usable"
    if hw.get("physical_cores"):
        cores += f" ({hw['physical_cores']} physical, {hw.get('cores', '?')} logical)"
    gpu = hw.get("gpu")
    if gpu:
        gpu = f"{hw.get('gpu_count') or 1} × {gpu}" + (f", {hw['gpu_memory_gb']} GB" if hw.get("gpu_memory_gb") else "")
    peak = hw.get("measured_peak") or {}
    units = (("fp32_gflops", "GFLOP/s FP32"), ("int8_gops", "GOP/s INT8"))
    peaks = ", ".join(f"{peak[k]:,} {unit}" for k, unit in units if peak.get(k))
    int8 = hw.get("int8") or {}
    pairs = [
        ("Device", record.device),
        ("CPU", hw.get("cpu")),
        ("CPU family", " · ".join(p for p in (cpu_id.get("vendor"), family) if p)),
        ("Instruction set", ", ".join(hw.get("cpu_isa") or [])),
        ("Cores", cores),
        ("Memory", f"{hw['memory_gb']} GB" if hw.get("memory_gb") else None),
        ("GPU", gpu or "none"),
        ("Platform", hw.get("platform")),
        ("Measured peak", peaks + (f" ({peak.get('threads')} threads)" if peaks and peak.get("threads") else "")),
        ("INT8 weights", " · ".join(str(int8[k]) for k in ("format", "reason") if int8.get(k))),
    ]
    return f"<dl>{_rows(pairs)}</dl>"


def versions_html(record: Record) -> str:
    return f"<dl>{_rows([(k, v) for k, v in (record.versions or {}).items() if not isinstance(v, dict)])}</dl>"


def method_html(record: Record) -> str:
    """The sample and the method in the record's own words (``data``, ``settings`` and ``method``)."""
    data = record.data or {}
    sample = [
        ("Questions", data.get("n_questions")),
        ("With an answer in the passage", data.get("has_answer")),
        ("Without one", data.get("no_answer")),
        ("File", data.get("file")),
        ("Drawn", data.get("sample")),
        ("SHA-256", data.get("sha256")),
    ]
    settings = record.settings or {}
    windows = settings.get("windows")
    rule = windows.get("rule") if isinstance(windows, dict) else windows
    how = [
        ("Windows", f"{settings['max_length']} tokens, stride {settings.get('stride')}" if settings.get("max_length")
         else None),
        ("Long passages", rule),
        ("Timed questions per variant", settings.get("latency_samples")),
        ("Passes", settings.get("latency_passes")),
    ]  # fmt: skip
    method = [(k, v) for k, v in (record.method or {}).items() if isinstance(v, (str, int, float))]
    return (
        f"<h3>Sample</h3><dl>{_rows(sample)}</dl><h3>Settings</h3><dl>{_rows(how)}</dl>"
        f'<h3>Method, in the record\'s words</h3><dl class="method">{_rows(method)}</dl>'
    )


def examples_html(examples: Examples | None) -> str:
    if examples is None:
        return '<p class="qa-muted">No example answers in this report (made without them).</p>'
    out = f"<p>{esc(examples.how)}</p>"
    for e in examples.rows:
        refs = " | ".join(e.references) if e.references else ""
        at = e.passage.find(e.references[0]) if e.references else -1
        if at >= 0:
            passage = highlight(e.passage, at, at + len(e.references[0]), EXAMPLE_SNIPPET)
        else:
            passage = esc(e.passage[: 2 * EXAMPLE_SNIPPET]) + ("…" if len(e.passage) > 2 * EXAMPLE_SNIPPET else "")
        given: dict[str, list[str]] = {}  # answer -> the variants that gave it: the differences stand out
        for label, answer in e.answers.items():
            given.setdefault(answer or "(no answer)", []).append(label)
        for label, error in e.errors.items():
            given.setdefault(f"failed: {error}", []).append(label)
        body = "".join(f"<tr><td>{esc(a)}</td><td>{esc(', '.join(who))}</td></tr>" for a, who in given.items())
        out += (
            f'<div class="example"><b>{esc(e.question)}</b>'
            f'<div class="passage">{esc(e.source)} · {count(len(e.passage))} characters: {passage}</div>'
            + (f"<div>Reference answer: {esc(refs)}</div>" if refs else "")
            + f"<table><thead><tr><th>Answer</th><th>Given by</th></tr></thead><tbody>{body}</tbody></table></div>"
        )
    return out


def page_html(title: str, made: datetime, body: str) -> str:
    """The whole file: one column, the tab's banner styles, print rules."""
    stamp = made.strftime("%Y-%m-%d %H:%M UTC")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{BANNER_CSS}{REPORT_CSS}</style></head><body><main>"
        f'<h1>{esc(title)}</h1><div class="made">Report made {esc(stamp)}</div>{body}</main></body></html>'
    )


def _facts(record: Record, examples: Examples | None) -> str:
    return (
        f"<h2>Example questions</h2>{examples_html(examples)}"
        f"<h2>The machine</h2>{machine_html(record)}"
        f"<h2>Versions</h2>{versions_html(record)}"
        f"<h2>How it was measured</h2>{method_html(record)}"
    )


# --- the reports ---------------------------------------------------------------------------------------------


def benchmark_report(
    record: Record,
    view: str = DEFAULT_VIEW,
    *,
    examples: Examples | None = None,
    price: float | None = None,
    note: str = "",
    made: datetime | None = None,
) -> str:
    """The report of a benchmark record, accuracy as ``view`` has it (the tab's views)."""
    header, figure, table = tab_parts(record, view, note, price)
    what = f"the {record.lineup} chain" if record.chain else f"the {record.preset or 'benchmark'} preset"
    title = f"QA variants side by side: {what} on {record.device}"
    body = f"{header}{figure_html(figure)}<h2>Per variant</h2>{table_html(table, table_label(view))}" + _facts(
        record, examples
    )
    return page_html(title, made or datetime.now(UTC), body)


def questions_report(
    run: Any, record: Record | None = None, made: datetime | None = None, price: float | None = None
) -> str:
    """The report of a run on a visitor's own questions (the Your questions tab's table and chart), with the cost
    per million answers at ``price`` dollars per hour where set, as on the tab."""
    record = record or run.record()
    scores, labelled = run.scores(record), run.questions.labelled
    costs = costs_by_variant(record, price)
    frame = records_to_frame(record, record_view("pipeline"))
    which = f"your {count(run.position)} questions"
    headline = headline_html(record, frame, accuracy_column("pipeline"), which) if labelled else ""
    if not labelled:  # no answers given: the tab's agreement, not F1 (the headline's F1 part is left out)
        headline = headline_html(record, frame.assign(f1=None), "f1", which)
    status = "stopped early: " + run.stopped if run.stopped else "finished"
    lines = [
        f"Your questions: {count(run.position)} of {count(run.total)} answered ({status}), "
        f"{run.seconds:.1f} s of model time.",
        f"Measured {record.created} on {hardware_label(record.hardware, record.device)}.",
    ]
    header = headline + '<div class="qa-record">' + "<br>".join(esc(x) for x in lines) + "</div>"
    body = (
        f"{header}{figure_html(chart(run, scores, record))}<h2>Per variant</h2>{scores_html(scores, labelled, costs)}"
        + _facts(record, run_examples(run))
    )
    return page_html("QA variants side by side: your questions", made or datetime.now(UTC), body)


def write_report(html: str, name: str, folder: str | Path | None = None) -> Path:
    folder = Path(folder) if folder else new_folder("report-")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"report-{name}.html"
    path.write_text(html, encoding="utf-8")
    return path


def benchmark_report_file(
    engine: Engine, record: Record, view: str = DEFAULT_VIEW, note: str = "", price: float | None = None
) -> str:
    """The Benchmark tab's "Download a report": the record's report, with the app's examples answered now, the
    cost at ``price`` dollars per hour where the tab has one set."""
    html = benchmark_report(record, view, examples=engine_examples(engine, record), note=note, price=price)
    return str(write_report(html, f"{record.name()}-{view}"))


def questions_report_file(run: Any, record: Record, price: float | None = None) -> str:
    """Your questions' "Download a report", at the end of a run (priced as the tab's box is)."""
    return str(write_report(questions_report(run, record, price=price), record.name() + "-your-questions"))
