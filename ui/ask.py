"""The Ask tab: examples, the handlers (closures over the engine, callable without a server), and its layout."""

import functools
import inspect
import logging
import math
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path

import gradio as gr

from variants.answering.qa import InputError, parse_null_threshold
from variants.answering.timing import DEFAULT_BUDGET_S, DEFAULT_RUNS
from variants.building import custom
from variants.core import config
from variants.core.spec import short_label
from variants.core.squad import load_squad_json
from variants.serving.engine import Engine
from variants.serving.guard import MAX_RUNS, ModelLine, Refused, request_rule, visitor
from variants.serving.outcome import VariantResult
from variants.serving.visitor import VisitorChains

from . import SAMPLE_FILE
from .announce import QUESTION_ID, announce, live_region
from .cards import cards_html, summary_html
from .charts import latency_figure
from .errors import log_refusal, refused
from .share import share_controls
from .startup import coming_html, when_changed
from .styles import CARD_CSS, html_block
from .visitor import visitor_cards_block, visitor_controls, wire_visitor

log = logging.getLogger("app")

# --- examples -------------------------------------------------------------------------------------

NORMANS_QUESTION = "In what country is Normandy located?"
UNANSWERABLE_ID = "5ad01e4677cf76001a686aa8"  # "What city has a population of 1,307,204?" (San Diego has 1,307,402)
LONG_TITLE, LONG_PARAGRAPHS = "Packet_switching", 5  # about 640 tokens: more than one 384-token window
LONG_QUESTION = "Who did Roger Scantlebury meet at the 1967 ACM Symposium?"  # answered in the last paragraph


ULAN_BATOR = (  # a short passage in neither shared SQuAD file: what a newcomer would type
    "Ulan Bator is the capital of Mongolia. The city lies on the Tuul River, in the north of the country, and "
    "was founded in 1639 as a movable Buddhist monastery.",
    "When was the city founded?",
)


def load_examples(path: Path = SAMPLE_FILE) -> tuple[list[list[str]], list[str]]:
    """[context, question] rows for gr.Examples, with labels: a short passage of our own, then SQuAD v2 ones
    (left out when the sample is missing)."""
    rows, labels = [list(ULAN_BATOR)], ["Ulan Bator: a short passage"]
    try:
        sample = load_squad_json(path)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("no SQuAD examples: %s", exc)
        return rows, labels
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


def selected_names(engine: Engine, extra: list[str] | None, leave_out: list[str] | None = None) -> list[str]:
    """The headline variants plus the intermediate steps ticked in the checkbox group, less those left out,
    built or still building (their cards say so)."""
    extra, leave_out = set(extra or []), set(leave_out or [])
    return [s.name for s in engine.specs if (s.headline or s.name in extra) and s.name not in leave_out]


def variant_choices(engine: Engine, headline: bool) -> list[tuple[str, str]]:
    """(short label, name) of the headline variants ("Leave out"), or of the steps between them."""
    return [(short_label(s.name, s.label), s.name) for s in engine.specs if s.headline == headline]


def choice_updates(engine: Engine) -> tuple[dict, dict]:
    """ "Leave out" and "Also show the intermediate steps" for the chain the engine builds now."""
    steps = variant_choices(engine, headline=False)
    return gr.update(choices=variant_choices(engine, headline=True)), gr.update(choices=steps, visible=bool(steps))


def built_names(engine: Engine, names: list[str]) -> list[str]:
    """Those of ``names`` whose build is over (ready, or failed with the reason on its card)."""
    return [n for n in names if n in engine.variants]


def make_ask(engine: Engine, line: ModelLine | None = None) -> Callable[..., Iterator[tuple]]:
    """The Ask handler: yields (cards, summary, chart, last) as each variant answers, after each round of
    timed runs, and at the end (the engine's one timing rule, :class:`~variants.answering.timing.TimingRule`).
    With ``line``, the models are used in turns with ``/answer`` (the place the validator reserved)."""

    def ask(
        context: str,
        question: str,
        extra: list[str],
        rule: str = "pipeline",
        margin: float = 0.0,
        runs: float = DEFAULT_RUNS,
        leave_out: list[str] | None = None,
        last: dict | None = None,
        request: gr.Request = None,
    ) -> Iterator[tuple]:
        try:
            engine.check_input(question, context)
        except InputError as exc:
            raise refused(str(exc), "Ask") from None
        names = selected_names(engine, extra, leave_out)
        if not names:
            raise refused("Every variant is left out: untick one under “Leave out”.", "Ask")
        ready = built_names(engine, names)  # the others are still building: their cards say where they stand
        if not ready:
            raise refused("No variant is ready yet: the top of the page shows the build; ask again in a moment.", "Ask")
        results: dict[str, VariantResult] = {}
        snap = engine.snapshot()
        coming = coming_html(snap, names)
        yield (
            cards_html(snap, names, context, running=True),
            summary_html(snap, ready, running=True) + coming,
            latency_figure(snap, names),
            last,
        )
        timing = request_rule(int(runs), DEFAULT_BUDGET_S)  # the slider stays inside the cap; a crafted call too
        try:
            threshold = null_threshold(rule, margin)
            with line.turn(claim=True, visitor=visitor(request)) if line else nullcontext():
                for progress in engine.ask_stream(question, context, ready, rule=timing, null_threshold=threshold):
                    results = progress.results
                    if progress.phase == "done":
                        break
                    snap = engine.snapshot(results)
                    yield (
                        cards_html(snap, names, context, running=True),
                        summary_html(snap, ready, running=True) + coming,
                        latency_figure(snap, names),
                        last,
                    )
        except (InputError, Refused) as exc:  # e.g. a question too long for the model's window; a full line
            raise refused(str(exc), "Ask") from None
        snap = engine.snapshot(results)
        yield (
            cards_html(snap, names, context),
            summary_html(snap, ready, running=False) + coming_html(snap, names),
            latency_figure(snap, names),
            {"context": context, "results": results},
        )

    return ask


def make_validator(engine: Engine, line: ModelLine | None = None) -> Callable[..., list[dict]]:
    """Checks the Ask inputs before the queue: a bad one gets its message under its own box, and the
    cards, chart and summary are left as they were. With ``line``, a question that finds it full is told so
    under the question box, with how long to wait (gradio's own "queue full" says neither)."""

    def validate(
        context: str,
        question: str,
        extra=None,
        rule=None,
        margin=None,
        runs=None,
        leave_out=None,
        last=None,
        request: gr.Request = None,
    ) -> list[dict]:
        # the Ask handler's inputs, in its order: one validation result for each (the request is gradio's)
        controls = [extra, rule, margin, runs, leave_out, last]
        fine = gr.validate(True, "")
        try:
            engine.check_input(question, context)
        except InputError as exc:
            message = str(exc)
            about_question = exc.field == "question"
            return [
                gr.validate(about_question, "" if about_question else message),
                gr.validate(not about_question, message if about_question else ""),
                *[fine] * len(controls),
            ]
        if not selected_names(engine, extra, leave_out):
            left_out = gr.validate(False, "Every variant is left out: untick one.")
            return [fine, fine, *[left_out if i == 4 else fine for i in range(len(controls))]]
        try:
            if line is not None:
                line.reserve(visitor(request))
        except Refused as exc:
            log_refusal(str(exc), "Ask")
            return [fine, gr.validate(False, str(exc)), *[fine] * len(controls)]
        return [fine] * (2 + len(controls))

    return validate


def make_reselect(engine: Engine) -> Callable[..., tuple]:
    """Show or hide the intermediate steps' cards without re-running anything."""

    def reselect(extra: list[str], last: dict, leave_out: list[str] | None = None) -> tuple:
        names = selected_names(engine, extra, leave_out)
        results = {k: v for k, v in (last or {}).get("results", {}).items() if k in names}
        context = (last or {}).get("context", "")
        snap = engine.snapshot(results)
        return (
            cards_html(snap, names, context),
            summary_html(snap, names, running=False) + coming_html(snap, names),
            latency_figure(snap, names),
        )

    return reselect


def make_answer_api(engine: Engine, line: ModelLine | None = None) -> Callable[..., list[dict]]:
    """The ``/answer`` API's handler; with ``line``, an async one that waits its turn there (refused at once,
    with how long to wait, when the line is full) instead of in the server's thread pool."""

    def answer(
        context: str,
        question: str,
        null_threshold: float | str | None = None,
        runs: int = DEFAULT_RUNS,
        budget_s: float | None = DEFAULT_BUDGET_S,
        request: gr.Request = None,
    ) -> list[dict]:
        """Answer `question` from `context` with every variant of the app's preset, timed as the Ask tab times
        them (a Hub model a visitor loaded on the page is theirs and is left out).

        `null_threshold` says when to answer "no answer": left out, transformers' pipeline rule (0, the
        default everywhere); "calibrated", each model's threshold tuned on SQuAD v2; or a number.
        Timing: every variant answers once, the fastest first (that run is an untimed warm-up unless it took
        over a second: then it is the first timed run); then they take turns, one timed run each per round, up
        to `runs` each (default 5, capped at 20), and a variant gives up its next run when it would end
        past `budget_s` seconds from the call's start (default 12, capped at 30; empty or 0: the
        cap), the slowest first; a variant left without a timed run is timed by its first run.
        Returns one dict per variant (baseline first) with the fields variant, label, answer, score,
        latency_ms (the median of the timed runs), latency_runs, latency_min_ms, latency_max_ms, timed_runs
        (k), runs_asked, budget_s, first_timed (its first run is among the k), budget_cut (the budget cut its
        runs), timing (what was done, in words), null_threshold, device, provider, dtype,
        start, end, null_score, guess, guess_start, guess_end, guess_score, size_mb, parameters, speedup
        (baseline median / this median), latency_only, pending and error; cpu_runs and wait_runs (the process's
        CPU time during each timed run and how long its threads waited for a CPU, ms), stretch (the median run's
        (CPU + wait) / CPU) and busy (stretch above 1.25: the machine was busy, the latencies are unreliable);
        notice (one line when the question or context is not English, else ""). `answer` is "" when the model
        finds no answer in the context, and `guess` (with its offsets and probability) is then the best span that
        "no answer" beat. One request's model time is capped at 30 s, first answers included: a variant whose
        answer would end past it (by its pace and the passage's windows) is skipped (skipped true, error says why
        and what brings it in). While the app builds, the variants not ready yet are listed too, after the others,
        with pending true, state ("queued" or "building") and step (the build step it is at), no answer; a
        variant whose build failed has state "failed" and its error; every other row has state "ready".
        """
        try:
            threshold = None if null_threshold in (None, "") else parse_null_threshold(null_threshold)
            if budget_s and not math.isfinite(float(budget_s)):
                raise ValueError(f"budget_s must be a finite number of seconds, not {budget_s}")
            if not math.isfinite(float(runs)):
                raise ValueError(f"runs must be a whole number of timed runs, not {runs}")
            timing = request_rule(int(runs), float(budget_s) if budget_s else None)
            names = [v.spec.name for v in engine.loaded if v.spec.name != custom.CUSTOM_NAME]
            results = list(engine.ask_iter(question, context, names, null_threshold=threshold, rule=timing))
            return [r.to_json() for r in [*results, *engine.not_ready()]]  # the ones still building: pending
        except (InputError, ValueError, TypeError, OverflowError) as exc:
            raise refused(str(exc), "/answer") from None

    if line is None:
        return answer

    @functools.wraps(answer)  # gradio reads the API's parameters from the wrapped function
    async def answer_in_line(*args, **kwargs) -> list[dict]:
        request = inspect.signature(answer).bind_partial(*args, **kwargs).arguments.get("request")
        try:
            return await line.run(functools.partial(answer, *args, **kwargs), visitor=visitor(request))
        except Refused as exc:
            raise refused(str(exc), "/answer") from None

    return answer_in_line


THRESHOLD_RULES = [  # (what the control says, mode)
    ("Like the transformers pipeline (default)", "pipeline"),
    ("Calibrated for SQuAD v2", "calibrated"),
    ("Set a margin", "margin"),
]
THRESHOLD_HELP = (
    "A model answers unless it rates “no answer” above its best span: by any margin in the transformers pipeline, "
    "by the margin tuned on SQuAD v2 (where half the questions have no answer, so it refuses far more often), "
    "or by the margin you set (lower: more answers)."
)
SCROLL_TO_RESULTS = """() => {
  const target = document.getElementById('qa-summary');
  if (target && target.getBoundingClientRect().top > window.innerHeight * 0.4) {
    target.scrollIntoView({behavior: 'smooth', block: 'start'});
  }
}"""


def null_threshold(rule: str, margin: float) -> str | float | None:
    """The engine's ``null_threshold`` for the Ask tab's control: None (the pipeline's 0, the engine's
    default), "calibrated" (each model's own), or the margin set on the slider."""
    if rule == "calibrated":
        return "calibrated"
    if rule == "margin":
        return float(margin)
    return None


def ask_tab(
    engine: Engine,
    headline: list[str],
    steps: list[tuple[str, str]],
    group: dict,
    sample_file: Path,
    chains: VisitorChains | None = None,
    line: ModelLine | None = None,
    page: gr.Blocks | None = None,
    timer: gr.Timer | None = None,
):
    """The Ask tab; ``chains`` (the visitors' chains, :mod:`ui.visitor`) adds "Try your own model", None leaves it
    out. The inputs sit
    above the summary and the cards; after Ask the page scrolls to them if they are below the fold. ``line``:
    the models' line shared with ``/answer``. ``page`` (the Blocks) adds a link to the question on the screen
    (:mod:`ui.share`), read when the page loads. ``timer`` redraws the cards when a variant's build state changes
    (each joins when it is ready)."""
    last = gr.State({})
    question = gr.Textbox(
        label="Question",
        placeholder="Ask something the passage answers (or not)",
        max_lines=4,
        render=False,
        elem_id=QUESTION_ID,
    )  # rendered in the right column, next to the Ask button; the examples on the left fill it too
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=320):
            context = gr.Textbox(
                label="Context",
                lines=6,
                max_lines=12,
                placeholder="Paste a passage…",
                info=f"Up to {engine.max_context_chars:,} characters; long passages are read in overlapping windows.",
            )
            rows, labels = load_examples(sample_file)
            if rows:
                gr.Examples(
                    rows, [context, question], example_labels=labels, cache_examples=False, label="Try an example"
                )
        with gr.Column(scale=2, min_width=320):
            question.render()
            submit = gr.Button("Ask every variant", variant="primary", elem_id="ask-submit")
            rule = gr.Radio(
                THRESHOLD_RULES,
                value="pipeline",
                label="When to say “no answer”",
                info=THRESHOLD_HELP,
                elem_id="threshold-rule",
            )
            margin = gr.Slider(
                -10,
                10,
                value=0,
                step=0.5,
                visible=False,
                elem_id="threshold-margin",
                label="Margin: ln(p(no answer) / p(best span)) above which the answer is “no answer”",
            )
            runs = gr.Slider(
                1,
                MAX_RUNS,
                value=DEFAULT_RUNS,
                step=1,
                label="Timed runs per variant (at most)",
                info=f"Every variant answers once, the fastest first, then they take turns; the slowest give up "
                f"runs first, to finish within about {DEFAULT_BUDGET_S:g} s. The cards show the median and the spread.",
            )
            leave_out = gr.CheckboxGroup(
                variant_choices(engine, headline=True),
                value=[],
                label="Leave out",
                info="Skip slow variants to answer long passages sooner (without the baseline, no speedups).",
                elem_id="leave-out",
            )
            extra = gr.CheckboxGroup(
                steps,
                value=[],
                label="Also show the intermediate steps",
                info="What each build step buys on its own (see the About tab).",
                visible=bool(steps),
            )
            if chains is not None:
                visitor = visitor_controls(chains.max_mb)
    snap = engine.snapshot()
    summary = html_block(summary_html(snap, headline, running=False), elem_id="qa-summary")
    cards = html_block(cards_html(snap, headline, ""), css=CARD_CSS, elem_id="qa-cards")
    visitor_cards = visitor_cards_block() if chains is not None else None  # the visitor's own chain, under these
    # hidden until the first question: an empty chart is a white box
    chart = gr.Plot(latency_figure(snap, headline), show_label=False, elem_id="latency-chart", visible=False)
    if page is not None:
        share_controls(engine, page, context, question, extra, leave_out, rule, margin,
                       asked=[submit.click, question.submit], space_page=config.space_page())  # fmt: skip
    live_region([submit.click, question.submit])
    inputs = [context, question, extra, rule, margin, runs, leave_out, last]
    asked = gr.on(
        [submit.click, question.submit],
        make_ask(engine, line),
        inputs,
        [cards, summary, chart, last],
        show_progress="minimal",
        api_visibility="private",
        validator=make_validator(engine, line),
        trigger_mode="always_last",  # a question asked while one runs is answered next, not dropped
        **group,
    )
    announce(asked)  # a status line, and focus on the results (or the question)
    gr.on([submit.click, question.submit], None, js=SCROLL_TO_RESULTS, api_visibility="private", queue=False)
    gr.on(
        [submit.click, question.submit],
        lambda: gr.Plot(visible=True),
        None,
        [chart],
        api_visibility="private",
        queue=False,
    )
    rule.change(lambda r: gr.Slider(visible=r == "margin"), [rule], [margin], queue=False, api_visibility="private")
    if timer is not None:  # the variants build in the background: each card joins when its variant is ready
        # a fallback (decided while the build fetches) swaps the chain: the choices name the variants it has now
        drawn = gr.State(-1)
        gr.on(
            [page.load, timer.tick] if page is not None else [timer.tick],
            when_changed(engine, lambda: choice_updates(engine), 2),
            [drawn],
            [drawn, leave_out, extra],
            queue=False,
            show_progress="hidden",
            api_visibility="private",
        )
        seen = gr.State(-1)
        # on the page's load too: a page opened after the build sees the ready cards (the timer has stopped by then)
        gr.on(
            [page.load, timer.tick] if page is not None else [timer.tick],
            when_changed(engine, make_reselect(engine), 3),
            [seen, extra, last, leave_out],
            [seen, cards, summary, chart],
            queue=False,
            show_progress="hidden",
            api_visibility="private",
        )
    gr.on(
        [extra.change, leave_out.change],
        make_reselect(engine),
        [extra, last, leave_out],
        [cards, summary, chart],
        queue=False,
        api_visibility="private",
    )
    if chains is not None:
        wire_visitor(chains, visitor, visitor_cards, asked, [context, question, runs], line)
