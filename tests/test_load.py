"""``python -m variants load-test`` at a small scale (8 clients x 3 requests) against the app on the tiny models,
served in this process, without and with dynamic batching: no errors, every answer the single-client one, and
memory that does not keep growing."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from app_helpers import TINY_SETTINGS, running, tiny_engine

import app
from variants.benchmarking import load_test as load_test_module
from variants.benchmarking import soak as soak_module
from variants.serving.batching import BatchingConfig
from variants.serving.engine import load_engine

ROOT = Path(__file__).resolve().parent.parent
CLIENTS, REQUESTS = 8, 24
RSS_GROWTH_MB = 300  # generous: the first requests warm up allocators, thread pools and client sessions


def load_script():
    return load_test_module


@pytest.fixture(scope="module")
def load_test():
    return load_script()


@pytest.mark.parametrize("batching", [False, True], ids=["unbatched", "batched"])
def test_small_load(load_test, batching, tiny_qa_dir, tiny_pruned_dir, artifacts_dir, tmp_path) -> None:
    if batching:
        overrides = {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)}
        config = BatchingConfig(max_wait_ms=5, max_batch_size=CLIENTS)
        engine = load_engine(
            "embedded",
            "cpu",
            overrides,
            fallback=False,
            cache_dir=artifacts_dir,
            settings=TINY_SETTINGS,
            batching=config,
        )
    else:
        engine = tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))
    demo = app.build_demo(engine, results_dir=tmp_path, concurrency_limit=CLIENTS if batching else 1)
    out = tmp_path / "load.json"
    argv = ["--clients", str(CLIENTS), "--requests", str(REQUESTS), "--pairs", "6", "--timeout-s", "120"]
    with running(demo, trusted_proxies="127.0.0.1") as url:  # each client a visitor of its own (X-Forwarded-For)
        status = load_test.main(["--url", url, "--pid", str(os.getpid()), "--out", str(out), *argv])
    if batching:
        stats = engine.batch_stats()
        engine.close()
    record = json.loads(out.read_text(encoding="utf-8"))
    (run,) = record["runs"]
    assert status == 0, run
    assert run["errors"] == 0 and run["mismatches"] == 0, run
    assert run["completed"] == REQUESTS and run["clients"] == CLIENTS and not run["timed_out"]
    assert run["latency_ms"]["p50"] > 0 and run["latency_ms"]["p95"] >= run["latency_ms"]["p50"]
    assert run["throughput_rps"] > 0
    rss = run["rss_mb"]
    assert rss["samples"] >= 2 and rss["start"] > 0 and rss["max"] >= rss["end"]
    assert rss["end"] - rss["start"] < RSS_GROWTH_MB, rss
    assert [m["variant"] for m in run["models"]] == [v.spec.name for v in engine.loaded]
    assert {"cpu", "cores"} <= set(record["hardware"]) and record["versions"]["gradio"]
    if batching:
        assert all(s["requests"] >= REQUESTS for s in stats.values())  # references + load, all via batchers


def test_targets_only_this_machine(load_test) -> None:
    assert load_test.check_url("http://127.0.0.1:7860") == "http://127.0.0.1:7860/"
    assert load_test.check_url("http://localhost:9000/") == "http://localhost:9000/"
    for url in ("http://example.com:7860", "http://10.0.0.5:7860", "https://huggingface.co/spaces/x/y"):
        with pytest.raises(ValueError, match="only targets"):
            load_test.check_url(url)
    assert load_test.main(["--url", "http://192.168.1.1:7860", "--requests", "1"]) == 2
    with pytest.raises(SystemExit):
        load_test.parse_args(["--clients", "100000"])  # bounded


def test_percentiles(load_test) -> None:
    assert load_test.percentile([], 50) is None
    assert load_test.percentile([5.0], 95) == 5.0
    assert load_test.percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert load_test.percentile(list(range(1, 101)), 95) == pytest.approx(95.05)


def load_soak():
    return soak_module


def test_soak_inputs_mix_paragraphs_and_articles() -> None:
    soak = load_soak()
    pairs = soak.mixed_pairs(40)
    assert len(pairs) == 40 and len(set(pairs)) == 40
    long = pairs[soak.LONG_EVERY - 1 :: soak.LONG_EVERY]
    short = [p for i, p in enumerate(pairs) if i % soak.LONG_EVERY != soak.LONG_EVERY - 1]
    assert all("\n" in c and len(c) <= soak.LONG_MAX_CHARS for _, c in long)
    assert max(len(c) for _, c in short) < min(len(c) for _, c in long)
    warned = _Collect()
    library = logging.getLogger("transformers")  # it does not propagate: pytest's capture would not see it
    library.addHandler(warned)
    try:
        mix = soak.length_mix(pairs)
    finally:
        library.removeHandler(warned)
    assert mix["pairs"] == 40 and mix["context_chars"]["max"] == max(len(c) for _, c in pairs)
    if "tokens" in mix:  # counted with the shipped tokenizer: an article is past 512 tokens, and no warning says so
        assert mix["tokens"]["max"] > 512 and not any("maximum sequence length" in m for m in warned.messages)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_small_soak(engine_for_soak, tmp_path) -> None:
    """The soak script against the app on the tiny models: samples every few requests and a growth figure."""
    soak = load_soak()
    demo = app.build_demo(engine_for_soak, results_dir=tmp_path)
    out = tmp_path / "soak.json"
    argv = ["--clients", "2", "--requests", "12", "--every", "4", "--warmup", "4", "--pairs", "8"]
    with running(demo, trusted_proxies="127.0.0.1") as url:
        soak.main(["--url", url, "--pid", str(os.getpid()), "--out", str(out), "--label", "tiny", *argv])
    record = json.loads(out.read_text(encoding="utf-8"))
    run = record["modes"]["tiny"]
    assert run["errors"] == 0 and run["completed"] == 12 and not run["timed_out"], run
    assert [s["requests"] for s in run["samples"]] == [0, 4, 8, 12]
    assert run["rss_after_warmup_mb"] == run["samples"][1]["rss_mb"] > 0
    assert run["rss_growth_mb"] == round(run["samples"][-1]["rss_mb"] - run["samples"][1]["rss_mb"], 1)
    assert record["inputs"]["pairs"] == 8 and {"cpu", "cores"} <= set(record["hardware"])


@pytest.fixture
def engine_for_soak(tiny_qa_dir, tiny_pruned_dir, artifacts_dir):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.mark.parametrize("module", [load_test_module, soak_module])
def test_a_url_where_nothing_answers_is_one_line_not_a_traceback(module, capsys) -> None:
    import socket  # noqa: PLC0415

    with socket.socket() as free:  # a port nobody listens on: bound, then closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    warmup = ["--warmup", "1"] if module is soak_module else []
    assert module.main(["--url", f"http://127.0.0.1:{port}", "--requests", "5", *warmup]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: nothing answers at http://127.0.0.1:{port}/") and "Traceback" not in err


def test_a_soak_whose_warm_up_takes_every_request_is_refused(capsys) -> None:
    with pytest.raises(SystemExit):
        soak_module.parse_args(["--requests", "50"])  # the default warm-up is 100 requests
    assert "--warmup (100) must be below --requests (50)" in capsys.readouterr().err
    assert soak_module.parse_args(["--requests", "50", "--warmup", "10"]).warmup == 10
