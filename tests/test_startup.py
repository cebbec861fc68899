"""The page opens before the variants are built: the build state object, the background build (a variant that
fails, the others serve; cards joining), the app's port answering before the build ends, the persistent folder,
the default preset by device, and --cache-dir covering the replica's folders."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import gradio as gr
import pytest
from app_helpers import CONTEXT, QUESTION, TINY_SETTINGS, free_port

import app
from ui.ask import make_ask
from ui.cards import cards_html
from ui.startup import build_html, header_html
from variants import cli
from variants.building import replica
from variants.building.build import VariantBuilder
from variants.core import config
from variants.core import spec as specs
from variants.serving.build_status import BUILDING, FAILED, FETCH_SECONDS, QUEUED, READY, STEP_SECONDS, BuildStatus
from variants.serving.engine import prepare_engine

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def wait_for(condition, timeout: float = 120.0, what: str = "the condition") -> None:
    """Poll ``condition`` until it holds (no fixed sleep: the suite runs under load)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout:.0f} s")
        time.sleep(0.05)


# --- the state object -----------------------------------------------------------------------------------


def test_the_build_status_follows_each_variant_and_logs_a_line_per_step() -> None:
    chain = specs.preset("embedded", "cpu")
    clock, lines = Clock(), []
    status = BuildStatus(chain, "embedded", log=lines.append, clock=clock)
    first = status.snapshot()
    assert not first.started and not first.done and all(v.state == QUEUED for v in first.variants)
    assert [v.name for v in first.variants] == [s.name for s in chain]
    assert first.remaining_s() > 0  # typical durations are known for every step

    status.begin()
    clock.now += 2
    status.step("baseline", "load")
    clock.now += 3
    snap = status.snapshot()
    baseline = snap.state("baseline")
    assert baseline.state == BUILDING and baseline.step == "load" and baseline.step_seconds == pytest.approx(3)
    assert snap.version > first.version
    status.ready("baseline")
    status.step("pruned-onnx", "export")
    clock.now += 1
    status.failed("pruned-onnx", "RuntimeError: no room")
    snap = status.snapshot()
    assert snap.state("baseline").state == READY and snap.state("baseline").seconds == pytest.approx(3)
    assert snap.state("pruned-onnx").state == FAILED and snap.state("pruned-onnx").error == "RuntimeError: no room"
    assert not snap.done and len(snap.pending) == len(chain) - 2
    assert lines[0] == "[   2.0 s] baseline: load the weights"
    assert any("baseline: ready in 3.0 s" in line for line in lines)
    assert any("pruned-onnx: FAILED in 1.0 s: RuntimeError: no room" in line for line in lines)

    status.fail_pending("the build stopped")
    assert status.snapshot().done and "build over: 1 of 6 variants ready" in lines[-1]


def test_the_build_shows_as_lines_with_steps_elapsed_time_and_an_estimate() -> None:
    chain = specs.preset("bert-large-replica", "cpu")
    clock = Clock()
    status = BuildStatus(chain, "bert-large-replica", clock=clock)
    queued = {v.name: v.estimate_s for v in status.snapshot().variants}
    large = STEP_SECONDS["large"]
    assert queued["baseline"] == large["load"] + large["warmup"]
    # the compacted model, the export and the optimized graph are made once and reused down the chain
    assert queued["pruned-onnx-opt-int8"] == large["int8"] + large["warmup"]
    status.begin()
    status.stage("Making replica:bert-large's random weights here (no download)")
    clock.now += 12
    html = build_html(status.snapshot())
    assert "0 of 6 ready, 12 s so far" in html
    assert f"random weights here (no download) (12 s; typically about {FETCH_SECONDS['bert-large-replica']} s)" in html
    status.stage("")
    status.step("pruned-onnx-opt", "optimize")
    clock.now += 5
    html = build_html(status.snapshot())
    more = large["optimize"] - 5 + large["warmup"]
    assert f"optimize the ONNX graph (step 3 of 4), 5 s; typically about {more} s more" in html
    assert "queued (typically about" in html


# --- the background build ---------------------------------------------------------------------------------


def gated(engine, name: str) -> threading.Event:
    """Make variant ``name``'s build wait until the returned event is set."""
    gate = threading.Event()
    build = engine._builder.build

    def slow_build(spec, progress, **kw):
        if spec.name == name:
            assert gate.wait(120), "the test never opened the gate"
        return build(spec, progress, **kw)

    engine._builder.build = slow_build
    return gate


def test_variants_join_as_they_build_and_a_failed_one_leaves_the_others_serving(
    tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path, tmp_path: Path
) -> None:
    chain = specs.preset("embedded", "cpu", {"baseline": str(tiny_qa_dir), "pruned": str(tmp_path / "missing")})
    chain = specs.named(chain, ["baseline", "pruned", "pruned-onnx-opt-int8"])
    engine = prepare_engine(variant_specs=chain, device="cpu", cache_dir=artifacts_dir, settings=TINY_SETTINGS)
    assert engine.loaded == [] and [v.state for v in engine.status.snapshot().variants] == [QUEUED] * 3
    gate = gated(engine, "pruned")
    thread = engine.build_in_background()
    wait_for(lambda: engine.status.snapshot().state("pruned").state == BUILDING, what="the pruned build")

    snap = engine.status.snapshot()
    assert snap.state("baseline").state == READY and not snap.done
    assert [v.spec.name for v in engine.loaded] == ["baseline"]  # the ready ones, as before the build ran apart
    cards = cards_html(engine.snapshot(), ["baseline", "pruned", "pruned-onnx-opt-int8"], "")
    assert 'data-variant="baseline" data-state="idle"' in cards
    assert 'data-variant="pruned" data-state="building"' in cards and "building: compact" in cards
    assert "Building the variants: 1 of 3 ready" in header_html(engine.snapshot())

    *_, (answered, summary, _chart, _last) = make_ask(engine)(CONTEXT, QUESTION, [])
    assert 'data-variant="baseline" data-state="done"' in answered and "Still building: Pruned" in summary

    gate.set()
    thread.join(120)
    snap = engine.status.snapshot()
    assert snap.done and snap.state("pruned").state == FAILED and "does not exist" in snap.state("pruned").error
    assert snap.state("pruned-onnx-opt-int8").state == FAILED  # the same missing source
    assert engine.variants["baseline"].ok and engine.variants["pruned"].error
    header = header_html(engine.snapshot())
    assert "2 of 3 variants failed to build" in header and "the others serve" in header
    cards = cards_html(engine.snapshot(), ["baseline", "pruned"], "")
    assert 'data-variant="pruned" data-state="error"' in cards and "does not exist" in cards


def test_the_fallback_is_decided_in_the_background_and_said(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setitem(
        specs.FAMILIES, "embedded", specs.Family("embedded", str(tiny_qa_dir), str(tiny_pruned_dir), "tiny stand-in")
    )
    engine = prepare_engine("bert-large", "cpu", cache_dir=tmp_path / "cache", settings=TINY_SETTINGS,
                            names=["baseline"])  # fmt: skip
    assert engine.preset == "bert-large" and not engine.notice  # nothing fetched yet: the page opens as asked
    engine.build_in_background().join(120)
    assert engine.preset == "embedded" and "madlag/" in engine.notice
    assert [v.name for v in engine.status.snapshot().variants] == ["baseline"] and engine.status.snapshot().done
    assert "preset</b> <code>embedded</code>" in header_html(engine.snapshot())
    header = header_html(engine.snapshot())
    assert engine.fallback_from == "bert-large" and "=bert-large" not in header  # the preset already asked for
    assert "--baseline DIR" in engine.notice  # off a Space: the command line's words


def test_after_a_fallback_on_a_space_the_advice_is_in_its_terms(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    for name, value in {"SPACE_ID": "someone/demo", "SYSTEM": "spaces", config.PERSIST_ENV: "0",
                        config.PRESET_ENV: "bert-large"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    monkeypatch.setitem(
        specs.FAMILIES, "embedded", specs.Family("embedded", str(tiny_qa_dir), str(tiny_pruned_dir), "tiny stand-in")
    )
    engine = prepare_engine("bert-large", "cpu", cache_dir=tmp_path / "cache", settings=TINY_SETTINGS,
                            names=["baseline"])  # fmt: skip
    engine.build_in_background().join(120)
    assert engine.preset == "embedded"
    assert "Settings → Variables and secrets" in engine.notice and "VARIANTS_BASELINE" in engine.notice
    assert "--baseline" not in engine.notice and "--pruned" not in engine.notice
    assert "Another preset" not in header_html(engine.snapshot())  # VARIANTS_PRESET=bert-large is what is set already


def test_the_header_names_the_other_preset_in_the_hosts_terms(monkeypatch) -> None:
    from types import SimpleNamespace  # noqa: PLC0415

    from ui.startup import preset_hint  # noqa: PLC0415

    for name in ("SPACE_ID", "SYSTEM", config.PRESET_ENV):
        monkeypatch.delenv(name, raising=False)
    engine = SimpleNamespace(preset="embedded", fallback_from="")
    assert "<code>--preset roberta-base</code> or <code>VARIANTS_PRESET=roberta-base</code>" in preset_hint(engine)
    assert "on 2 CPU cores" in preset_hint(engine)  # what a question costs with it
    monkeypatch.setenv("SPACE_ID", "someone/demo")
    assert "a variable in the Space's Settings → Variables and secrets" in preset_hint(engine)
    assert "--preset" not in preset_hint(engine)


def test_a_warm_start_says_what_came_from_the_cache() -> None:
    from variants.serving.build_status import fetch_words  # noqa: PLC0415

    lines: list[str] = []
    status = BuildStatus(specs.preset("embedded", "cpu"), "embedded", log=lines.append, clock=Clock())
    status.begin()
    status.step_over("pruned-onnx", "export", True, 0.07)
    status.step_over("pruned-onnx-opt", "optimize", False, 9.24)
    assert lines == [
        "[   0.0 s] pruned-onnx: export to ONNX: from the cache (0.1 s)",
        "[   0.0 s] pruned-onnx-opt: optimize the ONNX graph: built (9.2 s)",
    ]
    assert fetch_words("replica:bert-large") == "Making replica:bert-large's random weights here (no download)"
    assert "from the cache" in fetch_words("replica:bert-large", cached=True)
    assert fetch_words("madlag/x", cached=True) == "Reading madlag/x from the Hub cache (no download)"
    assert fetch_words("madlag/x") == "Downloading madlag/x"


# --- the app opens before the build ends ------------------------------------------------------------------


SLOW_APP = """
import sys, time
from pathlib import Path
import app
from variants.building.build import VariantBuilder

gate = Path(sys.argv[1])
build = VariantBuilder.build


def slow_build(self, spec, progress, **kw):
    while not gate.exists():
        time.sleep(0.05)
    return build(self, spec, progress, **kw)


VariantBuilder.build = slow_build
sys.exit(app.main(sys.argv[2:]))
"""


def test_the_port_answers_before_the_build_ends(tiny_qa_dir: Path, tmp_path: Path) -> None:
    port, gate = free_port(), tmp_path / "open"
    args = ["--preset", "embedded", "--baseline", str(tiny_qa_dir), "--variants", "baseline", "--no-fallback",
            "--cache-dir", str(tmp_path / "cache"), "--port", str(port)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "SPACE_ID"}
    log = (tmp_path / "app.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_APP, str(gate), *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        url = f"http://127.0.0.1:{port}/"

        def page() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    return reply.status == 200
            except OSError:
                return proc.poll() is not None  # stop waiting if the app died (asserted below)

        wait_for(page, what="the page")
        assert proc.poll() is None, (tmp_path / "app.log").read_text()
        assert not gate.exists()  # the page answered while the build still waited
        gate.touch()
        wait_for(lambda: "build over: 1 of 1" in (tmp_path / "app.log").read_text(), what="the build")
        text = (tmp_path / "app.log").read_text()
        assert "baseline: load the weights" in text and "baseline: ready in" in text
        assert text.index("Running on local URL") < text.index("baseline: ready in")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


# --- where things are kept ---------------------------------------------------------------------------------


def test_the_persistent_folder_is_the_spaces_storage_or_the_one_named(tmp_path: Path, monkeypatch) -> None:
    storage = tmp_path / "data"
    space = {"SPACE_ID": "someone/demo", "SYSTEM": "spaces"}
    assert config.persistent_dir(space, storage) is None  # a Space without persistent storage: nothing kept
    storage.mkdir()
    assert config.persistent_dir(space, storage) == storage
    assert config.persistent_dir({"SYSTEM": "spaces"}, storage) == storage
    assert config.persistent_dir({}, storage) is None  # a writable /data elsewhere is someone else's: left alone
    named = tmp_path / "mine"
    assert config.persistent_dir({config.PERSIST_ENV: str(named)}, storage) == named  # named: on any machine
    assert config.persistent_dir({**space, config.PERSIST_ENV: "0"}, storage) is None
    if os.geteuid() != 0:  # root writes anywhere
        storage.chmod(0o500)
        assert config.persistent_dir(space, storage) is None
        storage.chmod(0o700)

    stand_in = {**space, config.SPACE_STORAGE_ENV: str(storage)}
    assert config.space_storage({}) == Path("/data") and config.space_storage(stand_in) == storage
    assert config.persistent_dir(stand_in) == storage
    monkeypatch.delenv(config.PERSIST_ENV, raising=False)
    monkeypatch.delenv(config.CACHE_DIR_ENV, raising=False)
    for name, value in stand_in.items():
        monkeypatch.setenv(name, value)
    assert config.cache_dir() == storage / "qa-variants"
    monkeypatch.setenv(config.CACHE_DIR_ENV, str(tmp_path / "cache"))
    assert config.cache_dir() == tmp_path / "cache"


def test_the_hub_download_joins_the_artifacts_unless_the_host_chose_a_place(tmp_path: Path) -> None:
    home, storage = tmp_path / "home", tmp_path / "data"
    storage.mkdir()
    space = {"SPACE_ID": "someone/demo", "SYSTEM": "spaces", "HOME": str(home), config.SPACE_STORAGE_ENV: str(storage)}
    kept = storage / ".huggingface" / "hub"
    assert config.hub_cache(space) == kept
    # a Space image's HF_HOME is huggingface_hub's default in the home folder: ephemeral, not a choice
    assert config.hub_cache({**space, "HF_HOME": str(home / ".cache" / "huggingface")}) == kept
    assert config.hub_cache({**space, "HF_HOME": str(home / ".cache" / "huggingface") + "/"}) == kept
    assert config.hub_cache({**space, "HF_HUB_CACHE": str(home / ".cache" / "huggingface" / "hub")}) == kept
    xdg = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HF_HOME": str(tmp_path / "xdg" / "huggingface")}
    assert config.hub_cache({**space, **xdg}) == kept
    # anything else is the host's choice and wins, as does Hugging Face's own advice, HF_HOME=/data/.huggingface
    assert config.hub_cache({**space, "HF_HOME": str(tmp_path / "elsewhere")}) is None
    assert config.hub_cache({**space, "HF_HUB_CACHE": str(tmp_path / "hub")}) is None
    assert config.hub_cache({**space, "HF_HOME": str(storage / ".huggingface")}) is None
    off_space = {k: v for k, v in space.items() if k not in ("SPACE_ID", "SYSTEM")}
    assert config.hub_cache(off_space) is None  # no persistent folder: huggingface_hub's own place


def test_the_spaces_page_comes_from_its_variables() -> None:
    assert config.space_page({"SPACE_ID": "someone/demo"}) == "https://huggingface.co/spaces/someone/demo"
    names = {"SPACE_AUTHOR_NAME": "someone", "SPACE_REPO_NAME": "demo"}
    assert config.space_page(names) == "https://huggingface.co/spaces/someone/demo"
    assert config.space_page({}) is None and config.space_page({"SPACE_ID": "no-owner"}) is None


def test_cache_dir_covers_the_replicas_model_folders(tmp_path: Path, monkeypatch) -> None:
    written = []
    monkeypatch.setattr(replica, "write_model", lambda structure, folder: written.append(folder))
    chain = specs.preset("bert-large-replica", "cpu")
    builder = VariantBuilder("cpu", tmp_path / "cache")
    for spec in {s.source: s for s in chain}.values():  # the baseline's and the pruned model's folders
        known = builder.known_source(spec)  # before anything is built: where it will be
        assert known.path.parent == tmp_path / "cache" and not known.path.exists()
        assert builder.source(spec).path == known.path and known.path.is_dir()
    assert len(written) == 2 and all(str(w).startswith(str(tmp_path / "cache")) for w in written)

    args = app.parse_args(["--preset", "bert-large-replica", "--cache-dir", str(tmp_path / "other")])
    engine = cli.engine_from_args(args, build=False)
    assert all(engine._builder.known_source(s).path.parent == tmp_path / "other" for s in engine.specs)


def test_the_default_preset_follows_the_device(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline, the CPU's default is the one shipped with the app
    assert specs.default_preset("cpu") == "embedded" and specs.default_preset("cuda:0") == "bert-large"
    monkeypatch.delenv(config.PRESET_ENV, raising=False)
    engine = cli.engine_from_args(app.parse_args(["--device", "cpu"]), build=False)
    assert engine.preset == "embedded" and engine.loaded == []
    monkeypatch.delenv("HF_HUB_OFFLINE")  # where the Hub may answer, the published pair (nothing fetched yet)
    engine = cli.engine_from_args(app.parse_args(["--device", "cpu"]), build=False)
    assert engine.preset == "roberta-base" and engine.fallback_specs and engine.loaded == []
    monkeypatch.setenv(config.PRESET_ENV, "bert-large-replica")
    assert cli.engine_from_args(app.parse_args(["--device", "cpu"]), build=False).preset == "bert-large-replica"


def test_the_page_builds_from_the_specs_before_any_variant_is_built(tiny_qa_dir: Path, tmp_path: Path) -> None:
    overrides = {"baseline": str(tiny_qa_dir), "pruned": str(tiny_qa_dir)}
    engine = prepare_engine("embedded", "cpu", overrides, fallback=False, cache_dir=tmp_path, settings=TINY_SETTINGS)
    demo = app.build_demo(engine, results_dir=tmp_path / "no-records")
    assert engine.loaded == [] and not engine.status.snapshot().started  # building the page built nothing
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert "Starting the build of 6 variants" in by_id["qa-header"].value
    cards = by_id["qa-cards"].value
    assert cards.count('data-state="building"') == 3 and "building: queued" in cards  # the three headline ones
    leave_out = by_id["leave-out"]
    assert [value for _label, value in leave_out.choices] == ["baseline", "pruned", "pruned-onnx-opt-int8"]
    # no record for this preset: the header says what to do, and the two charts are not shown empty
    assert "Run quick benchmark" in by_id["bench-header"].value
    row = by_id["bench-scatter"].parent.parent  # the row of the two charts
    assert isinstance(row, gr.Row) and row.visible is False and by_id["bench-seqlen"].parent.parent is row
    # a page opened after the build (its timer already stopped) redraws the cards and About on load
    on_load = [fn for fn in demo.fns.values() if any(event == "load" for _block, event in fn.targets)]
    redrawn = {getattr(out, "elem_id", None) for fn in on_load for out in fn.outputs}
    assert "qa-cards" in redrawn  # they were left saying "building: queued" for good
