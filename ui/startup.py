"""The page while the variants build: what runs here (model, preset, hardware) above every tab, the build's
progress step by step, a card for each variant still coming, and the handler a ``gr.Timer`` calls to refresh
them, all read from the engine's one build state (:class:`variants.serving.build_status.BuildStatus`)."""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from variants.answering.gpu_check import ORT_CUDA12, TORCH_CUDA12, TORCH_CUDA12_INDEX, gpu_check
from variants.building.replica import LATENCY_ONLY
from variants.core import config
from variants.core import spec as specs
from variants.core.hardware import current_hardware, hardware_label
from variants.serving.build_status import BUILDING, FAILED, READY, BuildSnapshot, VariantStatus
from variants.serving.engine import Engine
from variants.serving.snapshot import Snapshot, VariantView

from .text import esc, notice_html

# What a question costs with the RoBERTa pair on 2 CPU cores: its same-shape replica asked the Ask tab's two
# examples in Chromium, every card's timing done, on a quiet 2-core Xeon (load 0.5-2.2), cold start
# (docs/results.md#the-published-cpu-pair-roberta;
# experiments/records/space/space-roberta-base-replica-cold-*T045421Z.json)
ROBERTA_COST = "about 2 s a short question, 10 s a long one, on 2 CPU cores"
MODELS = {  # the model a preset runs, in a few words
    "bert-large": "BERT-large (whole-word masking, SQuAD v2) and its block-pruned x2.63 version",
    "embedded": "MiniLM-L6 (SQuAD v2, 22 M parameters) and its pruned version, shipped with the app",
    "bert-large-replica": "a replica of BERT-large and its x2.63 pruned shape",
    "roberta-base": f"deepset's RoBERTa-base (SQuAD v2) and its distilled partner, 6 of its 12 layers ({ROBERTA_COST})",
    "roberta-base-replica": f"a replica of RoBERTa-base and its distilled 6-layer partner ({ROBERTA_COST})",
}
PUBLISHED = {  # the models a preset that needs the Hub loads, for the header's line after a fallback
    "roberta-base": "The published pair (deepset/roberta-base-squad2 and its distilled deepset/tinyroberta-squad2)",
    "bert-large": "The published BERT-large pair",
}
OTHER_PRESET = {  # what the other preset would give, for the line that says how to switch
    "embedded": ("roberta-base", f"deepset's published RoBERTa-base pair, {ROBERTA_COST}"),
    "roberta-base": ("embedded", "the small MiniLM trained here, a fraction of a second a question on a CPU"),
    "roberta-base-replica": ("embedded", "the small MiniLM, with real answers"),
    "bert-large": ("embedded", "the small MiniLM, a fraction of a second a question on a CPU"),
    "bert-large-replica": ("embedded", "the small MiniLM, with real answers"),
}
STARTUP_CSS = """
.qa-header { font-size: 0.92em; line-height: 1.5; padding: 8px 12px; border-radius: 8px;
  background: var(--background-fill-secondary); overflow-wrap: anywhere; }
.qa-header code { font-size: 0.95em; }
.qa-latency-badge { display: inline-block; padding: 0 6px; border-radius: 6px; background: #fef3c7; color: #78350f;
  font-weight: 600; }
.qa-build { margin: 6px 0 0; padding-left: 1.2em; }
.qa-build li { margin: 1px 0; }
.qa-build .qa-done { color: #15803d; }
.qa-build .qa-failed { color: #dc2626; }
.qa-build .qa-now { font-weight: 600; }
.qa-build-summary.qa-failed { color: #dc2626; }
.qa-muted { color: var(--body-text-color-subdued); }
.qa-gpu-problem { margin-top: 6px; padding-left: 8px; border-left: 3px solid #d97706; }
"""


def hardware_words(device: str) -> str:
    """This machine in a few words: the GPU on a CUDA device, else the CPU and its cores."""
    hw = current_hardware()
    if device.startswith("cuda") and hw.get("gpu"):
        return f"GPU: {hw['gpu']}"
    return f"CPU: {hardware_label(hw, 'cpu')}, no GPU" if not hw.get("gpu") else f"CPU: {hardware_label(hw, 'cpu')}"


def seconds_words(seconds: float) -> str:
    """A duration as a person reads it: "42 s", "3 min 5 s"."""
    seconds = max(0, round(seconds))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60} s"


def header_html(snap: Snapshot) -> str:
    """Above every tab: the model, the preset and the hardware (and for random weights, that only latency means
    anything), how to switch presets, then the build's progress while it runs."""
    preset, chain = snap.preset, snap.chain
    if chain:  # the host's own models: the baseline alone (its no-training chain) or with its pruned partner
        model = chain["name"] + (", the steps that need no training" if chain.get("pruned") is None else "")
    else:
        model = MODELS.get(preset) or ", ".join(sorted({s.source for s in snap.variants}))
    latency_only = any(s.latency_only for s in snap.variants)
    badge = f' <span class="qa-latency-badge">{esc(LATENCY_ONLY)}</span>' if latency_only else ""
    line = (
        f"<b>Model:</b> {esc(model)}{badge} · <b>preset</b> <code>{esc(preset)}</code> · "
        f"<b>{esc(hardware_words(snap.device))}</b>"
    )
    line += fallback_line(snap) + preset_hint(snap)
    return f'<div class="qa-header">{line}{gpu_problem_html()}{build_html(snap.build)}</div>'


def gpu_problem_html() -> str:
    """The header's sentence when this machine has an NVIDIA GPU that torch or ONNX Runtime cannot use (what the
    driver runs, what the installed builds need, the requirements.txt lines to change); "" otherwise, and on a
    machine without one."""
    check = gpu_check()
    problem = check.problem() if check is not None else ""
    return f'<div class="qa-gpu-problem" id="qa-gpu-problem">{gpu_words_html(problem)}</div>' if problem else ""


def gpu_words_html(text: str) -> str:
    """``text`` escaped, the requirements.txt lines it names set as code."""
    html = esc(text)
    for line in (TORCH_CUDA12_INDEX, TORCH_CUDA12, ORT_CUDA12):
        html = html.replace(esc(line), f"<code>{esc(line)}</code>")
    return html


def fallback_line(snap: Snapshot) -> str:
    """After a fallback, the header's line that says which models could not load and which preset the page shows
    instead (the banner below the header gives the reason)."""
    if not snap.fallback_from:
        return ""
    asked = PUBLISHED.get(snap.fallback_from) or f"The {snap.fallback_from} models"
    said = f"{asked} could not be loaded here, so this page shows the preset {snap.preset} instead"
    return f'<br><span class="qa-fallback"><b>Fallback:</b> {esc(said)} (the reason is below).</span>'


def preset_hint(snap: Snapshot) -> str:
    """The header's line on how to switch presets, in the host's terms (a Space's variables, else the option or
    the variable); none where it would suggest the preset already asked for (set), nor after a fallback (the Hub
    did not answer: the other presets but the embedded one need it too, and the fallback's line says what to do)."""
    other = OTHER_PRESET.get(snap.preset)
    if not other or snap.fallback_from or other[0] == config.env_text(config.PRESET_ENV):
        return ""
    setting = f"<code>{config.PRESET_ENV}={esc(other[0])}</code>"
    if config.on_space():
        how = f"{setting} ({esc(other[1])}), a variable in the Space's Settings → Variables and secrets."
    else:
        how = f"<code>--preset {esc(other[0])}</code> or {setting} ({esc(other[1])})."
    return f'<br><span class="qa-muted">Another preset: {how}</span>'


def build_html(snap: BuildSnapshot) -> str:
    """The build's progress, one line per variant, while it runs; once it is over, one line (failures named)."""
    n = len(snap.variants)
    ready = [v for v in snap.variants if v.state == READY]
    failed = [v for v in snap.variants if v.state == FAILED]
    if snap.done:
        if not failed:
            return ""
        why = "; ".join(f"{v.label}: {v.error}" for v in failed)
        said = f"{len(failed)} of {n} variants failed to build ({why}); the others serve."
        return f'<div class="qa-build-summary qa-failed">{esc(said)}</div>'
    if not snap.started:
        head = f"Starting the build of {n} variants…"
    else:
        left = snap.remaining_s()
        to_go = f", typically about {seconds_words(left)} to go" if left else ""
        head = f"Building the variants: {len(ready)} of {n} ready, {seconds_words(snap.seconds)} so far{to_go}."
    items = []
    if snap.stage:
        typical = f"; typically about {seconds_words(snap.stage_estimate_s)}" if snap.stage_estimate_s else ""
        items.append(f'<li class="qa-now">{esc(snap.stage)} ({esc(seconds_words(snap.seconds) + typical)})</li>')
    items += [f"<li{variant_class(v)}>{esc(variant_line(v))}</li>" for v in snap.variants]
    note = "Each variant joins the Ask tab's cards when it is ready; Ask answers with those ready meanwhile."
    return (
        f'<div class="qa-build-head" id="qa-build"><b>{esc(head)}</b> <span class="qa-muted">{esc(note)}</span>'
        f'</div><ul class="qa-build">{"".join(items)}</ul>'
    )


def variant_class(v: VariantStatus) -> str:
    kind = {READY: "qa-done", FAILED: "qa-failed", BUILDING: "qa-now"}.get(v.state, "qa-muted")
    return f' class="{kind}"'


def variant_line(v: VariantStatus) -> str:
    """One variant's state in words, e.g. "Pruned + ONNX: optimize the ONNX graph (step 3 of 5), 12 s; typically
    about 1 min 30 s more"."""
    if v.state == READY:
        return f"✓ {v.label}: ready ({seconds_words(v.seconds)})"
    if v.state == FAILED:
        return f"✗ {v.label}: failed: {v.error}"
    if v.state == BUILDING:
        at = v.steps.index(v.step) + 1 if v.step in v.steps else 0
        of = f" (step {at} of {len(v.steps)})" if at else ""
        more = f"; typically about {seconds_words(v.estimate_s)} more" if v.estimate_s else ""
        return f"… {v.label}: {v.step_words()}{of}, {seconds_words(v.step_seconds)}{more}"
    typical = f" (typically about {seconds_words(v.estimate_s)} to build)" if v.estimate_s else ""
    return f"· {v.label}: queued{typical}"


def building_card_html(spec: VariantView, state: VariantStatus | None) -> str:
    """The card of a variant still building (or failed before it could load): its name and where it stands."""
    words = variant_line(state).split(": ", 1)[-1] if state else "queued"
    kind = "error" if state is not None and state.state == FAILED else "building"
    return (
        f'<div class="qa-card qa-{kind}" data-variant="{esc(spec.name)}" data-state="{kind}">'
        f'<div class="qa-head"><span class="qa-title">{esc(specs.short_label(spec.name, spec.label))}</span></div>'
        f'<div class="qa-answer qa-pending">{esc("building: " + words if kind == "building" else words)}</div></div>'
    )


def coming_html(snap: Snapshot, names: list[str]) -> str:
    """One line under the summary naming the chosen variants still building, or ""."""
    build = snap.build
    coming = [v for v in build.pending if v.name in names]
    if not coming:
        return ""
    listed = ", ".join(f"{v.label} ({v.step_words() or 'queued'})" for v in coming)
    left = build.remaining_s()
    when = f"; all ready in about {seconds_words(left)}" if left else ""
    said = f"Still building: {listed}{when}. Ask again when they are ready."
    return f'<div class="qa-summary qa-muted">{esc(said)}</div>'


def notice_update(snap: Snapshot) -> dict:
    """The fallback banner: shown once the engine has a notice (the fallback is decided while it fetches)."""
    return gr.update(value=notice_html(snap.notice, "Fallback") if snap.notice else "", visible=bool(snap.notice))


def make_header_refresh(engine: Engine) -> Callable[[], tuple]:
    """The ``gr.Timer`` handler for the header and the fallback banner; the timer stops once the build is over."""

    def refresh() -> tuple:
        snap = engine.snapshot()
        return header_html(snap), notice_update(snap), gr.Timer(active=not snap.build.done)

    return refresh


def when_changed(engine: Engine, draw: Callable[..., tuple], outputs: int) -> Callable[..., tuple]:
    """A ``gr.Timer`` handler that calls ``draw(*inputs)`` only when a variant's build state changed since the
    version it was given (``seen``, kept in a ``gr.State``): (version, *draw's outputs or as many skips)."""

    def refresh(seen: int, *inputs) -> tuple:
        version = engine.status.snapshot().version
        if version == seen:
            return (seen, *[gr.skip()] * outputs)
        return (version, *draw(*inputs))

    return refresh
