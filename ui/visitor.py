"""The Ask tab's "Try your own model": a visitor's Hub model built into its no-training chain
(:mod:`variants.serving.visitor`), its build drawn as the start-up build is (:func:`ui.startup.build_html`), its
cards under the preset's once it is ready, answering the same question after them. The chain is the visitor's
alone (their session's): no other page sees it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import nullcontext

import gradio as gr

from variants.answering.qa import InputError
from variants.answering.timing import DEFAULT_BUDGET_S
from variants.building import custom
from variants.serving.guard import ModelLine, Refused, request_rule
from variants.serving.visitor import VisitorBusy, VisitorChain, VisitorChains

from .cards import cards_html
from .errors import log_refusal
from .startup import STARTUP_CSS, build_html, seconds_words
from .styles import BANNER_CSS, CARD_CSS, html_block
from .text import esc

VISITOR_CSS = """
.qa-visitor-head { margin: 12px 0 4px; font-size: 0.95em; }
"""


def status_html(chain: VisitorChain | None, chains: VisitorChains, said: str = "", ok: bool = True, snap=None) -> str:
    """Where the visitor's model stands: a refusal or a sentence (``said``), else its build as the start-up build
    is drawn (``snap``: the build's snapshot where the caller took one), and once it is over, how long it stays."""
    if said:
        return f'<div class="{"qa-ok" if ok else "qa-notice"}">{esc(said)}</div>'
    if chain is None:
        return ""
    snap = chain.snapshot() if snap is None else snap
    checked = chain.checked
    where = "the local Hub cache" if checked.cached is not None else "the Hub"
    head = f"Your model {checked.model_id} ({checked.download_mb:,.1f} MB, from {where}) into its no-training chain"
    if not snap.done:
        return f'<div class="qa-header"><b>{esc(head)}</b>{build_html(snap)}</div>'
    ready = len(chain.ready_names())
    if chain.stop_reason:
        n = len(snap.variants)
        kept = f"{ready} of {n} variants were ready and answer; the rest are not built." if ready else ""
        said = f"{head}: {chain.stop_reason} {kept or 'Nothing of it is kept.'}"
        return f'<div class="qa-notice">{esc(said)}</div>'
    if ready:
        kept = seconds_words(chains.idle_s)
        said = (
            f"{head}: {ready} of {len(snap.variants)} variants ready in {seconds_words(snap.seconds)}; ask a "
            f"question to see them under the preset's cards. Only you see them; they are dropped after {kept} unused."
        )
        return f'<div class="qa-ok">{esc(said)}</div>{build_html(snap)}'
    return f'<div class="qa-header"><b>{esc(head)}</b>{build_html(snap)}</div>'


def chain_cards_html(chain: VisitorChain | None, results: dict, context: str, running: bool = False) -> str:
    """The visitor's cards under a heading (every variant of their chain, ready or still building), or ""."""
    if chain is None:
        return ""
    names = [s.name for s in chain.engine.specs]
    head = f"Your model: {chain.model_id}, its own chain (each speedup against its own baseline; only you see it)"
    cards = cards_html(chain.engine.snapshot(results), names, context, running=running)
    return f'<div class="qa-visitor-head" id="visitor-head"><b>{esc(head)}</b></div>{cards}'


def make_handlers(chains: VisitorChains, line: ModelLine | None = None) -> dict[str, Callable]:
    """Build, Stop, the timer's refresh and the visitor's Ask; each finds the visitor's chain by their session."""

    def build(model_id: str, request: gr.Request) -> tuple:
        owner = request.session_hash or ""
        try:
            chain = chains.start(owner, model_id)
        except (custom.CustomModelRefused, VisitorBusy) as exc:
            log_refusal(str(exc), "Try your own model")
            return status_html(None, chains, str(exc), ok=False), gr.skip(), gr.skip(), gr.skip()
        return status_html(chain, chains), chain_cards_html(chain, {}, ""), gr.Timer(active=True), -1

    def stop(request: gr.Request) -> str:
        owner = request.session_hash or ""
        if not chains.stop(owner):
            return status_html(None, chains, "Nothing of yours is building.", ok=False)
        return status_html(None, chains, "Stopping at the next step…")

    def refresh(seen: int, request: gr.Request) -> tuple:
        chain = chains.get(request.session_hash, touch=False)
        if chain is None:
            return seen, gr.skip(), gr.skip(), gr.Timer(active=False)
        snap = chain.snapshot()
        active = gr.Timer(active=not (snap.done and not chain.building))
        if snap.version == seen and not snap.stage and snap.done:
            return seen, gr.skip(), gr.skip(), active
        return snap.version, status_html(chain, chains, snap=snap), chain_cards_html(chain, {}, ""), active

    def ask(context: str, question: str, runs: float, request: gr.Request) -> Iterator[str]:
        chain = chains.get(request.session_hash)
        if chain is None:
            yield ""
            return
        ready = chain.ready_names()
        if not ready:
            yield chain_cards_html(chain, {}, context)
            return
        results: dict = {}
        yield chain_cards_html(chain, results, context, running=True)
        try:
            with line.turn() if line else nullcontext():
                rule = request_rule(int(runs), DEFAULT_BUDGET_S)
                for progress in chain.engine.ask_stream(question, context, ready, rule=rule):
                    results = progress.results
                    yield chain_cards_html(chain, results, context, running=progress.phase != "done")
        except (InputError, Refused) as exc:
            yield chain_cards_html(chain, results, context) + status_html(None, chains, str(exc), ok=False)

    return {"build": build, "stop": stop, "refresh": refresh, "ask": ask}


def visitor_controls(custom_mb: float) -> dict:
    """The accordion's parts (in the Ask tab's right column)."""
    with gr.Accordion("Try your own model", open=False, elem_id="custom-model"):
        model_id = gr.Textbox(
            label="Hub model id",
            placeholder=custom.EXAMPLE_ID,
            info=f"An extractive QA model (…ForQuestionAnswering) of the BERT family, up to {custom_mb:,.0f} MB; it "
            "is built into its own chain (ONNX, optimized, INT8 on a CPU or FP16 on a GPU) beside the preset's.",
            elem_id="custom-model-id",
        )
        with gr.Row():
            build = gr.Button("Build its chain", elem_id="custom-build", scale=3)
            stop = gr.Button("Stop", variant="stop", elem_id="custom-stop", scale=1)
        status = html_block("", css=BANNER_CSS + STARTUP_CSS, elem_id="custom-status")
    return {"model_id": model_id, "build": build, "stop": stop, "status": status}


def wire_visitor(
    chains: VisitorChains, parts: dict, cards: gr.HTML, asked, ask_inputs: list, line: ModelLine | None
) -> None:
    """The events: Build and Stop, a timer that redraws the build while it runs, and the visitor's Ask after the
    preset's (``asked``, the Ask event: its cards follow in the same models' line)."""
    handlers = make_handlers(chains, line)
    timer = gr.Timer(1.0, active=False)
    seen = gr.State(-1)
    gr.on(
        [parts["build"].click, parts["model_id"].submit],
        handlers["build"],
        [parts["model_id"]],
        [parts["status"], cards, timer, seen],
        api_visibility="private",
        concurrency_id="custom-model",
        concurrency_limit=1,
    )
    parts["stop"].click(handlers["stop"], None, [parts["status"]], queue=False, api_visibility="private")
    timer.tick(
        handlers["refresh"],
        [seen],
        [seen, parts["status"], cards, timer],
        queue=False,
        show_progress="hidden",
        api_visibility="private",
    )
    # not in the models' gradio group: a page without a chain answers at once, and one with a chain waits its turn
    # in ``line``, as /answer does (refused, with how long to wait, when the line is full)
    asked.then(
        handlers["ask"],
        ask_inputs,
        [cards],
        api_visibility="private",
        show_progress="hidden",
        concurrency_id="visitor-ask",
        concurrency_limit=None,
    )


def visitor_cards_block() -> gr.HTML:
    """Where the visitor's cards go, under the preset's."""
    return html_block("", css=CARD_CSS + VISITOR_CSS, elem_id="visitor-cards")
