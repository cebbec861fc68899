"""The Benchmark tab's sentence above its chart: what the headline variant buys against the baseline and the
two peers (the README's ratios), and what it costs in F1, in plain words with the terms explained on hover."""

import math

from variants.answering.timing import busy
from variants.records.cost import BATCH1_WORDS, record_costs, saving_words, usd
from variants.records.frontier import frontier_sentence
from variants.records.record import Record

from .point_labels import tags
from .text import esc

TERMS = {  # word on the page -> what it means (the tooltip)
    "×": "How many times as fast: the median, over the bench's passes, of the ratio of median latencies, all "
    "measured in the same run on the same machine (lowest and highest pass in the table).",
    "transformers' pipeline": 'transformers\' pipeline("question-answering") on the baseline model, PyTorch FP32: '
    "what a few lines of code get without any of these optimizations.",
    "optimum's INT8": "optimum's ONNX Runtime dynamic INT8 quantization of the same baseline model: the ten-line "
    "optimization anyone can apply, without pruning.",
    "F1": "F1: how much of the reference answer's words the answer shares, 0 to 100, averaged over the questions.",
    "a million answers": BATCH1_WORDS,
}


SENTENCE_NAMES = {"baseline": "the baseline", "peer": "transformers' pipeline"}  # the chart's tags, in a sentence


def term(word: str, shown: str | None = None) -> str:
    """``word`` with its meaning in a tooltip (title=), dotted underline as a hint."""
    return f'<span class="qa-term" title="{esc(TERMS[word])}">{esc(shown or word)}</span>'


def _number(value) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def headline_html(
    record: Record | None,
    frame,
    column: str,
    questions: str,
    usd_per_hour: float | None = None,
    machine: str = "",
    view: str = "answerable",
) -> str:
    """One sentence on the record's headline variant (the chain's last, e.g. INT8): its median latency, its
    speedup over the baseline, the pipeline and optimum's INT8 where measured, and the F1 (``column`` of
    ``frame``, on ``questions``, e.g. "answerable questions") it gives up against the baseline; with a price
    (``usd_per_hour``, of ``machine`` where it is a published one) what a million of its answers cost against the
    baseline's. Under it, the best trade-offs of ``view`` in one sentence. Empty without a headline."""
    if record is None or frame is None or not len(frame):
        return ""
    rows = {r.variant: r for r in frame.itertuples(index=False)}
    # The chain's last headline variant (its most optimized, e.g. INT8): the one the README leads with.
    ends = [rows[e.variant] for e in record.variants if e.headline and e.variant in rows and e.variant != "baseline"]
    top = ends[-1] if ends else None
    if top is None or _number(top.p50_ms) is None or _number(top.speedup_vs_baseline) is None:
        return ""
    speeds = [f"<b>{top.speedup_vs_baseline:.1f}{term('×')}</b> as fast as the baseline"]
    for name, who in (("speedup_vs_peer", "transformers' pipeline"), ("speedup_vs_optimum_int8", "optimum's INT8")):
        ratio = _number(getattr(top, name, None))
        if ratio is not None:
            speeds.append(f"<b>{ratio:.1f}×</b> as fast as {term(who)}")
    disturbed = any(busy(e.stretch) for e in record.entries)  # the timing rule's flag: say it before the speeds
    text = "In short, timed on a busy machine (the speeds are unreliable): " if disturbed else "In short: "
    text += f"<b>{esc(top.short_label)}</b> answers a question in {top.p50_ms:.1f} ms (median), "
    text += ", ".join(speeds[:-1]) + (" and " if len(speeds) > 1 else "") + speeds[-1]
    base = rows.get("baseline")
    f1, f1_base = _number(getattr(top, column)), _number(getattr(base, column)) if base is not None else None
    if f1 is not None and f1_base is not None:
        lost = f1_base - f1
        change = f"<b>{abs(lost):.1f} points</b> of {term('F1')} {'less' if lost >= 0 else 'more'}"
        text += f", for {change} than the baseline on {esc(questions)}"
    text += "." + cost_words(record, top.variant, usd_per_hour, machine)
    # a disturbed run crowns no winner (the timing rule's flag): no best trade-offs either
    best = "" if disturbed else frontier_sentence(record, view, names={**tags(record), **SENTENCE_NAMES})
    best = f'<div class="qa-muted" id="bench-frontier">{esc(best)}</div>' if best else ""
    return f'<div class="qa-summary" id="bench-headline">{text}{best}</div>'


def cost_words(record: Record, variant: str, usd_per_hour: float | None, machine: str = "") -> str:
    """ " At $0.03 an hour (CPU Upgrade), a million answers from INT8 cost $0.083, 70% less than the baseline's
    $0.28." (batch 1, the record's throughput); " On CPU Basic, which is free, they cost nothing." at a price of 0;
    "" without a price or a throughput."""
    if usd_per_hour is None:
        return ""
    if usd_per_hour == 0:
        return f" On {esc(machine or 'a free machine')}, which is free, answers cost nothing."
    costs = {c.variant: c for c in record_costs(record, usd_per_hour)}
    mine, base = costs.get(variant), costs.get("baseline")
    if mine is None or mine.batch1_usd is None:
        return ""
    where = f"${usd_per_hour:g} an hour" + (f" ({esc(machine)})" if machine else "")
    text = f" At {where}, {term('a million answers')} from {esc(mine.label)} cost <b>{usd(mine.batch1_usd)}</b>"
    if base is not None and base.batch1_usd is not None:
        text += f", {saving_words(mine.batch1_saving)}'s {usd(base.batch1_usd)}"
    return text + " (one question at a time)."
