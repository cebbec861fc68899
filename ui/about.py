"""The About tab: what each variant is, how it was built, and what this machine runs."""

import platform
from pathlib import Path

from variants.answering.gpu_check import gpu_check
from variants.core import spec as specs
from variants.core.hardware import current_hardware, hardware_label
from variants.serving.engine import Engine

from . import ROOT
from .startup import gpu_words_html, variant_line
from .text import esc, fmt_mb, fmt_params, runtime_line, scroll_region


def shown_source(source: str) -> str:
    """A Hub id as is; a folder inside the app relative to it (server paths are not the visitor's business)."""
    path = Path(source)
    if path.is_absolute():
        try:
            return str(path.resolve().relative_to(ROOT))
        except ValueError:
            return path.name
    return source


# --- the page's title ------------------------------------------------------------------------------

NUMBER_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
LAST_STEP_WORDS = {"int8": "**quantized to 8-bit integers**", "fp16": "**run in 16-bit floats** on the GPU"}


def page_intro(engine: Engine) -> str:
    """The page's title and first paragraph, in Markdown, for the variants this engine loaded: how many there
    are, how many the Ask tab shows side by side (the headline ones) and that the build steps between them are
    one tick away."""
    n = len(engine.specs)  # known before they build
    shown = sum(s.headline for s in engine.specs) or n
    title = f"# One QA model, {number(n)} variants" if n > 1 else "# One QA model on this machine"
    steps = {step for s in engine.specs for step in s.steps}
    last = next((LAST_STEP_WORDS[s] for s in LAST_STEP_WORDS if s in steps), "optimized")
    pruned = "**pruned**, " if "compact" in steps else ""  # a baseline alone: the steps that need no training
    if any(specs.distilled(s.label) for s in engine.specs):  # a distilled partner: nothing cut, a smaller model
        pruned = "**distilled**, "
    where = f"{number(shown).capitalize()} answer side by side"
    if n > shown:
        more = n - shown
        where += (
            f"; the other {number(more)} (the build steps between them) are one tick away, under “Also show the "
            "intermediate steps”"
        )
    return (
        f"{title}\n"
        f"Ask a question about a passage: the **baseline** and its versions made faster step by step ({pruned}"
        f"**exported to ONNX Runtime**, graph-optimized, {last}) each answer it, live on this machine. {where}. "
        "Compare answer, latency and model size."
    )


def number(n: int) -> str:
    """A count in words up to ten, in digits above."""
    return NUMBER_WORDS[n] if n < len(NUMBER_WORDS) else f"{n:,}"


# --- About tab ------------------------------------------------------------------------------------


def about_html(engine: Engine) -> str:
    family = None if getattr(engine, "chain", None) else specs.FAMILIES.get(engine.preset)  # not the preset's models
    rows = []
    building = engine.status.snapshot()
    for spec in engine.specs:  # those still building too, with where they stand
        v = engine.variants.get(spec.name)
        if v is None:
            state = building.state(spec.name)
            rows.append(
                f"<tr><td><b>{esc(spec.label)}</b><br><code>{esc(spec.name)}</code></td>"
                f"<td>{esc(spec.description)}</td><td>{esc(' → '.join(spec.steps) or 'none (as published)')}</td>"
                f'<td class="qa-muted">{esc(variant_line(state) if state else "queued")}</td><td></td></tr>'
            )
            continue
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
        calibrated = v.calibrated_threshold
        threshold = "none" if calibrated is None else f"{calibrated:+.2f}"
        rows.append(
            f"<tr><td><b>{esc(spec.label)}</b><br><code>{esc(spec.name)}</code>"
            f"{'<br>headline' if spec.headline else ''}</td>"
            f"<td>{esc(spec.description)}<br><small>source: <code>{esc(shown_source(spec.source))}</code></small></td>"
            f"<td>{esc(steps)}<br><small>backend: {esc(spec.backend)}; "
            f"calibrated no-answer threshold {threshold}</small></td>"
            f"<td>{status}{notes}</td><td>{v.load_seconds:.1f} s</td></tr>"
        )
    fam = f"<p>{esc(family.description)}</p>" if family else ""
    return (
        f"<h3>Preset <code>{esc(engine.preset)}</code> on <code>{esc(engine.device)}</code></h3>{fam}"
        "<p>Every variant answers through the same code: the context is split into "
        f"{engine.settings.max_length}-token windows (stride {engine.settings.stride}), each window's start/end "
        "scores are decoded into the best span, and SQuAD v2's “no answer” wins when ln(its score / the span's) "
        "is above the no-answer threshold: 0 by default, the transformers pipeline's rule; each model's threshold "
        "calibrated on SQuAD v2 (where half the questions have no answer, so it refuses far more often) is one "
        "choice away in the Ask tab. Only the model underneath changes.</p>"
        f"<p>{esc(serving_line(engine))}</p>"
        # a phone scrolls the table sideways, not the page (it is wider than a phone's 390 px)
        + scroll_region(
            '<table class="qa-about"><thead><tr><th>Variant</th><th>What it is</th>'
            "<th>Build steps</th><th>Runs on (device · provider · precision), size</th><th>Load / build time</th>"
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>",
            "The variants, how each is built and what it runs on",
        )
        + f"<h3>This machine</h3><p>{esc(machine_summary())}</p>{gpu_summary_html()}"
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


def gpu_summary_html() -> str:
    """With an NVIDIA GPU: its driver and the CUDA it runs, whether torch sees CUDA, the providers ONNX Runtime
    really runs, and what stops them using it where something does; "" without one."""
    check = gpu_check()
    if check is None:
        return ""
    problem = check.problem()
    return f'<p id="qa-about-gpu">{esc(check.facts())}.</p>' + (f"<p>{gpu_words_html(problem)}</p>" if problem else "")


def machine_summary() -> str:
    hw = current_hardware()
    hardware = ", ".join(filter(None, [hardware_label(hw, "cpu"), hw.get("gpu")]))
    versions = []
    for module in ("torch", "onnxruntime", "transformers", "gradio"):
        try:
            versions.append(f"{module} {__import__(module).__version__}")
        except ImportError:
            continue
    return f"{hardware}; Python {platform.python_version()}; {', '.join(versions)}"
