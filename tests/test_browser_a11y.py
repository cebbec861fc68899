"""Accessibility in headless Chromium (WCAG 2.1 A and AA, axe-core through axe-playwright-python): the four tabs at
1400x1000 and 390x844, light and dark, after a question is answered and a file of questions is run (the Benchmark
tab with its tables' accordions open), with no violation allowed, Gradio's markup included; the keyboard
path from the first Tab to the answers, the status line, focus after Ask and after a refusal, and visible focus."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_browser import (  # noqa: F401 - pytest fixtures, shared with the Ask tab's tests
    ALL_SETTLED,
    CHROMIUM,
    CONTEXT,
    QUESTION,
    ask,
    browser,
    page,
    shots,
    url,
    wait_until_drawn,
)
from test_browser_questions import FINISHED, RUN, upload

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"),
]
TABS = ["Ask", "Benchmark", "Your questions", "About"]
OPENED = [("#bench-every", "Every column"), ("#bench-profile", "Where the time goes"), ("#bench-long", "Long passages")]
WCAG_AA = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]}}
TRANSITIONS_OVER = """async () => {  // a tab's color fades in: two frames for it to start, then until it ends
  await new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)));
  return !document.getAnimations().some(a => a instanceof CSSTransition);
}"""
LIVE = "() => document.getElementById('qa-live').textContent"
FOCUSED = "() => { const e = document.activeElement; return (e.closest('[id]') || {}).id + ' ' + e.tagName; }"
FOCUS_TEXT = "() => { const e = document.activeElement; return e.placeholder || e.innerText.trim(); }"
IN_VIEW = (
    "() => { const r = document.activeElement.getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; }"
)


def violations(view) -> list[tuple[str, str, str]]:
    """(rule, target, what fails) of every WCAG A/AA violation axe finds on the page as it is."""
    from axe_playwright_python.sync_playwright import Axe  # noqa: PLC0415 - the dev extra's, with axe-core inside

    found = Axe().run(view, options={**WCAG_AA, "resultTypes": ["violations"]}).response["violations"]
    return [(v["id"], n["target"][0], n["failureSummary"][:200]) for v in found for n in v["nodes"]]


def tabs_measured(view, size: tuple[int, int]) -> None:
    """Gradio measures the tab row once its container is sized (a ResizeObserver) and folds the tabs that do not
    fit into a "more" menu; measured before the web fonts were in, a phone's row was once folded for good (1 run in
    about 4). Once the fonts are in, a 1-pixel resize measures it again, and every tab must then be in the row."""
    view.evaluate("document.fonts.ready.then(() => true)")
    view.set_viewport_size({"width": size[0] - 1, "height": size[1]})
    view.set_viewport_size({"width": size[0], "height": size[1]})
    for tab in TABS:
        view.get_by_role("tab", name=tab).wait_for(state="visible")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("size", [(1400, 1000), (390, 844)], ids=["desktop", "phone"])
def test_no_violation_on_any_tab(browser, url: str, squad_file: Path, shots: Path, size, scheme) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": size[0], "height": size[1]}, color_scheme=scheme)
    view = context.new_page()
    view.set_default_timeout(60_000)
    view.goto(url)
    wait_until_drawn(view)
    tabs_measured(view, size)
    ask(view, CONTEXT, QUESTION)
    view.wait_for_function(ALL_SETTLED)
    view.get_by_role("tab", name="Your questions").click()
    upload(view, squad_file)
    view.get_by_role("button", name=RUN).click()
    view.wait_for_function(FINISHED)
    view.locator("#questions-scores .qa-scroll").wait_for()
    report = []
    for tab in TABS:
        view.get_by_role("tab", name=tab).click()
        view.get_by_role("tab", name=tab, selected=True).wait_for()
        view.locator(".tabitem:visible").first.wait_for()
        if tab == "Benchmark":  # its tables in the closed accordions too: axe reads only what is shown
            for part, name in OPENED:
                view.locator(part).get_by_text(name, exact=True).click()
                view.locator(f"{part} table.qa-table").wait_for()
        view.wait_for_function(TRANSITIONS_OVER)
        report += [(tab, *v) for v in violations(view)]  # none allowed: the app's markup and Gradio's alike
        view.screenshot(
            path=str(shots / f"a11y-{tab.replace(' ', '-').lower()}-{size[0]}-{scheme}.png"), full_page=True
        )
    context.close()
    assert not report, "\n".join(map(str, report))


def test_keyboard_only_from_the_first_tab_to_the_answers(page) -> None:  # noqa: F811
    stops = {}
    for stop in range(1, 40):  # Tab through the page, filling the boxes as a keyboard user would
        page.keyboard.press("Tab")
        where, text = page.evaluate(FOCUSED), page.evaluate(FOCUS_TEXT)
        if text.startswith("Paste a passage"):
            stops["context"] = stop
            page.keyboard.type(CONTEXT)
        elif where.startswith("qa-question TEXTAREA"):
            stops["question"] = stop
            page.keyboard.type(QUESTION)
        elif text == "Ask every variant":
            stops["ask"] = stop
            page.keyboard.press("Enter")
            break
    assert list(stops) == ["context", "question", "ask"] and stops["context"] <= 6, stops  # no hidden stops first
    page.wait_for_function(f"() => ({LIVE})().startsWith('Answers are in')")
    assert "of 3 variants answered" in page.evaluate(LIVE)
    assert page.evaluate(FOCUSED) == "qa-summary DIV"  # focus on the results, not left on the Ask button
    page.wait_for_function(IN_VIEW)  # and on screen once the page has scrolled to it
    page.keyboard.press("Tab")
    assert page.evaluate(FOCUSED) == "qa-cards DIV"  # the answers are the next stop

    page.locator("#qa-question textarea").fill("")  # refused: focus goes back to the box, and the line says why
    page.get_by_role("button", name="Ask every variant").focus()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => ({LIVE})().startsWith('Not asked')")
    assert page.evaluate(LIVE) == "Not asked: Please type a question."
    assert page.evaluate(FOCUSED) == "qa-question TEXTAREA"


def contrast(a: str, b: str) -> float:
    """WCAG contrast of two CSS rgb()/rgba() colors (alpha ignored)."""

    def luminance(color: str) -> float:
        parts = [float(x) / 255 for x in color[color.index("(") + 1 : color.index(")")].replace(",", " ").split()[:3]]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in parts]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


RING = """(selector) => { const e = document.querySelector(selector); e.focus();
  const s = getComputedStyle(e); let bg = e, color = 'rgba(0, 0, 0, 0)';
  while (bg && (color = getComputedStyle(bg).backgroundColor) === 'rgba(0, 0, 0, 0)') bg = bg.parentElement;
  return [s.outlineStyle, parseFloat(s.outlineWidth), s.outlineColor, color]; }"""


CONTROLS = ["#qa-question textarea", "textarea[placeholder^='Paste a passage']", "input[type=range]"]


@pytest.mark.parametrize("control", CONTROLS)
def test_focus_is_visible_on_the_controls_the_app_styles(page, control: str) -> None:  # noqa: F811
    page.keyboard.press("Tab")  # keyboard mode, so that :focus-visible applies to the slider too
    style, width, ring, background = page.evaluate(RING, control)
    assert style == "solid" and width >= 2
    assert contrast(ring, background) >= 3, (ring, background)
