"""The report scripts run to the end on the CPU and write the records they promise:
scripts/gpu_report.sh (quick, --device cpu, as CI runs it), ``python -m variants replica-bench`` (scaled replica)
and the served-latency measurement. Timings here only have to exist; the numbers come from the scripts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from variants.benchmarking import replica_bench

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_report_runs_to_the_end_on_the_cpu(tmp_path: Path, artifacts_dir: Path) -> None:
    args = ["--device", "cpu", "--quick", "--out", str(tmp_path), "--cache-dir", str(artifacts_dir)]
    env = {"PYTHON": sys.executable, "PATH": "/usr/bin:/bin", "WHEELS_DIR": "none"}  # this venv's packages
    command = ["bash", "scripts/gpu_report.sh", *args]
    done = subprocess.run(command, check=False, cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = tmp_path.glob("gpu-report-cpu-*-quick-*.json")
    record = json.loads(path.read_text())
    assert record["device"] == "cpu" and record["hardware"]["cpu_isa"] is not None
    assert record["onnxruntime"]["version"] and record["versions"]["torch"]
    assert [p["preset"] for p in record["presets"]] == ["embedded", "bert-large-replica"]
    for preset in record["presets"]:
        assert "error" not in preset, preset.get("error")
        answers = preset["answers"]
        assert len(answers) == 6 and all(a["error"] is None and a["device"] == "cpu" for a in answers)
        assert all(a["latency_only"] == (preset["preset"] == "bert-large-replica") for a in answers)
        torch_rows = [r for e in preset["torch"] for r in e["sweep"]]
        assert torch_rows and all(r["p50_ms"] > 0 and r["n"] == 2 for r in torch_rows)
        # The user's chain first: the last step, then back to the export, each pruned graph beside the baseline's
        assert [e["variant"] for e in preset["onnxruntime"]] == [
            f"{model}-{step}" for step in ("onnx-opt-int8", "onnx-opt", "onnx") for model in ("pruned", "baseline")
        ]
        entries = {e["variant"]: e for e in preset["onnxruntime"]}
        for entry in entries.values():  # IOBinding on CPU OrtValues, nodes counted from a profiled run
            assert "error" not in entry, entry.get("error")
            assert entry["mode"] == f"ort-cpu-{'int8' if 'int8' in entry['variant'] else 'fp32'}-iobinding"
            assert entry["providers"] == ["CPUExecutionProvider"] and entry["cpu_fallback"] is False
            assert set(entry["nodes_per_provider"]) == {"CPUExecutionProvider"}
            assert entry["sweep"][0]["p50_ms"] > 0
        # Where pruning pays: both models in each mode that has throughput rows, batches 1 and 2 at 32 tokens
        table = preset["where_pruning_pays"]
        modes = [("ort-cpu-int8-iobinding", "onnx-opt-int8"), ("ort-cpu-fp32-iobinding", "onnx-opt")]
        modes += [("ort-cpu-fp32-iobinding", "onnx"), ("torch-fp32", "")]
        assert [(r["mode"], r["step"], r["batch"], r["seq_len"]) for r in table] == [
            (mode, step, batch, 32) for mode, step in modes for batch in (1, 2)
        ]
        assert all(r["baseline_qps"] > 0 and r["pruned_qps"] > 0 and r["pruned_over_baseline"] > 0 for r in table)
        served = preset["served"]
        assert "error" not in served, served.get("error")
        row = served["rows"][0]
        assert row["n"] == 5 and row["client_p50_ms"] > 0 and row["model_run_p50_ms"] > 0
        assert row["hop_p50_ms"] > 0 and 0 < row["engine_share"] <= 1
        assert served["variant"] == "pruned-onnx-opt-int8"  # the chain's last step, as the route serves it


def test_replica_bench_writes_the_chain_beside_its_operation_counts(
    tmp_path: Path, artifacts_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch  # noqa: PLC0415

    monkeypatch.setenv("VARIANTS_THREADS", "0")  # restored after the test; the script sets it to --threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's torch threads
    args = ["--scaled", "--lengths", "32", "--runs", "2", "--threads", "1", "--out", str(tmp_path)]
    args += ["--cache-dir", str(artifacts_dir)]
    record = json.loads(replica_bench.main(args).read_text())
    assert record["latency_only"] and "latency only" in record["note"]
    rows = {r["variant"]: r for r in record["chain"]["32"]}
    assert list(rows) == [
        "baseline",
        "pruned-dense",
        "pruned",
        "pruned-onnx",
        "pruned-onnx-opt",
        "pruned-onnx-opt-int8",
    ]
    assert rows["baseline"]["promised_speedup"] == 1.0
    assert rows["pruned"]["promised_speedup"] > rows["pruned-dense"]["promised_speedup"] > 1.0
    assert rows["pruned-onnx"]["step_promised"] == 1.0  # same arithmetic: the gain is the runtime's
    assert all(r["p50_ms"] > 0 and "share_of_promise" in r for r in rows.values())
    assert all(r["thread_cpu_p50_ms"] > 0 and "speedup_in_cpu_time" in r for r in rows.values())
    counts = record["structure"]["parameters"]
    assert counts["pruned_compacted"] < counts["pruned_as_stored"] < counts["dense"]


@pytest.mark.parametrize("length", [24, 64])
def test_contexts_are_cut_to_the_asked_length(length: int) -> None:
    from transformers import AutoTokenizer  # noqa: PLC0415

    from variants.benchmarking.served_latency import QUESTION, context_of_length  # noqa: PLC0415
    from variants.building.replica import TOKENIZER_DIR  # noqa: PLC0415

    tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_DIR)
    context = context_of_length(tokenizer, QUESTION, length)
    assert len(tokenizer(QUESTION, context)["input_ids"]) in (length - 1, length)  # a word may take 2 tokens
