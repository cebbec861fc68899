"""What a screen reader hears and where keyboard focus goes around Ask: a ``role=status`` line that says when the
answers arrive and how many, focus on the results when they are in, and back on the question box when Ask is
refused (before, focus stayed on the Ask button, which the page had scrolled out of view).

Small browser-side scripts on the Ask event's ``.success`` and ``.failure``: the live line is one block whose value
never changes, so Gradio keeps its node and a screen reader hears each new text it is given."""

import gradio as gr

from .styles import html_block

LIVE_ID = "qa-live"
QUESTION_ID = "qa-question"  # the question box's elem_id
LIVE_CSS = (  # on the page for screen readers, off the screen for eyes (the cards say the same)
    f"#{LIVE_ID} {{ position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); "
    "white-space: nowrap; }"
)
SAY = f"(text) => {{ const live = document.getElementById('{LIVE_ID}'); if (live) live.textContent = text; }}"
# A refused Ask: say why and put the caret where the fix goes (the box Gradio marked, else the question box).
REFUSE = f"""(box) => {{
  const message = box && box.closest('label')?.querySelector('div.validation-error')?.textContent;
  ({SAY})('Not asked: ' + (message || 'see the message on the page.'));
  box = box || document.querySelector('#{QUESTION_ID} textarea');
  if (box) box.focus();
}}"""
# On Ask: say so, and watch for the validator's refusal (it marks a box and fires no .failure): a text box that
# gains Gradio's ``validation-error`` class before the answers arrive.
ASKING = f"""() => {{
  const n = document.querySelectorAll('#qa-cards .qa-card').length;
  ({SAY})(`Asking ${{n}} variants…`);
  if (window.qaRefusalWatch) window.qaRefusalWatch.disconnect();
  const watch = new MutationObserver((changes) => {{
    const marked = (t) => t.tagName === 'TEXTAREA' && t.classList.contains('validation-error');
    const box = changes.map(c => c.target).find(marked);
    if (box) {{ watch.disconnect(); ({REFUSE})(box); }}
  }});
  watch.observe(document.body, {{subtree: true, attributes: true, attributeFilter: ['class']}});
  window.qaRefusalWatch = watch;
}}"""
ANSWERED = f"""() => {{
  if (window.qaRefusalWatch) window.qaRefusalWatch.disconnect();
  const cards = [...document.querySelectorAll('#qa-cards .qa-card')];
  const done = cards.filter(c => c.dataset.state === 'done');
  const none = done.filter(c => c.querySelector('.qa-answer.qa-none')).length;
  const failed = cards.filter(c => c.dataset.state === 'error').length;
  let text = `Answers are in: ${{done.length - none}} of ${{cards.length}} variants answered`;
  if (none) text += `, ${{none}} said no answer`;
  if (failed) text += `, ${{failed}} failed`;
  ({SAY})(text + '.');
  const answers = document.getElementById('qa-cards');  // the next Tab stop: one card per variant
  if (answers) {{
    answers.setAttribute('tabindex', '0');
    answers.setAttribute('role', 'region');
    answers.setAttribute('aria-label', 'Answers, one card per variant');
  }}
  const results = document.getElementById('qa-summary');
  if (results) {{
    results.setAttribute('tabindex', '-1');
    results.setAttribute('aria-label', 'Results');
    results.focus({{preventScroll: true}});  // the page's own smooth scroll brings it up (an instant one cut it short)
    if (results.getBoundingClientRect().top < 0) results.scrollIntoView({{behavior: 'smooth', block: 'start'}});
  }}
}}"""
REFUSED = f"""() => {{
  if (window.qaRefusalWatch) window.qaRefusalWatch.disconnect();
  ({REFUSE})(null);
}}"""


def live_region(triggers: list) -> gr.HTML:
    """The status line, empty until the first Ask; it says "Asking" on the Ask ``triggers`` (wired before the Ask
    event itself: a listener added after it on the same trigger runs only once the answers are in)."""
    gr.on(triggers, None, js=ASKING, api_visibility="private", queue=False)
    status = f'<div id="{LIVE_ID}" role="status" aria-live="polite"></div>'
    return html_block(status, css=LIVE_CSS)


def announce(asked) -> None:
    """Wire the scripts to ``asked``, the Ask event (what ``gr.on`` returned)."""
    asked.success(None, js=ANSWERED, api_visibility="private", queue=False)
    asked.failure(None, js=REFUSED, api_visibility="private", queue=False)
