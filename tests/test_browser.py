"""The page in headless Chromium (Debian's build, driven by Playwright): ask, watch every card fill,
check the answers and latencies, the error toast, the benchmark tab's plots; screenshots go to
``$SCREENSHOT_DIR`` (or the test's tmp folder)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from app_helpers import running, tiny_engine, write_fake_record
from playwright.sync_api import TimeoutError as PlaywrightTimeout

import app
from variants.serving.engine import load_engine

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
INJECTED = '<img id="injected" src="x">'
CONTEXT = f"{INJECTED} paris is the capital of france and its largest city, with a population of two million people."
QUESTION = "what is the capital of france?"
ALL_SETTLED = """() => {
  const cards = [...document.querySelectorAll('#qa-cards .qa-card')];
  return cards.length > 0 && cards.every(c => ['done', 'error'].includes(c.dataset.state));
}"""

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"),
]


@pytest.fixture(scope="module")
def url(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    engine = tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))
    results = tmp_path_factory.mktemp("results")
    write_fake_record(results, engine)
    with running(app.build_demo(engine, results_dir=results)) as address:
        yield address


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def wait_until_drawn(page) -> None:
    """The Ask tab drawn: its cards and both text boxes. Gradio loads each component's code on its own, so on a busy
    machine the cards can be in the page before the boxes are."""
    page.wait_for_selector("#qa-cards .qa-card")
    page.wait_for_selector("textarea[placeholder^='Ask something']")
    page.wait_for_selector("textarea[placeholder^='Paste a passage']")


@pytest.fixture
def page(browser, url: str):
    """The page at 1400x1000; none of its own requests may be refused as a route or event it does not use (the
    edge's allowlist, variants.serving.allowed: a 403, 404 or 405), whatever the test clicks."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    refused: list[tuple[int, str]] = []
    context.on("response", lambda r: refused.append((r.status, r.url)) if r.status in (403, 404, 405) else None)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.goto(url)
    wait_until_drawn(page)
    yield page
    context.close()
    assert not refused, refused


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def ask(page, context: str, question: str) -> None:
    page.get_by_label("Context").fill(context)
    page.get_by_placeholder("Ask something the passage answers").fill(question)
    page.get_by_role("button", name="Ask every variant").click()


def test_ask_fills_every_card(page, shots: Path) -> None:
    cards = page.locator("#qa-cards .qa-card")
    assert cards.count() == 3  # the headline variants before anything is asked
    page.get_by_label("Pruned + ONNX", exact=True).check()  # one intermediate step too
    page.wait_for_function("document.querySelectorAll('#qa-cards .qa-card').length === 4")
    ask(page, CONTEXT, QUESTION)
    page.wait_for_function(ALL_SETTLED)
    assert cards.count() == 4
    for i in range(4):
        card = cards.nth(i)
        assert card.get_attribute("data-state") == "done", card.inner_text()
        answer = card.locator(".qa-answer").inner_text().strip()
        assert answer, card.inner_text()
        assert re.search(r"\d[\d.,]* ms", card.locator(".qa-metric.qa-key").inner_text())
        assert card.locator(".qa-runtime").inner_text().startswith("CPU · ")  # plain words ...
        assert "cpu · " in card.locator(".qa-runtime").get_attribute("title")  # ... the jargon in the tooltip
    assert "1.00×" in cards.nth(0).inner_text()
    # faster or slower than the baseline: which one this run measured is the bench's business, not this test's
    assert re.search(r"faster than baseline|the baseline's speed", cards.nth(3).inner_text())
    assert "8-bit integers" in cards.nth(3).inner_text()
    assert "CPUExecutionProvider · INT8" in cards.nth(3).locator(".qa-runtime").get_attribute("title")
    assert page.locator("#injected").count() == 0  # user text is escaped, never injected
    summary = page.locator(".qa-summary").inner_text()  # a busy machine crowns no winner and says so
    assert re.search(r"faster than the baseline|baseline was fastest|The machine was busy", summary)
    # the chart is hidden until the first question, so plotly draws it a moment after the cards
    page.wait_for_function("document.querySelectorAll('#latency-chart .js-plotly-plot .bars .point').length === 4")
    page.screenshot(path=str(shots / "ask.png"), full_page=True)


def test_example_and_bad_input(page, shots: Path) -> None:
    page.get_by_text("Normans: answerable").click()
    page.wait_for_function("[...document.querySelectorAll('textarea')].some(t => t.value.includes('Normandy located'))")
    page.get_by_placeholder("Ask something the passage answers").fill("")
    page.get_by_role("button", name="Ask every variant").click()
    page.get_by_text("Please type a question.").first.wait_for()  # under the question box
    page.screenshot(path=str(shots / "error.png"))
    assert page.locator('#qa-cards .qa-card[data-state="idle"]').count() == 3  # nothing else changed
    ask(page, CONTEXT, QUESTION)  # the page still answers afterwards
    page.wait_for_function(ALL_SETTLED)
    assert page.locator('#qa-cards .qa-card[data-state="done"]').count() == 3


def test_benchmark_tab_renders_its_plots(page, shots: Path) -> None:
    page.get_by_role("tab", name="Benchmark").click()
    page.wait_for_selector("#bench-scatter .js-plotly-plot .scatterlayer .point")
    assert page.locator("#bench-scatter .scatterlayer .trace").count() == 7  # 6 variants and the best trade-offs' line
    assert page.locator("#bench-seqlen .scatterlayer .trace").count() == 6
    header = page.locator("#bench-header").inner_text()
    assert "Stored benchmark record" in header and "questions whose passage holds the answer" in header  # the default
    assert "F1, answerable questions" in page.locator("#bench-scatter").inner_text()
    page.get_by_text("SQuAD v2, best threshold").click()  # another accuracy view, same record
    page.locator("#bench-header").get_by_text("best F1 (threshold chosen on these questions)").wait_for()
    assert "“no answer” to every one already scores 50.0" in page.locator("#bench-header").inner_text()
    assert page.locator("#bench-scatter .scatterlayer .trace").count() == 8  # and the always-"no answer" line
    assert "always “no answer”: 50.0" in page.locator("#bench-scatter .annotation-text").all_text_contents()
    assert "threshold" in page.locator("#bench-table thead").inner_text()  # it differs by variant in this view
    # no price until one is picked or typed: the view changed above, and nothing says the machine is free
    assert page.locator("#bench-price-usd input").input_value() == ""
    assert "free" not in page.locator("#bench-cost-note").inner_text()
    assert "$ per million answers" not in page.locator("#bench-table thead").inner_text()
    page.locator("#bench-price-choice input").click()  # a published price of this record's hardware (a CPU)
    page.get_by_role("option", name="CPU Upgrade (8 vCPU, 32 GB): $0.03/hour").click()
    page.locator("#bench-table thead").get_by_text("$ per million answers").wait_for()  # the table prices it
    assert "cost $" in page.locator("#bench-header").inner_text()  # and the headline says the cost
    assert page.locator("#bench-price-usd input").input_value() == "0.03"
    page.screenshot(path=str(shots / "benchmark.png"), full_page=True)
    page.get_by_role("tab", name="About").click()
    page.get_by_role("columnheader", name="Build steps").wait_for()  # the page's intro speaks of build steps too
    page.screenshot(path=str(shots / "about.png"), full_page=True)


# --- the shipped models, as a newcomer meets them ---------------------------------------------------

SHIPPED = Path(__file__).resolve().parent.parent / "assets" / "models"
VIEWPORTS = {"desktop": {"width": 1400, "height": 1000}, "phone": {"width": 390, "height": 844}}


@pytest.fixture(scope="module")
def shipped_url(tmp_path_factory: pytest.TempPathFactory):
    if not any(SHIPPED.glob("*/config.json")):
        pytest.skip("the embedded demo models are not in assets/models")
    engine = load_engine("embedded", "cpu", fallback=False)
    results = tmp_path_factory.mktemp("shipped-results")
    write_fake_record(results, engine)
    with running(app.build_demo(engine, results_dir=results)) as address:
        yield address


@pytest.mark.slow
@pytest.mark.parametrize("device", list(VIEWPORTS))
def test_the_issue_example_on_desktop_and_phone(browser, shipped_url: str, shots: Path, device: str) -> None:
    """The Ulan Bator example: "1639" on every card, the cards in view after Ask, titles on one line; the
    Benchmark tab's plots render, full width on a phone."""
    viewport = VIEWPORTS[device]
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(shipped_url)
    wait_until_drawn(page)
    assert page.evaluate(PLACEHOLDER_FITS), "the empty question box shows part of its placeholder"
    page.get_by_text("Ulan Bator: a short passage").click()
    page.wait_for_function("[...document.querySelectorAll('textarea')].some(t => t.value.includes('Tuul River'))")
    page.get_by_role("button", name="Ask every variant").click()
    page.wait_for_function(ALL_SETTLED)
    cards = page.locator("#qa-cards .qa-card")
    answers = [cards.nth(i).locator(".qa-answer").inner_text().strip() for i in range(cards.count())]
    assert answers == ["1639"] * cards.count(), answers
    assert "agree" in page.locator("#qa-summary").inner_text() or "match" in page.locator("#qa-summary").inner_text()
    settled(page, CARD_IN_VIEW)  # the smooth scroll to the results takes longer on a loaded machine
    box = cards.first.bounding_box()
    top, bottom = box["y"], box["y"] + box["height"]
    # in view: whole, or (a phone's tall card) starting in the upper part of the screen. A desktop's page can end
    # too soon below the cards to scroll them higher: the first card stays at about 600 px, all of it in view.
    assert 0 <= top and (bottom <= viewport["height"] or top < viewport["height"] * 0.6), (
        f"the first card spans {top:.0f}-{bottom:.0f} px, out of view"
    )
    cut = page.evaluate(
        "[...document.querySelectorAll('#qa-cards .qa-title')].filter(t => t.scrollWidth > t.clientWidth + 1)"
        ".map(t => t.textContent)"
    )
    assert cut == [], f"card titles cut off: {cut}"
    page.screenshot(path=str(shots / f"ask-{device}.png"))
    page.get_by_role("tab", name="Benchmark").click()
    page.wait_for_selector("#bench-scatter .js-plotly-plot .scatterlayer .point")
    assert page.locator("#bench-seqlen .scatterlayer .trace").count() == cards.count() + 3  # every variant
    full = page.locator("#bench-header").bounding_box()["width"]  # the tab's full width
    boxes = [page.locator(plot).bounding_box() for plot in ("#bench-scatter", "#bench-seqlen")]
    if device == "phone":  # stacked, each full width
        assert all(b["width"] >= 0.95 * full for b in boxes) and boxes[1]["y"] > boxes[0]["y"] + boxes[0]["height"] / 2
    else:  # side by side
        assert all(0.4 * full <= b["width"] <= 0.6 * full for b in boxes) and boxes[0]["y"] == boxes[1]["y"]
    labels = page.locator("#bench-scatter .annotation-text").all_text_contents()  # each point says its trade-off
    assert sum("×" in t and "F1" in t for t in labels) == page.locator("#bench-scatter .scatterlayer .point").count()
    assert "from" in page.locator("#bench-scatter .g-ytitle").text_content()  # where the fitted F1 axis starts
    page.locator("#bench-profile").get_by_text("Where the time goes").click()  # its table too: short headers
    settled(page, f"() => ({CUT_HEADERS})().length === 0")  # the tables lay out their columns
    assert page.evaluate(CUT_HEADERS) == [], "table headers cut or broken within a word"
    record = page.locator("#bench-record input")
    assert record.evaluate("i => getComputedStyle(i).textOverflow") == "ellipsis"
    if device == "phone":  # the variant's name and three numbers (accuracy, share answered, speed) in view
        assert page.evaluate(COLUMNS_IN_VIEW)[:4] == ["Variant", "F1", "% answered", "× baseline"]
    else:  # every column, no sideways scrolling
        assert page.evaluate(TABLE_SCROLLS) is False
    page.screenshot(path=str(shots / f"benchmark-{device}.png"), full_page=True)
    context.close()


def settled(page, condition: str, timeout_ms: int = 10_000) -> None:
    """Wait until ``condition`` (a JS function) holds, up to ``timeout_ms``: the assertion after it then judges the
    page as it stands, so a layout or a scroll that settles slowly on a loaded machine fails only if it never
    settles, not because a fixed pause was too short."""
    try:
        page.wait_for_function(condition, timeout=timeout_ms)
    except PlaywrightTimeout:
        pass


CARD_IN_VIEW = """() => {
  const box = document.querySelector('#qa-cards .qa-card').getBoundingClientRect();
  return box.top >= 0 && (box.bottom <= innerHeight || box.top < innerHeight * 0.6);
}"""
# A one-line box as tall as its placeholder needs: the height a copy of it (same width and font, sized by hand,
# out of the flow so that the box keeps its width) needs to hold the placeholder as its text.
PLACEHOLDER_FITS = """() => {
  const box = [...document.querySelectorAll('textarea')].find(t => t.placeholder.startsWith('Ask something'));
  const [width, height] = [box.offsetWidth, box.clientHeight];
  const copy = box.cloneNode();
  copy.value = box.placeholder;
  Object.assign(copy.style, {fieldSizing: 'fixed', height: '0px', width: width + 'px', position: 'absolute'});
  box.parentElement.appendChild(copy);
  const needed = copy.scrollHeight;
  copy.remove();
  return height + 1 >= needed;
}"""
CUT_HEADERS = """() => [...document.querySelectorAll('.qa-table thead th')]
  .filter(h => h.offsetParent && h.scrollWidth > h.clientWidth + 1).map(h => h.textContent)"""
COLUMNS_IN_VIEW = """() => {
  const right = document.querySelector('#bench-table .qa-scroll').getBoundingClientRect().right + 1;
  return [...document.querySelectorAll('#bench-table thead th')]
    .filter(h => h.getBoundingClientRect().right <= right).map(h => h.innerText.trim());
}"""
TABLE_SCROLLS = """() => {
  const view = document.querySelector('#bench-table .qa-scroll');
  return view.scrollWidth > view.clientWidth + 1;
}"""
