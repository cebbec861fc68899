"""The Ask tab's link on a Hugging Face Space, in headless Chromium: the link names the Space's page on the Hub
(``https://huggingface.co/spaces/OWNER/NAME#ask=...``), never the iframe's own address or query string; inside the
Space's page (stood in for: the Hub's address routed to a page that frames the app as the Hub does), the Hub's
``#`` handed to the app on first load asks that question again, and each question asked puts its ``#ask=...`` in
the Space page's address (the Hub's postMessage protocol)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from app_helpers import running, tiny_engine, write_fake_record
from test_browser import CHROMIUM, CHROMIUM_ARGS, wait_until_drawn

import app
from ui import share

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"),
]
SPACE = "someone/qa-demo"
SPACE_PAGE = f"https://huggingface.co/spaces/{SPACE}"
CARDS_DONE = """() => {
  const cards = [...document.querySelectorAll('#qa-cards .qa-card')];
  return cards.length > 0 && cards.every(c => c.dataset.state === 'done');
}"""
# The Space's page as the Hub serves it, reduced to what matters here: the app in an iframe, handed the page's
# hash on first load, and the Hub's listener that puts a message's `hash` in the page's own address.
HUB_PAGE = """<!doctype html><html lang="en"><head><title>Space</title></head><body>
<iframe id="app" title="app" style="width:1300px;height:900px" src="APP"></iframe>
<script>
window.addEventListener("message", (event) => {
  const data = event.data || {};
  if (typeof data.hash === "string") {
    history.replaceState(null, "", data.hash);
    window.followed = (window.followed || 0) + 1;
  }
});
</script></body></html>"""


@pytest.fixture(scope="module")
def hub_browser():
    """Chromium that lets a page on huggingface.co (routed here) frame the app on 127.0.0.1: its Local Network
    Access checks block a public page's requests to a loopback address, which a real Space's never are. The
    module's one browser: a second Playwright beside it in the same process refuses to start."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        args = [*CHROMIUM_ARGS, "--disable-features=LocalNetworkAccessChecks"]
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=args)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def space_url(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The page built as on a Space (``SPACE_ID`` set while it is built; gradio's own Space mode, which needs
    ``SYSTEM=spaces`` too, stays off)."""
    engine = tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))
    results = tmp_path_factory.mktemp("results")
    write_fake_record(results, engine)
    before = os.environ.get("SPACE_ID")
    os.environ["SPACE_ID"] = SPACE
    try:
        demo = app.build_demo(engine, results_dir=results)
    finally:
        if before is None:
            os.environ.pop("SPACE_ID")
        else:
            os.environ["SPACE_ID"] = before
    with running(demo) as address:
        yield address


def test_on_a_space_the_link_names_the_spaces_page(hub_browser, space_url: str) -> None:
    context = hub_browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(space_url.rstrip("/") + "/?__theme=light&logs=container")  # the query string an iframe gets
    wait_until_drawn(page)
    page.get_by_label("Context").fill("Ada Lovelace wrote the first program in 1843, for Babbage's engine.")
    page.get_by_placeholder("Ask something the passage answers").fill("Who wrote the first program?")
    page.get_by_role("button", name="Ask every variant").click()
    page.wait_for_function(CARDS_DONE)
    page.locator("#share-make").click()
    page.wait_for_function("(document.querySelector('#share-link textarea') || {}).value?.includes('#ask=')")
    link = page.locator("#share-link textarea").input_value()
    assert link.startswith(SPACE_PAGE + "#ask="), link
    assert "__theme" not in link and "logs=" not in link and "127.0.0.1" not in link
    state = share.decode(link[len(SPACE_PAGE) :], 25_000)
    assert state is not None and state.question == "Who wrote the first program?"
    context.close()


def test_inside_the_spaces_page_the_hash_asks_and_follows_the_question(hub_browser, space_url: str) -> None:
    first = share.encode(share.SharedAsk("Who wrote the first program?", "Ada Lovelace wrote the first program."))
    frame_src = space_url.rstrip("/") + "/?__theme=light" + first  # the Hub hands its hash to the app on load
    context = hub_browser.new_context(viewport={"width": 1400, "height": 1000})
    context.route(
        SPACE_PAGE + "*",
        lambda route: route.fulfill(content_type="text/html", body=HUB_PAGE.replace("APP", frame_src)),
    )
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(SPACE_PAGE + first)
    frame = page.frame_locator("#app")
    frame.locator("#qa-cards .qa-card").first.wait_for()
    app_frame = next(f for f in page.frames if f.url.startswith(space_url.rstrip("/")))
    app_frame.wait_for_function("() => [...document.querySelectorAll('textarea')].some(t => t.value === "
                                + json.dumps("Who wrote the first program?") + ")")  # fmt: skip
    app_frame.wait_for_function(CARDS_DONE)  # asked again on first load, as the Ask button does

    frame.get_by_placeholder("Ask something the passage answers").fill("When was it written?")
    frame.get_by_role("button", name="Ask every variant").click()
    page.wait_for_function(f"() => location.hash.startsWith('#ask=') && location.hash !== {json.dumps(first)}")
    assert page.url.startswith(SPACE_PAGE + "#ask=") and "__theme" not in page.url
    state = share.decode(page.url[len(SPACE_PAGE) :], 25_000)
    assert state is not None and state.question == "When was it written?"
    assert state.passage == "Ada Lovelace wrote the first program."
    context.close()
