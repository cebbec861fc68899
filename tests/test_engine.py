"""The engine end to end on tiny models: every variant of a preset, isolation, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from variants import cli
from variants.answering.qa import CALIBRATED_THRESHOLD, DecodeSettings, InputError
from variants.answering.runtime import resolve_device
from variants.benchmarking import accuracy, bench
from variants.benchmarking import options as bench_options
from variants.core import spec as specs
from variants.core.squad import QAExample
from variants.serving.engine import load_engine

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = DecodeSettings(max_length=64, stride=16)
CONTEXT = "paris is the capital of france and the largest city of the country ."
QUESTION = "what is the capital of france ?"


@pytest.fixture(scope="module")
def engine(tiny_qa_dir, tiny_pruned_dir, tmp_path_factory):
    overrides = {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)}
    return load_engine("embedded", "cpu", overrides, cache_dir=tmp_path_factory.mktemp("cache"), settings=SETTINGS)


def test_every_variant_of_the_chain_loads_and_answers(engine):
    names = [s.name for s in engine.specs]
    assert names == ["baseline", "pruned-dense", "pruned", "pruned-onnx", "pruned-onnx-opt", "pruned-onnx-opt-int8"]
    results = engine.ask(QUESTION, CONTEXT)
    assert [r.variant for r in results] == names
    for r in results:
        assert r.error is None, r
        assert r.latency_ms > 0 and r.device == "cpu"
        assert CONTEXT[r.start : r.end] == r.answer
    by_name = {r.variant: r for r in results}
    assert by_name["baseline"].provider == "PyTorch"
    assert by_name["pruned-onnx"].provider == "CPUExecutionProvider"
    assert by_name["pruned-onnx-opt-int8"].dtype == "int8"
    assert by_name["baseline"].speedup == pytest.approx(1.0)
    # Compaction changes the arithmetic, not the answer; ONNX and graph optimization neither.
    for name in ("pruned", "pruned-onnx", "pruned-onnx-opt"):
        assert by_name[name].answer == by_name["pruned-dense"].answer
        assert by_name[name].score == pytest.approx(by_name["pruned-dense"].score, abs=1e-3)
    assert by_name["pruned"].parameters < by_name["pruned-dense"].parameters


def test_headline_variants_and_labels():
    chain = specs.preset("embedded", "cpu")
    assert [s.name for s in chain if s.headline] == ["baseline", "pruned", "pruned-onnx-opt-int8"]
    gpu_chain = specs.preset("embedded", "cuda")
    assert gpu_chain[-1].name == "pruned-onnx-opt-fp16" and "FP16" in gpu_chain[-1].label
    assert all("FP16" not in s.label for s in chain), "a CPU run is never labelled FP16"


def test_bad_input_is_refused_before_any_variant_runs(engine):
    with pytest.raises(InputError, match="question"):
        engine.ask("", CONTEXT)
    with pytest.raises(InputError, match="too long"):
        engine.ask(QUESTION, "word " * 10_000)


def test_a_failing_variant_does_not_take_the_others_down(tiny_qa_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    engine = load_engine(
        "embedded",
        "cpu",
        {"baseline": str(tiny_qa_dir), "pruned": str(broken)},
        cache_dir=tmp_path / "cache",
        settings=SETTINGS,
        names=["baseline", "pruned", "pruned-onnx"],
    )
    results = {r.variant: r for r in engine.ask(QUESTION, CONTEXT)}
    assert results["baseline"].error is None and results["baseline"].latency_ms > 0
    assert results["pruned"].error and results["pruned-onnx"].error
    assert "Traceback" not in results["pruned"].error


def test_hub_preset_falls_back_to_embedded_offline(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setitem(
        specs.FAMILIES,
        "embedded",
        specs.Family("embedded", str(tiny_qa_dir), str(tiny_pruned_dir), "tiny stand-in"),
    )
    engine = load_engine("bert-large", "cpu", cache_dir=tmp_path / "cache", settings=SETTINGS, names=["baseline"])
    assert engine.preset == "embedded"
    assert "bert-large" in engine.notice and "madlag/" in engine.notice
    assert engine.ask(QUESTION, CONTEXT)[0].error is None


def test_cli_ask_json(tiny_qa_dir, tiny_pruned_dir, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable, "-m", "variants", "ask", "--preset", "embedded",
        "--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir),
        "--variants", "baseline,pruned,pruned-onnx-opt-int8", "--cache-dir", str(tmp_path),
        "--context", CONTEXT, "--question", QUESTION, "--json",
    ]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=True)
    rows = json.loads(out.stdout)
    assert [r["variant"] for r in rows] == ["baseline", "pruned", "pruned-onnx-opt-int8"]
    for row in rows:
        assert {"variant", "answer", "score", "latency_ms", "device", "provider"} <= set(row)
        assert row["error"] is None

    bad = subprocess.run([*cmd[:-5], "--context", "", "--question", QUESTION], capture_output=True, text=True,
                         cwd=ROOT, env=env, timeout=300, check=False)  # fmt: skip
    assert bad.returncode == 2 and "context" in bad.stderr and "Traceback" not in bad.stderr


def test_an_unknown_variant_name_is_refused_with_the_known_ones(tiny_qa_dir, tiny_pruned_dir, tmp_path):
    overrides = {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)}
    with pytest.raises(ValueError, match=r"unknown variant\(s\) 'bogus'; this preset has baseline, "):
        load_engine("embedded", "cpu", overrides, names=["baseline", "bogus"], settings=SETTINGS, cache_dir=tmp_path)
    assert cli.variant_names(" baseline, pruned ,,") == ["baseline", "pruned"]  # spaces and empty names dropped
    assert cli.variant_names("") is None and cli.variant_names(None) is None


def test_a_device_name_is_checked_and_cuda_without_a_gpu_runs_on_the_cpu_saying_so(
    tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch
):
    for bad in ("gpu", "cuda:x", "CPU", ""):
        with pytest.raises(ValueError, match="auto, cpu, cuda or cuda:N"):
            resolve_device(bad)
    assert resolve_device("cuda:1") == "cuda:1" and resolve_device("cpu") == "cpu"
    import torch  # noqa: PLC0415

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    overrides = {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)}
    engine = load_engine("embedded", "cuda", overrides, names=["baseline"], settings=SETTINGS, cache_dir=tmp_path)
    assert engine.device == "cpu" and "cuda" in engine.notice and "CPU" in engine.notice
    assert engine.ask(QUESTION, CONTEXT)[0].error is None


def test_cli_ask_exits_1_when_a_variant_fails(tiny_qa_dir, tmp_path, capsys):
    broken = tmp_path / "broken"  # a pruned model folder whose weights cannot be read
    shutil.copytree(tiny_qa_dir, broken)
    for weights in broken.glob("*.safetensors"):
        weights.write_bytes(b"not weights")
    args = ["--preset", "embedded", "--baseline", str(tiny_qa_dir), "--pruned", str(broken), "--no-fallback",
            "--variants", "baseline,pruned", "--cache-dir", str(tmp_path / "cache"), "--repeats", "1",
            "--context", CONTEXT, "--question", QUESTION]  # fmt: skip
    assert cli.ask_main(args) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "ERROR" not in lines[0] and "ERROR" in lines[1]


@pytest.mark.parametrize("calibrated", [-1e9, 1e9])
def test_the_pipeline_rule_by_default_and_a_models_calibrated_threshold_one_choice_away(
    calibrated, tiny_qa_dir, tiny_pruned_dir, tmp_path
):
    folder = tmp_path / "calibrated"
    shutil.copytree(tiny_qa_dir, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, CALIBRATED_THRESHOLD: calibrated}))
    overrides = {"baseline": str(folder), "pruned": str(tiny_pruned_dir)}

    engine = load_engine("embedded", "cpu", overrides, names=["baseline"], settings=SETTINGS, cache_dir=tmp_path)
    assert engine.null_threshold == 0.0 and engine.variants["baseline"].settings.null_threshold == 0.0
    assert engine.calibrated_thresholds() == {"baseline": calibrated}
    (default,) = engine.ask(QUESTION, CONTEXT)
    assert default.null_threshold == 0.0
    # Per call: "calibrated" (-1e9: always "no answer"; 1e9: never), or any number, from the same decoded span.
    (result,) = engine.ask(QUESTION, CONTEXT, null_threshold="calibrated")
    assert result.null_threshold == calibrated
    assert (result.answer == "") == (calibrated < 0)
    assert (result.answer or result.guess) == (default.answer or default.guess)
    (never,) = engine.ask(QUESTION, CONTEXT, null_threshold=1e9)
    (always,) = engine.ask(QUESTION, CONTEXT, null_threshold=-1e9)
    assert never.answer and not always.answer and always.guess == never.answer

    engine = load_engine(
        "embedded",
        "cpu",
        overrides,
        names=["baseline"],
        settings=SETTINGS,
        cache_dir=tmp_path,
        null_threshold="calibrated",
    )
    assert engine.variants["baseline"].settings.null_threshold == calibrated
    assert engine.threshold_for("baseline", 0.5) == 0.5


def test_repeats_time_each_variant_k_times_after_one_untimed_run(engine):
    results = engine.ask(QUESTION, CONTEXT, repeats=3)
    baseline = next(r for r in results if r.variant == "baseline")
    for r in results:
        assert r.error is None and len(r.latency_runs) == 3
        assert r.latency_min_ms <= r.latency_ms <= r.latency_max_ms
        assert r.latency_ms == pytest.approx(sorted(r.latency_runs)[1], abs=0.01)  # the median of 3
        assert r.speedup == pytest.approx(baseline.latency_ms / r.latency_ms)
    with pytest.raises(ValueError, match="repeats"):
        engine.ask(QUESTION, CONTEXT, repeats=0)


def test_the_bench_measures_int8_accuracy_one_question_per_call(engine):
    """Dynamic INT8's answers depend on what shares its batch, and the app never batches it: the bench's
    accuracy pass asks it one question per call, the other variants accuracy_batch at a time."""

    runners, _ = bench.variant_runners(engine)
    options = bench_options.Options(accuracy_batch=16)
    batches = {r.name: accuracy.accuracy_batch(r, options) for r in runners}
    assert batches.pop("pruned-onnx-opt-int8") == 1
    assert set(batches.values()) == {16}
    calls = []
    int8 = next(r for r in runners if r.name == "pruned-onnx-opt-int8")
    counted = bench_options.Runner(
        int8.name, lambda pairs, batch: calls.append(len(pairs)) or int8.answer(pairs, batch), int8.entry, int8.model
    )
    examples = [QAExample(f"q{i}", QUESTION, CONTEXT, ("paris",), (0,)) for i in range(3)]
    accuracy.measure_accuracy(counted, examples, accuracy.accuracy_batch(counted, options))
    assert calls == [1, 1, 1]


def test_requests_on_one_variant_from_several_threads_take_turns_at_its_tokenizer(engine):
    """A fast tokenizer called from two threads at once fails ("Already borrowed"): the Ask tab, /v1/answer, a
    quick benchmark and a batcher's thread can all reach one variant's tokenizer together."""
    context = "Paris is the capital of France. " * 200  # several windows: long tokenizer calls
    errors = []

    def ask(question: str) -> None:
        for _ in range(6):
            result = engine.answer_one("baseline", question, context)
            if result.error:
                errors.append(result.error)

    threads = [threading.Thread(target=ask, args=(q,)) for q in ("Où est Paris ?", "What is the capital of France?")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
