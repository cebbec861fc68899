"""What a million answers cost, on the page: the price controls (a number box of dollars per hour and the
published prices of the hardware the record ran on), the table's cost columns and the line under the controls.

The arithmetic is the engine's (:mod:`variants.records.cost`: the Benchmark tab, the Your questions tab, the CLI
and the report give the same figure); this module only shows it.
"""

from __future__ import annotations

import math

import gradio as gr

from variants.core.hardware import device_kind, hardware_label
from variants.records.cost import BATCH1_WORDS, BEST_BATCH_WORDS, VariantCost, prices_for, record_costs, usd
from variants.records.prices import PUBLISHED, SOURCE_NAME, SOURCE_URL, SPACES_PRICES
from variants.records.record import Record

from .text import esc

OWN = ""  # the chooser's value for "my own price" (the number box alone)
COST_COLUMNS = ["usd_per_million", "usd_per_million_best"]  # the frame's columns, numbers (the CSV keeps them so)
PRICE_INFO = (
    "Dollars per hour of a machine like the one this record was measured on; empty: no cost shown. "
    "The cost per million answers is this price over the answers the record measured per hour."
)


def usd_per_hour(value) -> float | None:
    """The price box's value as dollars per hour ("0.03", "$0.03" or a number); None where empty, negative or not
    a number."""
    if isinstance(value, str):
        value = value.strip().removeprefix("$").strip()
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def price_choices(record: Record | None) -> list[tuple[str, str]]:
    """The chooser's entries: the published prices that apply to ``record``'s hardware, then "my own"."""
    return [*((p.label(), p.key) for p in prices_for(record)), ("My own price (type it in the box)", OWN)]


def picked_price(key: str | None) -> float | None:
    """The dollars per hour of the published price ``key`` (None for "my own")."""
    return next((p.usd_per_hour for p in SPACES_PRICES if p.key == key), None)


def machine_name(record: Record | None, price: float | None, key: str | None) -> str:
    """The published machine the price is, where the box holds its price (else "")."""
    found = next((p for p in prices_for(record) if p.key == key), None)
    return found.name if found is not None and price is not None and found.usd_per_hour == price else ""


def price_controls(record: Record | None) -> tuple[gr.Dropdown, gr.Textbox]:
    """The chooser of published prices and the number box (empty by default), side by side."""
    with gr.Row(equal_height=True, elem_id="bench-price"):
        choice = gr.Dropdown(
            price_choices(record),
            value=OWN,
            label="Price the machine",
            info=f"The {SOURCE_NAME} ({PUBLISHED}) for this record's hardware, or your own.",
            scale=1,
            min_width=240,
            elem_id="bench-price-choice",
        )
        price = price_box("Dollars per hour", PRICE_INFO, "bench-price-usd", scale=1, min_width=160)
    return choice, price


def price_box(label: str, info: str, elem_id: str, **layout) -> gr.Textbox:
    """A box for dollars per hour, empty by default (no cost shown). A text box, not gr.Number: gradio 6's number
    box shows an empty value as 0 and sends 0 with the next event, which read as "this machine is free"."""
    return gr.Textbox("", label=label, info=info, placeholder="e.g. 0.03", max_lines=1, elem_id=elem_id, **layout)


def with_costs(frame, record: Record | None, price: float | None):
    """``frame`` with each row's dollars per million answers at batch 1 and at its best batch, their saving
    against the baseline, and the best batch's size (NaN without a price or a throughput)."""
    if frame is None or not len(frame):
        return frame
    costs = {c.variant: c for c in record_costs(record, price)} if record is not None and price is not None else {}

    def column(name: str) -> list:
        return [getattr(costs.get(v), name, None) for v in frame["variant"]]

    return frame.assign(
        usd_per_million=column("batch1_usd"),
        saving_vs_baseline=column("batch1_saving"),
        usd_per_million_best=column("best_usd"),
        saving_vs_baseline_best=column("best_saving"),
        best_batch=column("best_batch"),
    )


def cost_cell(value, share, variant: str, batch=None) -> str:
    """A table cell: "$0.083 · 70% less" ("at batch 8" added for the best batch); "" without a cost."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if value == 0:
        return "free"
    text = usd(value)
    if variant != "baseline" and share is not None and not (isinstance(share, float) and math.isnan(share)):
        percent = round(100 * share)
        text += f" · {abs(percent)}% {'less' if percent >= 0 else 'more'}" if percent else " · same"
    if batch is not None and not (isinstance(batch, float) and math.isnan(batch)):
        text += f" (batch {int(batch)})"
    return text


def cost_note(record: Record | None, price: float | None, key: str | None) -> str:
    """The line under the controls: what the price applies to, how the cost is worked out (in plain words, the
    rest in a tooltip), the source of the published prices; why there are none for this record's GPU."""
    if record is None:
        return ""
    published = prices_for(record)
    source = f'Published prices: <a href="{esc(SOURCE_URL)}">{esc(SOURCE_NAME)}</a>, as of {esc(PUBLISHED)}.'
    if not published:
        gpu = hardware_label(record.hardware, record.device)
        return (
            f'<div class="qa-muted" id="bench-cost-note">No published Spaces machine has this record\'s hardware '
            f"({esc(gpu)}): type the price you pay per hour. {source}</div>"
        )
    name = machine_name(record, price, key)
    if price == 0:
        what = f"{esc(name or 'This machine')} is free: answering costs nothing per hour there."
    elif price is None:
        what = "Pick a machine or type a price to see what a million answers cost."
    else:
        cores = (record.hardware or {}).get("usable_cores") if device_kind(record.device) == "cpu" else None
        on = f", one process on its {cores} cores" if cores else ""
        what = (
            f"At <b>${price:g}</b> an hour{f' ({esc(name)})' if name else ''}: that price over the "
            f'<span class="qa-term" title="{esc(BATCH1_WORDS)}">answers per hour this record measured</span>{on}.'
        )
    best = f' <span class="qa-term" title="{esc(BEST_BATCH_WORDS)}">Best batch</span>: the batch sweep\'s fastest.'
    has_sweep = any(e.peak_throughput_qps for e in record.entries)
    return f'<div class="qa-muted" id="bench-cost-note">{what}{best if has_sweep and price else ""} {source}</div>'


def costs_by_variant(record: Record | None, price: float | None) -> dict[str, VariantCost]:
    return {c.variant: c for c in record_costs(record, price)} if record is not None and price is not None else {}
