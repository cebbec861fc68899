"""Gradio app: optimized variants of an extractive QA transformer, side by side.

A thin UI over :mod:`variants`: the models load once at start-up (``load_models``) and every request
shares them; ``build_demo(engine)`` makes the page from an already-loaded engine (tests use tiny
models). Run ``python app.py [--preset NAME] [--port N]``; on a Hugging Face Space (``SPACE_ID`` set)
it serves on 0.0.0.0:7860. The API endpoint ``/answer`` takes (context, question) and returns one
dict per variant, the same fields as ``python -m variants ask --json``.

No model code lives here: loading, answering, timing and benchmarking are the engine's.
"""

import argparse
import html
import logging
import math
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gradio as gr
import plotly.graph_objects as go

from variants import config, custom
from variants import results as records
from variants import spec as specs
from variants.bench import quick_benchmark
from variants.config import add_model_arguments, engine_from_args
from variants.engine import Engine, LoadedVariant, VariantResult
from variants.qa import InputError
from variants.squad import load_squad_json

log = logging.getLogger("app")

ROOT = Path(__file__).resolve().parent
SAMPLE_FILE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
RESULTS_ENV = config.RESULTS_ENV  # folder of benchmark records (default: the engine's assets/results)
CONCURRENCY_GROUP = "models"  # every handler that runs a model shares this queue group
SNIPPET_RADIUS = 180  # characters of context shown either side of an answer

# Colours: the baseline grey, headline variants in the accent colour, intermediate steps lighter.
BASELINE_COLOUR, HEADLINE_COLOUR, STEP_COLOUR = "#9ca3af", "#ea580c", "#fdba74"


# --- examples -------------------------------------------------------------------------------------

NORMANS_QUESTION = "In what country is Normandy located?"
UNANSWERABLE_ID = "5ad01e4677cf76001a686aa8"  # "What city has a population of 1,307,204?" (San Diego has 1,307,402)
LONG_TITLE, LONG_PARAGRAPHS = "Packet_switching", 5  # about 640 tokens: more than one 384-token window
LONG_QUESTION = "Who did Roger Scantlebury meet at the 1967 ACM Symposium?"  # answered in the last paragraph


def load_examples(path: Path = SAMPLE_FILE) -> tuple[list[list[str]], list[str]]:
    """[context, question] rows for gr.Examples, with labels; empty when the sample is missing."""
    try:
        sample = load_squad_json(path)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("no examples: %s", exc)
        return [], []
    rows, labels = [], []
    normans = next((e for e in sample if e.question == NORMANS_QUESTION), None)
    if normans:
        rows.append([normans.context, NORMANS_QUESTION])
        labels.append("Normans: answerable")
    unanswerable = next((e for e in sample if e.id == UNANSWERABLE_ID), None)
    if unanswerable:
        rows.append([unanswerable.context, unanswerable.question])
        labels.append("Southern California: no answer in the text")
    paragraphs = list(dict.fromkeys(e.context for e in sample if e.title == LONG_TITLE))[:LONG_PARAGRAPHS]
    if len(paragraphs) == LONG_PARAGRAPHS:
        rows.append(["\n\n".join(paragraphs), LONG_QUESTION])
        labels.append("Packet switching: long context (several 384-token windows)")
    return rows, labels


# --- formatting -----------------------------------------------------------------------------------


def shown_source(source: str) -> str:
    """A Hub id as is; a folder inside the app relative to it (server paths are not the visitor's business)."""
    path = Path(source)
    if path.is_absolute():
        try:
            return str(path.resolve().relative_to(ROOT))
        except ValueError:
            return path.name
    return source


def esc(value: object) -> str:
    """Every piece of user or model text goes through here before it reaches HTML."""
    return html.escape(str(value), quote=True)


def fmt_params(n: int | None) -> str:
    if not n:
        return "–"
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M" if n >= 1e5 else f"{n:,}"


def fmt_mb(mb: float | None) -> str:
    if mb is None:
        return "–"
    return f"{mb:,.0f} MB" if mb >= 100 else f"{mb:.1f} MB" if mb >= 1 else f"{mb * 1000:.0f} kB"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.1f} ms"


def fmt_speedup(x: float | None) -> str:
    return "–" if not x else f"{x:.1f}×" if x >= 10 else f"{x:.2f}×"


def fmt_confidence(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.0%}" if p >= 0.095 else f"{p:.1%}"


def runtime_line(device: str, provider: str, dtype: str) -> str:
    """What it really ran on, e.g. ``cpu · CPUExecutionProvider · INT8``."""
    return " · ".join(p for p in (device, provider, dtype.upper()) if p)


def highlight(context: str, start: int, end: int, radius: int = SNIPPET_RADIUS) -> str:
    """An escaped snippet of ``context`` around [start, end) with the answer in <mark>."""
    if not (0 <= start < end <= len(context)):
        return ""
    lo, hi = max(0, start - radius), min(len(context), end + radius)
    if lo > 0:  # start and stop at word boundaries
        space = context.find(" ", lo, start)
        lo = space + 1 if space != -1 else lo
    if hi < len(context):
        space = context.rfind(" ", end, hi)
        hi = space if space != -1 else hi
    before, answer, after = context[lo:start], context[start:end], context[end:hi]
    return (
        ("…" if lo > 0 else "")
        + esc(before)
        + f"<mark>{esc(answer)}</mark>"
        + esc(after)
        + ("…" if hi < len(context) else "")
    )


# --- Ask tab: cards, chart, summary ---------------------------------------------------------------


def _metric(value: str, caption: str, extra: str = "") -> str:
    return f'<div class="qa-metric {extra}"><b>{esc(value)}</b><span>{esc(caption)}</span></div>'


def card_html(
    loaded: LoadedVariant,
    result: VariantResult | None = None,
    context: str = "",
    state: str = "idle",
    baseline: VariantResult | None = None,
) -> str:
    """One variant's card. ``state``: idle (nothing asked yet), running, done, stale (not run for this question)."""
    spec = loaded.spec
    info = loaded.model.describe() if loaded.ok else {}
    error = (result.error if result else None) or loaded.error
    if error:
        state = "error"
    classes = f"qa-card qa-{state}" + (" qa-headline" if spec.headline else "")
    role = {"baseline": "reference", custom.CUSTOM_NAME: "your model"}.get(
        spec.name, "headline" if spec.headline else "intermediate step"
    )
    head = (
        f'<div class="qa-head"><span class="qa-title">{esc(spec.label)}</span>'
        f'<span class="qa-role">{esc(role)}</span></div>'
    )
    if state == "error":
        body = f'<div class="qa-error"><b>This variant failed.</b> {esc(error)}</div>'
    elif state == "done" and result is not None:
        body = _answer_block(result, context) + _metrics_block(result, baseline)
    else:
        waiting = {"running": "running…", "stale": "not run for this question: press Ask"}.get(state, "")
        body = f'<div class="qa-answer qa-pending">{esc(waiting) or "&nbsp;"}</div>' + _static_metrics(info)
    device = result.device if result and result.device else info.get("device", "")
    provider = result.provider if result and result.provider else info.get("provider", "")
    dtype = result.dtype if result and result.dtype else info.get("dtype", "")
    runtime = runtime_line(device, provider, dtype)
    foot = f'<div class="qa-runtime" title="device · provider · precision">{esc(runtime)}</div>' if runtime else ""
    notes = "".join(f'<div class="qa-note">{esc(n)}</div>' for n in info.get("notes", []))
    return (
        f'<div class="{classes}" data-variant="{esc(spec.name)}" data-state="{esc(state)}">'
        f"{head}{body}{foot}{notes}</div>"
    )


def _answer_block(result: VariantResult, context: str) -> str:
    confidence = fmt_confidence(result.score)
    if not result.answer and result.guess:
        snippet = highlight(context, result.guess_start, result.guess_end, SNIPPET_RADIUS // 2)
        return (
            '<div class="qa-answer qa-none">no answer</div>'
            f'<div class="qa-snippet qa-muted" title="Its best span did not clear the model\'s calibrated '
            f'no-answer threshold.">Best guess, below its no-answer threshold: {snippet}</div>'
        )
    if not result.answer:
        return (
            '<div class="qa-answer qa-none">no answer</div>'
            f'<div class="qa-snippet qa-muted">The model judges the question unanswerable from this context '
            f"(confidence {esc(confidence)}).</div>"
        )
    snippet = highlight(context, result.start, result.end)
    return f'<div class="qa-answer">{esc(result.answer)}</div><div class="qa-snippet">{snippet}</div>'


def _metrics_block(result: VariantResult, baseline: VariantResult | None) -> str:
    if result.variant == "baseline":
        speed = _metric("1.00×", "reference speed", "qa-speed")
    elif result.speedup:
        word = "faster" if result.speedup >= 1 else "slower"
        shown = result.speedup if result.speedup >= 1 else 1 / result.speedup
        speed = _metric(
            fmt_speedup(shown), f"{word} than baseline", "qa-speed" + (" qa-good" if result.speedup >= 1 else "")
        )
    else:
        speed = _metric("–", "vs baseline", "qa-speed")
    smaller = ""
    if baseline and baseline.size_mb and result.size_mb and result.variant != "baseline":
        smaller = f" · {baseline.size_mb / result.size_mb:.1f}× smaller"
    return (
        '<div class="qa-metrics">'
        + _metric(fmt_ms(result.latency_ms), "latency", "qa-key")
        + speed
        + _confidence_metric(result)
        + _metric(fmt_mb(result.size_mb), "model size" + smaller)
        + _metric(fmt_params(result.parameters), "parameters")
        + "</div>"
    )


def _confidence_metric(result: VariantResult) -> str:
    """The answer's probability; with no answer, its best guess's (the [CLS] probability is often ~0%, since a
    calibrated threshold can make "no answer" win with a null score far below the span's)."""
    if result.answer:
        return _metric(fmt_confidence(result.score), "confidence")
    if result.guess:
        return _metric(fmt_confidence(result.guess_score), "best guess confidence")
    return _metric(fmt_confidence(result.score), "no-answer score")


def _static_metrics(info: dict) -> str:
    if not info:
        return ""
    return (
        '<div class="qa-metrics">'
        + _metric("–", "latency", "qa-key")
        + _metric("–", "vs baseline", "qa-speed")
        + _metric("–", "confidence")
        + _metric(fmt_mb(info.get("size_mb")), "model size")
        + _metric(fmt_params(info.get("parameters")), "parameters")
        + "</div>"
    )


def cards_html(
    engine: Engine, names: list[str], results: dict[str, VariantResult], context: str, running: bool = False
) -> str:
    """The grid of cards for ``names`` (in chain order), each in the state its result says."""
    baseline = results.get("baseline")
    cards = []
    for loaded in engine.loaded:
        name = loaded.spec.name
        if name not in names:
            continue
        if name in results:
            cards.append(card_html(loaded, results[name], context, "done", baseline))
        else:
            state = "running" if running else ("stale" if results else "idle")
            cards.append(card_html(loaded, None, context, state))
    return f'<div class="qa-cards">{"".join(cards)}</div>'


def summary_html(engine: Engine, names: list[str], results: dict[str, VariantResult], running: bool) -> str:
    """One line a stakeholder can read: the fastest variant, its speedup and size, and whether answers agree."""
    if running:
        done = len(results)
        return f'<div class="qa-summary">Running {done + 1} of {len(names)}…</div>'
    ok = [r for r in results.values() if not r.error and r.latency_ms]
    if not ok:
        text = "No variant could answer: the cards say why." if results else "Ask a question to compare the variants."
        return f'<div class="qa-summary qa-muted">{esc(text)}</div>'
    base = results.get("baseline")
    others = [r for r in ok if r.variant != "baseline"]
    if not base or base.error or not others:
        fastest = min(ok, key=lambda r: r.latency_ms)
        return f'<div class="qa-summary">Fastest: <b>{esc(fastest.label)}</b> ({esc(fmt_ms(fastest.latency_ms))})</div>'
    fastest = min(others, key=lambda r: r.latency_ms)
    ratio = base.latency_ms / fastest.latency_ms
    if ratio >= 1:
        lead = (
            f"Fastest: <b>{esc(fastest.label)}</b>, <b>{esc(fmt_ms(fastest.latency_ms))}</b>, "
            f"<b>{esc(fmt_speedup(ratio))} faster</b> than the baseline ({esc(fmt_ms(base.latency_ms))})"
        )
    else:
        lead = (
            f"The baseline was fastest on this question ({esc(fmt_ms(base.latency_ms))}); the quickest optimized "
            f"variant, <b>{esc(fastest.label)}</b>, took {esc(fmt_ms(fastest.latency_ms))}"
        )
    if base.size_mb and fastest.size_mb and base.size_mb / fastest.size_mb >= 1.05:
        lead += f", and it is {base.size_mb / fastest.size_mb:.1f}× smaller"
    agree = sum(r.answer == base.answer for r in ok)
    answers = (
        "Every variant gives the baseline's answer."
        if agree == len(ok)
        else f"{agree} of {len(ok)} variants give the baseline's answer."
    )
    return f'<div class="qa-summary">{lead}.<br><span class="qa-agree">{esc(answers)}</span></div>'


def latency_figure(engine: Engine, names: list[str], results: dict[str, VariantResult]) -> go.Figure:
    """Horizontal bars: latency per variant (chain order, baseline on top) with speedup labels."""
    rows = []
    for loaded in engine.loaded:
        r = results.get(loaded.spec.name)
        if loaded.spec.name in names and r is not None and r.latency_ms and not r.error:
            colour = (
                BASELINE_COLOUR if r.variant == "baseline" else HEADLINE_COLOUR if loaded.spec.headline else STEP_COLOUR
            )
            text = fmt_ms(r.latency_ms) + (f"  ·  {fmt_speedup(r.speedup)}" if r.variant != "baseline" else "")
            rows.append((r.label, r.latency_ms, colour, text))
    fig = go.Figure()
    if rows:
        labels, values, colours, texts = zip(*rows, strict=True)
        fig.add_bar(
            y=list(labels),
            x=list(values),
            orientation="h",
            marker_color=list(colours),
            text=list(texts),
            textposition="auto",
            hovertemplate="%{y}: %{x:.1f} ms<extra></extra>",
        )
    else:
        _empty(fig, "Latencies appear here as each variant answers")
    fig.update_layout(
        title={"text": "Latency for this question (lower is better)", "font": {"size": 14}},
        xaxis_title="milliseconds",
        yaxis={"autorange": "reversed"},
        height=max(220, 70 + 42 * max(len(rows), 3)),
        margin={"l": 10, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        showlegend=False,
    )
    return fig


def selected_names(engine: Engine, extra: list[str] | None) -> list[str]:
    """The headline variants plus the intermediate steps ticked in the checkbox group."""
    extra = set(extra or [])
    return [v.spec.name for v in engine.loaded if v.spec.headline or v.spec.name in extra]


def make_ask(engine: Engine) -> Callable[..., Iterator[tuple]]:
    """The Ask handler: yields (cards, summary, chart, last) after each variant finishes."""

    def ask(context: str, question: str, extra: list[str], last: dict) -> Iterator[tuple]:
        try:
            engine.check_input(question, context)
        except InputError as exc:
            raise gr.Error(str(exc)) from None
        names = selected_names(engine, extra)
        results: dict[str, VariantResult] = {}
        yield (
            cards_html(engine, names, results, context, running=True),
            summary_html(engine, names, results, running=True),
            latency_figure(engine, names, results),
            last,
        )
        try:
            for result in engine.ask_iter(question, context, names):
                results[result.variant] = result
                running = len(results) < len(names)
                yield (
                    cards_html(engine, names, results, context, running=running),
                    summary_html(engine, names, results, running=running),
                    latency_figure(engine, names, results),
                    last,
                )
        except InputError as exc:  # e.g. a question too long for the model's window
            raise gr.Error(str(exc)) from None
        yield (
            cards_html(engine, names, results, context),
            summary_html(engine, names, results, running=False),
            latency_figure(engine, names, results),
            {"context": context, "results": results},
        )

    return ask


def make_validator(engine: Engine) -> Callable[..., list[dict]]:
    """Checks the Ask inputs before the queue: a bad one gets its message under its own box, and the
    cards, chart and summary are left as they were."""

    def validate(context: str, question: str, extra: list[str], last: dict) -> list[dict]:
        try:
            engine.check_input(question, context)
        except InputError as exc:
            message = str(exc)
            about_question = exc.field == "question"
            return [
                gr.validate(about_question, "" if about_question else message),
                gr.validate(not about_question, message if about_question else ""),
                gr.validate(True, ""),
                gr.validate(True, ""),
            ]
        return [gr.validate(True, "")] * 4

    return validate


def make_reselect(engine: Engine) -> Callable[[list[str], dict], tuple]:
    """Show or hide the intermediate steps' cards without re-running anything."""

    def reselect(extra: list[str], last: dict) -> tuple:
        names = selected_names(engine, extra)
        results = {k: v for k, v in (last or {}).get("results", {}).items() if k in names}
        context = (last or {}).get("context", "")
        return (
            cards_html(engine, names, results, context),
            summary_html(engine, names, results, running=False),
            latency_figure(engine, names, results),
        )

    return reselect


def make_answer_api(engine: Engine) -> Callable[[str, str], list[dict]]:
    def answer(context: str, question: str) -> list[dict]:
        """Answer `question` from `context` with every loaded variant.

        Returns one dict per variant (baseline first) with the fields variant, label, answer, score,
        latency_ms, device, provider, dtype, start, end, null_score, guess, guess_start, guess_end,
        guess_score, size_mb, parameters, speedup and error; `answer` is "" when the model finds no answer
        in the context, and `guess` (with its offsets and probability) is then the best span that "no
        answer" beat.
        """
        try:
            return [r.to_json() for r in engine.ask(question, context)]
        except InputError as exc:
            raise gr.Error(str(exc)) from None

    return answer


# --- Try your own model ---------------------------------------------------------------------------


def custom_status_html(message: str, ok: bool) -> str:
    kind = "qa-ok" if ok else "qa-notice"
    return f'<div class="{kind}">{esc(message)}</div>'


def make_custom_loader(engine: Engine, steps: list[tuple[str, str]], max_mb: float) -> Callable[..., tuple]:
    """Check and load a user's Hub model as the extra variant ``custom``; tick it so that its card shows."""

    def load(model_id: str, extra: list[str], progress=gr.Progress()) -> tuple:
        try:
            loaded = custom.load_custom_variant(engine, model_id, max_mb, progress=lambda f, m: progress(f, desc=m))
        except custom.CustomModelRefused as exc:
            return custom_status_html(str(exc), ok=False), gr.skip()
        if not loaded.ok:
            return custom_status_html(f"{loaded.spec.label} failed to load: {loaded.error}", ok=False), gr.skip()
        name = loaded.spec.name
        status = (
            f"Loaded {loaded.spec.label.removeprefix('Your model: ')} ({loaded.spec.description.rstrip('.')}) "
            "as an extra variant: press Ask to compare it. Loading another model replaces it."
        )
        ticked = [*(e for e in extra or [] if e != name), name]
        choices = [*steps, (loaded.spec.label, name)]
        return custom_status_html(status, ok=True), gr.CheckboxGroup(choices=choices, value=ticked, visible=True)

    return load


# --- Benchmark tab --------------------------------------------------------------------------------

TABLE_COLUMNS = {  # records_to_frame column -> table header
    "label": "Variant",
    "exact": "EM",
    "f1": "F1",
    "has_ans_f1": "HasAns F1",
    "no_ans_f1": "NoAns F1",
    "p50_ms": "p50 ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "throughput_qps": "q/s",
    "speedup_vs_baseline": "× base",
    "size_mb": "MB",
    "parameters": "params",
}
HOVER_FIELDS = [k for k in TABLE_COLUMNS if k != "label"] + ["best_f1", "device", "provider", "dtype"]


def stored_record(engine: Engine, results_dir: Path | None) -> tuple[dict | None, str]:
    """The stored record for this preset and the hardware in use, and a note when it does not match."""
    loaded = records.load_records(results_dir) if results_dir else records.load_records()
    stored = [{**r.to_dict(), "_file": r.file} for r in loaded]  # until ui/ reads variants.record.Record
    same_preset = [r for r in stored if r.get("preset") == engine.preset]
    if not same_preset:
        return None, f"No benchmark records for the {engine.preset} preset yet."
    hardware = records.current_hardware()
    record = records.pick_record(same_preset, device=engine.device, hardware=hardware)
    here = records.hardware_label(hardware, engine.device)
    same_kind = records.device_kind(record.get("device")) == records.device_kind(engine.device)
    if same_kind and records.same_hardware(record, hardware):
        return record, ""
    return record, f"No record was measured on this machine ({here}, {engine.device}); showing the closest one."


def record_frame(record: dict | None):
    """One row per variant (and the transformers-pipeline peer, if measured) of ``record``."""
    if record is None:
        return None
    return records.records_to_frame([record])


def record_header(record: dict | None, note: str, fresh: bool = False) -> str:
    if record is None:
        return (
            f'<div class="qa-notice">{esc(note)} Run <code>python -m variants bench</code> to add one, '
            "or press <b>Run quick benchmark</b> below.</div>"
        )
    frame = record_frame(record)
    questions = frame["n_questions"].dropna().max() if len(frame) else None
    timed = frame["n_latency"].dropna().max() if len(frame) else None
    hardware = records.hardware_label(record.get("hardware") or {}, record.get("device", ""))
    source = "Fresh quick benchmark (this session, not saved)" if fresh else "Stored benchmark record"
    file = Path(str((record.get("data") or {}).get("file", ""))).name
    lines = [
        f"<b>{esc(source)}</b> · preset <code>{esc(record.get('preset', '?'))}</code> · "
        f"device <code>{esc(record.get('device', '?'))}</code> · measured {esc(record.get('created', '?'))}",
        f"Hardware: {esc(hardware)}",
        f"Accuracy on {esc(_count(questions))} SQuAD v2 questions"
        + (f" ({esc(file)})" if file else "")
        + (f" · latency over {esc(_count(timed))} timed runs per variant" if timed else ""),
    ]
    warn = f'<div class="qa-notice">{esc(note)}</div>' if note else ""
    return warn + '<div class="qa-record">' + "<br>".join(lines) + "</div>"


def _count(value) -> str:
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return "?"


def _empty(fig: go.Figure, message: str) -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font={"size": 14})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _colour(variant: str, headline: bool, peer: bool = False) -> str:
    if variant == "baseline" or peer:
        return BASELINE_COLOUR
    return HEADLINE_COLOUR if headline else STEP_COLOUR


def accuracy_figure(frame) -> go.Figure:
    """F1 against median latency; point size = model size; hover shows every metric."""
    fig = go.Figure()
    rows = frame.dropna(subset=["f1", "p50_ms"]) if frame is not None and len(frame) else None
    if rows is not None and len(rows):
        biggest = max(float(rows["size_mb"].fillna(0).max()), 1e-9)
        hover = "<br>".join(f"{f}: %{{customdata[{i}]}}" for i, f in enumerate(HOVER_FIELDS))
        for row in rows.itertuples(index=False):
            size = biggest / 4 if _missing(row.size_mb) else float(row.size_mb)
            shown = row.variant == "baseline" or bool(row.headline) or bool(row.is_peer)
            fig.add_scatter(
                x=[row.p50_ms],
                y=[row.f1],
                mode="markers+text" if shown else "markers",
                name=str(row.label),
                text=[str(row.variant) if not row.is_peer else "transformers pipeline"],
                textposition="bottom center" if row.variant == "pruned" else "top center",
                cliponaxis=False,
                marker={
                    "size": [14 + 40 * (size / biggest) ** 0.5],
                    "color": _colour(str(row.variant), bool(row.headline), bool(row.is_peer)),
                    "symbol": "diamond" if row.is_peer else "circle",
                    "opacity": 0.8,
                    "line": {"width": 1, "color": "#374151"},
                },
                customdata=[[_hover_value(getattr(row, f, None)) for f in HOVER_FIELDS]],
                hovertemplate=f"<b>{esc(row.label)}</b><br>{hover}<extra></extra>",
            )
    else:
        _empty(fig, "No accuracy and latency numbers yet")
    return _chart_layout(
        fig,
        "Accuracy against speed (up and left is better; bubble area = model size)",
        "median latency per question (ms)",
        "F1 on SQuAD v2 (%)",
        right_margin=60,
    )


def _chart_layout(fig: go.Figure, title: str, x_title: str, y_title: str, right_margin: int = 20) -> go.Figure:
    """The benchmark tab's common chart style: title, axes, white template, legend below."""
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        xaxis_title=x_title,
        yaxis_title=y_title,
        height=440,
        margin={"l": 10, "r": right_margin, "t": 50, "b": 40},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.22, "font": {"size": 11}},
    )
    return fig


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _hover_value(value) -> str:
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:,.2f}"
    if isinstance(value, int) and value > 1e5:
        return fmt_params(value)
    return esc("–" if value is None else value)


def seq_len_figure(record: dict | None) -> go.Figure:
    """Median latency against sequence length, one line per variant."""
    fig = go.Figure()
    for v in (record or {}).get("variants", []):
        sweep = v.get("seq_len_sweep") or []
        points = [(p["seq_len"], p["p50_ms"]) for p in sweep if p.get("p50_ms") is not None]
        if points:
            xs, ys = zip(*points, strict=True)
            colour = _colour(str(v.get("variant")), bool(v.get("headline")))
            fig.add_scatter(
                x=list(xs),
                y=list(ys),
                mode="lines+markers",
                name=str(v.get("label", v.get("variant"))),
                line={"color": colour, "width": 3 if v.get("headline") else 1.5},
                hovertemplate="%{x} tokens: %{y:.1f} ms<extra>%{fullData.name}</extra>",
            )
    if not fig.data:
        _empty(
            fig,
            "No sequence-length sweep in this record"
            + ("<br>(quick benchmarks skip it; run python -m variants bench)" if record else ""),
        )
    return _chart_layout(
        fig, "Latency against input length (one window, batch 1)", "sequence length (tokens)", "median latency (ms)"
    )


def table_frame(frame):
    import pandas as pd  # noqa: PLC0415

    if frame is None or not len(frame):
        return pd.DataFrame(columns=list(TABLE_COLUMNS.values()))
    table = frame[[c for c in TABLE_COLUMNS if c in frame.columns]].copy()
    for column in table.columns:
        if column == "parameters":
            table[column] = table[column].map(fmt_params)
        elif column != "label":
            table[column] = table[column].astype(float).round(2)
    return table.rename(columns=TABLE_COLUMNS)


def write_csv(frame, record: dict) -> str | None:
    """The record's per-variant rows as a CSV file in the temp folder (served by the download button)."""
    if frame is None or not len(frame):
        return None
    folder = Path(tempfile.gettempdir()) / "qa-variants"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = str(record.get("created", time.strftime("%Y%m%dT%H%M%S"))).replace(":", "").replace(" ", "_")
    path = folder / f"benchmark-{record.get('preset', 'preset')}-{stamp}.csv"
    frame.to_csv(path, index=False)
    return str(path)


def benchmark_outputs(record: dict | None, note: str, fresh: bool = False) -> tuple:
    """(header, scatter, table, seq-len chart, CSV path) for a record or none."""
    frame = record_frame(record) if record is not None else None
    csv = write_csv(frame, record) if record is not None else None
    return (
        record_header(record, note, fresh),
        accuracy_figure(frame),
        table_frame(frame),
        seq_len_figure(record),
        csv,
    )


def make_quick_benchmark(engine: Engine, sample_file: Path) -> Callable:
    def quick(n: float, progress=gr.Progress()) -> tuple:
        examples = load_squad_json(sample_file)
        progress(0.0, desc="Starting")
        record = quick_benchmark(engine, examples, int(n), progress=lambda f, msg: progress(f, desc=msg)).to_dict()
        *shown, csv = benchmark_outputs(record, "", fresh=True)
        return (*shown, gr.DownloadButton(value=csv, interactive=csv is not None))

    return quick


# --- About tab ------------------------------------------------------------------------------------


def about_html(engine: Engine) -> str:
    family = specs.FAMILIES.get(engine.preset)
    rows = []
    for v in engine.loaded:
        spec = v.spec
        info = v.model.describe() if v.ok else {}
        steps = " → ".join(spec.steps) if spec.steps else "none (as published)"
        runtime = runtime_line(info.get("device", ""), info.get("provider", ""), info.get("dtype", ""))
        status = (
            f'<span class="qa-bad">failed: {esc(v.error)}</span>'
            if v.error
            else f"{esc(runtime)}<br>{esc(fmt_mb(info.get('size_mb')))}, {esc(fmt_params(info.get('parameters')))} "
            f"parameters"
        )
        notes = "".join(f"<br><i>{esc(n)}</i>" for n in info.get("notes", []))
        threshold = (v.settings or engine.settings).null_threshold or 0.0
        rows.append(
            f"<tr><td><b>{esc(spec.label)}</b><br><code>{esc(spec.name)}</code>"
            f"{'<br>headline' if spec.headline else ''}</td>"
            f"<td>{esc(spec.description)}<br><small>source: <code>{esc(shown_source(spec.source))}</code></small></td>"
            f"<td>{esc(steps)}<br><small>backend: {esc(spec.backend)}; "
            f"no-answer threshold {threshold:+.2f}</small></td>"
            f"<td>{status}{notes}</td><td>{v.load_seconds:.1f} s</td></tr>"
        )
    notice = f'<div class="qa-notice">{esc(engine.notice)}</div>' if engine.notice else ""
    fam = f"<p>{esc(family.description)}</p>" if family else ""
    return (
        f"{notice}<h3>Preset <code>{esc(engine.preset)}</code> on <code>{esc(engine.device)}</code></h3>{fam}"
        "<p>Every variant answers through the same code: the context is split into "
        f"{engine.settings.max_length}-token windows (stride {engine.settings.stride}), each window's start/end "
        "scores are decoded into the best span, and SQuAD v2's 'no answer' wins when ln(its score / the span's) "
        "is above the model's no-answer threshold: calibrated for each model on held-out questions, 0 (the "
        "transformers pipeline's rule) for a model without one. Only the model underneath changes.</p>"
        f"<p>{esc(serving_line(engine))}</p>"
        '<table class="qa-about"><thead><tr><th>Variant</th><th>What it is</th><th>Build steps</th>'
        "<th>Runs on (device · provider · precision), size</th><th>Load / build time</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<h3>This machine</h3><p>{esc(machine_summary())}</p>"
    )


def serving_line(engine: Engine) -> str:
    """How requests are served: the context limit and, if on, dynamic batching."""
    line = f"Contexts of up to {engine.max_context_chars:,} characters are accepted."
    if engine.batching is not None:
        b = engine.batching
        line += (
            f" Dynamic batching is on: requests reaching a variant within {b.max_wait_ms:g} ms of each other run "
            f"as one batch (up to {b.max_batch_size}), so latencies include that wait; INT8 variants, whose "
            "answers depend on what shares their batch, run one request at a time."
        )
    return line


def machine_summary() -> str:
    hw = records.current_hardware()
    hardware = ", ".join(filter(None, [records.hardware_label(hw, "cpu"), hw.get("gpu")]))
    versions = []
    for module in ("torch", "onnxruntime", "transformers", "gradio"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            continue
    return f"{hardware}; Python {platform.python_version()}; {', '.join(versions)}"


# --- the page -------------------------------------------------------------------------------------

CARD_CSS = """
.qa-cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(290px, 1fr)); gap: 14px; }
.qa-card { border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 14px 16px;
  background: var(--block-background-fill); display: flex; flex-direction: column; gap: 8px; }
.qa-card.qa-headline { border-top: 4px solid #ea580c; }
.qa-card[data-variant="baseline"] { border-top-color: #9ca3af; }
.qa-card.qa-error { border-color: #dc2626; border-top-width: 4px; }
.qa-card.qa-running { opacity: 0.65; }
.qa-head { display: flex; justify-content: space-between; align-items: baseline; gap: 8px; }
.qa-title { font-weight: 700; font-size: 1.02em; }
.qa-role { font-size: 0.75em; text-transform: uppercase; letter-spacing: 0.04em;
  color: var(--body-text-color-subdued); }
.qa-answer { font-size: 1.35em; font-weight: 700; min-height: 1.4em; overflow-wrap: anywhere; }
.qa-answer.qa-none { color: var(--body-text-color-subdued); font-style: italic; }
.qa-answer.qa-pending { font-size: 1em; font-weight: 400; color: var(--body-text-color-subdued); }
.qa-snippet { font-size: 0.85em; line-height: 1.45; color: var(--body-text-color-subdued); overflow-wrap: anywhere;
  max-height: 9em; overflow: auto; }
.qa-snippet mark { background: #fde68a; color: #111827; padding: 0 2px; border-radius: 3px; font-weight: 600; }
.qa-metrics { display: grid; grid-template-columns: repeat(6, 1fr); gap: 6px; }
.qa-metric { grid-column: span 2; }
.qa-metric.qa-key, .qa-metric.qa-speed { grid-column: span 3; }
.qa-metric { display: flex; flex-direction: column; padding: 6px 8px; border-radius: 6px;
  background: var(--background-fill-secondary); }
.qa-metric b { font-size: 1.05em; }
.qa-metric span { font-size: 0.72em; color: var(--body-text-color-subdued); }
.qa-metric.qa-key b, .qa-metric.qa-speed b { font-size: 1.3em; }
.qa-metric.qa-good b { color: #15803d; }
.qa-runtime { font-family: var(--font-mono); font-size: 0.78em; color: var(--body-text-color-subdued); }
.qa-note { font-size: 0.78em; color: #b45309; }
.qa-error { color: #dc2626; overflow-wrap: anywhere; font-size: 0.9em; }
"""
BANNER_CSS = """
.qa-summary { font-size: 1.05em; padding: 10px 14px; border-radius: 8px; background: var(--background-fill-secondary); }
.qa-muted { color: var(--body-text-color-subdued); }
.qa-agree { font-size: 0.88em; color: var(--body-text-color-subdued); }
.qa-notice { padding: 10px 14px; border-radius: 8px; border: 1px solid #f59e0b; background: #fffbeb; color: #78350f;
  margin-bottom: 8px; overflow-wrap: anywhere; }
.qa-record { font-size: 0.92em; line-height: 1.6; }
.qa-about { width: 100%; border-collapse: collapse; font-size: 0.9em; }
.qa-about th, .qa-about td { border-bottom: 1px solid var(--border-color-primary); padding: 6px 8px; text-align: left;
  vertical-align: top; }
.qa-bad { color: #dc2626; }
.qa-ok { padding: 10px 14px; border-radius: 8px; border: 1px solid #16a34a; background: #f0fdf4; color: #14532d;
  overflow-wrap: anywhere; }
"""
PAGE_CSS = ".gradio-container { max-width: 1400px !important; }"


def launch_style() -> dict:
    """Page-wide theme and CSS, which Gradio 6 takes at launch() (the cards' styles travel with them)."""
    return {"theme": gr.themes.Soft(), "css": PAGE_CSS}


def _html(value: str = "", css: str = BANNER_CSS, **kwargs) -> gr.HTML:
    """An HTML block whose (scoped) styles travel with it, so build_demo() needs nothing at launch."""
    return gr.HTML(value, css_template=css, js_on_load=None, **kwargs)


def build_demo(
    engine: Engine,
    *,
    results_dir: str | Path | None = None,
    concurrency_limit: int = 1,
    max_queue: int = 32,
    sample_file: Path = SAMPLE_FILE,
    allow_custom_models: bool = False,
    max_custom_mb: float | None = None,
) -> gr.Blocks:
    """The page for an already-loaded engine, its queue configured: every handler that runs a model is in
    one concurrency group (``concurrency_limit`` at once, 1 by default: parallel runs would distort the
    latencies shown; with the engine's dynamic batching on, as many as make a batch), and at most
    ``max_queue`` requests wait. ``allow_custom_models`` adds "Try your own model" (absent otherwise)."""
    results_dir = results_dir or config.results_dir()
    results_dir = Path(results_dir) if results_dir else None
    group = {"concurrency_id": CONCURRENCY_GROUP, "concurrency_limit": concurrency_limit}
    custom_mb = None  # the size cap of "Try your own model"; None leaves the feature out
    if allow_custom_models:
        custom_mb = custom.max_custom_mb() if max_custom_mb is None else max_custom_mb
    headline = [v.spec.name for v in engine.loaded if v.spec.headline]
    steps = [(v.spec.label, v.spec.name) for v in engine.loaded if not v.spec.headline]
    with gr.Blocks(title="QA variants side by side") as demo:
        gr.Markdown(
            "# One QA model, optimized three ways\n"
            "Ask a question about a passage: the **baseline**, its **pruned** version and the pruned model "
            "**exported to ONNX Runtime and quantized** each answer it, live on this machine. Compare answer, "
            "latency and model size."
        )
        if engine.notice:
            _html(f'<div class="qa-notice"><b>Fallback:</b> {esc(engine.notice)}</div>')
        with gr.Tab("Ask"):
            _ask_tab(engine, headline, steps, group, sample_file, custom_mb)
        with gr.Tab("Benchmark"):
            _benchmark_tab(engine, results_dir, group, sample_file)
        with gr.Tab("About"):
            _html(about_html(engine))
        gr.api(make_answer_api(engine), api_name="answer", **group)
    demo.queue(max_size=max_queue, default_concurrency_limit=concurrency_limit)
    return demo


def _ask_tab(
    engine: Engine,
    headline: list[str],
    steps: list[tuple[str, str]],
    group: dict,
    sample_file: Path,
    custom_mb: float | None = None,
):
    """The Ask tab; ``custom_mb`` (the size cap) adds "Try your own model", None leaves it out."""
    last = gr.State({})
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            context = gr.Textbox(
                label="Context",
                lines=7,
                max_lines=14,
                placeholder="Paste a passage…",
                info=f"Up to {engine.max_context_chars:,} characters; long passages are read in overlapping windows.",
            )
            question = gr.Textbox(label="Question", placeholder="Ask something the passage answers (or not)")
            submit = gr.Button("Ask every variant", variant="primary")
            rows, labels = load_examples(sample_file)
            if rows:
                gr.Examples(
                    rows, [context, question], example_labels=labels, cache_examples=False, label="Try an example"
                )
            if custom_mb is not None:
                with gr.Accordion("Try your own model", open=False, elem_id="custom-model"):
                    model_id = gr.Textbox(
                        label="Hub model id",
                        placeholder=custom.EXAMPLE_ID,
                        info=f"An extractive QA model (…ForQuestionAnswering) of the BERT family, up to "
                        f"{custom_mb:,.0f} MB; it runs in PyTorch next to the others.",
                    )
                    load = gr.Button("Load it as an extra variant")
                    custom_status = _html("", elem_id="custom-status")
        with gr.Column(scale=2):
            summary = _html(summary_html(engine, headline, {}, running=False))
            chart = gr.Plot(latency_figure(engine, headline, {}), show_label=False, elem_id="latency-chart")
            extra = gr.CheckboxGroup(
                steps,
                value=[],
                label="Also show the intermediate steps",
                info="What each build step buys on its own (see the About tab).",
                visible=bool(steps),
            )
    cards = _html(cards_html(engine, headline, {}, ""), css=CARD_CSS, elem_id="qa-cards")
    gr.on(
        [submit.click, question.submit],
        make_ask(engine),
        [context, question, extra, last],
        [cards, summary, chart, last],
        show_progress="minimal",
        api_visibility="private",
        validator=make_validator(engine),
        **group,
    )
    extra.change(make_reselect(engine), [extra, last], [cards, summary, chart], queue=False, api_visibility="private")
    if custom_mb is not None:
        gr.on(
            [load.click, model_id.submit],
            make_custom_loader(engine, steps, custom_mb),
            [model_id, extra],
            [custom_status, extra],
            api_visibility="private",
            concurrency_id="custom-model",
            concurrency_limit=1,
        )


def _benchmark_tab(engine: Engine, results_dir: Path | None, group: dict, sample_file: Path):
    record, note = stored_record(engine, results_dir)
    header0, scatter0, table0, sweep0, csv0 = benchmark_outputs(record, note)
    header = _html(header0, elem_id="bench-header")
    with gr.Row(equal_height=True):
        n = gr.Slider(10, 200, value=50, step=10, label="Questions for a quick benchmark", scale=3)
        run = gr.Button("Run quick benchmark", variant="primary", scale=1)
        download = gr.DownloadButton("Download CSV", value=csv0, interactive=csv0 is not None, scale=1)
    with gr.Row():
        scatter = gr.Plot(scatter0, show_label=False, elem_id="bench-scatter")
        sweep = gr.Plot(sweep0, show_label=False, elem_id="bench-seqlen")
    table = gr.Dataframe(table0, label="Per variant", interactive=False, wrap=True, elem_id="bench-table")
    gr.Markdown(
        "Stored records come from `python -m variants bench` (the full sample, hundreds of timed runs, sweeps). "
        "A quick benchmark runs here and now on N questions drawn at random from the SQuAD v2 sample, at batch 1, "
        "and is not saved; it waits in the same model queue as the Ask tab. EM and F1 are percentages; latency is per "
        "question (tokenize, every window, decode)."
    )
    run.click(
        make_quick_benchmark(engine, sample_file),
        [n],
        [header, scatter, table, sweep, download],
        show_progress_on=[header],
        api_visibility="private",
        **group,
    )


# --- start-up -------------------------------------------------------------------------------------


def console_progress(fraction: float, message: str) -> None:
    """Model-loading progress on the console (the engine reports build sub-steps as 0, "label: step")."""
    sub_step = fraction == 0 and ": " in message
    prefix = "      " if sub_step else f"[{fraction:4.0%}]"
    print(f"{prefix} {message}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Gradio app: QA variants side by side")
    add_model_arguments(parser)  # defaults from the VARIANTS_* environment
    serving = config.serving_defaults()
    parser.add_argument("--port", type=int, default=7860, help="local port (default 7860)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on (a Space always uses 0.0.0.0)")
    parser.add_argument("--share", action="store_true", help="also make a temporary public gradio.live link")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=serving["concurrency"],
        help="model requests run at once (default 1: concurrent runs would distort the latencies)",
    )
    parser.add_argument(
        "--max-queue",
        type=int,
        default=serving["max_queue"],
        help="requests that may wait in the queue; more are turned away (default 32)",
    )
    parser.add_argument("--results-dir", default=None, help=f"benchmark records folder (env {RESULTS_ENV})")
    parser.add_argument(
        "--allow-custom-models",
        action="store_true",
        help="let users load a Hub model of their own as an extra variant (off by default; on a Space only with "
        f"{custom.ALLOW_ENV}=1)",
    )
    return parser.parse_args(argv)


def model_concurrency(args: argparse.Namespace, engine: Engine) -> int:
    """Model requests let in at once: ``--concurrency``, or with dynamic batching enough to fill a batch
    (they meet in each variant's batcher, which still runs its model one batch at a time)."""
    if engine.batching is None:
        return args.concurrency
    return max(args.concurrency, engine.batching.max_batch_size)


def load_models(args: argparse.Namespace) -> Engine:
    """Load every variant once, printing progress; the engine falls back to `embedded` if it must."""
    started = time.perf_counter()
    engine = engine_from_args(args, progress=console_progress)
    print(f"Loaded preset {engine.preset!r} on {engine.device} in {time.perf_counter() - started:.1f} s", flush=True)
    if engine.notice:
        print(f"NOTICE: {engine.notice}", flush=True)
    for v in engine.loaded:
        status = f"FAILED: {v.error}" if v.error else f"ok ({v.load_seconds:.1f} s)"
        print(f"  {v.spec.name:<24} {status}", flush=True)
    return engine


def serve_address(args: argparse.Namespace) -> tuple[str, int]:
    if config.on_space():
        return "0.0.0.0", 7860
    return args.host, args.port


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    try:
        allow_custom = custom.custom_models_allowed(args.allow_custom_models)
        custom_mb = custom.max_custom_mb() if allow_custom else None
        engine = load_models(args)
    except (ValueError, FileNotFoundError) as exc:  # an unknown preset, a bad config file or setting
        print(f"error: {exc}", file=sys.stderr)
        return 2
    demo = build_demo(
        engine,
        results_dir=args.results_dir,
        concurrency_limit=model_concurrency(args, engine),
        max_queue=args.max_queue,
        allow_custom_models=allow_custom,
        max_custom_mb=custom_mb,
    )
    host, port = serve_address(args)
    demo.launch(server_name=host, server_port=port, share=args.share, **launch_style())
    return 0


if __name__ == "__main__":
    sys.exit(main())
