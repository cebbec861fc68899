"""The "Your questions" tab in headless Chromium: a bad file gets its sentence, a good one runs to the table,
the chart and the disagreements, and its answers download as CSV; screenshots go to ``$SCREENSHOT_DIR``."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from test_browser import CHROMIUM, browser, shots, url  # noqa: F401 - pytest fixtures, shared with the Ask tab's tests

from variants.core.question_files import read_questions

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no Chromium at /usr/bin/chromium (apt-get install chromium)"),
]
RUN = "Run every variant on my questions"
FINISHED = "() => /^(Done|Stopped)/m.test(document.querySelector('#questions-status').innerText)"


@pytest.fixture
def questions_page(browser, url: str):  # noqa: F811
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(url)
    page.get_by_role("tab", name="Your questions").click()
    yield page
    context.close()


def upload(page, path: Path) -> None:
    """Choose ``path`` in the file box and wait for the box's finished preview: the table cell named after the file,
    there only once the server has stored it. Not the text: while uploading, the box shows the name in one span, and
    the preview splits it into stem and extension ("mine" ".csv"), so waiting for the text matched only the passing
    uploading state and timed out whenever the upload finished before the first look (CI, once in about 10 runs)."""
    page.locator("#questions-file input[type=file]").set_input_files(str(path))
    page.locator("#questions-file .file-preview").get_by_role("cell", name=path.name, exact=True).wait_for()


def test_upload_run_and_download_the_answers(questions_page, squad_file: Path, tmp_path: Path, shots: Path) -> None:  # noqa: F811
    page = questions_page
    page.locator("#questions-paste textarea").fill("passage,query\nParis.,Where?\n")  # pasted rows, bad ones
    page.get_by_role("button", name=RUN).click()
    page.locator("#questions-status [role=alert]").get_by_text("lacks 'context' and 'question'").wait_for()

    good = tmp_path / "mine.csv"
    with good.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "context", "question", "answer"])
        for e in read_questions(squad_file).examples:
            writer.writerow([e.id, e.context, e.question, e.answers[0] if e.answers else ""])
    upload(page, good)  # a file comes before pasted rows
    page.get_by_role("button", name=RUN).click()
    page.wait_for_function(FINISHED)
    assert "Done: 6 of 6 questions" in page.locator("#questions-status").inner_text()
    table = page.locator("#questions-table")
    assert table.locator("tbody tr").count() == 3  # the card's three variants, by default
    assert "Overlap with baseline" in table.inner_text()
    assert "6 questions, scored against your answers" in page.locator("#questions-scores").inner_text()
    page.wait_for_selector("#questions-chart .js-plotly-plot .scatterlayer .point")
    assert page.locator("#questions-chart .scatterlayer .trace").count() >= 3
    assert "F1 on your questions" in page.locator("#questions-chart").inner_text()
    assert page.locator("#questions-disagreements").inner_text().strip()  # a table, or "every variant agreed"
    page.screenshot(path=str(shots / "questions.png"), full_page=True)
    with page.expect_download() as download:
        page.locator("#questions-csv").click()
    saved = tmp_path / "answers.csv"
    download.value.save_as(saved)
    with saved.open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:5] == ["id", "question", "gold answers", "Baseline", "Baseline ms"]
    assert [r[0] for r in rows[1:]] == [f"q{i}" for i in range(6)]
