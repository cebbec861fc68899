"""A visitor's own model in headless Chromium: a tiny DistilBERT in the local Hub cache (offline; the preset is a
BERT) is built into its no-training chain with the build's progress, answers under the preset's cards, is scored by
a quick benchmark beside them, and its files are gone after the idle time; another visitor is told a build is
going; Stop ends a build. Screenshots go to ``$SCREENSHOT_DIR`` (or the test's tmp folder)."""

from __future__ import annotations

import threading
from pathlib import Path

import huggingface_hub
import pytest
from app_helpers import VISITOR_ID, running, write_cached_distilbert
from test_browser import CHROMIUM, browser, shots, wait_until_drawn  # noqa: F401 - pytest fixtures, shared with the Ask tab's tests

import app
from variants.serving.engine import load_engine
from variants.serving.visitor import VisitorChains

CONTEXT = "paris is the capital of france and its largest city, with a population of two million people."
QUESTION = "what is the capital of france?"
CHAIN = ["baseline", "baseline-onnx", "baseline-onnx-opt", "baseline-onnx-opt-int8"]
VISITOR_SETTLED = """() => {
  const cards = [...document.querySelectorAll('#visitor-cards .qa-card')];
  return cards.length === 4 && cards.every(c => ['done', 'error'].includes(c.dataset.state));
}"""
IDLE_S = 20

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"),
]


@pytest.fixture
def offline_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "hub"
    write_cached_distilbert(cache)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


def open_page(chromium, address: str):
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(address)
    wait_until_drawn(page)
    page.get_by_text("Try your own model").click()
    return context, page


def build(page, model_id: str) -> None:
    page.get_by_label("Hub model id").fill(model_id)
    page.get_by_role("button", name="Build its chain").click()


def test_a_visitors_model(
    browser,  # noqa: F811
    offline_cache,
    tiny_qa_dir: Path,
    artifacts_dir: Path,
    tmp_path: Path,
    shots,  # noqa: F811
):
    engine = load_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=artifacts_dir, names=["baseline"])
    chains = VisitorChains(engine, root=tmp_path / "chains", idle_s=IDLE_S, sweep_every_s=0.5)
    demo = app.build_demo(engine, results_dir=tmp_path / "results", allow_custom_models=True, visitor_chains=chains)
    with running(demo) as address:
        context, page = open_page(browser, address)
        build(page, "../../etc/passwd")
        page.locator("#custom-status .qa-notice").get_by_text("never file paths").wait_for()
        build(page, VISITOR_ID)
        status = page.locator("#custom-status")
        status.get_by_text(f"Your model {VISITOR_ID}").first.wait_for()  # its build, as the start-up build's
        page.locator("#custom-status .qa-ok").get_by_text("4 of 4 variants ready").wait_for()
        chain = chains.building() or next(iter(chains._chains.values()))
        assert chain.checked.model_type == "distilbert" and chain.checked.cached is not None
        page.get_by_label("Context").fill(CONTEXT)
        page.get_by_placeholder("Ask something the passage answers").fill(QUESTION)
        page.get_by_role("button", name="Ask every variant").click()
        page.wait_for_function(VISITOR_SETTLED)
        cards = page.locator("#visitor-cards .qa-card")
        assert [cards.nth(i).get_attribute("data-variant") for i in range(4)] == CHAIN
        assert all(cards.nth(i).get_attribute("data-state") == "done" for i in range(4))
        assert page.locator('#qa-cards .qa-card[data-variant="baseline"]').get_attribute("data-state") == "done"
        assert VISITOR_ID in page.locator("#visitor-head").inner_text()
        page.screenshot(path=str(shots / "visitor-answering.png"), full_page=True)
        # the quick benchmark measures the visitor's chain beside the preset's
        page.get_by_role("tab", name="Benchmark").click()
        page.get_by_role("button", name="Run quick benchmark").click()
        page.locator("#bench-table").get_by_text("Your model + ONNX + INT8").first.wait_for(timeout=180_000)
        folder = chain.folder
        assert folder.exists()  # each chunk of the run counted as a use
        page.screenshot(path=str(shots / "visitor-benchmark.png"), full_page=True)
        # another visitor sees nothing of it
        other_context, other = open_page(browser, address)
        assert other.locator("#visitor-cards .qa-card").count() == 0
        other_context.close()
        # dropped after the idle time, its files with it
        for _ in range(120 * 4):  # generous: the idle time is 20 s
            if not folder.exists():
                break
            page.wait_for_timeout(250)
        assert not folder.exists() and not chains._chains
        context.close()


def test_busy_and_stop(
    browser,  # noqa: F811
    offline_cache,
    tiny_qa_dir: Path,
    artifacts_dir: Path,
    tmp_path: Path,
):
    """A second visitor is told another build is going; Stop ends the first (held at its source meanwhile)."""
    engine = load_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=artifacts_dir, names=["baseline"])
    chains = VisitorChains(engine, root=tmp_path / "chains")
    held = threading.Event()
    original = chains._source

    def source(chain):
        while not held.wait(0.05):
            chains._check(chain)  # Stop ends it here
        return original(chain)

    chains._source = source
    demo = app.build_demo(engine, results_dir=tmp_path / "results", allow_custom_models=True, visitor_chains=chains)
    with running(demo) as address:
        context, page = open_page(browser, address)
        build(page, VISITOR_ID)
        page.locator("#custom-status").get_by_text("Building the variants: 0 of 4 ready").wait_for()
        other_context, other = open_page(browser, address)
        build(other, VISITOR_ID)
        other.locator("#custom-status .qa-notice").get_by_text("Another visitor's model is building").wait_for()
        other_context.close()
        page.get_by_role("button", name="Stop", exact=True).first.click()
        page.locator("#custom-status .qa-notice").get_by_text("Stopped. Nothing of it is kept.").wait_for()
        assert chains.building() is None and not any((tmp_path / "chains").iterdir())
        context.close()
    held.set()
