"""The Benchmark tab: stored records and quick runs shown as header, charts, table and CSV."""

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import gradio as gr

from variants import results as records
from variants.bench import quick_benchmark
from variants.engine import Engine
from variants.squad import load_squad_json

from .charts import accuracy_figure, seq_len_figure
from .styles import html_block
from .text import count, esc, fmt_params

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
    stored = records.load_records(results_dir) if results_dir else records.load_records()
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
        f"Accuracy on {esc(count(questions))} SQuAD v2 questions"
        + (f" ({esc(file)})" if file else "")
        + (f" · latency over {esc(count(timed))} timed runs per variant" if timed else ""),
    ]
    warn = f'<div class="qa-notice">{esc(note)}</div>' if note else ""
    return warn + '<div class="qa-record">' + "<br>".join(lines) + "</div>"


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
        record = quick_benchmark(engine, examples, int(n), progress=lambda f, msg: progress(f, desc=msg))
        *shown, csv = benchmark_outputs(record, "", fresh=True)
        return (*shown, gr.DownloadButton(value=csv, interactive=csv is not None))

    return quick


def benchmark_tab(engine: Engine, results_dir: Path | None, group: dict, sample_file: Path):
    record, note = stored_record(engine, results_dir)
    header0, scatter0, table0, sweep0, csv0 = benchmark_outputs(record, note)
    header = html_block(header0, elem_id="bench-header")
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
