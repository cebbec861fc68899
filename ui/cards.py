"""The Ask tab's cards and summary line: pure functions of a snapshot of the variants and their results
(:class:`~variants.serving.snapshot.Snapshot`), drawn without an engine."""

from variants.answering.timing import same_size, size_ratio
from variants.building import custom
from variants.building.replica import LATENCY_ONLY
from variants.core.spec import short_label
from variants.serving.outcome import VariantResult, busy_words
from variants.serving.snapshot import Snapshot, VariantView

from .startup import building_card_html
from .text import SNIPPET_RADIUS, esc, fmt_confidence, fmt_mb, fmt_ms, fmt_params, fmt_speedup, highlight, runtime_line

ROLES = {  # badge in plain words, the jargon in its tooltip
    "baseline": ("original", "The reference: the published model as it is (PyTorch, 32-bit floats)."),
    "headline": ("optimized", "A headline variant: the end of one optimization chain."),
    "step": ("build step", "An intermediate step of the chain, shown to see what each step buys on its own."),
    custom.CUSTOM_NAME: ("your model", "The Hub model you loaded, run in PyTorch next to the others."),
}
DEVICES = {"cpu": "CPU", "cuda": "GPU", "mps": "Apple GPU"}
PROVIDERS = {
    "PyTorch": "PyTorch",
    "CPUExecutionProvider": "ONNX Runtime",
    "CUDAExecutionProvider": "ONNX Runtime (CUDA)",
    "TensorrtExecutionProvider": "ONNX Runtime (TensorRT)",
}
PRECISIONS = {
    "fp32": "32-bit floats",
    "fp16": "16-bit floats",
    "bf16": "bfloat16",
    "int8": "8-bit integers",
}
LATENCY_ONLY_TIP = (
    "A replica of the published model's shape with random weights (the model itself cannot be downloaded): "
    "its speed is the real model's, its answers mean nothing."
)
LATENCY_TIP = (
    "Median of {runs} timed runs; the range is the fastest and the slowest run. The variants answer the fastest "
    "first, each once untimed as a warm-up (a first run over a second is timed instead), then they take turns, one "
    "run each per round, within a time budget they share. Speedups compare medians."
)
SPEED_TIP = "Baseline median ÷ this median: above 1 is faster, below 1 slower."
CONFIDENCE_TIP = (
    "The model's probability for this answer among the spans of the part of the passage it was read from: the "
    "softmax of its start and end scores over one window of at most 384 tokens and “no answer”, so it never "
    "exceeds 100%. On a long passage that window is one of several, and the share is of that window, not of the "
    "whole passage. Each model spreads its probability in its own way (a pruned, distilled model can be more "
    "peaked than its teacher on the very same span), so confidences of different variants are not comparable: "
    "a higher one does not mean a more reliable answer."
)
APART = (
    1.5  # a variant's confidence this many times the baseline's, or under 1 / this, on the same answer (60% and 95%)
)


def plain_runtime(device: str, provider: str, dtype: str) -> str:
    """What a variant runs on in words, e.g. "CPU · ONNX Runtime · 8-bit integers" (the card's tooltip keeps
    ``cpu · CPUExecutionProvider · INT8``)."""
    kind = DEVICES.get(device.split(":", maxsplit=1)[0], device)
    parts = (kind, PROVIDERS.get(provider, provider), PRECISIONS.get(dtype.lower(), dtype.upper()))
    return " · ".join(p for p in parts if p)


def _metric(value: str, caption: str, extra: str = "", tip: str = "") -> str:
    title = f' title="{esc(tip)}"' if tip else ""
    return f'<div class="qa-metric {extra}"{title}><b>{esc(value)}</b><span>{esc(caption)}</span></div>'


def _latency_metric(result: VariantResult) -> str:
    """The median latency with the number of timed runs and their spread, explained in the tooltip."""
    if result.pending:
        return _metric("timing…", f"{result.timed_runs} of up to {result.runs_asked} runs", "qa-key")
    runs = len(result.latency_runs) or 1
    low, high = result.latency_min_ms, result.latency_max_ms
    caption = f"median of {runs} runs" if runs > 1 else "one run"
    if runs > 1 and low is not None and high is not None:
        caption += f" · {fmt_ms(low).removesuffix(' ms')}–{fmt_ms(high)}"
    return _metric(fmt_ms(result.latency_ms), caption, "qa-key", LATENCY_TIP.format(runs=runs))


def speed_words(ratio: float) -> tuple[str, str]:
    """A speedup as the card shows it: the ratio itself (the chart's number too) and what it means, e.g.
    ("2.10×", "faster than baseline") or ("0.95×", "the baseline's speed: slower")."""
    return fmt_speedup(ratio), "faster than baseline" if ratio >= 1 else "the baseline's speed: slower"


def size_words(baseline: VariantResult | None, result: VariantResult) -> str:
    """The size against the baseline's: "same size" within 5%, else "3.9× smaller" or "1.2× larger"."""
    if baseline is None or result.variant == "baseline":
        return ""
    ratio = size_ratio(baseline.size_mb, result.size_mb)
    if ratio is None:
        return ""
    if same_size(ratio):
        return "same size"
    return f"{ratio:.1f}× smaller" if ratio > 1 else f"{1 / ratio:.1f}× larger"


def card_html(
    view: VariantView,
    result: VariantResult | None = None,
    context: str = "",
    state: str = "idle",
    baseline: VariantResult | None = None,
) -> str:
    """One variant's card. ``state``: idle (nothing asked yet), running, done, stale (not run for this question)."""
    info = view.info
    error = (result.error if result else None) or view.error
    if error:
        state = "error"
    classes = f"qa-card qa-{state}" + (" qa-headline" if view.headline else "")
    role, role_tip = ROLES.get(view.name, ROLES["headline" if view.headline else "step"])
    head = (
        f'<div class="qa-head"><span class="qa-title" title="{esc(view.description or view.label)}">'
        f"{esc(short_label(view.name, view.label))}</span>"
        f'<span class="qa-role" title="{esc(role_tip)}">{esc(role)}</span></div>'
    )
    if view.latency_only:
        head += f'<div class="qa-latency-only" title="{esc(LATENCY_ONLY_TIP)}">{esc(LATENCY_ONLY)}</div>'
    if state == "error":
        failed = "" if result is not None and result.skipped else "<b>This variant failed.</b> "  # says "Skipped:"
        body = f'<div class="qa-error">{failed}{esc(error)}</div>'
    elif state in ("done", "timing") and result is not None:
        body = (
            _answer_block(result, context)
            + _metrics_block(result, baseline)
            + _confidence_note(result, baseline)
            + _timing_note(result)
            + _busy_note(result)
        )
    else:
        waiting = {"running": "running…", "stale": "not run for this question: press Ask"}.get(state, "")
        body = f'<div class="qa-answer qa-pending">{esc(waiting) or "&nbsp;"}</div>' + _static_metrics(info)
    device = result.device if result and result.device else info.get("device", "")
    provider = result.provider if result and result.provider else info.get("provider", "")
    dtype = result.dtype if result and result.dtype else info.get("dtype", "")
    execution = result.execution if result and result.execution else info.get("execution", "")
    runtime = runtime_line(device, provider, dtype) + (f" · {execution}" if execution else "")
    plain = plain_runtime(device, provider, dtype) + (f" · {execution.split(' (')[0]}" if execution else "")
    foot = f'<div class="qa-runtime" title="{esc(runtime)}">{esc(plain)}</div>' if runtime else ""
    notes = "".join(f'<div class="qa-note">{esc(n)}</div>' for n in info.get("notes", []))
    return (
        f'<div class="{classes}" data-variant="{esc(view.name)}" data-state="{esc(state)}">'
        f"{head}{body}{foot}{notes}</div>"
    )


def _answer_block(result: VariantResult, context: str) -> str:
    if result.latency_only:  # random weights: no text, highlight or confidence to read anything into
        return (
            '<div class="qa-answer qa-none">answer not shown</div>'
            '<div class="qa-snippet qa-muted">The weights are random, so the span it would pick means nothing; '
            "only its speed is the real model's.</div>"
        )
    confidence = fmt_confidence(result.score)
    if not result.answer and result.guess:
        snippet = highlight(context, result.guess_start, result.guess_end, SNIPPET_RADIUS // 2)
        rule = f" (threshold {result.null_threshold:+.2f})"
        return (
            '<div class="qa-answer qa-none">no answer</div>'
            f'<div class="qa-guess" title="The model rated &quot;no answer&quot; above this span under the chosen '
            f'rule{esc(rule)}.">Best guess: <b>{esc(result.guess)}</b> '
            f"(confidence {esc(fmt_confidence(result.guess_score))})</div>"
            f'<div class="qa-snippet qa-muted">{snippet}</div>'
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
        speed = _metric("1.00×", "reference speed", "qa-speed", "Speedups compare median latencies.")
    elif result.speedup and not result.pending:
        value, caption = speed_words(result.speedup)
        good = result.speedup >= 1 and not result.busy  # not shown as a gain when the machine was busy
        speed = _metric(value, caption, "qa-speed" + (" qa-good" if good else ""), SPEED_TIP)
    else:
        speed = _metric("–", "vs baseline", "qa-speed")
    size = size_words(baseline, result)
    return (
        '<div class="qa-metrics">'
        + _latency_metric(result)
        + speed
        + _confidence_metric(result)
        + _metric(fmt_mb(result.size_mb), "model size" + (f" · {size}" if size else ""))
        + _metric(fmt_params(result.parameters), "parameters")
        + "</div>"
    )


def _timing_note(result: VariantResult) -> str:
    """When the time budget cut this variant's timed runs short, or its first run is among them (no warm-up), the
    card says so, in the timing rule's words (:meth:`~variants.answering.timing.TimingRule.describe`)."""
    cut = result.budget_cut and result.timed_runs < result.runs_asked
    if result.pending or not result.timing or not (cut or result.first_timed):
        return ""
    text = result.timing[0].upper() + result.timing[1:] + "."
    return f'<div class="qa-note qa-runs-note">{esc(text)}</div>'


def _busy_note(result: VariantResult) -> str:
    """When the machine was busy while this variant was timed: how much its runs waited for a CPU."""
    if result.pending or not result.busy or not result.stretch:
        return ""
    tip = (
        "Each timed run's wall time against the CPU time this process spent meanwhile: its threads were ready to "
        "run but waited for a CPU that other work held. The median run took this many times its computing time."
    )
    return (
        f'<div class="qa-note qa-busy-note" title="{esc(tip)}">The machine was busy: waiting for a CPU, these '
        f"runs took {result.stretch:.1f}× their computing time, so this latency and speedup are unreliable.</div>"
    )


def _confidence_metric(result: VariantResult) -> str:
    """The answer's probability; with no answer, its best guess's (the [CLS] probability is often ~0%, since a
    calibrated threshold can make "no answer" win with a null score far below the span's)."""
    if result.latency_only:
        return _metric("–", "no confidence: random weights", tip=LATENCY_ONLY_TIP)
    if result.answer:
        return _metric(fmt_confidence(result.score), "confidence", tip=CONFIDENCE_TIP)
    if result.guess:
        return _metric(fmt_confidence(result.guess_score), "best guess confidence", tip=CONFIDENCE_TIP)
    return _metric(fmt_confidence(result.score), "no-answer score", tip=CONFIDENCE_TIP)


def _confidence_note(result: VariantResult, baseline: VariantResult | None) -> str:
    """Where this variant gives the baseline's answer at a confidence far from the baseline's (41% against 8.9%),
    one line saying that the two numbers are on different scales: read side by side, the higher one looked like
    the surer answer."""
    if baseline is None or result.variant == "baseline" or result.pending or result.latency_only:
        return ""
    if not same_answer(result.answer, baseline.answer) or not result.score or not baseline.score:
        return ""
    ratio = result.score / baseline.score
    if 1 / APART < ratio < APART:
        return ""
    mine, theirs = fmt_confidence(result.score), fmt_confidence(baseline.score)
    return (
        f'<div class="qa-note qa-confidence-note" title="{esc(CONFIDENCE_TIP)}">Same answer as the baseline, at '
        f"{esc(mine)} confidence against the baseline's {esc(theirs)}: each model has its own scale of confidence, "
        "so the higher number does not make this answer surer.</div>"
    )


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


def cards_html(snap: Snapshot, names: list[str], context: str, running: bool = False) -> str:
    """The grid of cards for ``names`` (in chain order), each in the state its result says: done, timing
    (answered, still being timed), running, stale (not run for this question) or idle."""
    results = snap.results
    baseline = results.get("baseline")
    cards = []
    for view in snap.variants:  # in chain order, built or not
        name = view.name
        if name not in names:
            continue
        if not view.loaded:  # still building: where its build stands
            cards.append(building_card_html(view, view.build))
            continue
        if name in results:
            state = "timing" if results[name].pending else "done"
            cards.append(card_html(view, results[name], context, state, baseline))
        else:
            state = "running" if running else ("stale" if results else "idle")
            cards.append(card_html(view, None, context, state))
    return f'<div class="qa-cards">{"".join(cards)}</div>'


def summary_html(snap: Snapshot, names: list[str], running: bool) -> str:
    """One line a stakeholder can read: the fastest variant among those that answered, its speedup and size
    (medians), then how many variants answered and how many of those give the baseline's answer ("no answer"
    twice is not agreement), then what the timing did. Above it, the engine's notice about the input (a
    question or passage not in English); instead of a winner, that the machine was too busy to crown one."""
    results = snap.results
    notice = next((r.notice for r in results.values() if r.notice), "")
    line = f'<div class="qa-input-notice">{esc(notice)}</div>' if notice else ""
    return line + _summary_line(names, results, running)


def _summary_line(names: list[str], results: dict[str, VariantResult], running: bool) -> str:
    if running:
        done = len(results)
        if done < len(names) or not any(r.pending for r in results.values()):
            return f'<div class="qa-summary">Running {min(done + 1, len(names))} of {len(names)}…</div>'
        rounds = max(r.timed_runs for r in results.values())
        asked = max(r.runs_asked for r in results.values())
        text = f"Every variant has answered; timing them in turns: round {rounds + 1} of at most {asked}…"
        return f'<div class="qa-summary">{esc(text)}</div>'
    ok = [r for r in results.values() if not r.error and r.latency_ms]
    if not ok:
        text = "No variant could answer: the cards say why." if results else "Ask a question to compare the variants."
        return f'<div class="qa-summary qa-muted">{esc(text)}</div>'
    timing = _timing_line(ok)
    busy = busy_words(ok)  # no winner crowned from runs that waited for a CPU
    lead = f'<span class="qa-busy">{esc(busy)}</span>' if busy else _speed_line(ok, results.get("baseline")) + "."
    return f'<div class="qa-summary">{lead}<br>{answers_line(ok)}{timing}</div>'


def _timing_line(ok: list[VariantResult]) -> str:
    """What the timing did, e.g. "Latency: 2–5 timed runs each, in turns, the fastest first, after one untimed
    warm-up run; fewer than the 5 asked for the slowest, as the 12 s time budget ran out (the cards say so)." """
    timed = [r for r in ok if r.timing]
    if not timed:
        return ""
    counts = sorted({r.timed_runs for r in timed})
    k = str(counts[0]) if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    text = f"Latency: {k} timed run{'s' if counts[-1] != 1 else ''} each, in turns, the fastest first"
    first = [r for r in timed if r.first_timed]  # timed from their first run: long enough, or no room for more
    if not first:
        text += ", after one untimed warm-up run"
    elif len(first) < len(timed):
        text += f", after one untimed warm-up run ({len(first)} of {len(timed)} timed from their first run instead)"
    else:
        text += ", each from its first run (no warm-up)"
    if cut := [r for r in timed if r.budget_cut and r.timed_runs < r.runs_asked]:
        asked, budget = max(r.runs_asked for r in cut), max(r.budget_s or 0 for r in cut)
        who = (
            "every variant" if len(cut) == len(timed) else "the slowest" if len(cut) == 1 else f"the {len(cut)} slowest"
        )
        text += f"; fewer than the {asked} asked for {who}, as the {budget:g} s time budget ran out (the cards say so)"
    return f'<br><span class="qa-muted">{esc(text)}.</span>'


def _speed_line(ok: list[VariantResult], base: VariantResult | None) -> str:
    """The fastest variant among those that answered (all of them when none did, or all give random-weight
    answers); its speedup is the engine's (``VariantResult.speedup``, the chart's number too)."""
    answered = [r for r in ok if r.answer and not r.latency_only]
    pool = answered or ok
    which = " of the variants that answered" if answered and len(answered) < len(ok) else ""
    if not answered and not all(r.latency_only for r in ok):
        which = " to say “no answer”"
    base_ok = base is not None and not base.error and bool(base.latency_ms)
    refused = base_ok and not base.answer and not base.latency_only
    others = [r for r in pool if r.variant != "baseline"]
    if not base_ok or not others:
        fastest = min(pool, key=lambda r: r.latency_ms)
        name = esc(short_label(fastest.variant, fastest.label))
        line = f"Fastest{esc(which)}: <b>{name}</b> (median {esc(fmt_ms(fastest.latency_ms))})"
        return line + _refused(refused and bool(answered))
    fastest = min(others, key=lambda r: r.latency_ms)
    name = esc(short_label(fastest.variant, fastest.label))
    ratio = fastest.speedup or 0.0
    if ratio >= 1 or (refused and answered):  # a baseline that refused is not among those that answered
        value = esc(fmt_speedup(ratio))
        speed = f"<b>{value} faster</b> than" if ratio >= 1 else f"<b>{value}</b> the speed of"
        lead = (
            f"Fastest{esc(which)}: <b>{name}</b>, median <b>{esc(fmt_ms(fastest.latency_ms))}</b>, "
            f"{speed} the baseline ({esc(fmt_ms(base.latency_ms))})"
        )
    else:
        lead = (
            f"The baseline was fastest on this question (median {esc(fmt_ms(base.latency_ms))}); the quickest "
            f"optimized variant, <b>{name}</b>, took {esc(fmt_ms(fastest.latency_ms))}"
        )
    ratio_mb = size_ratio(base.size_mb, fastest.size_mb)
    if ratio_mb and ratio_mb >= 1 and not same_size(ratio_mb):
        lead += f", and it is {ratio_mb:.1f}× smaller"
    return lead + _refused(refused and bool(answered))


def _refused(refused: bool) -> str:
    return " (the baseline said “no answer” to this question)" if refused else ""


def same_answer(a: str, b: str) -> bool:
    """Two answers agree when both are given and equal up to case and surrounding space."""
    return bool(a.strip()) and a.strip().casefold() == b.strip().casefold()


def answers_line(ok: list[VariantResult]) -> str:
    """How many variants answered, and how many of those give the baseline's answer (random-weight variants
    are left out: their answers mean nothing)."""
    if ok and all(r.latency_only for r in ok):
        return f'<span class="qa-agree">{esc(LATENCY_ONLY.capitalize())}: the answers are not compared.</span>'
    ok = [r for r in ok if not r.latency_only]
    answered = [r for r in ok if r.answer]
    base = next((r for r in ok if r.variant == "baseline"), None)
    text = f"{len(answered)} of {len(ok)} variants answered"
    if not answered:
        text = f"No variant answered ({len(ok)} said “no answer”; each card shows its best guess)"
    elif base is None:
        pass
    elif not base.answer:
        text += ", and the baseline said “no answer”, so there is no baseline answer to agree with"
    else:
        others = [r for r in answered if r.variant != "baseline"]
        agree = sum(same_answer(r.answer, base.answer) for r in others)
        if others:
            text += f"; {agree} of the {len(others)} other answers match the baseline's"
    return f'<span class="qa-agree">{esc(text)}.</span>'
