"""The app measures its own chain on its own machine (variants.benchmarking.self_bench, issue 78): the setting, a
record kept beside the built artifacts, a restart that goes on from the checkpoint, a start that finds its key
measured and measures nothing, the Benchmark tab's progress line and default record, GET /v1/benchmark and
``python -m variants self-bench``; on the tiny fixture models and the tiny SQuAD file."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from app_helpers import TINY_SETTINGS, tiny_engine
from fastapi.testclient import TestClient
from filelock import FileLock

from ui import benchmark as tab
from ui.own_record import own_html, own_record, with_own
from ui.record_choice import choices_for, record_label
from variants.benchmarking import self_bench
from variants.benchmarking.self_bench import SelfBench
from variants.core import config
from variants.core.question_files import read_questions
from variants.core.spec import VariantSpec
from variants.records import own
from variants.records.own import OwnStatus
from variants.records.record import Record
from variants.serving.engine import load_engine
from variants.serving.guard import ModelLine
from variants.serving.http import create_app


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def examples(squad_file: Path):
    return read_questions(squad_file).examples


class Turns:
    """The models' line as the self-bench meets it: counts the turns it took; ``fail_after`` turns, the process
    "stops" (the turn raises, as a killed process would stop measuring)."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.taken, self.fail_after = 0, fail_after

    @contextmanager
    def __call__(self):
        if self.fail_after is not None and self.taken >= self.fail_after:
            raise RuntimeError("stopped")
        self.taken += 1
        yield


def bench(engine, examples, folder: Path, n: int = 6, turns: Turns | None = None) -> SelfBench:
    # chunks of one question, one turn each, however fast the machine (a fast one answered all six in one chunk)
    return SelfBench(engine, n, folder, examples, turn=turns or Turns(), pause_s=0.0, checkpoint_s=0.0, chunk_s=1e-9)


def test_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.SELF_BENCH_ENV in config.ENVIRONMENT
    assert config.self_bench_questions({}) == config.SELF_BENCH
    assert config.self_bench_questions({"VARIANTS_SELF_BENCH": "40"}) == 40
    assert config.self_bench_questions({"VARIANTS_SELF_BENCH": "0"}) == 0
    with pytest.raises(ValueError, match="VARIANTS_SELF_BENCH='many' is not a whole number"):
        config.self_bench_questions({"VARIANTS_SELF_BENCH": "many"})
    with pytest.raises(ValueError, match="must not be negative"):
        config.self_bench_questions({"VARIANTS_SELF_BENCH": "-1"})
    docs = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text(encoding="utf-8")
    assert f"| `{config.SELF_BENCH_ENV}` |" in docs


def test_off_measures_nothing(engine, examples, tmp_path: Path) -> None:
    turns = Turns()
    off = SelfBench(engine, 0, tmp_path, examples, turn=turns)
    assert off.start() is None and off.measure().state == own.OFF and turns.taken == 0
    assert own_html(off.status()) == "" and not list(tmp_path.iterdir())


def test_measured_kept_and_not_measured_again(engine, examples, tmp_path: Path) -> None:
    """A record of kind self in the folder, with this machine's hardware, the code and its key; a second start
    (same chain, weights, hardware, code) finds it and takes no turn."""
    turns = Turns()
    first = bench(engine, examples, tmp_path, turns=turns)
    status = first.measure()
    assert status.state == own.DONE and status.done == status.total == 6 and turns.taken >= 2
    saved = Record.load(tmp_path / status.file)
    assert saved.is_own and saved.data["key"] == first.key() and saved.n_questions == 6
    assert saved.hardware["cpu"] and saved.versions["code"] == self_bench.record_versions()["code"]
    assert saved.data["code"] == self_bench.code_identity()
    assert all(e.latency_ms and e.latency_ms.n == 6 for e in saved.variants if not e.error)
    assert not list(tmp_path.glob(f"*{own.PARTIAL}"))  # the checkpoint goes once the record is kept
    again = Turns()
    second = bench(engine, examples, tmp_path, turns=again).measure()
    assert second.state == own.DONE and second.found and again.taken == 0 and second.file == status.file
    assert "Measured on this machine by an earlier start of this app" in second.words()


def test_the_key_is_the_chain_weights_hardware_and_code(engine, examples, tmp_path, monkeypatch) -> None:
    one = bench(engine, examples, tmp_path)
    key = one.key()
    assert key == bench(engine, examples, tmp_path).key()
    assert key != bench(engine, examples, tmp_path, n=5).key()
    monkeypatch.setattr(self_bench, "code_identity", lambda: "another-commit")
    assert one.key() != key
    monkeypatch.undo()
    real = self_bench.current_hardware()
    monkeypatch.setattr(self_bench, "current_hardware", lambda: {**real, "cpu": "Another CPU"})
    assert one.key() != key
    monkeypatch.undo()
    monkeypatch.setattr(engine, "weights", lambda: {"baseline": "sha256:other"})
    assert one.key() != key


def test_a_restart_goes_on_from_the_checkpoint(engine, examples, tmp_path: Path) -> None:
    """Stopped once every variant has answered the first question (a turn each), the measurement so far is on disk;
    the next start goes on from it and the record holds every question once per variant, and says where it went on
    from."""
    variants = sum(v.ok for v in engine.loaded)
    stopped = bench(engine, examples, tmp_path, turns=Turns(fail_after=variants + 1)).measure()
    assert stopped.state == own.FAILED and "stopped" in stopped.error
    key = bench(engine, examples, tmp_path).key()
    saved = own.read_checkpoint(tmp_path, key)
    assert saved is not None and saved["position"] > 0
    turns = Turns()
    resumed = bench(engine, examples, tmp_path, turns=turns).measure()
    assert resumed.state == own.DONE and resumed.resumed_at == saved["position"]
    record = resumed.record
    assert record.data["resumed_at"] == saved["position"] and record.n_questions == 6
    assert all(e.latency_ms.n == 6 for e in record.variants if not e.error)
    assert "Taken across a restart" in tab.benchmark_outputs(record, "")[0]


def test_a_checkpoint_of_other_questions_is_not_used(engine, examples, tmp_path: Path) -> None:
    first = bench(engine, examples, tmp_path)
    own.write_checkpoint(tmp_path, first.key(), {"position": 3, "questions": ["x"], "variants": {}})
    status = first.measure()
    assert status.state == own.DONE and status.resumed_at == 0


def test_the_tab_says_how_far_and_shows_the_record(engine, examples, tmp_path: Path) -> None:
    measuring = OwnStatus(own.MEASURING, done=12, total=40)
    html = own_html(measuring)
    assert "Measuring this chain on this machine: 12 of 40 questions" in html
    assert 'max="40" value="12"' in html
    status = bench(engine, examples, tmp_path).measure()
    record = own_record(status)
    assert record is not None and "Measured on this machine" in own_html(status)
    stored = with_own([], record)
    assert with_own(stored, record) == [record]  # once
    (label, key), *_ = choices_for(stored, [])
    assert label.startswith("Measured here by the app") and key == f"file:{record.file}"
    assert label == record_label(record)
    header = tab.benchmark_outputs(record, "")[0]
    assert "Measured on this machine by this app" in header


def test_the_page_shows_it_by_default(engine, examples, tmp_path: Path) -> None:
    """A page built once the record is taken chooses it; one built while it measures says how far it is."""
    import app  # noqa: PLC0415

    done = bench(engine, examples, tmp_path)
    done.measure()
    demo = app.build_demo(engine, results_dir=tmp_path / "none", self_bench=done)
    config_ = demo.get_config_file()
    values = {c["props"].get("elem_id"): c["props"].get("value") for c in config_["components"]}
    assert values["bench-record"] == f"file:{done.status().file}"
    assert "Measured on this machine" in values["bench-own"]
    waiting = bench(engine, examples, tmp_path / "other", n=4)
    demo = app.build_demo(engine, self_bench=waiting)
    values = {c["props"].get("elem_id"): c["props"].get("value") for c in demo.get_config_file()["components"]}
    assert "will be measured on this machine once it is built: 4 questions" in values["bench-own"]
    assert waiting.turn.__func__ is ModelLine.queued_turn  # its chunks take turns in the page's line


def test_the_api_reads_it(engine, examples, tmp_path: Path) -> None:
    with TestClient(create_app(engine)) as client:
        off = client.get("/v1/benchmark").json()
    assert off["state"] == "off" and off["record"] is None
    measured = bench(engine, examples, tmp_path)
    measured.measure()
    with TestClient(create_app(engine, own=measured.status)) as client:
        reply = client.get("/v1/benchmark")
    body = reply.json()
    assert reply.status_code == 200 and body["state"] == "done" and body["done"] == body["total"] == 6
    assert body["record"]["kind"] == "self" and body["record"]["data"]["key"] == measured.key()
    assert body["file"] == measured.status().file


def test_the_command_line_measures_and_reads_it(tiny_qa_dir, tiny_pruned_dir, tmp_path: Path, capsys) -> None:
    model = ["--preset", "embedded", "--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir)]
    model += ["--device", "cpu", "--cache-dir", str(tmp_path), "--no-fallback", "--questions", "3"]
    assert self_bench.main([*model, "--json"]) == 1  # nothing measured yet
    assert json.loads(capsys.readouterr().out)["record"] is None
    assert self_bench.main([*model, "--measure"]) == 0
    out = capsys.readouterr().out
    assert "Measured on this machine" in out and "record:" in out
    assert list((tmp_path / own.FOLDER).glob("*.json"))
    assert self_bench.main([*model, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["state"] == "done" and body["record"]["kind"] == "self" and body["record"]["data"]["n_questions"] == 3


def test_a_chain_of_random_weights_is_timed_on_fewer_questions(tiny_qa_dir, artifacts_dir, examples, tmp_path):
    """A replica's chain (latency only) asks at most LATENCY_ONLY_QUESTIONS: no F1 to pin down, and BERT-large's
    questions take seconds each on 2 cores; its record has latency and no accuracy."""
    spec = VariantSpec("baseline", "Baseline (random weights)", str(tiny_qa_dir), latency_only=True)
    replica = load_engine(
        variant_specs=[spec], device="cpu", fallback=False, cache_dir=artifacts_dir, settings=TINY_SETTINGS
    )
    many = [replace(e, id=f"{e.id}-{i}") for i in range(10) for e in examples]  # 60 questions
    status = SelfBench(replica, 60, tmp_path, many, pause_s=0.0).measure()
    assert status.state == own.DONE and status.total == status.done == self_bench.LATENCY_ONLY_QUESTIONS
    (entry,) = status.record.variants
    assert entry.latency_only and entry.latency_ms.n == 50 and entry.view("pipeline") is None


def test_one_process_measures_a_key_at_a_time(engine, examples, tmp_path: Path) -> None:
    """Two processes on one folder (replicas of the app): the second waits for the first's record and takes it."""
    first = bench(engine, examples, tmp_path)
    held = FileLock(tmp_path / f"{first.key()}.lock")
    held.acquire()
    try:
        thread = first.start()
        time.sleep(1.0)
        assert first.status().state == own.WAITING
    finally:
        held.release()
    thread.join(300)
    assert first.status().state == own.DONE
