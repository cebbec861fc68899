"""The peers in an environment of their own: our decoding against transformers' pipeline's answers (from the
fixture its script writes there), the peer worker on its own and run for real, and the bench with and without that
environment."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
import tomllib

import pytest
from packaging.requirements import Requirement
from peer_helpers import FIXTURE, ROOT, baseline_folder, needs_peers, pipeline_answers
from transformers import AutoTokenizer

from variants.__main__ import main
from variants.answering import timing
from variants.answering.qa import DecodeSettings, answer
from variants.answering.runtime import TorchQAModel
from variants.benchmarking import bench, peer, peer_worker
from variants.benchmarking.options import Options, Runner
from variants.building.storage import load_qa_model
from variants.core.spec import VariantSpec
from variants.core.squad import load_squad, load_squad_json
from variants.records.record import OPTIMUM_INT8, PEER, Record
from variants.serving.engine import load_engine

PEERS_PINS = ROOT / "requirements-peers.txt"


def pins(path) -> dict[str, str]:
    lines = (line.split("#")[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return {Requirement(line).name.lower(): str(Requirement(line).specifier) for line in lines if line}


# --- our decoding against the pipeline's answers ----------------------------------------------------------


@pytest.fixture(scope="module")
def shipped():
    folder = baseline_folder()
    return TorchQAModel(load_qa_model(folder)), AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize("max_answer_len", ["3", "15"])
def test_our_decoding_answers_as_the_pipeline_on_the_shipped_baseline(shipped, max_answer_len):
    """Short passages through 64-token windows (one of them spans a dozen), two answer-length limits: the same
    text at the same characters, and the score the pipeline ranks by (a sum over windows, which can pass 1)."""
    model, tokenizer = shipped
    fixture = pipeline_answers()["windows"]
    theirs = fixture[max_answer_len]
    options = theirs["settings"]
    settings = DecodeSettings(
        max_length=options["max_seq_len"],
        stride=options["doc_stride"],
        max_answer_length=options["max_answer_len"],
        windows="pipeline",
    )
    for case, expected in zip(fixture["cases"], theirs["answers"], strict=True):
        ours = answer(model, tokenizer, case["question"], case["context"], settings)
        assert (ours.text, ours.start, ours.end) == (expected["answer"], expected["start"], expected["end"]), case
        # one window's probability is shown; the pipeline's ranking score is ours too. The fixture was computed in
        # another environment (its transformers, the same torch): equal to float rounding.
        assert (ours.ranked_score if ours.text else ours.score) == pytest.approx(expected["score"], abs=1e-4)
        assert 0.0 <= ours.score <= 1.0


def test_the_fixture_says_how_it_was_made_and_follows_the_peers_pins():
    data = pipeline_answers()  # and its digests are the shipped model's
    assert data["made_by"].startswith("scripts/peer_fixtures.py")
    peers = pins(PEERS_PINS)
    for lib in ("transformers", "tokenizers", "torch"):  # regenerate the fixture when these pins move
        assert "==" + data["environment"][lib].split("+")[0] == peers[lib], lib
    for answers in (*(data["windows"][n] for n in ("3", "15")), data["sample"]):
        assert answers["settings"]["handle_impossible_answer"] is True and answers["settings"]["dtype"] == "float32"
    assert data["model"]["dtype"] == "fp32"
    sample = load_squad_json(ROOT / data["sample"]["file"])
    assert data["sample"]["ids"] == [e.id for e in sample[: len(data["sample"]["ids"])]]


def test_the_peers_environment_is_pinned_exactly_with_the_products_onnxruntime():
    peers = pins(PEERS_PINS)
    assert all(spec.startswith("==") and "," not in spec for spec in peers.values()), peers
    assert {"torch", "transformers", "optimum", "optimum-onnx", "onnxruntime"} <= set(peers)
    assert (peers["transformers"], peers["optimum"], peers["optimum-onnx"]) == ("==4.57.6", "==2.1.0", "==0.1.0")
    product = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    ours = {Requirement(r).name: str(Requirement(r).specifier) for r in product}
    assert peers["onnxruntime"] == ours["onnxruntime"] and peers["torch"] == ours["torch"]


# --- the worker on its own ----------------------------------------------------------------------------------


def test_the_worker_imports_nothing_of_the_product_and_only_the_peers_libraries_in_its_functions():
    tree = ast.parse((ROOT / "variants/benchmarking/peer_worker.py").read_text(encoding="utf-8"))
    top = {
        n.module if isinstance(n, ast.ImportFrom) else a.name
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert {name.split(".")[0] for name in top} - {"__future__"} <= set(sys.stdlib_module_names), top
    inner = {
        (n.module if isinstance(n, ast.ImportFrom) else n.names[0].name).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
    }
    assert inner - set(sys.stdlib_module_names) - {"__future__"} == {"torch", "transformers", "optimum", "onnxruntime"}
    # run as the bench runs it (a file, isolated): it starts with no package of ours within reach
    done = subprocess.run(
        [sys.executable, "-I", str(peer.WORKER), "versions"], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout)["python"] == sys.version.split()[0]


PEERS_ONLY = ("optimum", "transformers.pipelines", "transformers.data.metrics")  # not in the product's transformers
# the upgrade's measurements of optimum's export, run in the peers' environment (experiments/upgrade/README.md)
BEFORE_THE_UPGRADE = ROOT / "experiments/upgrade"


def test_only_the_worker_imports_what_the_peers_environment_alone_has():
    """The pipeline, squad_metrics and optimum are the peers' (transformers 4): nothing else imports them."""
    found = []
    folders = ("variants", "ui", "tests", "experiments")
    files = [ROOT / "app.py", ROOT / "conftest.py", *(p for d in folders for p in (ROOT / d).rglob("*.py"))]
    for path in files:
        if path == peer.WORKER or path.is_relative_to(BEFORE_THE_UPGRADE):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            hits = [n for n in names if n == "transformers.pipeline" or n.startswith(PEERS_ONLY)]
            found += [f"{path.relative_to(ROOT)}:{node.lineno} {hit}" for hit in hits]
    assert found == []


def test_the_worker_times_with_the_benchs_clock():
    """Its clock is a copy of the timing rule's (it may import nothing of ours): both read the same process alike."""
    ours, theirs = timing.cpu_clock(), peer_worker.cpu_clock()
    assert theirs[0] == pytest.approx(ours[0], abs=0.05)
    assert (theirs[1] is None) == (ours[1] is None) and (
        ours[1] is None or theirs[1] == pytest.approx(ours[1], abs=0.05)
    )
    started = peer_worker.cpu_clock()
    end = time.process_time() + 0.05
    while time.process_time() < end:  # 50 ms of CPU
        pass
    cpu_ms, _ = peer_worker.cpu_since(started)
    assert 40 <= cpu_ms <= 1000
    assert peer_worker.memory()["rss_mb"] > 0


def test_a_call_timed_elsewhere_counts_its_own_time_not_the_pipes():
    """The bench's batch-1 timing takes a peer's own measure (OwnTiming) over the wall time around the call."""

    class Far:
        timed = None

        def __call__(self, pairs, batch=1):
            time.sleep(0.05)  # the pipe and the other process's wait: not the peer's time
            self.timed = timing.OwnTiming(ms=7.0, cpu_ms=6.0, wait_ms=1.0)
            return [("x", None)]

    examples = load_squad_json(ROOT / "assets/data/squad_v2_dev_sample.json")[:2]
    runs = timing.latency_pass({"far": Far()}, examples, samples=3, warmup=1)["far"]
    assert runs.times_ms == [7.0] * 3 and runs.cpu_ms == [6.0] * 3 and runs.stretched == pytest.approx(7 / 6, abs=0.01)


# --- without the peers' environment ---------------------------------------------------------------------------


def tiny_engine(tiny_qa_dir):
    return load_engine("embedded", "cpu", variant_specs=[VariantSpec("baseline", "Baseline", str(tiny_qa_dir))])


def test_without_the_peers_environment_the_bench_says_so_in_one_line(
    tiny_qa_dir, squad_file, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("VARIANTS_PEERS_VENV", str(tmp_path / "no-peers"))
    entry = peer.peer_runner(tiny_engine(tiny_qa_dir))
    expected = f"the peers' environment is not set up ({tmp_path / 'no-peers'}): run bash scripts/setup.sh peers"
    assert entry.error == expected and peer.optimum_int8_runner(tiny_engine(tiny_qa_dir)).error == expected
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps({"preset": "embedded", "variants": [{"name": "baseline", "label": "B", "source": str(tiny_qa_dir)}]})
    )
    argv = ["bench", "--config", str(config), "--device", "cpu", "--data", str(squad_file), "--out", str(tmp_path)]
    argv += [
        "--latency-samples",
        "2",
        "--latency-passes",
        "1",
        "--warmup",
        "1",
        "--skip-sweeps",
        "--profile-questions",
        "0",
    ]
    assert main(argv) == 0  # the variants ran; the peers' columns carry the error
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("peers:")] == [
        f"peers: {expected}; their columns carry this error"
    ]
    assert "Traceback" not in err
    (path,) = tmp_path.glob("embedded-*.json")
    record = Record.load(path)
    assert record.peer.error == expected and [p.error for p in record.peers] == [expected]
    assert record.entry("baseline").error is None and record.entry("baseline").environment == {}


def test_records_from_before_the_peers_environment_still_load():
    old = Record.load(ROOT / "assets/results/embedded-cpu-intel-xeon-20261128T122209Z.json")
    assert old.peer.environment == {} and all(e.environment == {} for e in old.entries)
    assert Record.load(ROOT / "tests/data/record-schema1.json").peer.environment == {}


# --- the peers for real, in their environment ---------------------------------------------------------------


def test_the_worker_answers_like_the_fixture_on_the_shipped_baseline():
    """The bench's own worker in the peers' environment, a handful of the sample's questions: the fixture's answers,
    each timed by the worker; a bad request is that call's error and the worker goes on."""
    python = needs_peers()
    data = pipeline_answers()
    settings = data["sample"]["settings"]
    argv = ["serve", "pipeline", "--model", str(baseline_folder()), "--threads", "1"]
    argv += ["--max-length", str(settings["max_seq_len"]), "--stride", str(settings["doc_stride"])]
    argv += ["--max-answer-length", str(settings["max_answer_len"])]
    process, ready = peer.start(python, argv)
    assert ready["dtype"] == "fp32" and ready["environment"]["transformers"] == data["environment"]["transformers"]
    by_id = {e.id: e for e in load_squad_json(ROOT / data["sample"]["file"])}
    for qid, expected in list(zip(data["sample"]["ids"], data["sample"]["answers"], strict=True))[:5]:
        example = by_id[qid]
        reply = process.ask({"pairs": [[example.question, example.context]], "batch": 1})
        (got,) = reply["answers"]
        assert (got["answer"], got["start"], got["end"]) == (expected["answer"], expected["start"], expected["end"])
        assert got["score"] == pytest.approx(expected["score"], abs=1e-6)
        assert reply["ms"] > 0 and reply["cpu_ms"] > 0
    with pytest.raises(peer.PeerError, match="TypeError"):
        process.ask({"pairs": 5})
    assert len(process.ask({"pairs": [["Where?", "It is in Paris."]]})["answers"]) == 1  # it went on
    assert process.memory()["rss_mb"] > 100


def test_the_peers_run_in_turns_with_the_variants_and_the_record_says_where(
    tiny_qa_dir, squad_file, tmp_path, monkeypatch
):
    needs_peers()
    monkeypatch.setenv("VARIANTS_CACHE_DIR", str(tmp_path / "cache"))
    engine = tiny_engine(tiny_qa_dir)
    pipeline_peer, optimum_peer = peer.peer_runner(engine), peer.optimum_int8_runner(engine, threads=1)
    assert isinstance(pipeline_peer, Runner) and isinstance(optimum_peer, Runner), (pipeline_peer, optimum_peer)
    options = Options(latency_samples=3, warmup=1, skip_sweeps=True, latency_passes=2)
    record = bench.benchmark(engine, load_squad(squad_file), options, peer=pipeline_peer, others=[optimum_peer])
    for entry in (record.peer, *record.peers):
        assert entry.error is None and entry.latency_ms.n == 6 and len(entry.latency_pass_p50_ms) == 2
        assert entry.environment["name"] == "peers" and entry.environment["transformers"] == "4.57.6"
        assert entry.environment["optimum"] == "2.1.0" and entry.memory["process"] == "the peer's own"
        assert entry.view("pipeline").f1 is not None
    assert record.entry("baseline").environment == {} and record.peer.variant == PEER
    assert set(record.entry("baseline").speedup_vs_peers) == {OPTIMUM_INT8}
    again = Record.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.peer.environment == record.peer.environment
    from variants.benchmarking.cli import environment_line  # noqa: PLC0415

    line = environment_line(record)
    assert line.startswith("peer and optimum-int8 ran in the peers environment (") and "transformers 4.57.6" in line
    assert FIXTURE.is_file()
