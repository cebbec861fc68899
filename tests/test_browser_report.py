"""The report and the shared link in headless Chromium: a report made on the Benchmark tab opens offline, draws
its chart, prints to a 2-4 page PDF on A4 and on Letter with no table wider than the page; a link to the Ask
tab's question opens the page with that question asked again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_browser import CHROMIUM, browser, shots, url, wait_until_drawn  # noqa: F401 - the fixtures, shared

from ui import share
from ui.report import benchmark_report
from variants.records.results import RESULTS_DIR, load_records

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"),
]
MM = 96 / 25.4  # CSS px per millimetre
PAGE_BOX_PX = {"A4": (210 - 24) * MM, "Letter": (215.9 - 24) * MM}  # the page's width less the report's 12 mm margins
CARDS_DONE = """() => {
  const cards = [...document.querySelectorAll('#qa-cards .qa-card')];
  return cards.length > 0 && cards.every(c => c.dataset.state === 'done');
}"""


def pages(pdf: bytes) -> int:
    """The page count of a PDF as Chromium writes it (one /Type /Page object a page)."""
    return len(re.findall(rb"/Type\s*/Page(?!s)", pdf))


def check_offline(browser, report: Path, shots: Path, name: str) -> None:  # noqa: F811
    """Open ``report`` with every network request refused, check the chart and the print, screenshot it."""
    for width, height, size in ((1400, 1000, "desktop"), (390, 844, "phone")):
        context = browser.new_context(viewport={"width": width, "height": height})
        fetched: list[str] = []

        def refuse(route, fetched: list[str] = fetched) -> None:  # every network request aborted, and noted
            if route.request.url.startswith("file:"):
                route.continue_()
            else:
                fetched.append(route.request.url)
                route.abort()

        context.route("**/*", refuse)
        page = context.new_page()
        page.goto(report.resolve().as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg .scatterlayer .trace")  # the chart drew, offline
        assert page.locator(".js-plotly-plot .scatterlayer .point").count() >= 3
        assert fetched == []  # nothing asked of any network
        page.screenshot(path=str(shots / f"{name}-{size}.png"), full_page=True)
        widths = page.evaluate("[...document.querySelectorAll('table, .js-plotly-plot')].map(t => t.scrollWidth)")
        assert max(widths) <= width, widths  # a phone scrolls none of it sideways
        if size == "desktop":
            page.emulate_media(media="print")
            for paper, box in PAGE_BOX_PX.items():
                page.set_viewport_size({"width": int(box), "height": 1000})
                widths = page.evaluate(
                    "[...document.querySelectorAll('table, .js-plotly-plot')].map(t => t.scrollWidth)"
                )
                assert max(widths) <= box, (paper, widths)  # no table (nor the chart) wider than the page: none cut
                pdf = page.pdf(format=paper, print_background=True)
                (shots / f"{name}-{paper}.pdf").write_bytes(pdf)
                assert 2 <= pages(pdf) <= 4, (paper, pages(pdf))
        context.close()


def test_a_shipped_records_report_opens_offline_and_prints(browser, shots: Path, tmp_path: Path) -> None:  # noqa: F811
    record = next(r for r in load_records(RESULTS_DIR) if r.preset == "embedded")  # the README's, with its F1
    report = tmp_path / "report.html"
    report.write_text(benchmark_report(record), encoding="utf-8")
    check_offline(browser, report, shots, "report-shipped")


def test_the_benchmark_tabs_report_downloads_and_opens_offline(browser, url: str, shots: Path, tmp_path: Path) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    page.get_by_role("tab", name="Benchmark").click()
    page.locator("#bench-make-report").click()
    page.wait_for_function("!document.querySelector('#bench-report').disabled")
    with page.expect_download() as download:
        page.locator("#bench-report").click()
    report = tmp_path / "downloaded.html"
    download.value.save_as(report)
    context.close()
    html = report.read_text(encoding="utf-8")
    assert "Example questions" in html and "Given by" in html  # the app's examples, answered when it was made
    check_offline(browser, report, shots, "report-downloaded")


def test_a_link_reopens_the_question_asked_again(browser, url: str, shots: Path) -> None:  # noqa: F811
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    wait_until_drawn(page)
    page.get_by_label("Context").fill("Ada Lovelace wrote the first program in 1843, for Babbage's engine.")
    page.get_by_placeholder("Ask something the passage answers").fill("Who wrote the first program?")
    page.get_by_label("Pruned + ONNX", exact=True).check()
    page.locator("#share-make").click()
    page.wait_for_function("(document.querySelector('#share-link textarea') || {}).value?.includes('#ask=')")
    link = page.locator("#share-link textarea").input_value()
    assert link.startswith(url.rstrip("/")) and "Ada" not in link  # deflated: not readable at a glance either
    context.close()
    context = browser.new_context(viewport={"width": 390, "height": 844})
    opened = context.new_page()
    opened.set_default_timeout(60_000)
    opened.goto(link)
    opened.wait_for_function(
        "[...document.querySelectorAll('textarea')].some(t => t.value === 'Who wrote the first program?')"
    )
    opened.wait_for_function(CARDS_DONE)  # asked again, as the Ask button does, with the step ticked there too
    assert opened.locator("#qa-cards .qa-card").count() == 4
    assert opened.get_by_label("Pruned + ONNX", exact=True).is_checked()
    opened.screenshot(path=str(shots / "share-opened.png"), full_page=True)
    context.close()


def test_a_link_without_its_passage_asks_for_it(browser, url: str) -> None:  # noqa: F811
    passage = " ".join(f"w{i * 7919 % 100003}" for i in range(3000))  # ~20,000 characters that barely compress
    fragment = share.encode(share.SharedAsk("Who wrote it?", passage))
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url.rstrip("/") + "/" + fragment)
    page.wait_for_function("[...document.querySelectorAll('textarea')].some(t => t.value === 'Who wrote it?')")
    box = page.get_by_label("Context")
    page.wait_for_function("[...document.querySelectorAll('textarea')].some(t => t.placeholder.includes('too long'))")
    assert box.input_value() == "" and f"{len(passage):,} characters" in box.get_attribute("placeholder")
    assert page.locator('#qa-cards .qa-card[data-state="idle"]').count() == 3  # nothing asked without a passage
    context.close()
