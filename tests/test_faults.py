"""Faults and bad input, on the tiny models: Unicode and HTML end to end, a variant failing at run time or
load time (isolated on its own card), broken and failed cache builds, the offline fallback notice, a full
queue, the configurable context limit, and no remote code."""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import re
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from app_helpers import CONTEXT, QUESTION, TINY_SETTINGS, running, tiny_engine
from gradio_client import Client
from onnxruntime.capi.onnxruntime_pybind11_state import Fail

import app
from ui.about import about_html
from ui.ask import make_ask
from variants.__main__ import main as cli_main
from variants.answering.qa import InputError
from variants.building import export
from variants.building.cache import ArtifactCache
from variants.core import spec as specs
from variants.serving.engine import MAX_CONTEXT_CHARS, Engine, default_max_context_chars, load_engine

ROOT = Path(__file__).resolve().parent.parent
CONTEXT_LIMIT = 3_000  # the app under test takes contexts up to this many characters
UNICODE = {
    "emoji": ("paris 🇫🇷 is the capital of france 🥖🧀 and its largest city 👩‍👩‍👧, with two million people.", QUESTION),
    "rtl": ("باريس هي عاصمة فرنسا. paris is the capital of france. פריז היא בירת צרפת.", "מהי בירת צרפת? what is it?"),
    "mixed": ("Ｐａｒｉｓ «est» la capitale — 巴黎是法国的首都; pa\u0301ris is the capital of france.\u200b", QUESTION),
    "whitespace": ("\n\n  paris\u00a0is   the\tcapital\u2003of france .\r\n", "  what   is the capital?  "),
}
EVIL = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path) -> Engine:
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def url(engine: Engine, tmp_path_factory: pytest.TempPathFactory):
    limited = dataclasses.replace(engine, max_context_chars=CONTEXT_LIMIT)  # the same loaded variants
    with running(app.build_demo(limited, results_dir=tmp_path_factory.mktemp("none"))) as address:
        yield address


@pytest.fixture(scope="module")
def client(url: str) -> Client:
    return Client(url, verbose=False)


def tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, cache: Path, names: list[str], **kwargs) -> Engine:
    overrides = {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)}
    return load_engine(
        "embedded", "cpu", overrides, fallback=False, cache_dir=cache, settings=TINY_SETTINGS, names=names, **kwargs
    )


# --- Unicode and HTML end to end ------------------------------------------------------------------


@pytest.mark.parametrize("case", sorted(UNICODE))
def test_unicode_end_to_end(engine: Engine, client: Client, case: str) -> None:
    context, question = UNICODE[case]
    direct = engine.ask(question, context)
    for r in direct:
        assert r.error is None, r
        assert context[r.start : r.end] == r.answer  # offsets are code points into the original text
        assert r.answer or r.start == r.end == 0
    via_api = client.predict(context, question, api_name="/answer")
    assert [(r["variant"], r["answer"], r["start"], r["end"]) for r in via_api] == [
        (r.variant, r.answer, r.start, r.end) for r in direct
    ]


def test_html_in_the_input_is_shown_escaped(engine: Engine) -> None:
    context = f"{EVIL} {CONTEXT} {EVIL}"
    steps = [v.spec.name for v in engine.loaded if not v.spec.headline]
    outputs = list(make_ask(engine)(context, f"<b>{QUESTION}</b>", steps, last={}))
    for cards, summary, _chart, _last in outputs:
        for page in (cards, summary):
            assert "<script" not in page and "<img" not in page and "<b>what" not in page
    cards = outputs[-1][0]
    assert cards.count('data-state="done"') == len(engine.loaded)
    for snippet in re.findall(r'<div class="qa-snippet">(.*?)</div>', cards):
        assert "&lt;" in snippet or "<mark>" in snippet  # what surrounds the answer is escaped text


# --- a variant failing at run time ----------------------------------------------------------------

RUNTIME_FAULTS = {
    "memory": ("pruned", MemoryError(), "Out of memory"),
    "cuda-oom": (
        "baseline",
        RuntimeError(
            "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity)\nSee documentation"
        ),
        "Out of memory",
    ),
    "ort-fail": (
        "pruned-onnx-opt",
        Fail("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Attention node.\nmore"),
        "Fail: [ONNXRuntimeError] : 1 : FAIL",
    ),
    "missing-file": (
        "pruned-onnx-opt-int8",
        FileNotFoundError(errno.ENOENT, "No such file or directory", "/cache/x/model.onnx"),
        "No such file or directory",
    ),
}


def break_variant(monkeypatch: pytest.MonkeyPatch, engine: Engine, name: str, exc: BaseException) -> None:
    def run(_inputs):
        raise exc

    monkeypatch.setattr(engine.variants[name].model, "run", run)


def assert_isolated(results: list[dict], broken: str, message: str) -> None:
    by_name = {r["variant"]: r for r in results}
    error = by_name[broken]["error"]
    assert error and message in error, error
    assert "\n" not in error and "Traceback" not in error and len(error) <= 300
    for name, r in by_name.items():
        if name != broken:
            assert r["error"] is None and r["latency_ms"] > 0, r


@pytest.mark.parametrize("fault", sorted(RUNTIME_FAULTS))
def test_runtime_failure_stays_on_its_variant(engine, client, monkeypatch, fault: str) -> None:
    name, exc, message = RUNTIME_FAULTS[fault]
    break_variant(monkeypatch, engine, name, exc)
    assert_isolated([r.to_json() for r in engine.ask(QUESTION, CONTEXT)], name, message)
    assert_isolated(client.predict(CONTEXT, QUESTION, api_name="/answer"), name, message)
    steps = [v.spec.name for v in engine.loaded if not v.spec.headline]
    *_, (cards, _summary, _chart, _last) = make_ask(engine)(CONTEXT, QUESTION, steps, last={})
    assert cards.count('data-state="error"') == 1 and f'data-variant="{name}" data-state="error"' in cards
    assert cards.count('data-state="done"') == len(engine.loaded) - 1


def test_artifact_deleted_before_load_fails_only_that_variant(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch):
    original = ArtifactCache.get_or_build

    def get_or_build_then_lose_it(self, key, build, validate=None):
        folder = original(self, key, build, validate)
        (folder / "model.onnx").unlink()  # e.g. another process clearing the cache at that moment
        return folder

    monkeypatch.setattr(ArtifactCache, "get_or_build", get_or_build_then_lose_it)
    engine = tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, tmp_path, ["baseline", "pruned-onnx"])
    assert engine.variants["baseline"].ok and not engine.variants["pruned-onnx"].ok
    results = [r.to_json() for r in engine.ask(QUESTION, CONTEXT)]
    assert_isolated(results, "pruned-onnx", "model.onnx")
    monkeypatch.undo()
    again = tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, tmp_path, ["pruned-onnx"])  # the next start rebuilds it
    assert again.ask(QUESTION, CONTEXT)[0].error is None


# --- cache faults at start-up ---------------------------------------------------------------------


def test_corrupt_cached_model_is_rebuilt_on_the_next_load(tiny_qa_dir, tiny_pruned_dir, tmp_path, caplog) -> None:
    first = tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, tmp_path, ["pruned-onnx"])
    answer = first.ask(QUESTION, CONTEXT)[0]
    artifact = first.variants["pruned-onnx"].artifact
    artifact.write_bytes(b"\0" * artifact.stat().st_size)  # same size, garbage: only the sha256 can tell
    with caplog.at_level(logging.WARNING, logger="variants.building.cache"):
        second = tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, tmp_path, ["pruned-onnx"])
    assert "rebuilding" in caplog.text
    again = second.ask(QUESTION, CONTEXT)[0]
    assert again.error is None and (again.answer, again.start, again.end) == (answer.answer, answer.start, answer.end)


def test_disk_full_during_a_build_leaves_nothing_to_trust(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch):
    def quantize_until_the_disk_is_full(src: Path, out_dir: Path, **options) -> Path:
        (Path(out_dir) / "model.onnx").write_bytes(b"half a model")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(export, "quantize_int8", quantize_until_the_disk_is_full)
    names = ["baseline", "pruned-onnx-opt-int8"]
    engine = tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, tmp_path, names)
    results = [r.to_json() for r in engine.ask(QUESTION, CONTEXT)]
    assert_isolated(results, "pruned-onnx-opt-int8", "No space left on device")
    entries = sorted(p.name for p in tmp_path.iterdir() if p.is_dir())
    assert len(entries) == 2  # onnx and optimize were built; the int8 step left no entry ...
    assert not [n for n in entries if n.startswith((".tmp-", ".trash-"))]  # ... and no temporary folder
    monkeypatch.undo()
    later = tiny_spec_engine(tiny_qa_dir, tiny_pruned_dir, tmp_path, names)  # a later start builds it properly
    assert all(r.error is None for r in later.ask(QUESTION, CONTEXT))
    assert len([p for p in tmp_path.iterdir() if p.is_dir()]) == 3


def test_offline_fallback_notice_is_on_the_page(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    tiny = specs.Family("embedded", str(tiny_qa_dir), str(tiny_pruned_dir), "tiny stand-in")
    monkeypatch.setitem(specs.FAMILIES, "embedded", tiny)
    engine = load_engine("bert-large", "cpu", cache_dir=tmp_path, settings=TINY_SETTINGS, names=["baseline"])
    assert engine.preset == "embedded" and "could not be loaded" in engine.notice
    with running(app.build_demo(engine, results_dir=tmp_path)) as address:
        with urllib.request.urlopen(address + "config", timeout=30) as response:
            page = json.loads(response.read())
        answer = Client(address, verbose=False).predict(CONTEXT, QUESTION, api_name="/answer")
    html_values = [c.get("props", {}).get("value") for c in page["components"] if c.get("type") == "html"]
    said = [v for v in html_values if isinstance(v, str) and "Fallback:" in v]
    header = [v for v in said if "qa-header" in v]  # the header's line: which preset the page shows instead
    banner = [v for v in said if "qa-header" not in v]
    assert len(header) == 1 and "shows the preset embedded instead" in header[0]
    assert len(banner) == 1, "the fallback's reason is said once, not again on the About tab"
    plain, _, details = banner[0].partition("<details>")
    assert "The bert-large models could not be loaded" in plain and "HF_HUB_OFFLINE" not in plain
    assert "HF_HUB_OFFLINE" in details, "the technical reason is one click away"
    assert answer[0]["error"] is None


# --- the queue ------------------------------------------------------------------------------------


def test_a_full_queue_turns_requests_away_with_a_clear_message(engine, tmp_path, monkeypatch) -> None:
    model = engine.variants["baseline"].model
    run = model.run

    def slow_run(inputs):
        time.sleep(1.0)
        return run(inputs)

    monkeypatch.setattr(model, "run", slow_run)
    outcomes: list[object] = []
    with running(app.build_demo(engine, results_dir=tmp_path, concurrency_limit=1, max_queue=1)) as address:
        clients = [Client(address, verbose=False) for _ in range(5)]

        def call(c: Client) -> None:
            try:
                outcomes.append(c.predict(CONTEXT, QUESTION, api_name="/answer"))
            except Exception as exc:
                outcomes.append(exc)

        threads = [threading.Thread(target=call, args=(c,)) for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        monkeypatch.undo()
        assert len(clients[0].predict(CONTEXT, QUESTION, api_name="/answer")) == 6  # and it serves afterwards
    refused = [o for o in outcomes if isinstance(o, Exception)]
    answered = [o for o in outcomes if isinstance(o, list)]
    assert len(outcomes) == 5 and len(answered) >= 1 and len(refused) >= 2  # 1 running + 1 waiting at most
    # the models' line says how long to wait, not gradio's "Queue is full! Please try again."
    assert all("The app is busy" in str(e) and "try again in" in str(e) for e in refused), refused
    assert all(len(a) == 6 for a in answered)


# --- the context limit ----------------------------------------------------------------------------


def test_context_limit_is_configurable(engine, client, monkeypatch) -> None:
    with pytest.raises(Exception, match=f"at most {CONTEXT_LIMIT:,}"):
        client.predict("word " * 700, QUESTION, api_name="/answer")  # 3,500 characters
    assert client.predict("word " * 500 + CONTEXT, QUESTION, api_name="/answer")[0]["error"] is None  # in windows
    monkeypatch.delenv("VARIANTS_MAX_CONTEXT_CHARS", raising=False)
    assert default_max_context_chars() == MAX_CONTEXT_CHARS == 25_000
    monkeypatch.setenv("VARIANTS_MAX_CONTEXT_CHARS", "40,000")
    assert default_max_context_chars() == 40_000
    monkeypatch.setenv("VARIANTS_MAX_CONTEXT_CHARS", "lots")
    with pytest.raises(ValueError, match="VARIANTS_MAX_CONTEXT_CHARS"):
        default_max_context_chars()
    small = dataclasses.replace(engine, max_context_chars=50)
    with pytest.raises(InputError, match="at most 50") as info:
        small.check_input(QUESTION, "x" * 51)
    assert info.value.field == "context"
    with pytest.raises(ValueError, match="at least 1"):
        dataclasses.replace(engine, max_context_chars=0)


def test_context_limit_flag_and_environment(tiny_qa_dir, artifacts_dir, monkeypatch, capsys) -> None:
    monkeypatch.setenv("VARIANTS_MAX_CONTEXT_CHARS", "60")
    engine = load_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=artifacts_dir, names=["baseline"])
    assert engine.max_context_chars == 60
    base = ["ask", "--preset", "embedded", "--baseline", str(tiny_qa_dir), "--variants", "baseline"]
    base += ["--cache-dir", str(artifacts_dir), "--question", QUESTION]
    assert cli_main([*base, "--context", CONTEXT]) == 2  # 93 characters > 60 from the environment
    assert "at most 60" in capsys.readouterr().err
    assert cli_main([*base, "--max-context-chars", "200", "--context", CONTEXT]) == 0  # the flag wins
    assert cli_main([*base, "--max-context-chars", "50", "--context", CONTEXT]) == 2
    assert "The context is too long (93 characters; at most 50)." in capsys.readouterr().err
    args = app.parse_args(["--max-context-chars", "30,000", "--batching", "--max-batch", "8"])
    assert args.max_context_chars == 30_000 and args.batching and args.max_batch == 8
    with pytest.raises(SystemExit):
        app.parse_args(["--max-context-chars", "0"])


def test_batching_flags_open_the_model_group(engine, monkeypatch) -> None:
    monkeypatch.delenv("VARIANTS_BATCHING", raising=False)
    args = app.parse_args([])
    assert not args.batching and args.batch_wait_ms == 5.0 and args.max_batch == 16
    assert app.model_concurrency(args, engine) == 1
    monkeypatch.setenv("VARIANTS_BATCHING", "1")
    monkeypatch.setenv("VARIANTS_MAX_BATCH", "12")
    args = app.parse_args([])
    assert args.batching and args.max_batch == 12
    from variants.cli import batching_from_args  # noqa: PLC0415

    batched = dataclasses.replace(engine, batching=batching_from_args(args))
    assert app.model_concurrency(args, batched) == 12
    assert "Dynamic batching is on" in about_html(batched)


# --- no remote code -------------------------------------------------------------------------------


def test_no_remote_code_is_ever_trusted() -> None:
    folders = ("ui", "variants", "experiments")
    sources = [ROOT / "app.py", *(path for folder in folders for path in (ROOT / folder).rglob("*.py"))]
    pattern = re.compile(r"trust_remote_code\s*=\s*(?!False\b)")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sources
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
    code = {
        name: (ROOT / "variants" / "building" / name).read_text(encoding="utf-8") for name in ("build.py", "storage.py")
    }
    assert code["build.py"].count("trust_remote_code=False") >= 1  # the tokenizer
    assert (
        code["storage.py"].count("trust_remote_code=False") >= 1
    )  # the model (variants.building.storage.load_qa_model)
