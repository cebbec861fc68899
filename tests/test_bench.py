"""The benchmark end to end on the tiny fixture models, its records, and reading them back.

Only shapes, counts and orderings are checked: the timings themselves depend on the machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from peer_helpers import needs_peers
from transformers import AutoTokenizer

from variants.__main__ import main
from variants.answering.qa import WINDOW_RULES, DecodeSettings
from variants.answering.timing import latency_passes, seq_len_sweep, summarize
from variants.benchmarking import accuracy, bench, long_inputs, peer, plot, quick
from variants.benchmarking import cli as bench_cli
from variants.benchmarking import options as bench_options
from variants.core import hardware
from variants.core.spec import VariantSpec
from variants.core.squad import load_squad
from variants.records import results
from variants.records.record import SCHEMA_VERSION, VIEWS, LatencyStats, Record, VariantEntry
from variants.serving.engine import load_engine
from variants.training.augment import answer_sentence

REQUIRED_ENTRY_KEYS = {
    "variant",
    "label",
    "headline",
    "backend",
    "device",
    "provider",
    "dtype",
    "size_mb",
    "parameters",
    "calibrated_threshold",
    "load_seconds",
    "accuracy",
    "latency_ms",
    "throughput_qps",
    "speedup_vs_baseline",
    "speedup_vs_peer",
    "agreement_with_baseline",
    "seq_len_sweep",
    "batch_sweep",
    "memory",
    "error",
    "latency_only",
}
REQUIRED_COLUMNS = [
    "variant",
    "label",
    "short_label",
    "view",
    "threshold",
    "f1",
    "exact",
    "has_ans_f1",
    "no_ans_f1",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "throughput_qps",
    "size_mb",
    "parameters",
    "speedup_vs_baseline",
    "device",
    "provider",
    "dtype",
    "hardware",
    "created",
    "n_questions",
    "n_latency",
]


def tiny_specs(tiny_qa_dir: Path, tiny_pruned_dir: Path) -> list[VariantSpec]:
    return [
        VariantSpec("baseline", "Baseline", str(tiny_qa_dir), (), True),
        VariantSpec("pruned-dense", "Pruned dense", str(tiny_pruned_dir)),
        VariantSpec("pruned", "Pruned", str(tiny_pruned_dir), ("compact",), True),
        VariantSpec("broken", "Broken", str(tiny_qa_dir.parent / "no-such-model")),
    ]


@pytest.fixture(scope="module")
def engine(tiny_qa_dir, tiny_pruned_dir):
    return load_engine("embedded", "cpu", variant_specs=tiny_specs(tiny_qa_dir, tiny_pruned_dir), fallback=False)


# --- the command line, end to end -----------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, tiny_qa_dir, tiny_pruned_dir, squad_file):
    """``python -m variants bench`` with a config naming the tiny models (and one that cannot load)."""
    out = tmp_path_factory.mktemp("results")
    config = out.parent / "bench_config.json"
    variants = [
        {"name": s.name, "label": s.label, "source": s.source, "steps": list(s.steps), "headline": s.headline}
        for s in tiny_specs(tiny_qa_dir, tiny_pruned_dir)
    ]
    config.write_text(json.dumps({"preset": "embedded", "variants": variants}))
    argv = ["bench", "--config", str(config), "--device", "cpu", "--data", str(squad_file), "--out", str(out)]
    argv += ["--latency-samples", "8", "--latency-passes", "2", "--warmup", "2", "--runs", "3"]
    argv += ["--seq-lens", "16,32,256"]
    argv += ["--batch-sizes", "1,2,4", "--sweep-questions", "4", "--sort-by-length", "--accuracy-batch", "4"]
    code = main(argv)  # the peers from their environment where it is set up, else their rows carry its absence
    (json_path,) = out.glob("*.json")
    return code, json_path, json.loads(json_path.read_text())


def test_cli_writes_a_record_and_a_csv(cli_run, capsys):
    code, json_path, record = cli_run
    assert code == 1  # one variant failed; the record is written anyway
    assert json_path.name.startswith("embedded-cpu-")
    assert json_path.name.endswith(record["created"].replace("-", "").replace(":", "") + ".json")
    csv = pd.read_csv(json_path.with_suffix(".csv"))
    rows = ["baseline", "pruned-dense", "pruned", "broken", "peer", "optimum-int8"]  # each view a row
    assert list(csv["variant"]) == rows * 3
    assert list(csv["view"]) == [v for v in VIEWS for _ in rows]
    assert list(csv.columns[: len(REQUIRED_COLUMNS)]) == REQUIRED_COLUMNS


def test_record_top_level(cli_run, squad_file):
    _, _, record = cli_run
    assert record["schema_version"] == SCHEMA_VERSION == 2
    assert record["preset"] == "embedded" and record["device"] == "cpu" and record["kind"] == "full"
    assert record["created"].endswith("Z")
    hw = record["hardware"]
    assert hw["cpu"] and hw["cores"] >= 1 and hw["memory_gb"] > 0 and "gpu" in hw and "gpu_count" in hw
    for lib in ("torch", "transformers", "onnxruntime", "optimum", "onnx", "numpy", "python"):
        assert lib in record["versions"]
    assert record["versions"]["torch"] and record["versions"]["python"]
    data = record["data"]
    assert data["n_questions"] == 6 and data["has_answer"] == 4 and data["no_answer"] == 2
    assert len(data["sha256"]) == 64 and data["file"].endswith("tiny_squad.json")
    settings = record["settings"]
    assert (settings["max_length"], settings["stride"], settings["max_answer_length"]) == (384, 128, 30)
    assert "threads" in settings and settings["latency_samples"] == 8 and settings["latency_passes"] == 2
    assert settings["windows"] == DecodeSettings().window_rule() and settings["windows"]["rule"] == "near"


def test_each_variant_is_measured(cli_run):
    _, _, record = cli_run
    by_name = {e["variant"]: e for e in record["variants"]}
    peer_ran = record["peer"]["error"] is None  # the peers' environment is set up (CI sets it up)
    assert set(by_name) == {"baseline", "pruned-dense", "pruned", "broken"}
    for name in ("baseline", "pruned-dense", "pruned"):
        e = by_name[name]
        assert REQUIRED_ENTRY_KEYS <= set(e)
        assert e["error"] is None
        assert e["build"] == {}  # PyTorch variants have no ONNX build steps to report
        assert (e["device"], e["provider"], e["dtype"], e["backend"]) == ("cpu", "PyTorch", "fp32", "torch")
        assert e["size_mb"] > 0 and e["parameters"] > 0 and e["load_seconds"] >= 0
        assert e["weights"].startswith("sha256:")  # what it measured, the same in every clone
        lat = e["latency_ms"]
        assert lat["n"] == 16  # 8 questions, 2 passes
        assert len(e["latency_pass_p50_ms"]) == 2 and all(p > 0 for p in e["latency_pass_p50_ms"])
        for key in ("speedup_vs_baseline", "speedup_vs_peer")[: 2 if peer_ran else 1]:
            low, high = e[key + "_range"]
            assert low <= e[key] <= high
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"] and lat["std"] >= 0
        assert e["throughput_qps"] == pytest.approx(1000 / lat["mean"], rel=0.01)
        views = e["accuracy"]
        assert set(views) == set(VIEWS) and views["calibrated"] is None  # the tiny models have none
        for acc in (views["pipeline"], views["best"]):
            assert acc["n"] == 6 and acc["has_ans_n"] == 4 and acc["no_ans_n"] == 2
            for key in ("exact", "f1", "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1"):
                assert 0 <= acc[key] <= 100
            assert acc["exact"] <= acc["f1"]
        assert views["pipeline"]["threshold"] == 0.0 and views["best"]["f1"] >= views["pipeline"]["f1"]
        assert 0 <= e["agreement_with_baseline"] <= 1
        assert e["speedup_vs_baseline"] > 0 and (not peer_ran or e["speedup_vs_peer"] > 0)
        assert e["memory"]["rss_mb"] > 0 and e["memory"]["peak_rss_mb"] > 0
        # Sequence-length sweep: the tiny model has 128 positions, so 256 fails and says so.
        sweep = {row["seq_len"]: row for row in e["seq_len_sweep"]}
        assert set(sweep) == {16, 32, 256}
        for n in (16, 32):
            assert sweep[n]["n"] == 3 and 0 < sweep[n]["p50_ms"] <= sweep[n]["p90_ms"]
        assert "error" in sweep[256]
        rows = e["batch_sweep"]
        assert [r["batch_size"] for r in rows] == [1, 2, 4]
        for row in rows:
            assert row["n_questions"] == 4 and row["n_batches"] == -(-4 // row["batch_size"])
            assert row["ms_per_question"] > 0 and row["throughput_qps"] > 0
        assert e["peak_throughput_qps"] == max(r["throughput_qps"] for r in rows)
        prof = e["profile"]
        assert prof["n"] == 6 and prof["tokens"] > 0
        assert all(prof[k] > 0 for k in ("tokenize_ms", "forward_ms", "decode_ms", "gflop", "gflops_achieved"))
    base = by_name["baseline"]
    assert base["speedup_vs_baseline"] == 1.0 and base["agreement_with_baseline"] == 1.0
    assert by_name["pruned"]["parameters"] < by_name["pruned-dense"]["parameters"]
    # Compaction cuts operations; the dense copy with zeros still runs them all.
    assert by_name["pruned"]["profile"]["gflop"] < by_name["pruned-dense"]["profile"]["gflop"]
    assert by_name["pruned-dense"]["profile"]["gflop"] == pytest.approx(base["profile"]["gflop"])
    peak = record["hardware"]["measured_peak"]
    assert peak["fp32_gflops"] > 0 and peak["int8_gops"] > 0 and peak["threads"] >= 1
    # The same weights, compacted or not, give the same answers.
    for view in ("pipeline", "best"):
        compacted, dense = by_name["pruned"]["accuracy"][view], by_name["pruned-dense"]["accuracy"][view]
        assert compacted["f1"] == pytest.approx(dense["f1"]) and compacted["exact"] == pytest.approx(dense["exact"])


def test_failed_variant_keeps_its_error(cli_run):
    _, _, record = cli_run
    broken = next(e for e in record["variants"] if e["variant"] == "broken")
    assert REQUIRED_ENTRY_KEYS <= set(broken)
    assert "does not exist" in broken["error"]
    assert broken["latency_ms"] is None and broken["accuracy"] == dict.fromkeys(VIEWS)


def test_peer_is_measured_alongside(cli_run):
    needs_peers()  # from the peers' environment (tests/test_peers.py checks the bench without it)
    _, _, record = cli_run
    peer = record["peer"]
    assert REQUIRED_ENTRY_KEYS <= set(peer)
    assert peer["variant"] == "peer" and peer["backend"] == "transformers-pipeline" and peer["error"] is None
    assert peer["latency_ms"]["n"] == 16 and peer["speedup_vs_peer"] == 1.0
    assert peer["speedup_vs_peer_range"] == [1.0, 1.0]
    assert peer["accuracy"]["pipeline"]["n"] == 6 and peer["accuracy"]["pipeline"]["threshold"] == 0.0
    assert peer["accuracy"]["best"] is None and peer["accuracy"]["calibrated"] is None
    base = next(e for e in record["variants"] if e["variant"] == "baseline")
    assert peer["parameters"] == base["parameters"]
    assert peer["weights"] == base["weights"]  # the pipeline runs the baseline's weights
    # The engine's decoding is the pipeline's: same answers, same scores.
    assert peer["agreement_with_baseline"] == 1.0
    for key in ("f1", "exact", "has_ans_f1", "no_ans_f1"):
        assert peer["accuracy"]["pipeline"][key] == pytest.approx(base["accuracy"]["pipeline"][key])


# --- benchmark() and quick_benchmark() directly -----------------------------------------------------


def test_a_variant_failing_while_measured_does_not_stop_the_run(engine, squad_file, monkeypatch):
    def boom(inputs):
        raise RuntimeError("kaboom\nsecond line")

    monkeypatch.setattr(engine.variants["pruned-dense"].model, "run", boom)
    examples = load_squad(squad_file)
    options = bench_options.Options(latency_samples=3, warmup=1, skip_sweeps=True)
    record = bench.benchmark(engine, examples, options)
    assert record.entry("pruned-dense").error == "RuntimeError: kaboom"
    assert record.entry("pruned").error is None and record.entry("pruned").latency_ms.n == 3
    assert record.entry("pruned").seq_len_sweep == [] and record.entry("pruned").batch_sweep == []
    assert record.peer is None


def test_the_quick_run_goes_in_chunks_to_the_record_of_one_go(engine, squad_file):
    """The Benchmark tab's quick run (issue 68): stepped a chunk at a time, as the app's queue does, it measures the
    same questions, answers and accuracy as in one go; only the times differ (and are not compared)."""
    examples = load_squad(squad_file)
    whole = quick.quick_benchmark(engine, examples, 6)
    run = quick.QuickRun(engine, examples, 6, chunk_s=0)  # a chunk of one turn: one variant on one question
    chunks = 0
    while run.step():
        chunks += 1
    assert chunks >= 6 and run.finished and run.stopped is None
    record = run.record()
    assert record.data == whole.data and record.is_quick and record.settings == whole.settings
    assert [e.variant for e in record.variants] == [e.variant for e in whole.variants]
    for mine, theirs in zip(record.variants, whole.variants, strict=True):
        assert mine.error == theirs.error
        if not mine.error:
            assert mine.accuracy == theirs.accuracy and mine.agreement_with_baseline == theirs.agreement_with_baseline
            assert mine.latency_ms.n == theirs.latency_ms.n == 6


def test_a_stopped_quick_run_says_what_it_measured(engine, squad_file):
    run = quick.QuickRun(engine, load_squad(squad_file), 6, chunk_s=0)
    while run.position < 2:
        assert run.step()
    run.stop()
    assert not run.step() and run.finished  # Stop is honoured at the next chunk: nothing more runs
    record = run.record()
    assert record.n_questions == run.position == 2 and record.data["n_total"] == 6 and record.data["stopped"]
    assert record.data["sample"] == "2 of the 6 questions drawn at random (seed 0): stopped there"
    assert all(e.latency_ms.n == 2 and e.view("pipeline").n == 2 for e in record.variants if not e.error)


def test_quick_benchmark(engine, squad_file, tmp_path):
    calls = []
    examples = load_squad(squad_file)
    record = quick.quick_benchmark(engine, examples, 4, progress=lambda f, m: calls.append((f, m)))
    assert record.is_quick and record.peer is None and record.n_questions == 4 and record.noisy
    ok = [e for e in record.variants if not e.error]
    assert {e.variant for e in ok} == {"baseline", "pruned-dense", "pruned"}
    for e in ok:
        assert e.latency_ms.n == 4 and e.view("pipeline").n == 4 and e.view("best").n == 4
        assert e.batch_sweep == [] and e.seq_len_sweep == []
    assert calls and calls[-1][0] == 1.0
    assert all(0 <= f <= 1 for f, _ in calls)
    assert not list(tmp_path.iterdir())  # nothing written unless asked
    quick.quick_benchmark(engine, examples, 2, out=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1 and len(list(tmp_path.glob("*.csv"))) == 1
    # The busy-machine measure travels in the record, and the summary names a disturbed run (set readings).
    record.variants[0].stretch = 1.9
    again = Record.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.variants[0].stretch == 1.9
    lines = bench_cli.summary_table(again).splitlines()
    assert "machine busy: runs took 1.9x their computing time" in lines[2] and "unreliable" in lines[-1]
    for entry in again.entries:
        entry.stretch = 1.05
    assert "busy" not in bench_cli.summary_table(again)


@pytest.mark.parametrize(
    "flags",
    [["--limit", "-5"], ["--limit", "0"], ["--threads", "-2"], ["--seq-lens", "0,-32"], ["--batch-sizes", ","],
     ["--accuracy-batch", "0"], ["--latency-round", "0"], ["--runs", "-1"], ["--warmup", "-1"]],
)  # fmt: skip
def test_bench_refuses_a_count_below_its_least_before_anything_runs(flags, capsys):
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)  # the parser only: a count it let through would start a whole bench
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(flags)
    assert stop.value.code == 2 and "argument " + flags[0] in capsys.readouterr().err


def test_bench_counts_read_as_given():
    parser = argparse.ArgumentParser()
    bench_cli.add_arguments(parser)
    args = parser.parse_args(["--seq-lens", "32, 64", "--warmup", "0", "--profile-questions", "0", "--limit", "7"])
    assert (args.seq_lens, args.warmup, args.profile_questions, args.limit) == ((32, 64), 0, 0, 7)


def test_load_data_limit_and_counts(squad_file):
    examples, data = bench.load_data(squad_file, limit=4)
    assert len(examples) == 4 and data["n_questions"] == 4 and data["n_total"] == 6 and data["limit"] == 4
    assert data["has_answer"] + data["no_answer"] == 4


def test_speedup_is_the_median_of_per_pass_ratios():
    def entry(p50s: list[float]) -> VariantEntry:
        e = VariantEntry("v", "v", latency_ms=LatencyStats(p50=sorted(p50s)[len(p50s) // 2], n=9))
        e.latency_pass_p50_ms = p50s
        return e

    reference, variant = entry([10.0, 20.0, 12.0]), entry([2.0, 4.0, 4.0])  # ratios 5, 5, 3; pooled 12 / 4
    assert bench.speedup(reference, variant) == (5.0, [3.0, 5.0])
    # Passes that do not line up, or one pass: the ratio of the pooled medians, and no range.
    variant.latency_pass_p50_ms = [2.0, 4.0]
    assert bench.speedup(reference, variant) == (3.0, None)
    reference.latency_pass_p50_ms, variant.latency_pass_p50_ms = [], []
    assert bench.speedup(reference, variant) == (3.0, None)
    assert bench.speedup(None, variant) == (None, None)


def test_latency_passes_pool_the_times_and_keep_each_median(squad_file):
    examples, _ = bench.load_data(squad_file)
    calls = []

    def answer(pairs, batch=1):
        calls.append(pairs[0][0])
        return [("x", None)]

    def broken(pairs, batch=1):
        raise RuntimeError("out of memory")

    def fails_in_pass_two(pairs, batch=1):
        late.append(1)
        if len(late) > 7:  # pass 1: one warm-up, 4 timed, one untimed per turn of 2
            raise RuntimeError("out of memory")
        return [("x", None)]

    late: list[int] = []
    answerers = {"ok": answer, "broken": broken, "late": fails_in_pass_two}
    timings = latency_passes(answerers, examples, 4, 1, passes=3, round_size=2)
    ok = timings["ok"]
    assert len(ok.times_ms) == 12 and len(ok.pass_p50_ms) == 3 and ok.error is None
    assert ok.pass_p50_ms == [round(float(np.median(ok.times_ms[4 * k : 4 * k + 4])), 3) for k in range(3)]
    assert len(calls) == 3 * (1 + 4 + 2)  # per pass: warm-up, timed, one untimed per turn
    assert timings["broken"].error == "RuntimeError: out of memory" and timings["broken"].times_ms == []
    # A failure in the second pass keeps the first pass's times and drops out of the third.
    assert timings["late"].error and len(late) == 8 and timings["late"].pass_p50_ms == [timings["late"].pass_p50_ms[0]]


def test_summarize_and_agreement():
    stats = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stats["n"] == 5 and stats["p50"] == 3.0 and stats["min"] == 1.0 and stats["max"] == 5.0
    assert stats["p50"] <= stats["p90"] <= stats["p99"] and stats["mean"] == 3.0
    assert summarize([])["n"] == 0
    assert summarize([2.0])["std"] == 0.0
    same = accuracy.agreement({"a": "The Paris", "b": "x", "c": ""}, {"a": "paris!", "b": "y", "c": ""})
    assert same == pytest.approx(2 / 3, abs=1e-4)
    assert accuracy.agreement({"a": "x"}, {}) is None


# --- results.py ----------------------------------------------------------------------------------


def test_results_read_back(cli_run):
    _, json_path, record = cli_run
    records = results.load_records(json_path.parent)
    assert len(records) == 1 and records[0].file == json_path.name
    assert records[0].to_dict() == {k: v for k, v in record.items()}
    frame = results.records_to_frame(records)
    assert list(frame.columns[: len(REQUIRED_COLUMNS)]) == REQUIRED_COLUMNS
    assert len(frame) == 6 and frame["is_peer"].sum() == 1 and set(frame["view"]) == {"pipeline"}  # + optimum INT8
    assert len(results.records_to_frame(records, view=None)) == 18
    best = results.records_to_frame(records, view="best").set_index("variant")
    assert best.loc["baseline", "f1"] == record["variants"][0]["accuracy"]["best"]["f1"]
    row = frame.set_index("variant").loc["baseline"]
    assert row["n_questions"] == 6 and row["n_latency"] == 16 and row["device"] == "cpu"
    assert row["latency_passes"] == 2
    pruned = frame.set_index("variant").loc["pruned"]
    assert pruned["speedup_vs_baseline_low"] <= pruned["speedup_vs_baseline"] <= pruned["speedup_vs_baseline_high"]
    assert row["p50_ms"] == record["variants"][0]["latency_ms"]["p50"]
    assert frame.set_index("variant").loc["broken", "error"]


def test_load_records_skips_junk(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    assert results.load_records(tmp_path) == []
    assert results.load_records(tmp_path / "missing") == []
    assert results.pick_record([]) is None


def test_pick_record_prefers_this_hardware_then_newest():
    here = {"cpu": "CPU A", "usable_cores": 8, "gpu": "GPU X"}
    elsewhere = {"cpu": "CPU B", "usable_cores": 8, "gpu": None}
    records = [
        {"created": "2026-01-03T00:00:00Z", "device": "cpu", "hardware": elsewhere, "variants": []},
        {"created": "2026-01-02T00:00:00Z", "device": "cpu", "hardware": here, "variants": []},
        {"created": "2026-01-01T00:00:00Z", "device": "cuda", "hardware": here, "variants": []},
    ]
    assert results.pick_record(records, hardware=here)["created"].startswith("2026-01-02")
    assert results.pick_record(records, device="cuda", hardware=here)["device"] == "cuda"
    assert results.pick_record(records, device="cpu", hardware={"cpu": "other"})["created"].startswith("2026-01-03")
    assert results.pick_record(records, hardware={"cpu": "other"})["created"].startswith("2026-01-03")
    quick = {"created": "2026-01-04T00:00:00Z", "kind": "quick", "device": "cpu", "hardware": here, "variants": []}
    assert results.pick_record([quick, *records], hardware=here)["created"].startswith("2026-01-02")
    assert results.pick_record([quick], hardware=here) is quick


def test_pick_record_prefers_a_record_of_this_cpus_int8_format():
    """One CPU model comes with and without VNNI, and the INT8 variant differs between them."""
    avx2 = {"cpu": "AMD EPYC", "usable_cores": 2, "int8": {"format": "U8S7"}}
    vnni = {"cpu": "AMD EPYC", "usable_cores": 2, "int8": {"format": "U8S8"}}
    records = [
        {"created": "2026-01-02T00:00:00Z", "device": "cpu", "hardware": vnni, "variants": []},
        {"created": "2026-01-01T00:00:00Z", "device": "cpu", "hardware": avx2, "variants": []},
    ]
    assert results.pick_record(records, hardware=avx2)["hardware"] is avx2
    assert results.pick_record(records, hardware=vnni)["hardware"] is vnni
    unknown = {"cpu": "AMD EPYC", "usable_cores": 2, "int8": {"format": "U8U8"}}
    assert results.pick_record(records, hardware=unknown)["hardware"] is vnni  # same CPU: the newest


def test_pick_record_tells_cpu_generations_apart():
    """A VM's model name can be one string for two generations; family and model tell them apart."""
    zen4 = {"cpu": "AMD EPYC", "usable_cores": 2, "cpu_id": {"vendor": "AuthenticAMD", "family": 25, "model": 17}}
    zen5 = {"cpu": "AMD EPYC", "usable_cores": 2, "cpu_id": {"vendor": "AuthenticAMD", "family": 26, "model": 2}}
    unknown = {"cpu": "AMD EPYC", "usable_cores": 2}  # a record from before cpu_id
    records = [
        {"created": "2026-01-03T00:00:00Z", "device": "cpu", "hardware": zen5, "variants": []},
        {"created": "2026-01-02T00:00:00Z", "device": "cpu", "hardware": zen4, "variants": []},
        {"created": "2026-01-01T00:00:00Z", "device": "cpu", "hardware": unknown, "variants": []},
    ]
    assert results.pick_record(records, hardware=zen4)["hardware"] is zen4
    assert results.pick_record(records[::2], hardware=zen4)["hardware"] is unknown  # the same name, no id: may be
    other_stepping = {**zen4, "cpu_id": {**zen4["cpu_id"], "stepping": 2}}
    assert results.same_hardware(records[1], other_stepping)
    no_id_here = {"cpu": "AMD EPYC", "usable_cores": 2, "cpu_id": {}}  # /proc/cpuinfo unreadable
    assert results.same_hardware(records[0], no_id_here)
    # before cpu_id, the recorded instruction set still tells CPUs apart where both have one
    before = {**unknown, "cpu_isa": ["avx2"]}
    old = {"created": "2026-01-01T00:00:00Z", "device": "cpu", "variants": [], "hardware": before}
    assert not results.same_hardware(old, {**zen5, "cpu_isa": ["avx2", "avx_vnni"]})
    assert results.same_hardware(old, {**zen5, "cpu_isa": ["avx2"]})
    assert hardware.hardware_label(zen5, "cpu") == "AMD EPYC (family 26 model 2, 2 cores)"
    assert hardware.hardware_label(unknown, "cpu") == "AMD EPYC (2 cores)"


def test_current_hardware_and_slugs():
    hw = hardware.current_hardware()
    assert {"cpu", "cores", "memory_gb", "gpu", "gpu_count", "cpu_slug"} <= set(hw)
    assert hardware.slugify("Intel(R) Xeon(R) Platinum 8480C CPU @ 2.00GHz") == "intel-xeon-platinum-8480c"
    assert hardware.slugify("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert hardware.hardware_slug({"cpu_slug": "c", "gpu_slug": "g"}, "cuda:0") == "g"
    assert hardware.hardware_slug({"cpu_slug": "c", "gpu_slug": "g"}, "cpu") == "c"


def test_the_plot_command_writes_a_png(cli_run, tmp_path):
    pytest.importorskip("matplotlib")
    _, json_path, _ = cli_run
    module = plot
    out = tmp_path / "chart.png"
    assert module.main([str(json_path), "--out", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = tmp_path / "chart.html"
    assert module.main(["--folder", str(json_path.parent), "--out", str(html)]) == 0
    assert "plotly" in html.read_text()


def test_sequence_length_sweep_takes_turns_and_keeps_one_failure_to_its_model(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    calls: list[tuple[str, int]] = []

    class Model:
        input_names = ("input_ids", "attention_mask")

        def __init__(self, name: str, fails_at: int | None = None) -> None:
            self.name, self.fails_at = name, fails_at

        def run(self, feed):
            length = feed["input_ids"].shape[1]
            calls.append((self.name, length))
            if length == self.fails_at and sum(c == (self.name, length) for c in calls) > 2:
                raise RuntimeError("out of memory")  # fails after its warm-up, mid-sweep

    rows = seq_len_sweep({"a": (Model("a"), tokenizer), "b": (Model("b", fails_at=32), tokenizer)}, (16, 32), 6, 1, 2)
    assert [r["n"] for r in rows["a"]] == [6, 6]
    assert rows["b"][0]["n"] == 6 and rows["b"][1] == {"seq_len": 32, "error": "RuntimeError: out of memory"}
    timed_16 = [name for name, length in calls if length == 16][2:]  # after each one's warm-up run
    assert timed_16[:6] == ["a"] * 3 + ["b"] * 3  # turns of 2 timed runs after one untimed


def test_the_answer_sentence_holds_the_answer_and_stops_at_sentence_ends():
    cut = answer_sentence
    context = 'It rained. The bridge opened in 1937, "on time." Cars crossed it! Then what?'
    start = context.index("1937")
    assert cut(context, start, start + 4) == 'The bridge opened in 1937, "on time."'
    assert cut(context, 0, 2) == "It rained."
    end = context.index("Cars") + 4
    assert cut(context, start, end) == 'The bridge opened in 1937, "on time." Cars crossed it!'
    assert cut(context, context.index("what"), len(context)) == "Then what?"


def test_whole_articles_keep_every_gold_answer_at_its_new_place(squad_file):
    examples = load_squad(squad_file)
    articles = long_inputs.whole_articles(examples)
    assert len(articles) == len(examples) and len({a.context for a in articles}) == 1  # one article in the file
    for before, after in zip(examples, articles, strict=True):
        assert before.context in after.context and after.id == before.id
        for text, start in zip(after.answers, after.answer_starts, strict=True):
            assert after.context[start : start + len(text)] == text


def test_the_long_input_view_scores_every_rule_on_paragraphs_and_articles(engine, squad_file):
    examples = load_squad(squad_file)
    view = long_inputs.long_input_view(engine, examples)
    assert set(view["variants"]) == {"baseline", "pruned"}  # the headline variants that loaded
    assert view["n_questions"] == 6 and view["n_answerable"] == 4 and view["n_articles"] == 1
    for entry in view["variants"].values():
        for kind in ("paragraph", "article"):
            assert set(entry[kind]) == set(WINDOW_RULES)
            for row in entry[kind].values():
                assert 0 <= row["f1"] <= 100 and 0 <= row["answered_share"] <= 100 and row["shown_above_one"] == 0
    assert "long inputs: 6 questions" in bench_cli.long_input_table(view)


def test_the_optimum_peer_on_a_gpu_says_it_is_a_cpu_peer(engine, monkeypatch):
    monkeypatch.setattr(engine, "device", "cuda:0")
    entry = peer.optimum_int8_runner(engine)
    assert entry.error == "a CPU peer: not run on cuda:0"
