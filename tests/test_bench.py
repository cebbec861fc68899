"""The benchmark end to end on the tiny fixture models, its records, and reading them back.

Only shapes, counts and orderings are checked: the timings themselves depend on the machine.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from transformers import AutoTokenizer

from variants import bench, results
from variants import record as records
from variants.__main__ import main
from variants.engine import load_engine
from variants.measure import latency_passes, seq_len_sweep, summarize
from variants.spec import VariantSpec
from variants.squad import load_squad

CONTEXTS = [
    "paris is the capital of france and its largest city .",
    "berlin is the capital of germany . it was founded in the year 1237 .",
    "the longest river in italy is the po . rome is the capital of italy .",
]
QUESTIONS = [
    ("what is the capital of france ?", 0, "paris"),
    ("what is the largest city of france ?", 0, "paris"),
    ("when was berlin founded ?", 1, "1237"),
    ("what is the capital of spain ?", 1, None),
    ("what is the longest river in italy ?", 2, "po"),
    ("who built the city of madrid ?", 2, None),
]
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


@pytest.fixture(scope="module")
def squad_file(tmp_path_factory) -> Path:
    """A SQuAD v2 file of six questions (two unanswerable) on short contexts in the fixture vocabulary."""
    paragraphs = [{"context": c, "qas": []} for c in CONTEXTS]
    for i, (question, ctx, answer) in enumerate(QUESTIONS):
        answers = [] if answer is None else [{"text": answer, "answer_start": CONTEXTS[ctx].index(answer)}]
        paragraphs[ctx]["qas"].append(
            {"id": f"q{i}", "question": question, "answers": answers, "is_impossible": answer is None}
        )
    path = tmp_path_factory.mktemp("squad") / "tiny_squad.json"
    path.write_text(json.dumps({"version": "v2.0", "data": [{"title": "T", "paragraphs": paragraphs}]}))
    return path


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
    code = main(argv)
    (json_path,) = out.glob("*.json")
    return code, json_path, json.loads(json_path.read_text())


def test_cli_writes_a_record_and_a_csv(cli_run, capsys):
    code, json_path, record = cli_run
    assert code == 1  # one variant failed; the record is written anyway
    assert json_path.name.startswith("embedded-cpu-")
    assert json_path.name.endswith(record["created"].replace("-", "").replace(":", "") + ".json")
    csv = pd.read_csv(json_path.with_suffix(".csv"))
    assert list(csv["variant"]) == ["baseline", "pruned-dense", "pruned", "broken", "peer"] * 3  # one row a view
    assert list(csv["view"]) == [v for v in records.VIEWS for _ in range(5)]
    assert list(csv.columns[: len(REQUIRED_COLUMNS)]) == REQUIRED_COLUMNS


def test_record_top_level(cli_run, squad_file):
    _, _, record = cli_run
    assert record["schema_version"] == records.SCHEMA_VERSION == 2
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


def test_each_variant_is_measured(cli_run):
    _, _, record = cli_run
    by_name = {e["variant"]: e for e in record["variants"]}
    assert set(by_name) == {"baseline", "pruned-dense", "pruned", "broken"}
    for name in ("baseline", "pruned-dense", "pruned"):
        e = by_name[name]
        assert REQUIRED_ENTRY_KEYS <= set(e)
        assert e["error"] is None
        assert e["build"] == {}  # PyTorch variants have no ONNX build steps to report
        assert (e["device"], e["provider"], e["dtype"], e["backend"]) == ("cpu", "PyTorch", "fp32", "torch")
        assert e["size_mb"] > 0 and e["parameters"] > 0 and e["load_seconds"] >= 0
        lat = e["latency_ms"]
        assert lat["n"] == 16  # 8 questions, 2 passes
        assert len(e["latency_pass_p50_ms"]) == 2 and all(p > 0 for p in e["latency_pass_p50_ms"])
        for key in ("speedup_vs_baseline", "speedup_vs_peer"):
            low, high = e[key + "_range"]
            assert low <= e[key] <= high
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"] and lat["std"] >= 0
        assert e["throughput_qps"] == pytest.approx(1000 / lat["mean"], rel=0.01)
        views = e["accuracy"]
        assert set(views) == set(records.VIEWS) and views["calibrated"] is None  # the tiny models have none
        for acc in (views["pipeline"], views["best"]):
            assert acc["n"] == 6 and acc["has_ans_n"] == 4 and acc["no_ans_n"] == 2
            for key in ("exact", "f1", "has_ans_exact", "has_ans_f1", "no_ans_exact", "no_ans_f1"):
                assert 0 <= acc[key] <= 100
            assert acc["exact"] <= acc["f1"]
        assert views["pipeline"]["threshold"] == 0.0 and views["best"]["f1"] >= views["pipeline"]["f1"]
        assert 0 <= e["agreement_with_baseline"] <= 1
        assert e["speedup_vs_baseline"] > 0 and e["speedup_vs_peer"] > 0
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
    assert broken["latency_ms"] is None and broken["accuracy"] == dict.fromkeys(records.VIEWS)


def test_peer_is_measured_alongside(cli_run):
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
    options = bench.Options(latency_samples=3, warmup=1, skip_sweeps=True)
    record = bench.benchmark(engine, examples, options)
    assert record.entry("pruned-dense").error == "RuntimeError: kaboom"
    assert record.entry("pruned").error is None and record.entry("pruned").latency_ms.n == 3
    assert record.entry("pruned").seq_len_sweep == [] and record.entry("pruned").batch_sweep == []
    assert record.peer is None


def test_quick_benchmark(engine, squad_file, tmp_path):
    calls = []
    examples = load_squad(squad_file)
    record = bench.quick_benchmark(engine, examples, 4, progress=lambda f, m: calls.append((f, m)))
    assert record.is_quick and record.peer is None and record.n_questions == 4 and record.noisy
    ok = [e for e in record.variants if not e.error]
    assert {e.variant for e in ok} == {"baseline", "pruned-dense", "pruned"}
    for e in ok:
        assert e.latency_ms.n == 4 and e.view("pipeline").n == 4 and e.view("best").n == 4
        assert e.batch_sweep == [] and e.seq_len_sweep == []
    assert calls and calls[-1][0] == 1.0
    assert all(0 <= f <= 1 for f, _ in calls)
    assert not list(tmp_path.iterdir())  # nothing written unless asked
    bench.quick_benchmark(engine, examples, 2, out=tmp_path)
    assert len(list(tmp_path.glob("*.json"))) == 1 and len(list(tmp_path.glob("*.csv"))) == 1


def test_load_data_limit_and_counts(squad_file):
    examples, data = bench.load_data(squad_file, limit=4)
    assert len(examples) == 4 and data["n_questions"] == 4 and data["n_total"] == 6 and data["limit"] == 4
    assert data["has_answer"] + data["no_answer"] == 4


def test_speedup_is_the_median_of_per_pass_ratios():
    def entry(p50s: list[float]) -> records.VariantEntry:
        e = records.VariantEntry("v", "v", latency_ms=records.LatencyStats(p50=sorted(p50s)[len(p50s) // 2], n=9))
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
    same = bench.agreement({"a": "The Paris", "b": "x", "c": ""}, {"a": "paris!", "b": "y", "c": ""})
    assert same == pytest.approx(2 / 3, abs=1e-4)
    assert bench.agreement({"a": "x"}, {}) is None


# --- results.py ----------------------------------------------------------------------------------


def test_results_read_back(cli_run):
    _, json_path, record = cli_run
    records = results.load_records(json_path.parent)
    assert len(records) == 1 and records[0].file == json_path.name
    assert records[0].to_dict() == {k: v for k, v in record.items()}
    frame = results.records_to_frame(records)
    assert list(frame.columns[: len(REQUIRED_COLUMNS)]) == REQUIRED_COLUMNS
    assert len(frame) == 5 and frame["is_peer"].sum() == 1 and set(frame["view"]) == {"pipeline"}
    assert len(results.records_to_frame(records, view=None)) == 15
    best = results.records_to_frame(records, view="best").set_index("variant")
    assert best.loc["baseline", "f1"] == record["variants"][0]["accuracy"]["best"]["f1"]
    row = frame.set_index("variant").loc["baseline"]
    assert row["n_questions"] == 6 and row["n_latency"] == 16 and row["device"] == "cpu"
    assert row["latency_passes"] == 2
    pruned = frame.set_index("variant").loc["pruned"]
    assert pruned["speedup_vs_peer_low"] <= pruned["speedup_vs_peer"] <= pruned["speedup_vs_peer_high"]
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
    assert results.hardware_label(zen5, "cpu") == "AMD EPYC (family 26 model 2, 2 cores)"
    assert results.hardware_label(unknown, "cpu") == "AMD EPYC (2 cores)"


def test_current_hardware_and_slugs():
    hw = results.current_hardware()
    assert {"cpu", "cores", "memory_gb", "gpu", "gpu_count", "cpu_slug"} <= set(hw)
    assert results.slugify("Intel(R) Xeon(R) Platinum 8480C CPU @ 2.00GHz") == "intel-xeon-platinum-8480c"
    assert results.slugify("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert results.hardware_slug({"cpu_slug": "c", "gpu_slug": "g"}, "cuda:0") == "g"
    assert results.hardware_slug({"cpu_slug": "c", "gpu_slug": "g"}, "cpu") == "c"


def test_plot_script_writes_a_png(cli_run, tmp_path):
    pytest.importorskip("matplotlib")
    _, json_path, _ = cli_run
    path = Path(__file__).resolve().parent.parent / "scripts" / "plot_results.py"
    spec = importlib.util.spec_from_file_location("plot_results", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
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


def test_the_malloc_probe_times_each_setting_in_its_own_process(tiny_qa_dir, tmp_path):
    from test_train import import_script  # noqa: PLC0415

    probe = import_script("malloc_probe")
    out = tmp_path / "malloc.json"
    args = ["--baseline", str(tiny_qa_dir), "--variant", "baseline", "--questions", "3", "--warmup", "1"]
    record = probe.main([*args, "--rounds", "2", "--timeout", "300", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "malloc-probe"
    assert set(record["runs"]) == set(probe.SETTINGS) and all(len(runs) == 2 for runs in record["runs"].values())
    pids = set()
    for name, runs in record["runs"].items():
        mmap, trim = probe.SETTINGS[name]
        for r in runs:
            assert r["n"] == 3 and r["p50_ms"] > 0 and r["mmap_threshold"] == mmap and r["trim_threshold"] == trim
            assert r["applied"] is True  # glibc, as on every machine this project runs on
            if r["mmaps_4mib_block"] is not None:  # the setting took effect: a 4 MiB block is mmapped below it only
                assert r["mmaps_4mib_block"] is (probe.CHECK_BLOCK > mmap)
            pids.add(r["pid"])
    assert len(pids) == 4  # each run in a process of its own
    assert set(record["median_of_rounds"]) == set(probe.SETTINGS)
    assert record["hardware"]["cpu"] and record["versions"]["onnxruntime"]


def test_the_core_share_probe_times_four_runners_in_blocks(tiny_qa_dir, tiny_pruned_dir, squad_file, tmp_path):
    import torch  # noqa: PLC0415
    from test_train import import_script  # noqa: PLC0415

    probe = import_script("core_share_probe")
    out = tmp_path / "cores.json"
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--variant", "pruned-onnx"]
    args += ["--data", str(squad_file)]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        record = probe.main([*args, "--seconds", "1", "--block", "2", "--gain-split", "0.5", "--out", str(out)])
        assert torch.get_num_threads() == 2  # the pipeline's threads given back
    finally:
        torch.set_num_threads(threads)
    assert json.loads(out.read_text()) == record and record["kind"] == "core-share-probe"
    blocks = record["blocks"]
    assert blocks and all(set(b["p50_ms"]) == set(b["ms"]) == set(probe.RUNNERS) for b in blocks)
    assert all(len(times) == 2 for b in blocks for times in b["ms"].values()) and blocks[0]["questions"] == [0, 1]
    assert [b["order"][0] for b in blocks[:2]] == list(probe.RUNNERS[: min(2, len(blocks))])  # the order rotates
    assert record["threads_seen"] == {probe.PIPELINE: 2, probe.PIPELINE_ONE_THREAD: 1}
    assert all(b["guest"]["others_cpu_s"] >= 0 and b["guest"]["steal_s"] >= 0 for b in blocks)
    assert record["summary"]["all blocks"]["blocks"] == len(blocks)
    assert set(record["slow_share"]) == set(probe.RUNNERS)
    assert record["data"]["questions_per_block"] == 2 and record["data"]["n_questions"] == len(QUESTIONS)
    assert record["hardware"]["cpu"] and record["versions"]["onnxruntime"]


def test_slow_share_counts_questions_slower_than_their_own_median():
    from test_train import import_script  # noqa: PLC0415

    probe = import_script("core_share_probe")

    def block(questions, variant_ms):
        ms = {name: [10.0] * len(questions) for name in probe.RUNNERS}
        ms[probe.ALL_CORES] = variant_ms
        return {"questions": questions, "ms": ms}

    # question 0 takes 4 ms as a rule and once 6 (slow); question 1 takes 20 ms, once 24 (not above 1.25x)
    blocks = [block([0, 1], [4.0, 20.0]), block([0, 1], [4.0, 24.0]), block([0, 1], [6.0, 20.0])]
    shares = probe.slow_share(blocks)
    assert shares[probe.ALL_CORES] == round(1 / 6, 4) and shares[probe.PIPELINE] == 0.0


def test_guest_cpu_seconds_count_this_process_and_the_whole_guest():
    from test_train import import_script  # noqa: PLC0415

    probe = import_script("core_share_probe")
    before = probe.guest_cpu_seconds()
    spin_until = time.process_time() + 0.3
    while time.process_time() < spin_until:
        pass
    after = probe.guest_cpu_seconds()
    assert after["own"] - before["own"] >= 0.25
    if Path("/proc/stat").exists():  # the guest's busy time includes this process's
        assert after["busy"] - before["busy"] >= 0.2
    reading = probe.guest_between({"busy": 10.0, "steal": 1.0, "own": 3.0}, {"busy": 14.0, "steal": 1.5, "own": 5.0})
    assert reading == {"others_cpu_s": 2.0, "steal_s": 0.5}


def test_core_share_groups_split_blocks_by_gain():
    from test_train import import_script  # noqa: PLC0415

    probe = import_script("core_share_probe")

    def block(all_cores, one, pipe):
        times = {probe.ALL_CORES: all_cores, probe.ONE_THREAD: one, probe.PIPELINE: pipe}
        times[probe.PIPELINE_ONE_THREAD] = 48.0
        guest = {"others_cpu_s": 0.1, "steal_s": 0.0}
        return {"p50_ms": times, "core_gain": one / all_cores, "pipeline_core_gain": 48.0 / pipe, "guest": guest}

    blocks = [block(4.0, 7.0, 32.0), block(5.0, 7.5, 30.0), block(7.0, 7.0, 35.0)]
    summary = probe.group_summary(blocks, 1.25)
    assert summary["core_gain >= 1.25"]["blocks"] == 2 and summary["core_gain < 1.25"]["blocks"] == 1
    assert summary["core_gain >= 1.25"]["pipeline_over_variant"] == 7.0  # median of 8.0 and 6.0
    assert summary["core_gain < 1.25"]["p50_ms"][probe.ALL_CORES] == 7.0
    assert summary["all blocks"]["pipeline_over_variant_range"] == [5.0, 8.0]
    assert summary["core_gain < 1.25"]["core_gain"] == 1.0
    assert summary["core_gain >= 1.25"]["pipeline_core_gain"] == 1.55  # median of 48/32 and 48/30
    assert probe.group_summary(blocks[:1], 2.0)["core_gain >= 2.0"] == {"blocks": 0}


def test_the_answer_sentence_holds_the_answer_and_stops_at_sentence_ends():
    from test_train import import_script  # noqa: PLC0415

    cut = import_script("short_context_eval").answer_sentence
    context = 'It rained. The bridge opened in 1937, "on time." Cars crossed it! Then what?'
    start = context.index("1937")
    assert cut(context, start, start + 4) == 'The bridge opened in 1937, "on time."'
    assert cut(context, 0, 2) == "It rained."
    end = context.index("Cars") + 4
    assert cut(context, start, end) == 'The bridge opened in 1937, "on time." Cars crossed it!'
    assert cut(context, context.index("what"), len(context)) == "Then what?"


def test_the_short_context_eval_asks_each_question_twice(tiny_qa_dir, tiny_pruned_dir, squad_file, tmp_path):
    from test_train import import_script  # noqa: PLC0415

    probe = import_script("short_context_eval")
    out = tmp_path / "short.json"
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--data", str(squad_file)]
    record = probe.main([*args, "--variants", "baseline,pruned-onnx", "--rounds", "200", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "short-context-eval"
    answerable = sum(1 for _q, _c, answer in QUESTIONS if answer is not None)
    assert record["data"]["answerable_asked"] == answerable
    for name in ("baseline", "pruned-onnx"):
        for kind in ("paragraph", "answer sentence"):
            entry = record["results"][name][kind]
            assert 0 <= entry["f1"] <= 100 and 0 <= entry["no_answer_share"] <= 1
            assert ("f1_minus_baseline" in entry) is (name != "baseline")
    short, whole = (record["data"]["median_context_chars"][k] for k in ("answer sentence", "paragraph"))
    assert 0 < short <= whole


def test_a_probe_exits_naming_the_variant_that_did_not_load(tiny_qa_dir, tmp_path):
    engine = bench.probe_engine("embedded", ["baseline"], baseline=str(tiny_qa_dir))
    assert engine.variants["baseline"].ok and engine.settings_for(engine.variants["baseline"]).max_length == 128
    engine.close()
    with pytest.raises(SystemExit, match=r"^baseline: "):
        bench.probe_engine("embedded", ["baseline"], baseline=str(tmp_path / "no-such-model"))
