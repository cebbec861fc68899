"""The Benchmark tab's GPU section: the GPU-record reader (variants.records.gpu) on the committed H200
record, on a record with every part (its rows made by the report's own timing code, so the field names
are the ones it writes), on one missing parts and on no records; and what the section shows for each."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest

from ui.benchmark import benchmark_tab
from ui.gpu_view import NO_RECORD, bench_outputs, gpu_outputs, gpu_section, newest_gpu_bench
from variants.benchmarking import chainbench
from variants.benchmarking.gpu import ort as gpu_ort
from variants.benchmarking.gpu import report as gpu_report
from variants.benchmarking.gpu.timing import Budget, no_sync, sweep, throughput_rows, throughput_table
from variants.records import gpu
from variants.records.results import GPU_DIR

ROOT = Path(__file__).resolve().parent.parent
H200 = GPU_DIR / "gpu-report-cuda-nvidia-h200-20261126T162449Z.json"
LENGTHS = (32, 128, 384)
BATCHES, THROUGHPUT_LENGTHS = (1, 8, 32), (128, 384)


# --- records --------------------------------------------------------------------------------------


def factory(scale: float, fail_batch: int | None = None):
    """A stand-in for a model's call factory: sleeps in proportion to the batch (``fail_batch`` runs out of memory)."""

    def make(length: int, batch: int = 1):
        if batch == fail_batch:
            raise RuntimeError("CUDA out of memory")
        return lambda: time.sleep(scale * 1e-4 * batch)

    return make


def full_preset(name: str = "bert-large-replica") -> dict:
    """A preset entry as ``gpu_report.report_preset`` writes it, its timings from the report's own code:
    torch entries, an ONNX Runtime IOBinding and CUDA-graph entry for the pruned graph and a baseline graph
    skipped by the budget, throughput rows (batch 32 fails at 384 tokens), ``where_pruning_pays`` and ``served``."""
    budget = Budget(120)
    fp16 = gpu_ort.mode_name("fp16", {"ran_on": "cuda", "cpu_fallback": False})
    entries = []
    for model, scale in (("baseline", 4), ("pruned", 2)):
        for mode in ("torch-fp32", "torch-cudagraph-fp16"):
            make = factory(scale if mode == "torch-fp32" else scale / 2)
            entries.append({"model": model, "variant": model, "mode": mode})
            entries[-1]["sweep"] = sweep(make, LENGTHS, 3, 1, no_sync, budget)
            entries[-1]["throughput"] = throughput_rows(make, BATCHES, THROUGHPUT_LENGTHS, 2, 1, no_sync, budget)
    ort_entry = {"model": "pruned", "variant": "pruned-onnx-opt-fp16", "mode": fp16, "all_nodes_on_cuda": True}
    ort_entry["sweep"] = sweep(factory(1), LENGTHS, 3, 1, no_sync, budget)
    ort_entry["throughput"] = throughput_rows(factory(1, fail_batch=32), BATCHES, THROUGHPUT_LENGTHS, 2, 1, no_sync,
                                              budget)  # fmt: skip
    graph = {"model": "pruned", "variant": "pruned-onnx-opt-fp16", "mode": "ort-cuda-fp16-cudagraph"}
    graph["buckets"] = list(gpu_ort.BUCKETS)
    graph["sweep"] = sweep(factory(0.5), LENGTHS, 3, 1, no_sync, budget)
    for row in graph["sweep"]:
        row["padded_to"] = gpu_ort.bucket_for(row["seq_len"])
    skipped = {"model": "baseline", "variant": "baseline-onnx", "error": "skipped: the report's time budget is spent"}
    torch_entries, ort_entries = entries, [ort_entry, graph, skipped]
    served = {"variant": "pruned-onnx-opt-fp16", "route": "POST /v1/answer", "client": "http.client",
              "server": "uvicorn (loopback)", "warmup": 3,
              "rows": [{"seq_len": n, "client_p50_ms": 1.0 + n / 100, "client_p90_ms": 1.5 + n / 100,
                        "client_p99_ms": 2.0 + n / 100, "client_max_ms": 3.0 + n / 100, "engine_p50_ms": 0.5 + n / 100,
                        "n": 100, "device": "cuda:0", "provider": "CUDAExecutionProvider", "dtype": "fp16"}
                       for n in (32, 384)],
              "chosen_as_fastest": {"variant": "pruned-onnx-opt-fp16", "batch1_p50_ms_at_32": 0.6}}  # fmt: skip
    return {
        "preset": name,
        "latency_only": True,
        "torch": torch_entries,
        "onnxruntime": ort_entries,
        "served": served,
        "where_pruning_pays": throughput_table([*torch_entries, *ort_entries]),
        "seconds": 12.0,
    }


def full_record() -> dict:
    return {
        "kind": "gpu-report",
        "quick": False,
        "note": chainbench.latency_only_note(),
        "hardware": {"gpu": "Tesla T4", "gpu_slug": "tesla-t4", "cpu": "Intel Xeon"},
        "versions": {"torch": "2.11.0"},
        "device": "cuda",
        "cuda": {"gpu": "Tesla T4", "gpu_memory_gb": 14.6, "driver": "580.1", "torch_cuda": "13.0"},
        "onnxruntime": {"version": "1.31.1", "available_providers": ["CUDAExecutionProvider", "CPUExecutionProvider"]},
        "settings": {
            "batch": 1,
            "lengths": list(LENGTHS),
            "runs": 3,
            "warmup": 1,
            "throughput": {"batches": list(BATCHES), "lengths": list(THROUGHPUT_LENGTHS)},
        },
        "presets": [full_preset()],
    }


def partial_record() -> dict:
    """An older record's shape with parts gone: one preset failed whole, the other has torch rows only (one
    length skipped by the budget), no ONNX Runtime part, no served latency, no throughput, no settings."""
    data = json.loads(H200.read_text(encoding="utf-8"))
    embedded = data["presets"][0]
    embedded["torch"] = embedded["torch"][:2]
    embedded["torch"][1]["sweep"][-1] = {"seq_len": 384, "error": "skipped: the report's time budget is spent"}
    for part in ("onnxruntime", "served", "latency_only"):
        embedded.pop(part)
    data["presets"] = [{"preset": "bert-large-replica", "error": "CUDA out of memory"}, embedded]
    for part in ("settings", "cuda", "onnxruntime"):
        data.pop(part)
    return data


@pytest.fixture(scope="module")
def h200() -> dict:
    records = gpu.load_gpu_records()
    assert records, f"the committed GPU record is missing from {GPU_DIR}"
    return next(r for r in records if Path(r["file"]).name == H200.name)


@pytest.fixture(scope="module")
def full_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("gpu")
    shutil.copy(H200, folder / H200.name)
    chainbench.write_record(full_record(), folder, "gpu-report-cuda-tesla-t4")  # created now: the newest
    later = "2099-01-01T00:00:00+00:00"  # the newest of all (write_record keeps a given time)
    rehearsal = {**full_record(), "created": later, "device": "cpu", "quick": True, "cuda": {"cuda_available": False}}
    chainbench.write_record(rehearsal, folder, "gpu-report-cpu-intel-xeon-quick")  # newer, but not a GPU
    (folder / "broken.json").write_text("{not json", encoding="utf-8")
    (folder / "bench.json").write_text(json.dumps({"kind": "full", "created": "2099-01-01"}), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def full(full_dir: Path) -> dict:
    return gpu.newest_gpu_record(full_dir)


def pick(frame, **values):
    """The rows of ``frame`` whose columns hold ``values``."""
    for column, value in values.items():
        frame = frame[frame[column] == value]
    return frame


# --- the reader -----------------------------------------------------------------------------------


def test_the_reader_imports_no_torch() -> None:
    code = "import sys, variants.records.gpu; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_reader_on_the_committed_h200_record(h200: dict) -> None:
    data = json.loads(H200.read_text(encoding="utf-8"))
    frame = gpu.latency_frame(h200)
    torch_entries = data["presets"][0]["torch"]
    assert len(frame) == sum(len(e["sweep"]) for e in torch_entries) == 50
    assert set(frame["variant"]) == {"baseline", "pruned"}
    assert set(frame["mode"]) == {"torch-fp32", "torch-fp16", "torch-amp", "torch-cudagraph-fp16", "torch-compile-fp16"}
    assert sorted(set(frame["seq_len"])) == [32, 64, 128, 256, 384]
    assert set(frame["engine"]) == {"PyTorch"} and set(frame["n"]) == {20}
    assert "PyTorch FP16, CUDA graph" in set(frame["mode_label"])
    for entry in torch_entries:  # every number as the JSON has it
        for point in entry["sweep"]:
            row = pick(frame, variant=entry["variant"], mode=entry["mode"], seq_len=point["seq_len"])
            assert len(row) == 1
            for key in ("p50_ms", "p90_ms", "p99_ms", "min_ms", "max_ms", "n"):
                assert row.iloc[0][key] == point[key]
    assert gpu.throughput_frame(h200).empty and gpu.pruning_frame(h200).empty  # it predates the throughput step
    served = gpu.served_frame(h200)
    assert list(served["seq_len"]) == [32, 64, 128, 256, 384] and set(served["variant"]) == {"pruned"}
    assert list(served["client_p50_ms"]) == [r["client_p50_ms"] for r in data["presets"][0]["served"]["rows"]]
    problems = gpu.problem_frame(h200)
    assert len(problems) == 1 and problems.iloc[0]["part"] == "ONNX Runtime"
    assert "no CUDA provider" in problems.iloc[0]["error"]
    facts = gpu.gpu_facts(h200)
    assert (facts["gpu"], facts["runs"], facts["warmup"], facts["ort_cuda"]) == ("NVIDIA H200", [20], 5, False)
    assert "random weights" in facts["note"] and facts["trained_weights"] == ["embedded"]


def test_reader_on_a_record_with_throughput_and_onnx_runtime(full: dict) -> None:
    assert gpu.gpu_facts(full)["gpu"] == "Tesla T4"  # the newest of the folder, before the H200's
    preset = full["presets"][0]
    latency = gpu.latency_frame(full)
    assert set(latency["engine"]) == {"PyTorch", "ONNX Runtime"}
    assert set(latency["mode"]) == {"torch-fp32", "torch-cudagraph-fp16", "ort-cuda-fp16-iobinding",
                                    "ort-cuda-fp16-cudagraph"}  # fmt: skip
    assert len(latency) == 6 * len(LENGTHS)
    graph = latency[latency["mode"] == "ort-cuda-fp16-cudagraph"]
    assert list(graph["padded_to"]) == [gpu_ort.bucket_for(n) for n in LENGTHS]
    assert set(graph["mode_label"]) == {"ONNX Runtime FP16, CUDA graph"}
    assert set(latency[latency["mode"] == "ort-cuda-fp16-iobinding"]["mode_label"]) == {"ONNX Runtime FP16 (CUDA)"}
    assert set(graph["variant_label"]) == {"Pruned + ONNX + FP16"}

    throughput = gpu.throughput_frame(full)
    measured = [(e, r) for e in preset["torch"] + preset["onnxruntime"] for r in e.get("throughput", []) if "qps" in r]
    failed = [r for e in preset["onnxruntime"] for r in e.get("throughput", []) if "error" in r]
    assert len(throughput) == len(measured) == 5 * len(BATCHES) * len(THROUGHPUT_LENGTHS) - len(failed)
    assert failed and all(r["batch"] == 32 for r in failed)
    for entry, row in measured:
        found = pick(
            throughput, mode=entry["mode"], variant=entry["variant"], batch=row["batch"], seq_len=row["seq_len"]
        )
        assert list(found["qps"]) == [row["qps"]] and list(found["p50_ms"]) == [row["p50_ms"]]

    pruning = gpu.pruning_frame(full)
    assert len(pruning) == len(preset["where_pruning_pays"])
    cudagraph = pruning[pruning["mode"] == "torch-cudagraph-fp16"]
    assert cudagraph["pruned_over_baseline"].notna().all()
    ort_rows = pruning[pruning["mode"] == "ort-cuda-fp16-iobinding"]  # the baseline graph was skipped: no ratio
    assert len(ort_rows) and ort_rows["baseline_qps"].isna().all() and ort_rows["pruned_over_baseline"].isna().all()

    assert list(gpu.served_frame(full)["seq_len"]) == [32, 384]
    problems = gpu.problem_frame(full)
    assert set(problems["variant"]) == {"baseline-onnx", "pruned-onnx-opt-fp16"}
    assert (problems["part"] == "ONNX Runtime throughput").sum() == len(failed)
    facts = gpu.gpu_facts(full)
    assert facts["random_weights"] == ["bert-large-replica"] and facts["ort_cuda"] and facts["runs"] == [3]


def test_reader_on_a_record_missing_parts() -> None:
    record = partial_record()
    latency = gpu.latency_frame(record)
    assert len(latency) == 9 and set(latency["mode"]) == {"torch-fp32", "torch-fp16"}  # the skipped point left out
    for frame in (gpu.throughput_frame(record), gpu.pruning_frame(record), gpu.served_frame(record)):
        assert frame.empty and list(frame.columns)  # empty, with its columns
    problems = gpu.problem_frame(record)
    assert set(problems["part"]) == {"preset", "PyTorch latency"}
    assert problems[problems["part"] == "PyTorch latency"].iloc[0]["seq_len"] == 384
    facts = gpu.gpu_facts(record)
    assert facts["gpu"] == "NVIDIA H200" and facts["runs"] == [20] and facts["warmup"] is None
    assert gpu.gpu_facts(None)["gpu"] is None and gpu.latency_frame(None).empty


def test_the_newest_record_on_a_gpu_comes_before_cpu_rehearsals(full_dir: Path) -> None:
    records = gpu.load_gpu_records(full_dir)
    assert [r["device"] for r in records] == [
        "cpu",
        "cuda",
        "cuda",
    ]  # newest first; the broken and CPU-bench files skipped
    assert Path(records[-1]["file"]).name == H200.name
    assert gpu.newest_gpu_record(full_dir)["cuda"]["gpu"] == "Tesla T4"
    shown = gpu_outputs(records[0])
    assert "Not on a GPU: a CPU rehearsal" in shown.header and "Tesla T4" not in shown.header


def test_reader_on_an_empty_folder(tmp_path: Path) -> None:
    assert gpu.load_gpu_records(tmp_path) == [] and gpu.newest_gpu_record(tmp_path) is None
    assert gpu.load_gpu_records(tmp_path / "missing") == []
    (tmp_path / "broken.json").write_text("[", encoding="utf-8")
    assert gpu.load_gpu_records(tmp_path) == []


def test_plain_names_for_modes() -> None:
    assert gpu.mode_label("torch-cudagraph-fp16") == "PyTorch FP16, CUDA graph"
    assert gpu.mode_label("ort-cpu-int8-iobinding") == "ONNX Runtime INT8 (CPU)"
    fallback = gpu_ort.mode_name("fp32", {"ran_on": "cpu", "cpu_fallback": True})
    assert "ran on the CPU" in gpu.mode_label(fallback) and "not a GPU number" in gpu.mode_jargon(fallback)
    assert gpu.mode_label("something-new") == "something-new" and gpu.mode_jargon("something-new") == ""
    assert "CUDAGraph" in gpu.mode_jargon("torch-cudagraph-fp16")


# --- the section ----------------------------------------------------------------------------------


def traces_by_name(fig) -> dict:
    return {t.name: t for t in fig.data}


def test_section_on_the_committed_h200_record(h200: dict) -> None:
    shown = gpu_outputs(h200)
    header = shown.header
    for text in ("NVIDIA H200", "2026-11-26 16:24 UTC", "20 timed runs per point", "no accuracy", "as trained"):
        assert text in header
    assert "Not measured: ONNX Runtime (CUDA)" in header and "<code>torch-cudagraph-fp16</code>" in header
    frame = gpu.latency_frame(h200)
    assert len(shown.latency.data) == frame.groupby(["variant", "mode"]).ngroups == 10  # one line per variant+mode
    lines = traces_by_name(shown.latency)
    line = lines["Pruned · PyTorch FP16, CUDA graph"]
    sweep_rows = next(e for e in h200["presets"][0]["torch"] if e["variant"] == "pruned"
                      and e["mode"] == "torch-cudagraph-fp16")["sweep"]  # fmt: skip
    assert list(line.x) == [r["seq_len"] for r in sweep_rows] and list(line.y) == [r["p50_ms"] for r in sweep_rows]
    assert list(line.error_y.array) == pytest.approx([r["p90_ms"] - r["p50_ms"] for r in sweep_rows])
    assert len(shown.latency_table) == 50 and "median ms" in shown.latency_table.columns
    assert "Preset" not in shown.latency_table.columns and "padded to" not in shown.latency_table.columns
    assert shown.throughput is None and shown.throughput_table is None and shown.pruning_table is None
    note = shown.throughput_note
    assert "no throughput table" in note and "python -m variants gpu-report" in note and "docs/gpu.md" in note
    assert len(shown.served_table) == 5 and "POST /v1/answer" in shown.served_note


def test_section_on_a_record_with_throughput(full: dict) -> None:
    shown = gpu_outputs(full)
    assert "Tesla T4" in shown.header and "Random weights (bert-large-replica)" in shown.header
    assert "Not measured: Baseline + ONNX" in shown.header and "points not measured" in shown.header
    names = {t.name for t in shown.latency.data}
    assert len(shown.latency.data) == len(names) == 6
    assert "Pruned + ONNX + FP16 · ONNX Runtime FP16, CUDA graph" in names
    assert "padded to" in shown.latency_table.columns
    throughput = gpu.throughput_frame(full)
    combos = throughput.groupby(["variant", "mode"]).ngroups
    legend = [t.name for t in shown.throughput.data if t.showlegend]
    assert len(legend) == len(set(legend)) == combos == 5
    assert len(shown.throughput.data) == len(throughput.groupby(["variant", "mode", "seq_len"]))  # a panel per length
    table = shown.throughput_table
    assert [c for c in table.columns if c.startswith("batch")] == [f"batch {b} q/s" for b in BATCHES]
    assert len(table) == combos * len(THROUGHPUT_LENGTHS)
    row = table[(table["How it ran"] == "PyTorch FP32") & (table["Variant"] == "Pruned") & (table["tokens"] == 384)]
    expected = throughput.query("mode == 'torch-fp32' and variant == 'pruned' and seq_len == 384 and batch == 8")
    assert row.iloc[0]["batch 8 q/s"] == expected.iloc[0]["qps"]
    assert "where pruning pays" in shown.throughput_note and "pruned ÷ baseline" in shown.pruning_table.columns
    assert "(the fastest at 32 tokens)" in shown.served_note


def test_section_on_a_record_missing_parts() -> None:
    shown = gpu_outputs(partial_record())
    assert "Not measured: the bert-large-replica preset: CUDA out of memory" in shown.header
    assert "1 point not measured" in shown.header
    assert "Random weights: models of the published shape" in shown.header  # no preset flag: the note stands
    assert len(shown.latency.data) == 2 and len(shown.latency_table) == 9
    assert list(traces_by_name(shown.latency)["Baseline · PyTorch FP16"].x) == [32, 64, 128, 256]  # 384: skipped
    assert "Preset" not in shown.latency_table.columns  # one preset measured
    assert shown.throughput is None and "no throughput table" in shown.throughput_note
    assert shown.served_table is None and shown.served_note == ""


def test_section_without_a_gpu_record(tmp_path: Path) -> None:
    shown = gpu_outputs(gpu.newest_gpu_record(tmp_path))
    assert shown.header == f'<div class="qa-notice">{NO_RECORD}</div>' and NO_RECORD.startswith("No GPU record yet")
    assert all(part is None for part in (shown.latency, shown.latency_table, shown.throughput, shown.served_table))
    with gr.Blocks() as demo:
        gpu_section(tmp_path)
    ids = {c.get("props", {}).get("elem_id") for c in demo.config["components"]}
    assert "bench-gpu-header" in ids and "bench-gpu-latency" not in ids


def test_section_builds_in_a_page(full_dir: Path) -> None:
    with gr.Blocks() as demo:
        shown = gpu_section(full_dir)
    components = demo.config["components"]
    ids = {c.get("props", {}).get("elem_id") for c in components}
    assert {"bench-gpu", "bench-gpu-header", "bench-gpu-latency", "bench-gpu-table", "bench-gpu-throughput"} <= ids
    accordion = next(c for c in components if c.get("props", {}).get("elem_id") == "bench-gpu")
    assert accordion["props"]["label"].startswith("On a GPU: Tesla T4") and accordion["props"]["open"] is False
    assert not demo.config["dependencies"]  # shown once: no events, nothing runs a model
    assert "Tesla T4" in shown.header


def test_several_presets_are_told_apart(full: dict) -> None:
    record = copy.deepcopy(full)
    record["presets"].append({**copy.deepcopy(record["presets"][0]), "preset": "embedded"})
    shown = gpu_outputs(record)
    names = [t.name for t in shown.latency.data]
    assert len(names) == len(set(names)) == 12 and "embedded: Baseline · PyTorch FP32" in names
    assert "Preset" in shown.latency_table.columns and "Preset" in shown.throughput_table.columns


def test_the_benchmark_tab_shows_the_gpu_section(tmp_path: Path) -> None:
    """The tab as app.py builds it, with no CPU record and one GPU record in the results folder's gpu/."""
    (tmp_path / "gpu").mkdir()
    shutil.copy(H200, tmp_path / "gpu" / H200.name)
    engine = SimpleNamespace(preset="embedded", device="cpu", weights=dict, specs=[])  # no record for it
    with gr.Blocks() as demo:
        benchmark_tab(engine, tmp_path, {}, tmp_path / "sample.json", start_quick=lambda *a, **k: None)
    ids = [c.get("props", {}).get("elem_id") for c in demo.config["components"]]
    assert {"bench-header", "bench-record", "bench-gpu", "bench-gpu-latency", "bench-gpu-table"} <= set(ids)
    assert ids.index("bench-gpu") > ids.index("bench-table")  # at the foot, below the CPU views
    header = next(c for c in demo.config["components"] if c.get("props", {}).get("elem_id") == "bench-gpu-header")
    assert "NVIDIA H200" in header["props"]["value"]


def test_the_report_writes_its_weights_note_from_what_its_presets_ran() -> None:
    assert "random weights" in gpu_report.weights_note([{"preset": "bert-large-replica", "latency_only": True}])
    trained = gpu_report.weights_note([{"preset": "embedded", "latency_only": False}, {"preset": "x", "error": "oom"}])
    assert "random" not in trained and trained.startswith("embedded: the trained models") and "x" not in trained
    mixed = gpu_report.weights_note([{"preset": "a", "latency_only": True}, {"preset": "b", "latency_only": False}])
    assert mixed.startswith("a: ") and "random weights" in mixed and "b: the trained models" in mixed


def test_a_malformed_gpu_record_leaves_the_page_standing(tmp_path: Path) -> None:
    broken = json.loads(H200.read_text())
    broken["versions"] = "not a mapping"
    (tmp_path / H200.name).write_text(json.dumps(broken))
    with gr.Blocks():
        shown = gpu_section(tmp_path)
    assert "could not be read" in shown.header and shown.latency is None


def test_a_bench_record_measured_on_a_gpu_is_picked_on_a_gpu_and_shown_in_the_gpu_section(tmp_path: Path) -> None:
    """The embedded bench on cuda:0 (the measuring call writes it) beside the CPU record: the tab's main view
    picks it when the app runs on a GPU, the CPU record otherwise, and the GPU section always shows it. The
    record here is the shipped CPU record relabelled as the bench labels a run on cuda:0."""
    from variants.records import results  # noqa: PLC0415

    shipped = ROOT / "assets/results/embedded-cpu-intel-xeon-20261128T122209Z.json"
    shutil.copy(shipped, tmp_path / shipped.name)
    on_gpu = json.loads(shipped.read_text())
    on_gpu.update(device="cuda:0", created="2026-11-29T10:00:00Z")
    on_gpu["hardware"].update(gpu="NVIDIA H200", gpu_count=1, gpu_slug="nvidia-h200")
    for entry in on_gpu["variants"]:
        entry["device"] = "cuda:0" if entry["backend"] == "torch" or entry["dtype"] != "int8" else "cpu"
    (tmp_path / "embedded-cuda-nvidia-h200-20261129T100000Z.json").write_text(json.dumps(on_gpu))
    records = results.load_records(tmp_path)
    gpu_bench = newest_gpu_bench(records, "embedded")
    assert gpu_bench is not None and gpu_bench.device == "cuda:0" and newest_gpu_bench(records, "bert-large") is None
    assert results.pick_record(records, device="cuda:0").device == "cuda:0"
    assert results.pick_record(records, device="cpu").device == "cpu"
    note, table = bench_outputs(gpu_bench)
    assert "501 questions" in note and "cuda:0" in note and "NVIDIA H200" in note
    ok = [e for e in on_gpu["variants"] if not e["error"]]
    assert len(table) == len(ok) + 1 + len(on_gpu["peers"])  # the variants, the pipeline, the other peers
    assert table["runs on"][0] == "GPU · PyTorch · 32-bit floats"  # plain words, as the cards write them
    assert list(table["F1"][: len(ok)]) == pytest.approx([e["accuracy"]["pipeline"]["f1"] for e in ok], abs=0.006)
    engine = SimpleNamespace(preset="embedded", device="cpu", weights=dict, specs=[])
    with gr.Blocks() as demo:
        benchmark_tab(engine, tmp_path, {}, tmp_path / "sample.json", start_quick=lambda *a, **k: None)
    ids = [c.get("props", {}).get("elem_id") for c in demo.config["components"]]
    assert {"bench-gpu", "bench-gpu-bench-note", "bench-gpu-bench"} <= set(ids)
