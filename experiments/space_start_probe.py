"""What a Space host and its visitors wait for: start the app as a Space would, and time it from outside.

Starts ``python app.py --preset P`` (a persistent folder given, as a Space with storage has ``/data``), then:
the port (the first ``GET /`` answered), the build (the log's ``build over`` line) and the process tree's peak
resident memory; the page's waits in headless Chromium for the Ask tab's two examples and a passage of
``--long-chars`` characters (first card answered, every card answered, the Ask event over: the status line's
"Answers are in"); ``/answer`` through gradio_client for the same three; and with ``--quick N`` an Ask while a
quick benchmark of N questions runs in another page. Writes one JSON record with the machine, its load and the
versions. Loopback only, every wait bounded.

    python -m experiments.space_start_probe --preset embedded --persist-dir /tmp/space-data --port 7870
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

import psutil

from variants.core.hardware import current_hardware
from variants.core.versions import artifact_versions

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "records" / "space"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
EXAMPLES = ("Ulan Bator: a short passage", "Packet switching: long context (several 384-token windows)")
# A passage of our own (not from SQuAD), repeated sentence by sentence up to --long-chars characters.
OWN = (
    "The lighthouse at Saint Aubin was built in 1871 by the engineer Marthe Delcour, who also designed the harbour "
    "wall. Its lamp burned whale oil until 1903, when a paraffin burner replaced it. The keeper's cottage became a "
    "museum in 1962. Storms in the winter of 1987 cracked the lantern glass, and the town paid for its repair with "
    "a lottery. The light was automated in 1994 and is now watched from a station forty kilometres to the south. "
    "Visitors climb 117 steps to the gallery, from where the islands of the bay can be seen on a clear day. "
)
ANSWERED = """() => {  // a card "timing" has its answer and is being timed
  const cards = [...document.querySelectorAll('#qa-cards .qa-card')];
  return {done: cards.filter(c => ['timing', 'done', 'error'].includes(c.dataset.state)).length, all: cards.length,
          live: (document.getElementById('qa-live') || {}).textContent || ''};
}"""


def long_passage(chars: int) -> str:
    text = ""
    while len(text) < chars:
        text += OWN
    return text[:chars].rsplit(" ", 1)[0] + "."


def rss_mb(pid: int) -> float:
    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
        return sum(p.memory_info().rss for p in procs) / 2**20
    except psutil.Error:
        return 0.0


def start_app(args: argparse.Namespace, log: Path) -> tuple[subprocess.Popen, dict]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VARIANTS_PERSIST_DIR": str(args.persist_dir)}
    started = time.monotonic()
    cmd = [sys.executable, "app.py", "--preset", args.preset, "--port", str(args.port)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url, facts, peak = f"http://127.0.0.1:{args.port}/", {}, 0.0
    deadline = started + args.max_start_s
    while time.monotonic() < deadline and proc.poll() is None:
        peak = max(peak, rss_mb(proc.pid))
        if "port_s" not in facts:
            try:
                with urllib.request.urlopen(url, timeout=1) as reply:
                    if reply.status == 200:
                        facts["port_s"] = round(time.monotonic() - started, 2)
            except OSError:
                pass
        if "build over" in log.read_text(errors="replace"):
            facts["built_s"] = round(time.monotonic() - started, 2)
            break
        time.sleep(0.2)
    facts["peak_rss_mb_while_building"] = round(peak, 1)
    facts["rss_mb_when_built"] = round(rss_mb(proc.pid), 1)
    facts["log_tail"] = log.read_text(errors="replace").splitlines()[-12:]
    return proc, facts


def ask_in_page(page, example: str | None, context: str | None, timeout_s: float) -> dict:
    """Click an example (or fill the context with a question of ours) and Ask; the waits, from the click."""
    page.get_by_role("tab", name="Ask").click()
    if example:
        page.get_by_text(example).click()
    else:
        page.get_by_label("Context").fill(context)
        page.get_by_placeholder("Ask something the passage answers").fill("Who designed the harbour wall?")
    page.wait_for_timeout(300)
    # mark the last question's cards stale: the page redraws them with this question's states
    page.evaluate("() => document.querySelectorAll('#qa-cards .qa-card').forEach(c => { c.dataset.state = 'stale'; })")
    clicked = time.monotonic()
    page.get_by_role("button", name="Ask every variant").click()
    first = every = None
    while time.monotonic() - clicked < timeout_s:
        state = page.evaluate(ANSWERED)
        now = round(time.monotonic() - clicked, 2)
        if state["done"] and first is None:
            first = now
        if state["all"] and state["done"] == state["all"] and every is None:
            every = now
        if state["live"].startswith(("Answers are in", "Not asked")):
            return {"first_card_s": first, "all_cards_s": every, "done_s": now, "status": state["live"]}
        time.sleep(0.05)
    return {"first_card_s": first, "all_cards_s": every, "done_s": None, "status": "timed out"}


def api_waits(url: str, pairs: dict[str, tuple[str, str]]) -> dict:
    from gradio_client import Client  # noqa: PLC0415 - a dev dependency, only for this probe

    client, waits = Client(url, verbose=False), {}
    for name, (context, question) in pairs.items():
        started = time.monotonic()
        try:
            client.predict(context, question, api_name="/answer")
            waits[name] = round(time.monotonic() - started, 2)
        except Exception as exc:  # a refusal is a finding, not a crash of the probe
            waits[name] = f"error: {exc}"
    return waits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="embedded")
    parser.add_argument("--persist-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=7870)
    parser.add_argument("--label", default="", help="a word for the record's name (cold, warm)")
    parser.add_argument("--long-chars", type=int, default=2440)
    parser.add_argument("--quick", type=int, default=0, help="also: an Ask while a quick benchmark of N questions runs")
    parser.add_argument("--max-start-s", type=float, default=900)
    parser.add_argument("--timeout-s", type=float, default=180)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright  # noqa: PLC0415 - a dev dependency, only for this probe

    from ui.ask import ULAN_BATOR  # noqa: PLC0415

    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log = OUT / f"app-{args.preset}-{args.label or 'run'}-{stamp}.log"
    record: dict = {
        "what": "start-up and waits as a Space host and its visitors meet them",
        "created": stamp,
        "preset": args.preset,
        "label": args.label,
        "persist_dir_had_files_before": any(args.persist_dir.rglob("*")) if args.persist_dir.exists() else False,
        "hardware": current_hardware(),
        "versions": artifact_versions(),
        "loadavg_before": os.getloadavg(),
    }
    proc, record["start"] = start_app(args, log)
    url = f"http://127.0.0.1:{args.port}/"
    long_text = long_passage(args.long_chars)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            page.wait_for_selector("#qa-cards .qa-card")
            waits = {}
            for name in EXAMPLES:
                waits[name.split(":")[0]] = [ask_in_page(page, name, None, args.timeout_s) for _ in range(2)]
            waits[f"own passage, {len(long_text)} characters"] = [
                ask_in_page(page, None, long_text, args.timeout_s) for _ in range(2)
            ]
            record["page"] = waits
            if args.quick:
                other = browser.new_page(viewport={"width": 1400, "height": 1000})
                other.goto(url)
                other.get_by_role("tab", name="Benchmark").click()
                try:  # the slider's number box (50 by default, the run)
                    other.get_by_label("Questions for a quick benchmark").last.fill(str(args.quick), timeout=3000)
                except Exception:  # the default stands; the record says how many were asked
                    args.quick = 50
                other.get_by_role("button", name="Run quick benchmark").click()
                time.sleep(3)
                status = "#bench-quick-status"
                before = other.locator(status).inner_text()
                during = [ask_in_page(page, EXAMPLES[0], None, args.timeout_s) for _ in range(3)]
                record["ask_during_quick_benchmark"] = {
                    "quick_questions": args.quick,
                    "waits": during,
                    "benchmark_status_before": before,
                    "benchmark_status_after": other.locator(status).inner_text(),
                }
                other.get_by_role("button", name="Stop").first.click()
            browser.close()
        pairs = {
            "Ulan Bator": ULAN_BATOR,
            f"own passage, {len(long_text)} characters": (long_text, "Who designed the harbour wall?"),
        }
        record["answer_api_s"] = api_waits(url, pairs)
    finally:
        record["loadavg_after"] = os.getloadavg()
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    path = OUT / f"space-{args.preset}-{args.label or 'run'}-{record['hardware']['cpu_slug']}-{stamp}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in record.items() if k not in ("hardware", "versions")}, indent=2, default=str))
    print(f"record: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
