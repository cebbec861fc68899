"""The Benchmark tab's GPU section: the newest GPU record (``python -m variants gpu-report``) as a header, a
latency chart and its table, throughput when the record has it, and served latency. It only reads the
record (:mod:`variants.records.gpu`): nothing here runs a model, and the CPU views beside it do not change."""

import logging
from pathlib import Path
from typing import Any, NamedTuple

import gradio as gr

from variants.core.hardware import device_kind, hardware_label
from variants.records import gpu
from variants.records.record import Record
from variants.records.results import records_to_frame

from .cards import plain_runtime
from .charts import gpu_latency_figure, gpu_throughput_figure
from .styles import fixed_widths, html_block
from .tables import table_block, table_html
from .text import count, esc

HOW_TO = "<code>python -m variants gpu-report</code> on a GPU machine (see <code>docs/gpu.md</code>)"
log = logging.getLogger("ui.gpu_view")
NO_RECORD = f"No GPU record yet: {HOW_TO} writes one into <code>assets/results/gpu</code>."
LATENCY_HEADERS = {  # latency_frame column -> table header
    "preset": "Preset",
    "variant_label": "Variant",
    "mode_label": "How it ran",
    "seq_len": "tokens",
    "p50_ms": "median ms",
    "p90_ms": "p90 ms",
    "p99_ms": "p99 ms",
    "min_ms": "fastest ms",
    "max_ms": "slowest ms",
    "n": "runs",
    "padded_to": "padded to",
}
PRUNING_HEADERS = {
    "preset": "Preset",
    "mode_label": "How it ran",
    "seq_len": "tokens",
    "batch": "batch",
    "baseline_qps": "baseline q/s",
    "pruned_qps": "pruned q/s",
    "pruned_over_baseline": "pruned ÷ baseline",
}
SERVED_HEADERS = {
    "preset": "Preset",
    "seq_len": "tokens",
    "client_p50_ms": "median ms",
    "client_p90_ms": "p90 ms",
    "client_p99_ms": "p99 ms",
    "client_max_ms": "slowest ms",
    "engine_p50_ms": "engine's median ms",
    "hop_p50_ms": "HTTP hop, median ms",
    "model_run_p50_ms": "model run alone, median ms",
    "n": "requests",
    "provider": "runtime",
    "dtype": "precision",
    "execution": "how it ran",
}


BENCH_HEADERS = {  # records_to_frame column -> table header, for the bench record measured on a GPU
    "short_label": "Variant",
    "has_ans_f1": "answerable F1",
    "f1": "F1",
    "p50_ms": "median ms",
    "speedup_vs_peer": "× pipeline",
    "runs_on": "runs on",
}


def newest_gpu_bench(records: list[Record], preset: str | None = None) -> Record | None:
    """The newest bench record (``python -m variants bench``) measured on CUDA, of ``preset`` if given."""
    found = [r for r in records if device_kind(r.device) == "cuda" and (preset is None or r.preset == preset)]
    return max(found, key=lambda r: r.created or "", default=None)


def bench_outputs(record: Record | None) -> tuple[str, Any]:
    """F1 against latency on the GPU from a bench record: a sentence saying what was measured, and a table
    of each variant's accuracy and median latency (None: no such record)."""
    if record is None:
        return "", None
    frame = records_to_frame(record, view="pipeline")
    frame = frame[frame["error"].isna()].copy()
    frame["runs_on"] = [plain_runtime(str(d or ""), str(p or ""), str(t or "")) for d, p, t in
                        zip(frame["device"], frame["provider"], frame["dtype"], strict=True)]  # fmt: skip
    table = frame[list(BENCH_HEADERS)].copy()
    for column in ("has_ans_f1", "f1", "speedup_vs_peer"):
        table[column] = table[column].astype(float).round(2)
    table["p50_ms"] = table["p50_ms"].astype(float).round(3)
    machine = hardware_label(record.hardware or {}, record.device)
    note = (
        f"F1 against latency on the GPU: the bench on {count(record.n_questions)} questions of "
        f"<code>{esc(record.preset)}</code>, {esc(record.device)}, {esc(machine)}, "
        f"{esc(when(record.created))}; F1 at threshold 0, the median of one question at batch 1 end to end, "
        "× pipeline against transformers' pipeline on the same GPU in the same run."
    )
    return note, table.rename(columns=BENCH_HEADERS).reset_index(drop=True)


class GpuShown(NamedTuple):
    """What the section shows for one record (None / empty: that part is left out)."""

    header: str  # HTML
    latency: Any = None  # plotly figure
    latency_table: Any = None  # pandas DataFrame, display headers
    throughput_note: str = ""  # HTML: what the throughput numbers are, or why there are none
    throughput: Any = None
    throughput_table: Any = None
    pruning_table: Any = None
    served_note: str = ""
    served_table: Any = None


def when(created: str | None) -> str:
    """ "2026-11-26T16:24:49+00:00" -> "2026-11-26 16:24 UTC"."""
    return (str(created or "?").replace("T", " ")[:16] + " UTC") if created else "an unknown date"


def note_sentence(facts: dict[str, Any]) -> str:
    """What the weights were, from the presets' own ``latency_only`` flags (records before the report wrote
    its note from them carry a random-weights note whatever ran), and that a GPU report measures no accuracy."""
    if facts["random_weights"]:
        which = ", ".join(map(str, facts["random_weights"]))
        return (
            f"Random weights ({which}): models of the published shape, timed for speed only; no accuracy is measured."
        )
    if facts["trained_weights"]:
        which = ", ".join(map(str, facts["trained_weights"]))
        return f"The {which} models as trained; speed only: a GPU report measures no accuracy (the bench does)."
    if "random weights" in facts["note"].lower():  # no preset says: the note stands
        return "Random weights: models of the published shape, timed for speed only; no accuracy is measured."
    return "Speed only: a GPU report measures no accuracy."


def runs_text(runs: list[int], warmup: int | None) -> str:
    if not runs:
        return "timed runs per point not recorded"
    shown = count(runs[0]) if len(runs) == 1 else f"{count(runs[0])}–{count(runs[-1])}"
    return f"{shown} timed runs per point" + (f" after {warmup} warm-ups" if warmup else "")


def problems_html(problems) -> str:
    """Whole parts not measured, one line each; failed single points, a count with their reasons folded."""
    if problems is None or not len(problems):
        return ""
    whole = problems[problems["seq_len"].isna() & problems["batch"].isna()]
    lines = []
    for row in whole.itertuples(index=False):
        if row.part == "preset":
            what = f"the {row.preset} preset"
        else:
            what = " · ".join(
                x for x in (gpu.variant_label(row.variant) if row.variant else "", row.mode_label or row.part) if x
            )
        lines.append(f"Not measured: {esc(what)}: {esc(row.error)}.")
    points = problems.drop(whole.index)
    if len(points):
        reasons = "".join(
            f"<li>{esc(gpu.variant_label(r.variant))} · {esc(r.mode_label)} · {esc(r.part)} at "
            f"{esc(count(r.seq_len))} tokens"
            + (f", batch {esc(count(r.batch))}" if r.batch == r.batch and r.batch else "")
            + f": {esc(r.error)}</li>"
            for r in points.itertuples(index=False)
        )
        many = f"{len(points)} point{'s' if len(points) > 1 else ''} not measured"
        lines.append(f"<details><summary>{many}</summary><ul>{reasons}</ul></details>")
    return "<br>".join(lines)


def modes_html(modes: list[str]) -> str:
    """A folded footnote: each mode's plain name, the report's name for it and what it is."""
    items = "".join(
        f"<li><b>{esc(gpu.mode_label(m))}</b> (<code>{esc(m)}</code>): {esc(gpu.mode_jargon(m))}</li>"
        for m in modes
        if gpu.mode_jargon(m)
    )
    return f"<details><summary>What the ways of running mean</summary><ul>{items}</ul></details>" if items else ""


def header_html(record: dict[str, Any], latency, problems) -> str:
    facts = gpu.gpu_facts(record)
    memory = f" ({facts['gpu_memory_gb']} GB)" if facts["gpu_memory_gb"] else ""
    presets = ", ".join(f"<code>{esc(p)}</code>" for p in facts["presets"]) or "none"
    where = f"On a GPU: {facts['gpu'] or 'unnamed GPU'}"
    if not facts["on_cuda"]:  # gpu-report --device cpu: the report's code paths rehearsed, no GPU number
        where, memory = f"Not on a GPU: a CPU rehearsal of the GPU report ({facts['cpu'] or 'CPU'})", ""
    first = (
        f"<b>{esc(where)}</b>{esc(memory)} · measured {esc(when(facts['created']))}"
        f" · batch 1, {esc(runs_text(facts['runs'], facts['warmup']))} · preset {presets}"
        + (" · quick run" if facts["quick"] else "")
    )
    versions = [
        f"driver {facts['driver']}" if facts["driver"] else "",
        f"CUDA {facts['torch_cuda']}" if facts["torch_cuda"] else "",
        f"torch {facts['torch']}" if facts["torch"] else "",
        f"onnxruntime {facts['onnxruntime']}" + ("" if facts["ort_cuda"] else " (no CUDA provider)")
        if facts["onnxruntime"]
        else "",
        facts["file"],
    ]
    lines = [first, esc(note_sentence(facts)), esc(" · ".join(v for v in versions if v))]
    problems_line = problems_html(problems)
    lines += [problems_line] if problems_line else []
    modes = list(dict.fromkeys(latency["mode"])) if len(latency) else []
    return '<div class="qa-record">' + "<br>".join(lines) + modes_html(modes) + "</div>"


def display(frame, headers: dict[str, str]):
    """``frame``'s columns in ``headers`` under those names; the preset only when it holds several, a column
    with nothing in it left out; numbers rounded."""
    columns = [c for c in headers if c in frame.columns and frame[c].notna().any()]
    if frame["preset"].nunique() <= 1 and "preset" in columns:
        columns.remove("preset")
    table = frame[columns].copy()
    for column in table.columns:
        if column.endswith(("_ms", "_qps")) or column == "pruned_over_baseline":
            table[column] = table[column].astype(float).round(3 if column.endswith("_ms") else 2)
    return table.rename(columns=headers).reset_index(drop=True)


def throughput_display(frame):
    """Questions per second, one row per variant, mode and length, one column per batch size."""
    index = ["variant_label", "mode_label", "seq_len"]
    index = ["preset", *index] if frame["preset"].nunique() > 1 else index
    wide = frame.pivot_table(index=index, columns="batch", values="qps", sort=False).reset_index()
    wide.columns = [f"batch {int(c)} q/s" if isinstance(c, (int, float)) else c for c in wide.columns]
    return wide.rename(columns=LATENCY_HEADERS)


def throughput_sentence(record: dict[str, Any], measured: bool) -> str:
    if measured:
        return (
            "Questions per second: one window of the given length per question, a batch's size over its median "
            "time (log scales). “pruned ÷ baseline” below says where pruning pays."
        )
    settings = record.get("settings") if isinstance(record.get("settings"), dict) else {}
    why = (
        "its throughput step measured nothing (see above)"
        if "throughput" in settings
        else "it was made before the report measured throughput"
    )
    return (
        f"This record has no throughput table ({why}): {HOW_TO} measures questions per second at batches of 1, 8, "
        "32 and 128, at 128 and 384 tokens."
    )


def served_sentence(record: dict[str, Any]) -> str:
    for preset in gpu.presets(record):
        served = preset.get("served")
        if isinstance(served, dict) and served.get("rows"):
            chosen = (served.get("chosen_as_fastest") or {}).get("variant")
            how = ", ".join(str(served[k]) for k in ("server", "client") if served.get(k))
            return (
                f"Served latency: <code>{esc(served.get('route', 'POST /v1/answer'))}</code> answered by "
                f"{esc(gpu.variant_label(served.get('variant')))}"
                + (" (the fastest at 32 tokens)" if chosen else "")
                + (" (the chain's last step, which the route serves by default)" if served.get("why") else "")
                + (f", {esc(how)}" if how else "")
                + ": milliseconds per request as the client saw them, the engine's share (tokenize, run, decode), "
                "what the HTTP hop adds, and the model's run alone."
            )
    return ""


def gpu_outputs(record: dict[str, Any] | None) -> GpuShown:
    """What the section shows for ``record`` (the newest GPU record; None: a sentence saying there is none)."""
    if record is None:
        return GpuShown(header=f'<div class="qa-notice">{NO_RECORD}</div>')
    latency = gpu.latency_frame(record)
    throughput = gpu.throughput_frame(record)
    pruning = gpu.pruning_frame(record)
    served = gpu.served_frame(record)
    measured_pruning = pruning[pruning[["baseline_qps", "pruned_qps"]].notna().any(axis=1)]
    return GpuShown(
        header=header_html(record, latency, gpu.problem_frame(record)),
        latency=gpu_latency_figure(latency),
        latency_table=display(latency, LATENCY_HEADERS),
        throughput_note=throughput_sentence(record, bool(len(throughput))),
        throughput=gpu_throughput_figure(throughput) if len(throughput) else None,
        throughput_table=throughput_display(throughput) if len(throughput) else None,
        pruning_table=display(measured_pruning, PRUNING_HEADERS) if len(measured_pruning) else None,
        served_note=served_sentence(record),
        served_table=display(served, SERVED_HEADERS) if len(served) else None,
    )


# A phone (~300 px of table) shows the pinned name, how it ran, the length and the median; the rest a swipe away.
WIDE_COLUMNS = {"How it ran": "100px", "Preset": "96px", "tokens": "64px", "model's median ms": "88px",
                "pruned ÷ baseline": "84px"}  # fmt: skip


def gpu_table(table, caption: str, tall: bool = True) -> str:
    """A GPU table as the page shows it (:func:`ui.tables.table_html`): widths for its headers, at most 360 px tall
    (``tall``) under a header that stays."""
    widths = fixed_widths(list(table.columns), first="84px", default="68px", wider=WIDE_COLUMNS)
    return table_html(table, caption, widths, max_height="360px" if tall else "")


BENCH_WIDTHS = fixed_widths(list(BENCH_HEADERS.values()), wider={"answerable F1": "84px", "runs on": "200px"})


def gpu_section(folder: Path | None = None, bench: Record | None = None) -> GpuShown:
    """A closed accordion at the foot of the Benchmark tab with the newest GPU record in ``folder`` (default
    ``assets/results/gpu``), and ``bench``, a bench record measured on a GPU, as a table of F1 against
    latency. Built once with the page: no events, no model."""
    record = gpu.newest_gpu_record(folder)
    try:
        shown = gpu_outputs(record)
        facts = gpu.gpu_facts(record) if record else {}
    except Exception as exc:  # a malformed record must not stop the page from being built
        log.warning("the newest GPU record could not be shown", exc_info=True)
        shown = GpuShown(header=f'<div class="qa-notice">The newest GPU record could not be read '
                                f"({esc(type(exc).__name__)}: {esc(str(exc))[:200]}).</div>")  # fmt: skip
        record, facts = None, {}
    label = "On a GPU"
    if record:
        label += (
            f": {facts['gpu'] or 'GPU'}, {when(facts['created'])[:10]}"
            if facts["on_cuda"]
            else " (a CPU rehearsal only)"
        )
    try:
        bench_note, bench_table = bench_outputs(bench)
    except Exception:  # as above: the page stands
        log.warning("the GPU bench record could not be shown", exc_info=True)
        bench_note, bench_table = "", None
    with gr.Accordion(label, open=False, elem_id="bench-gpu"):
        html_block(shown.header, elem_id="bench-gpu-header")
        if bench_table is not None:
            html_block(f'<div class="qa-record">{bench_note}</div>', elem_id="bench-gpu-bench-note")
            table_block(
                table_html(bench_table, "F1 against latency on the GPU", BENCH_WIDTHS), elem_id="bench-gpu-bench"
            )
        if shown.latency is not None:
            gr.Plot(shown.latency, show_label=False, elem_id="bench-gpu-latency")
            table_block(gpu_table(shown.latency_table, "Batch-1 latency per length"), elem_id="bench-gpu-table")
        if record is not None:
            html_block(f'<div class="qa-record">{shown.throughput_note}</div>', elem_id="bench-gpu-throughput-note")
        if shown.throughput is not None:
            gr.Plot(shown.throughput, show_label=False, elem_id="bench-gpu-throughput")
            table_block(gpu_table(shown.throughput_table, "Questions per second"))
        if shown.pruning_table is not None:
            table_block(gpu_table(shown.pruning_table, "Where pruning pays"))
        if shown.served_table is not None:
            html_block(f'<div class="qa-record">{shown.served_note}</div>')
            table_block(gpu_table(shown.served_table, "Served latency", tall=False))
    return shown
