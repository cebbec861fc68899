"""A visitor's own model built into its no-training chain: offline from the local Hub cache (a tiny DistilBERT,
another family than the preset's BERT), one build at a time, Stop, the time cap, and the idle drop with its
files removed."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import huggingface_hub
import pytest
from app_helpers import CONTEXT, QUESTION, TINY_SETTINGS, VISITOR_ID, write_cached_distilbert

from variants.building import custom
from variants.building.custom import CustomModelRefused
from variants.serving.build_status import FAILED, READY
from variants.serving.engine import load_engine
from variants.serving.visitor import BuildStopped, VisitorBusy, VisitorChains, busy_sentence

CHAIN = ["baseline", "baseline-onnx", "baseline-onnx-opt", "baseline-onnx-opt-int8"]
JOIN_S = 120  # a tiny chain builds in seconds; generous for a loaded 2-core machine


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("hub")
    write_cached_distilbert(cache)
    return cache


@pytest.fixture
def offline(hub_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No Hub: the visitor's model is read from the local cache only."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    return hub_cache


@pytest.fixture(scope="module")
def base(tiny_qa_dir: Path, artifacts_dir: Path):
    """The preset's engine: the tiny BERT baseline alone."""
    return load_engine(
        "embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=artifacts_dir, settings=TINY_SETTINGS,
        names=["baseline"],
    )  # fmt: skip


def chains_for(base, tmp_path: Path, **options) -> VisitorChains:
    return VisitorChains(base, root=tmp_path / "chains", **options)


def test_the_cached_copy_is_checked_offline(offline: Path) -> None:
    checked = custom.inspect_model(VISITOR_ID, 500)
    assert (checked.model_type, checked.architecture) == ("distilbert", "DistilBertForQuestionAnswering")
    assert checked.cached is not None and checked.cached.parent.parent == offline / "models--someone--tiny-distil-qa"
    assert checked.revision == "d" * 40 and 0 < checked.download_mb < 5
    with pytest.raises(CustomModelRefused, match=r"too large.*at most 0 MB"):
        custom.inspect_model(VISITOR_ID, 0)
    with pytest.raises(CustomModelRefused, match="not in the local Hugging Face cache"):
        custom.inspect_model("someone/not-cached", 500)


def test_a_cached_distilbert_builds_its_chain_and_answers(offline: Path, base, tmp_path: Path) -> None:
    chains = chains_for(base, tmp_path)
    lines: list[str] = []
    chain = chains.start("visitor-1", VISITOR_ID)
    chain.engine.status.set_log(lines.append)
    chain.thread.join(JOIN_S)
    snap = chain.snapshot()
    assert [v.name for v in snap.variants] == CHAIN
    assert all(v.state == READY for v in snap.variants), [(v.name, v.error) for v in snap.variants]
    assert chain.ready_names() == CHAIN and not chain.building
    results = {r.variant: r for r in chain.engine.ask(QUESTION, CONTEXT)}
    assert all(r.error is None for r in results.values())
    assert len({r.answer for r in results.values()}) == 1  # ONNX, optimized and INT8 answer as the model does
    assert results["baseline-onnx-opt-int8"].speedup is not None  # against its own baseline
    assert any("export to ONNX" in line for line in lines) and any("quantize to INT8" in line for line in lines)
    assert chains.get("visitor-2") is None  # no one else's
    files = chain.folder
    assert any(files.rglob("*.onnx"))
    chains.drop("visitor-1")
    assert not files.exists() and chains.get("visitor-1") is None
    assert (offline / "models--someone--tiny-distil-qa").is_dir()  # the host's cached copy stays
    chains.close()


def gate_source(chains: VisitorChains, entered: threading.Event, release: threading.Event) -> None:
    """Hold every build at its source until ``release``, checking for Stop meanwhile."""
    original = chains._source

    def held(chain):
        entered.set()
        while not release.wait(0.05):
            chains._check(chain)
        return original(chain)

    chains._source = held


def test_one_build_at_a_time_and_stop(offline: Path, base, tmp_path: Path) -> None:
    chains = chains_for(base, tmp_path)
    entered, release = threading.Event(), threading.Event()
    gate_source(chains, entered, release)
    first = chains.start("visitor-1", VISITOR_ID)
    assert entered.wait(JOIN_S)
    busy = r"^Another visitor's model is building \(one at a time here, about .* left\)"
    with pytest.raises(VisitorBusy, match=busy):
        chains.start("visitor-2", VISITOR_ID)
    with pytest.raises(VisitorBusy, match="still building"):
        chains.start("visitor-1", VISITOR_ID)
    assert not chains.stop("visitor-2")  # nothing of theirs builds
    assert chains.stop("visitor-1")
    first.thread.join(JOIN_S)
    snap = first.snapshot()
    assert all(v.state == FAILED and v.error == "Stopped." for v in snap.variants) and snap.done
    assert not first.folder.exists()  # nothing of a stopped build is kept
    release.set()
    second = chains.start("visitor-2", VISITOR_ID)  # the slot is free again
    second.thread.join(JOIN_S)
    assert second.ready_names() == CHAIN
    chains.close()
    assert not first.folder.exists() and not second.folder.exists()


def test_the_build_time_cap(offline: Path, base, tmp_path: Path) -> None:
    chains = chains_for(base, tmp_path, build_s=0)
    chain = chains.start("visitor-1", VISITOR_ID)
    chain.thread.join(JOIN_S)
    errors = {v.error for v in chain.snapshot().variants}
    assert errors == {"Stopped: it took longer than the 0 s a build may take here."}
    chains.close()


def test_dropped_after_the_idle_time_files_and_all(offline: Path, base, tmp_path: Path) -> None:
    now = [0.0]
    chains = chains_for(base, tmp_path, idle_s=60, clock=lambda: now[0], sweep_every_s=3600)
    chain = chains.start("visitor-1", VISITOR_ID)
    chain.thread.join(JOIN_S)
    assert chain.ready_names() == CHAIN
    now[0] += 59
    assert chains.get("visitor-1") is chain  # a use: the idle time starts again
    now[0] += 59
    assert chains.sweep() == [] and chain.folder.exists()
    now[0] += 2
    assert chains.sweep() == ["visitor-1"]
    assert not chain.folder.exists() and chains.get("visitor-1") is None
    chains.close()


def test_the_timer_drops_it(offline: Path, base, tmp_path: Path) -> None:
    """With the real clock and the sweeper thread: a 1 s idle time, checked every 0.2 s."""
    chains = chains_for(base, tmp_path, idle_s=1, sweep_every_s=0.2)
    chain = chains.start("visitor-1", VISITOR_ID)
    chain.thread.join(JOIN_S)
    deadline = time.monotonic() + 30
    while chain.folder.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not chain.folder.exists() and chains.get("visitor-1") is None
    chains.close()


def test_busy_sentence() -> None:
    from variants.serving.build_status import BuildStatus  # noqa: PLC0415

    snap = BuildStatus([]).snapshot()
    assert busy_sentence(snap, 42) == (
        "Another visitor's model is building (one at a time here, about 42 s left): try again then."
    )
    assert "about 5 min left" in busy_sentence(snap, 300)
    assert issubclass(BuildStopped, BaseException) and not issubclass(BuildStopped, Exception)


def test_measured_beside_the_presets(offline: Path, base, tmp_path: Path, squad_file: Path) -> None:
    """The quick benchmark's engine for a visitor with a chain: the preset's variants and theirs in one record,
    each speedup and agreement against its own chain's baseline; the summary stays on the preset's chain."""
    from ui.report import benchmark_report  # noqa: PLC0415
    from variants.benchmarking.quick import QuickRun  # noqa: PLC0415
    from variants.core.squad import load_squad_json  # noqa: PLC0415
    from variants.records.cost import record_costs  # noqa: PLC0415
    from variants.serving.visitor import beside  # noqa: PLC0415

    chains = chains_for(base, tmp_path)
    assert beside(base, None) is base
    chain = chains.start("visitor-1", VISITOR_ID)
    chain.thread.join(JOIN_S)
    view = beside(base, chain)
    assert [s.name for s in view.specs] == ["baseline", *(f"yours-{n}" for n in CHAIN)]
    assert not any(s.headline for s in view.specs if s.name.startswith("yours-"))
    assert view.specs[-1].label == "Your model + ONNX + INT8" and VISITOR_ID in view.specs[-1].description
    run = QuickRun(view, load_squad_json(squad_file), 4, chunk_s=0.05)
    while run.step():
        pass
    record = run.record()
    entries = {e.variant: e for e in record.entries}
    assert set(entries) == {"baseline", *(f"yours-{n}" for n in CHAIN)}
    assert entries["baseline"].speedup_vs_baseline == entries["yours-baseline"].speedup_vs_baseline == 1.0
    int8 = entries["yours-baseline-onnx-opt-int8"]
    own = entries["yours-baseline"].latency_ms.p50 / int8.latency_ms.p50
    assert int8.speedup_vs_baseline == pytest.approx(own, rel=0.01)  # against its own baseline, not the preset's
    costs = {c.variant: c for c in record_costs(record, 1.0)}
    assert costs["yours-baseline-onnx-opt-int8"].batch1_usd is not None  # the cost per million answers
    report = benchmark_report(record, price=1.0)  # and the report, with the visitor's chain in its table
    assert "Your model + ONNX + INT8" in report and "$ per million answers" in report
    chains.close()
