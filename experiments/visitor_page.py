"""A visitor's model on the page, in a real browser (issue 73): built into its chain with progress, answering under
the preset's cards, scored by a quick benchmark, another visitor's Ask timed idle and during the build, Stop, and
the chain's files after the idle time; screenshots at 1400x1000 and 390x844.

    python -m experiments.visitor_page cache --hub-cache /tmp/hub      # the visitor's model, in the Hub cache
    HF_HUB_CACHE=/tmp/hub HF_HUB_OFFLINE=1 VARIANTS_VISITOR_IDLE_S=45 \
        python app.py --port 7876 --allow-custom-models &              # a running app, offline
    python -m experiments.visitor_page run --url http://127.0.0.1:7876 --shots /tmp/visitor-shots

``cache`` writes a DistilBERT-shaped QA model made from the embedded MiniLM's weights (its token-type-1 embedding
folded into the word embeddings: another family than the preset's BERT, with real answers, not the same ones) in
huggingface_hub's cache layout (``models--visitor--minilm-as-distilbert-qa/snapshots/<rev>``, ``refs/main``).
``run`` needs Playwright and /usr/bin/chromium; its record: the Ask times (s, end to end in the browser, n each),
the load average at each phase, the build's time, the quick run's table, the files, Stop.
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import time
from pathlib import Path

from experiments.common import RECORDS, save_probe_record
from variants.core.spec import EMBEDDED_MODELS

MODEL_ID = "visitor/minilm-as-distilbert-qa"
CONTEXT = (
    "Ulan Bator is the capital of Mongolia. The city lies on the Tuul River, in the north of the country, and "
    "was founded in 1639 as a movable Buddhist monastery."
)
QUESTION = "When was the city founded?"
SETTLED = """(sel) => { const c = [...document.querySelectorAll(sel + ' .qa-card')];
  return c.length > 0 && c.every(x => ['done', 'error'].includes(x.dataset.state)); }"""
DESKTOP, PHONE = {"width": 1400, "height": 1000}, {"width": 390, "height": 844}


def write_cache(cache: Path, revision: str = "5" * 40) -> Path:
    """The embedded MiniLM as a DistilBertForQuestionAnswering in the Hub cache layout; returns the snapshot."""
    import torch  # noqa: PLC0415
    from transformers import (  # noqa: PLC0415
        AutoModelForQuestionAnswering,
        AutoTokenizer,
        DistilBertConfig,
        DistilBertForQuestionAnswering,
    )

    src = EMBEDDED_MODELS / "minilm-squad2"
    repo = cache / ("models--" + MODEL_ID.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision, encoding="utf-8")
    bert = AutoModelForQuestionAnswering.from_pretrained(src).eval()
    c = bert.config
    shape = DistilBertConfig(
        vocab_size=c.vocab_size, dim=c.hidden_size, n_layers=c.num_hidden_layers, n_heads=c.num_attention_heads,
        hidden_dim=c.intermediate_size, max_position_embeddings=c.max_position_embeddings, activation="gelu",
        architectures=["DistilBertForQuestionAnswering"],
    )  # fmt: skip
    distil = DistilBertForQuestionAnswering(shape).eval()
    with torch.no_grad():
        e, de = bert.bert.embeddings, distil.distilbert.embeddings
        de.word_embeddings.weight.copy_(e.word_embeddings.weight + e.token_type_embeddings.weight[1])
        de.position_embeddings.weight.copy_(e.position_embeddings.weight)
        de.LayerNorm.load_state_dict(e.LayerNorm.state_dict())
        for bl, dl in zip(bert.bert.encoder.layer, distil.distilbert.transformer.layer, strict=True):
            a = bl.attention
            dl.attention.q_lin.load_state_dict(a.self.query.state_dict())
            dl.attention.k_lin.load_state_dict(a.self.key.state_dict())
            dl.attention.v_lin.load_state_dict(a.self.value.state_dict())
            dl.attention.out_lin.load_state_dict(a.output.dense.state_dict())
            dl.sa_layer_norm.load_state_dict(a.output.LayerNorm.state_dict())
            dl.ffn.lin1.load_state_dict(bl.intermediate.dense.state_dict())
            dl.ffn.lin2.load_state_dict(bl.output.dense.state_dict())
            dl.output_layer_norm.load_state_dict(bl.output.LayerNorm.state_dict())
        distil.qa_outputs.load_state_dict(bert.qa_outputs.state_dict())
    distil.save_pretrained(snapshot)
    AutoTokenizer.from_pretrained(src, model_input_names=["input_ids", "attention_mask"]).save_pretrained(snapshot)
    return snapshot


def ask_once(page) -> float:
    """One Ask on the preset's cards, end to end in the browser (s)."""
    page.get_by_label("Context").fill(CONTEXT)
    page.get_by_placeholder("Ask something the passage answers").fill(QUESTION)
    started = time.perf_counter()
    page.get_by_role("button", name="Ask every variant").click()
    page.wait_for_timeout(200)
    page.wait_for_function(SETTLED, arg="#qa-cards", timeout=300_000)
    return time.perf_counter() - started


def shoot(page, shots: Path, name: str, selector: str) -> None:
    for label, size in (("1400x1000", DESKTOP), ("390x844", PHONE)):
        page.set_viewport_size(size)
        page.wait_for_timeout(300)
        page.locator(selector).first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.wait_for_timeout(200)
        page.screenshot(path=str(shots / f"{name}-{label}.png"))
    page.set_viewport_size(DESKTOP)


def open_page(chromium, url: str):
    context = chromium.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.set_default_timeout(300_000)
    page.goto(url)
    page.wait_for_selector("#qa-cards .qa-card")
    return page


def run(url: str, shots: Path, idle_asks: int, idle_s: float) -> dict:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    shots.mkdir(parents=True, exist_ok=True)
    out: dict = {"load_before": os.getloadavg()}
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
        a, b = open_page(chromium, url), open_page(chromium, url)  # the visitor with a model, and another
        a.wait_for_function("() => !document.querySelector('#qa-build')", timeout=600_000)  # the preset is built
        ask_once(b)
        out["idle_ask_s"] = [ask_once(b) for _ in range(idle_asks)]
        out["load_idle"] = os.getloadavg()
        before = set(glob.glob("/tmp/qa-visitor-chains-*/chain-*"))
        a.get_by_text("Try your own model").click()
        a.get_by_label("Hub model id").fill(MODEL_ID)
        started = time.perf_counter()
        a.get_by_role("button", name="Build its chain").click()
        a.locator("#custom-status .qa-build").wait_for()
        shoot(a, shots, "visitor-building", "#custom-status")
        shoot(a, shots, "visitor-building-cards", "#visitor-head")
        out["during_build_ask_s"], out["load_during"] = [], []
        while not a.locator("#custom-status .qa-ok").is_visible():
            out["during_build_ask_s"].append(ask_once(b))
            out["load_during"].append(os.getloadavg())
        out["build_s"] = time.perf_counter() - started
        out["status_ready"] = a.locator("#custom-status").inner_text()
        a.get_by_label("Context").fill(CONTEXT)
        a.get_by_placeholder("Ask something the passage answers").fill(QUESTION)
        a.get_by_role("button", name="Ask every variant").click()
        a.wait_for_function(SETTLED.replace("c.length > 0", "c.length === 4"), arg="#visitor-cards")
        out["visitor_cards"] = a.locator("#visitor-cards").inner_text()
        shoot(a, shots, "visitor-answering", "#visitor-head")
        a.screenshot(path=str(shots / "visitor-answering-full-1400.png"), full_page=True)
        a.get_by_role("tab", name="Benchmark").click()
        number = a.get_by_label("number input for Questions for a quick benchmark")
        number.fill("10")
        number.press("Enter")
        started = time.perf_counter()
        a.get_by_role("button", name="Run quick benchmark").click()
        a.locator("#bench-table").get_by_text("Your model + ONNX + INT8").first.wait_for(timeout=600_000)
        out["quick_s"] = time.perf_counter() - started
        a.screenshot(path=str(shots / "visitor-benchmark-1400.png"), full_page=True)
        out["bench_table"] = a.locator("#bench-table").inner_text()
        folders = sorted(set(glob.glob("/tmp/qa-visitor-chains-*/chain-*")) - before)
        out["chain_folders_after_quick_run"] = folders
        started = time.perf_counter()
        while any(Path(f).exists() for f in folders) and time.perf_counter() - started < 3 * idle_s + 60:
            time.sleep(1)
        out["files_gone_after_s"] = time.perf_counter() - started
        out["files_gone"] = not any(Path(f).exists() for f in folders)
        a.get_by_role("tab", name="Ask").click()
        a.get_by_role("button", name="Build its chain").click()  # again, then Stop
        a.locator("#custom-status .qa-build").wait_for()
        started = time.perf_counter()
        a.locator("#custom-stop").click()
        a.locator("#custom-status .qa-notice").get_by_text("Stopped.").wait_for()
        out["stop_to_stopped_s"] = time.perf_counter() - started
        out["status_stopped"] = a.locator("#custom-status").inner_text()
        chromium.close()
    idle, during = out["idle_ask_s"], out["during_build_ask_s"]
    out["idle_median_s"], out["idle_max_s"] = statistics.median(idle), max(idle)
    if during:
        out["during_median_s"], out["during_max_s"] = statistics.median(during), max(during)
        out["during_max_over_idle_median"] = round(max(during) / statistics.median(idle), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["cache", "run"])
    parser.add_argument("--hub-cache", default="/tmp/visitor-hub", help="cache: where to write the model")
    parser.add_argument("--url", default="http://127.0.0.1:7876", help="run: the running app")
    parser.add_argument("--shots", default="/tmp/visitor-shots", help="run: the screenshots' folder")
    parser.add_argument("--idle-asks", type=int, default=8, help="run: Asks timed before the build")
    parser.add_argument("--idle-s", type=float, default=45, help="run: the app's VARIANTS_VISITOR_IDLE_S")
    parser.add_argument("--out", default=str(RECORDS / "visitor" / "visitor-page.json"), help="run: the record")
    args = parser.parse_args(argv)
    if args.what == "cache":
        print(write_cache(Path(args.hub_cache)))
        return 0
    started = time.time()
    result = run(args.url, Path(args.shots), args.idle_asks, args.idle_s)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    save_probe_record({"kind": "visitor-page", "model": MODEL_ID, **result}, started, args.out)
    print(f"record: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
