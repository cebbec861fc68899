"""The most one request may ask of the models: timed runs and the time budget, the same caps for every caller.

The app has one model slot (the Gradio queue's concurrency group, ``POST /v1/answer``'s lock), so what one
request asks for, everyone behind it waits for. Whatever a caller sends, the gradio ``/answer`` API, ``POST
/v1/answer``, its Ray Serve routes and the Ask tab's own settings go through :func:`request_rule`, which caps
them here: at most :data:`MAX_RUNS` timed runs per variant and :data:`MAX_BUDGET_S` seconds of budget, and a
budget of 0 or none is the cap, never "unbounded". With the timing rule's own bound (the budget plus one run per
variant, :class:`~variants.answering.timing.TimingRule`), that bounds the model time of any one request.
"""

from __future__ import annotations

import math

from variants.answering.timing import SERVED, TimingRule

MAX_RUNS = 20  # timed runs per variant one request may ask for (the Ask tab's slider goes this far)
MAX_BUDGET_S = 30.0  # seconds of model time one request's timed runs may take (the default is 12 s)


def request_rule(runs: int, budget_s: float | None, warmup: bool = True) -> TimingRule:
    """The timing rule a request asks for, within the caps: runs above :data:`MAX_RUNS` and a budget above
    :data:`MAX_BUDGET_S`, 0 or none are capped (the rule's ``note`` says so where it changed what was asked);
    ``ValueError`` for what no rule can mean (runs below 1, a negative or not-a-number budget).

    One run without a warm-up is the request as served (:data:`~variants.answering.timing.SERVED`): no
    budget to cap, it times every variant's one answer.
    """
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    if budget_s is not None and (math.isnan(budget_s) or budget_s < 0):
        raise ValueError(f"budget_s must be 0 or more seconds, not {budget_s}")
    if runs == 1 and not warmup:
        return SERVED
    notes = []
    if runs > MAX_RUNS:
        notes.append(f"runs capped at {MAX_RUNS} ({runs} asked)")
    if budget_s and budget_s > MAX_BUDGET_S:
        notes.append(f"budget capped at {MAX_BUDGET_S:g} s ({budget_s:g} asked)")
    elif not budget_s:
        notes.append(f"budget: the {MAX_BUDGET_S:g} s cap (no limit asked)")
    budget = min(budget_s, MAX_BUDGET_S) if budget_s else MAX_BUDGET_S  # 0 or none: the most allowed
    return TimingRule(runs=min(runs, MAX_RUNS), budget_s=budget, warmup=warmup, note="; ".join(notes))
