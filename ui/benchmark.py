"""The Benchmark tab: every stored record and this session's quick runs, each selectable, shown as header,
charts, table and CSV, with the accuracy view (which no-answer threshold) chosen in the tab; at its foot the
newest GPU record (:mod:`ui.gpu_view`), read once when the page is built."""

import logging
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from variants.answering.timing import busy
from variants.building.replica import LATENCY_ONLY
from variants.core import safe_csv
from variants.core.hardware import hardware_label
from variants.core.squad import load_squad_json
from variants.records import results
from variants.records.record import ANSWERABLE, VIEW_TITLES, Record, accuracy_column, record_view
from variants.serving.engine import Engine

from .charts import accuracy_figure, no_answer_floor, seq_len_figure
from .gpu_view import gpu_section, newest_gpu_bench
from .headline import headline_html
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


def record_header(record: Record | None, note: str, view: str = DEFAULT_VIEW) -> str:
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
        f"<b>{esc(source)}</b> · preset <code>{esc(record.preset)}</code> · device <code>{esc(record.device)}</code>"
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
    headline = headline_html(record, frame, accuracy_column(view), questions) if measured == "Accuracy" else ""
    return warn + headline + '<div class="qa-record">' + "<br>".join(lines) + "</div>"


SCROLL_TO_HEADER = """(...inputs) => {
  const target = document.getElementById('bench-header');
  if (target && target.getBoundingClientRect().top < 0) target.scrollIntoView({behavior: 'smooth', block: 'start'});
  return inputs;
}"""


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


def table_frame(frame, view: str = DEFAULT_VIEW):
    """The table of ``view``: its columns (:data:`VIEW_COLUMNS`) under their short headers, numbers rounded."""
    import pandas as pd  # noqa: PLC0415

    columns = VIEW_COLUMNS.get(view, VIEW_COLUMNS["pipeline"])
    if frame is None or not len(frame):
        return pd.DataFrame(columns=[TABLE_COLUMNS[c] for c in columns])
    bounds = zip(frame["speedup_vs_baseline_low"], frame["speedup_vs_baseline_high"], strict=True)
    frame = frame.assign(speedup_vs_baseline_spread=[spread(low, high) for low, high in bounds])
    shown = [c for c in columns if c in frame.columns]
    if not frame["speedup_vs_baseline_spread"].astype(bool).any():
        shown.remove("speedup_vs_baseline_spread")  # one pass: no range to show
    shown = [c for c in shown if c not in PEER_RATIOS or frame[c].notna().any()]  # a peer the run did not measure
    table = frame[shown].copy()
    random_weights = frame["latency_only"].fillna(False).astype(bool)
    table.loc[random_weights, "short_label"] += f" ({LATENCY_ONLY})"
    for column in table.columns:
        if column == "parameters":
            table[column] = table[column].map(fmt_params)
        elif column not in ("short_label", "speedup_vs_baseline_spread"):
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


PROFILE_COLUMNS = [  # short words (a phone shows three at a time); the note above the table says what each is
    "Variant",
    "tokenize ms",
    "model ms",
    "decode ms",
    "GFLOP per question",
    "GFLOP/s",
    "% of peak",
]
PROFILE_NOTE = (
    "Per question: **tokenize**, reading the text into tokens; **model**, the network's forward pass over "
    "every window; **decode**, picking the answer span; the work (GFLOP) and rate (GFLOP/s) of the model's "
    "matrix products; **% of peak**, that rate against the fastest this machine was measured to run."
)


def profile_frame(record: Record | None):
    """Where each variant's time per question goes (the record's profile), beside the machine's measured peak."""
    import pandas as pd  # noqa: PLC0415

    peak = (record.hardware.get("measured_peak") or {}) if record is not None else {}
    rows = []
    for entry in record.variants if record is not None else []:
        prof = entry.profile or {}
        if "forward_ms" not in prof:
            continue
        top = peak.get("int8_gops" if entry.dtype == "int8" else "fp32_gflops")
        rate = prof.get("gflops_achieved")
        share = round(100 * rate / top, 1) if rate and top else None
        rows.append([entry.short_label, *(round(prof[k], 2) for k in ("tokenize_ms", "forward_ms", "decode_ms")),
                     prof.get("gflop"), round(rate) if rate else None, share])  # fmt: skip
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def profile_note(record: Record | None) -> str:
    """What the profile table measured, in a line (empty when the record has no profile)."""
    peak = (record.hardware.get("measured_peak") or {}) if record is not None else {}
    profiled = [e.profile.get("n") for e in record.variants if e.profile.get("n")] if record is not None else []
    if not profiled:
        if record is not None and record.settings.get("skip_sweeps") and not record.is_quick:
            return "This run skipped the profile (`python -m variants bench` without `--skip-sweeps` measures it)."
        return "This record has no profile (quick runs, and records from before it was added, have none)."
    text = f"{PROFILE_NOTE} Medians over {count(max(profiled))} questions at batch 1."
    if peak:
        text += (
            f" Peak: the fastest large matrix product this machine ran on {peak.get('threads')} threads, "
            f"{peak.get('fp32_gflops')} GFLOP/s in FP32 and {peak.get('int8_gops')} GOP/s in INT8 "
            "(INT8 variants are compared with the INT8 peak)."
        )
    return text


def write_csv(frame, record: Record, view: str = DEFAULT_VIEW) -> str | None:
    """The record's per-variant rows as a CSV file in the temp folder (served by the download button)."""
    if frame is None or not len(frame):
        return None
    folder = Path(tempfile.gettempdir()) / "qa-variants"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = (record.created or time.strftime("%Y%m%dT%H%M%S")).replace(":", "").replace(" ", "_")
    path = folder / f"benchmark-{record.preset or 'preset'}-{stamp}-{view}.csv"
    safe_csv.write_frame(frame, path)  # a record's labels and names can be a visitor's text (a Hub model id)
    return str(path)


LONG_COLUMNS = [  # short: a phone shows the table one narrow column at a time; the note above says the rest
    "Variant",
    "F1, own paragraph",
    "F1, whole article",
    "points lost",
    "% answered, whole article",
]


def long_inputs_frame(record: Record | None):
    """A record's long-input view (``bench --long-inputs``) under its own window rule: per variant, F1 on the
    answerable questions asked about their own paragraph and about their whole article. Empty without one."""
    import pandas as pd  # noqa: PLC0415

    view = (record.long_inputs or {}) if record is not None else {}
    rule, rows = record.window_rule if record is not None else "", []
    for name, measured in (view.get("variants") or {}).items():
        paragraph = (measured.get("paragraph") or {}).get(rule) or {}
        article = (measured.get("article") or {}).get(rule) or {}
        if paragraph.get("has_ans_f1") is None or article.get("has_ans_f1") is None:
            continue
        entry, para, art = record.entry(name), paragraph["has_ans_f1"], article["has_ans_f1"]
        label = entry.short_label if entry else name
        rows.append([label, para, art, round(para - art, 2), article.get("answered_share")])
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def long_inputs_note(record: Record | None) -> str:
    """What the long-input table measured, in a line (or why there is none)."""
    view = (record.long_inputs or {}) if record is not None else {}
    if not view.get("variants"):
        return (
            "This record has no long-passage view: `python -m variants bench --long-inputs` asks every question "
            "about its whole article as well as about its own paragraph."
        )
    chars = view.get("article_chars") or []
    size = f" ({min(chars):,} to {max(chars):,} characters, tens of windows each)" if chars else ""
    return (
        f"Each of the {count(view.get('n_answerable'))} answerable questions asked twice: about its own paragraph, "
        f"and about its whole article{size}, all of it pasted in as one passage; F1 on those questions. The "
        f"app's rule for combining a long passage's windows (`{record.window_rule}`) decides, at the app's default "
        "threshold (0)."
    )


def benchmark_outputs(record: Record | None, note: str, view: str = DEFAULT_VIEW) -> tuple:
    """(header, scatter, table, seq-len chart, profile note, profile table, long-passage note, long-passage table,
    CSV path) for a record or none, accuracy as ``view`` has it. A record that cannot be shown (edited by hand,
    cut short) gives the outputs of none, with a note saying which and why: never a page that does not build."""
    try:
        return _record_outputs(record, note, view)
    except Exception as exc:  # any field of a stored file may be off: the page still builds
        name = (record.file or record.created) if record is not None else ""
        log.warning("the benchmark record %s cannot be shown: %r", name, exc)
        reason = f"The benchmark record {name} cannot be shown ({type(exc).__name__}: {exc}): choose another."
        return _record_outputs(None, reason, view)


def _record_outputs(record: Record | None, note: str, view: str) -> tuple:
    frame = record_frame(record, view) if record is not None else None
    csv = write_csv(frame, record, record_view(view)) if record is not None else None
    floor = None if view == "answerable" else no_answer_floor(record)  # answerable: refusing scores 0
    return (
        record_header(record, note, view),
        accuracy_figure(frame, floor, CHART_TITLES.get(view, view), y=accuracy_column(view)),
        table_frame(frame, view),
        seq_len_figure(record),
        profile_note(record),
        profile_frame(record),
        long_inputs_note(record),
        long_inputs_frame(record),
        csv,
    )


# What runs a quick benchmark: (engine, questions, how many, progress(fraction, message)) -> a record.
# app.py hands in variants.benchmarking.quick.quick_benchmark: the UI imports no benchmarking code.
QuickBenchmark = Callable[..., Record]


def make_quick_benchmark(
    engine: Engine, sample_file: Path, run_quick: QuickBenchmark, stored: list[Record] | None = None
) -> Callable:
    """Run a quick benchmark and add it beside the stored records (never instead of them), selected."""

    def quick(n: float, view: str, quick_runs: list[Record], older: bool = False, progress=gr.Progress()) -> tuple:
        examples = load_squad_json(sample_file)
        progress(0.0, desc="Starting")
        try:
            record = run_quick(engine, examples, int(n), progress=lambda f, msg: progress(f, desc=msg))
        except ValueError as exc:  # e.g. variants answered by a backend: the reason, on the page
            raise gr.Error(str(exc)) from None
        quick_runs = [*(quick_runs or []), record]
        choices = gr.Dropdown(choices=choices_for(stored or [], quick_runs, older), value=record_key(record))
        return (*select_outputs(record, "", view), quick_runs, choices)

    return quick


def select_outputs(record: Record | None, note: str, view: str) -> tuple:
    """What the tab shows for ``record``: header, scatter, table (with its column widths), sweep and the
    download button."""
    header, scatter, table, *shown, csv = benchmark_outputs(record, note, view)
    table = gr.Dataframe(table, column_widths=table_widths(table), label=table_label(view))
    return (header, scatter, table, *shown, gr.DownloadButton(value=csv, interactive=csv is not None))


def benchmark_tab(engine: Engine, results_dir: Path | None, group: dict, sample_file: Path, run_quick: QuickBenchmark):
    stored = stored_records(results_dir)
    record, note = stored_record(engine, results_dir)
    weights = engine.weights()

    def notes(picked: Record | None) -> str:
        said = (note if picked is record else "", weights_note(picked, weights), older_note(picked, stored))
        return " ".join(text for text in said if text)

    header0, scatter0, table0, sweep0, profile_note0, profile0, long_note0, long0, csv0 = benchmark_outputs(
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
    header = html_block(header0, elem_id="bench-header")
    with gr.Row():
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
        download = gr.DownloadButton("Download CSV", value=csv0, interactive=csv0 is not None, scale=1)
    gr.Markdown(
        "Stored records come from `python -m variants bench` (the full sample, hundreds of timed runs, sweeps). "
        "A quick benchmark runs here and now on N questions drawn at random from the SQuAD v2 sample, at batch 1; "
        "it is added to the list above, not saved, and waits in the same model queue as the Ask tab. At 50 "
        "questions an F1 is only known to about ±14 points. EM and F1 are percentages; latency is per question "
        "(tokenize, every window, decode)."
    )
    shown = [header, scatter, table, sweep, why, profile, long_note, long_table, download]

    def select(key: str, chosen_view: str, runs: list[Record]) -> tuple:
        picked = find_record(key, stored, runs or [])
        return select_outputs(picked, notes(picked), chosen_view)

    def list_records(show_older: bool, key: str | None, runs: list[Record]) -> gr.Dropdown:
        entries = choices_for(stored, runs or [], show_older)
        keys = [k for _label, k in entries]
        if key not in keys:  # an older record was chosen, then hidden: its machine's current one instead
            key = record_key(record) if record is not None else (keys[0] if keys else None)
        return gr.Dropdown(choices=entries, value=key)

    gr.on([choice.change, view.change], select, [choice, view, quick_runs], shown, api_visibility="private")
    older.change(list_records, [older, choice, quick_runs], choice, api_visibility="private")
    run.click(
        make_quick_benchmark(engine, sample_file, run_quick, stored),
        [n, view, quick_runs, older],
        [*shown, quick_runs, choice],
        show_progress_on=[header],
        # its progress shows on the header, far above the button on a phone: bring it into view first (a separate
        # js-only event on this button moved the Ask tab's scroll to the results, measured in test_browser)
        js=SCROLL_TO_HEADER,
        api_visibility="private",
        **group,
    )
    # the newest GPU record, and the preset's bench on a GPU (the main view above shows it when the app runs
    # on one), read once: no events
    gpu_section(Path(results_dir) / "gpu" if results_dir else None, newest_gpu_bench(stored, engine.preset))
