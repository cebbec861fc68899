"""The GPU report's CUDA paths, checked on the CPU wherever the code allows (CI has no GPU):

IOBinding on CPU buffers (the same binding code as on CUDA buffers), the ORT-optimized graph of a model
with a headless layer and its FP16 graph's structure, the provider check that marks a CPU fallback, the
length buckets that ORT's CUDA graphs run on, the throughput table, and the pins of the wheels that
carry onnxruntime-gpu to a GPU machine. Timings here only have to exist.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from conftest import zero_out
from variants.answering import cuda_graphs, runtime
from variants.benchmarking.gpu import app as gpu_app
from variants.benchmarking.gpu import ort as gpu_ort
from variants.benchmarking.gpu import torch_modes as gpu_torch
from variants.benchmarking.gpu.timing import Budget, no_sync, throughput_rows, throughput_table
from variants.building import prune

ROOT = Path(__file__).resolve().parent.parent
HAS_CUDA_PROVIDER = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.fixture(scope="module")
def graphs(tiny_qa_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A compacted tiny model with uneven heads (3, then none) as ONNX, ORT-optimized and FP16 graphs."""
    from variants.building import export  # noqa: PLC0415

    folder = tmp_path_factory.mktemp("gpu-graphs")
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    with torch.no_grad():
        zero_out(model, {0: [2], 1: [0, 1, 2, 3]}, {0: list(range(0, 64, 3))})
    prune.compact(model)
    onnx_path = export.export_onnx(model, AutoTokenizer.from_pretrained(tiny_qa_dir), folder / "onnx")
    optimized = export.optimize_onnx(onnx_path, folder / "opt", for_gpu=True)
    fp16 = export.to_fp16(optimized, folder / "fp16")
    for path in (optimized, fp16):  # the vocabulary size, as the engine's build leaves it beside each graph
        (path.parent / "config.json").write_bytes((onnx_path.parent / "config.json").read_bytes())
    return {"onnx": onnx_path, "opt": optimized, "fp16": fp16}


def test_the_optimizer_keeps_each_layers_heads_and_a_headless_layer_passes_its_input_on(graphs) -> None:
    from variants.building.export import attention_heads, max_abs_diff, run_cpu  # noqa: PLC0415 - optional

    assert attention_heads(graphs["opt"]) == [3]  # layer 0 keeps 3 heads; layer 1 has no attention node
    feed = gpu_ort.random_feed(["input_ids", "attention_mask", "token_type_ids"], 2, 16, vocab=100)
    assert max_abs_diff(run_cpu(graphs["onnx"], feed), run_cpu(graphs["opt"], feed)) < 1e-4


def test_the_fp16_graph_has_fp16_weights_and_keeps_fp32_inputs_and_outputs(graphs) -> None:
    graph = onnx.load(str(graphs["fp16"])).graph
    tp = onnx.TensorProto
    floats = [i for i in graph.initializer if i.data_type in (tp.FLOAT, tp.FLOAT16)]
    products = {n.input[1] for n in graph.node if n.op_type in ("MatMul", "Attention")}
    assert products and all(i.data_type == tp.FLOAT16 for i in floats if i.name in products)
    assert sum(i.data_type == tp.FLOAT16 for i in floats) > len(floats) / 2
    assert {i.type.tensor_type.elem_type for i in graph.input} == {tp.INT64}
    assert [o.type.tensor_type.elem_type for o in graph.output] == [tp.FLOAT, tp.FLOAT]  # keep_io_types
    assert any(n.op_type == "Cast" for n in graph.node)


def test_iobinding_on_cpu_buffers_gives_a_plain_runs_outputs_and_takes_new_inputs_in_place(graphs) -> None:
    make, check = gpu_ort.bound(graphs["opt"], "cpu")
    assert check == {"providers": ["CPUExecutionProvider"], "ran_on": "cpu", "cpu_fallback": False}
    call = make(16, 2)
    call()
    names, vocab = list(call.inputs), gpu_ort.graph_vocab(graphs["opt"])
    assert vocab < 1000  # the tiny model's, read beside the graph
    plain = call.session.run(None, gpu_ort.random_feed(names, 2, 16, vocab))
    np.testing.assert_allclose(call.results()["start_logits"], plain[0], rtol=0, atol=1e-6)
    other = gpu_ort.random_feed(names, 2, 16, vocab, seed=7)
    call.update(other)
    call()
    np.testing.assert_allclose(call.results()["end_logits"], call.session.run(None, other)[1], rtol=0, atol=1e-6)
    assert not np.allclose(call.results()["end_logits"], plain[1])


def test_a_session_asked_for_cuda_says_where_it_really_runs(graphs) -> None:
    session = gpu_ort.make_session(graphs["fp16"], "cuda:0")
    check = gpu_ort.provider_check(session, "cuda:0")
    if HAS_CUDA_PROVIDER:  # a GPU build: the session must really be on CUDA
        assert check["ran_on"] == "cuda" and not check["cpu_fallback"]
        return
    # A CPU build: ONNX Runtime hands back a CPU session without raising; the row must say so.
    assert check == {"providers": ["CPUExecutionProvider"], "ran_on": "cpu", "cpu_fallback": True}
    assert gpu_ort.mode_name("fp16", check) == "ort-cpu-fp16-iobinding-cpu-fallback"
    assert gpu_ort.mode_name("fp16", gpu_ort.provider_check(session, "cpu")) == "ort-cpu-fp16-iobinding"
    call = gpu_ort.Bound(session, gpu_ort.random_feed(["input_ids", "attention_mask", "token_type_ids"], 1, 8, 100))
    assert call.kind == "cpu"  # bound on the device it really runs on, not the one asked for
    call()
    assert call.results()["start_logits"].dtype == np.float32


@pytest.mark.skipif(HAS_CUDA_PROVIDER, reason="checks the CPU-only refusal")
def test_cuda_graphs_refuse_a_cpu_device_or_a_cpu_session(graphs) -> None:
    with pytest.raises(RuntimeError, match="need the CUDA provider"):
        gpu_ort.graphed(graphs["fp16"], "cpu")(32)
    with pytest.raises(Exception, match=r"CPU|cpu|fallback"):  # strict session, no CUDA provider here
        gpu_ort.graphed(graphs["fp16"], "cuda")(32)


@pytest.mark.parametrize(("length", "bucket"), [(1, 64), (32, 64), (64, 64), (65, 128), (300, 384), (384, 384)])
def test_lengths_pad_to_the_next_bucket(length: int, bucket: int) -> None:
    assert gpu_ort.bucket_for(length) == bucket


@pytest.mark.parametrize("length", [0, 385])
def test_a_length_no_bucket_holds_is_refused(length: int) -> None:
    with pytest.raises(ValueError, match="no bucket holds"):
        gpu_ort.bucket_for(length)


def test_padding_to_a_bucket_leaves_the_real_tokens_logits_alone(graphs) -> None:
    names = ["input_ids", "attention_mask", "token_type_ids"]
    feed = gpu_ort.random_feed(names, 2, 20, vocab=100)
    padded = gpu_ort.pad_feed(feed, gpu_ort.bucket_for(20, (16, 32)))
    assert padded["input_ids"].shape == (2, 32) and padded["input_ids"].dtype == np.int64
    assert not padded["attention_mask"][:, 20:].any() and not padded["input_ids"][:, 20:].any()
    np.testing.assert_array_equal(padded["token_type_ids"][:, :20], feed["token_type_ids"])
    session = gpu_ort.make_session(graphs["opt"], "cpu")
    real, _ = session.run(None, feed)
    long, _ = session.run(None, padded)
    np.testing.assert_allclose(long[:, :20], real, rtol=0, atol=1e-4)
    with pytest.raises(ValueError, match="do not fit"):
        gpu_ort.pad_feed(feed, 16)


def test_the_throughput_table_has_a_row_per_mode_batch_and_length(graphs) -> None:
    make, _ = gpu_ort.bound(graphs["opt"], "cpu")
    budget = Budget(60)
    rows = throughput_rows(make, (1, 4), (8, 16), runs=2, warmup=1, sync=no_sync, budget=budget)
    assert [(r["batch"], r["seq_len"]) for r in rows] == [(1, 8), (4, 8), (1, 16), (4, 16)]
    assert all(r["qps"] > 0 and r["qps"] == round(r["batch"] * 1000 / r["p50_ms"], 1) for r in rows)
    spent = throughput_rows(make, (1,), (8,), runs=2, warmup=1, sync=no_sync, budget=Budget(0), reserve=1)
    assert spent[0]["error"].startswith("TimeoutError: skipped") and "qps" not in spent[0]
    entries = [
        {"model": "baseline", "mode": "m", "throughput": rows},
        {"model": "pruned", "mode": "m", "throughput": [{**r, "qps": r["qps"] * 2} for r in rows[:3]]},
        {"model": "pruned", "mode": "other", "throughput": spent},
    ]
    table = throughput_table(entries)
    assert [(r["mode"], r["batch"], r["seq_len"]) for r in table] == [
        ("m", 1, 8),
        ("m", 4, 8),
        ("m", 1, 16),
        ("m", 4, 16),
        ("other", 1, 8),
    ]  # fmt: skip  (in the order measured: the report measures the user's chain first)
    assert [r["pruned_over_baseline"] for r in table] == [2.0, 2.0, 2.0, None, None]
    # Two ONNX Runtime graphs of one precision (as exported, optimized) share a mode, not a row.
    ort_rows = rows[:1]
    graphs_of = [
        {"model": m, "variant": f"{m}-{step}", "mode": "ort-cpu-fp32-iobinding", "throughput": ort_rows}
        for step in ("onnx-opt", "onnx")
        for m in ("pruned", "baseline")
    ]
    assert [(r["step"], r["pruned_over_baseline"]) for r in throughput_table(graphs_of)] == [
        ("onnx-opt", 1.0),
        ("onnx", 1.0),
    ]


def test_torch_factories_take_a_batch(tiny_qa_dir: Path) -> None:
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    modes = gpu_torch.torch_modes(model, "cpu")
    assert list(modes) == ["torch-fp32"]  # the rest need CUDA
    feed = gpu_torch.torch_inputs(12, "cpu", vocab=model.config.vocab_size, batch=3)
    assert feed["input_ids"].shape == (3, 12) and int(feed["input_ids"].max()) < model.config.vocab_size
    assert tuple(modes["torch-fp32"](12, 3)().shape) == (3, 12)


def test_the_gpu_wheels_are_hash_pinned_at_the_projects_versions() -> None:
    lines = [x for x in (ROOT / "scripts/gpu_bundle.txt").read_text().splitlines() if x and not x.startswith("#")]
    pins = {}
    for line in lines:
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+) --hash=sha256:[0-9a-f]{64}", line)
        assert match, line
        pins[match[1].lower().replace("_", "-")] = match[2]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = [
        *project["dependencies"],
        *project["optional-dependencies"]["gpu"],
        *project["optional-dependencies"]["dev"],
    ]
    ours = dict(p.split("==") for p in pinned)
    # the offline GPU machine's driver is 580+: it takes the CUDA 13 build of the CPU path's ONNX Runtime, where a
    # Space takes the gpu extra's CUDA 12 build (docs/gpu.md, "Which build runs where")
    ours["onnxruntime-gpu"] = ours["onnxruntime"]
    shared = {name: pins[name] for name in pins if name in ours}
    assert {"onnxruntime-gpu", "transformers", "huggingface-hub", "gradio", "gradio-client"} <= set(shared)
    assert not {"optimum", "optimum-onnx"} & set(pins)  # the export is torch.onnx, on the machine's image
    assert shared == {name: ours[name] for name in shared}


def test_the_app_check_takes_the_cards_three_and_never_counts_a_cpu_answer_as_cuda() -> None:
    assert gpu_app.headline("embedded", "cuda:0") == ["baseline", "pruned", "pruned-onnx-opt-fp16"]
    assert gpu_app.headline("embedded", "cpu")[-1] == "pruned-onnx-opt-int8"

    def result(variant: str, device: str, provider: str, ms: float, error: str | None = None) -> dict:
        return {"variant": variant, "device": device, "provider": provider, "dtype": "fp16", "latency_ms": ms,
                "error": error}  # fmt: skip

    graphs = {**result("pruned-onnx-opt-fp16", "cuda:0", "CUDAExecutionProvider", 1.0), "execution": "CUDA graphs"}
    requests = [
        {"results": [result("baseline", "cuda:0", "PyTorch", 3.0), result("pruned-onnx-opt-fp16", "cpu", "CPU", 9.0)]},
        {"results": [graphs]},
        {"results": [result("baseline", "cuda:0", "PyTorch", 5.0), result("pruned", "cuda:0", "PyTorch", 2.0, "boom")]},
        {"error": "TimeoutError: no answer"},
    ]
    summary = gpu_app.summarize_variants(requests, "cuda:0")
    assert summary["baseline"]["on_device"] and summary["baseline"]["engine_latency_ms"]["p50"] == 4.0
    fp16 = summary["pruned-onnx-opt-fp16"]
    assert fp16["devices"] == ["cpu", "cuda:0"] and not fp16["on_device"]  # one answer from the CPU is enough
    assert fp16["executions"] == ["CUDA graphs"] and summary["baseline"]["executions"] == []
    assert summary["pruned"]["errors"] == ["boom"] and not summary["pruned"]["on_device"]
    assert summary["pruned"]["engine_latency_ms"] is None


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_slim_takes_the_models_out_of_the_travelling_tree_and_restore_puts_them_back(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts/gpu_ort_wheel.sh", tmp_path / "scripts")
    (tmp_path / ".gitignore").write_text("/.gpu-pieces/\n/.gpu-stash/\n")
    (tmp_path / "assets/models/m").mkdir(parents=True)
    (tmp_path / "assets/models/m/weights.bin").write_bytes(b"w" * 4096)
    (tmp_path / "README.md").write_text("kept\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")

    def script(command: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", "scripts/gpu_ort_wheel.sh", command], check=False, cwd=tmp_path, capture_output=True, text=True
        )

    slim = script("slim")
    assert slim.returncode == 0, slim.stderr
    assert "travelling now: 0.0 MiB" in slim.stdout  # README.md, .gitignore and the script only
    assert not git(tmp_path, "ls-files", "assets/models") and not (tmp_path / "assets/models").exists()
    assert (tmp_path / ".gpu-stash/models/m/weights.bin").is_file()
    assert script("slim").returncode != 0  # not twice
    assert git(tmp_path, "rev-list", "--count", "HEAD").strip() == "1"  # nothing committed
    restore = script("restore")
    assert restore.returncode == 0, restore.stderr
    assert not git(tmp_path, "status", "--porcelain") and (tmp_path / "assets/models/m/weights.bin").is_file()
    (tmp_path / "assets/models/m/weights.bin").write_bytes(b"changed")
    refused = script("slim")
    assert refused.returncode != 0 and "has changes" in refused.stderr


# --- the sessions every mode opens, and the engine's CUDA graphs ----------------------------------------------

CPU_EP, CUDA_EP, FALLBACK_OFF = runtime.CPU, runtime.CUDA, runtime.FALLBACK_OFF
# Every way a session is opened: the engine (CPU; CUDA; its FP16 variant's CUDA graphs) and the GPU report
# (the profiled count, fallback allowed; the strict timing session; its CUDA-graph sessions).
MODES = {
    "engine on the CPU": (("cpu", False, False), [(CPU_EP, {})], {}),
    "engine on CUDA": (("cuda:0", False, False), [(CUDA_EP, {"device_id": "0"}), (CPU_EP, {})], {}),
    "engine FP16 CUDA graphs": (
        ("cuda:1", False, True),
        [(CUDA_EP, {"device_id": "1", "enable_cuda_graph": "1"})],
        {FALLBACK_OFF: "1"},
    ),
    "report strict": (("cuda", True, False), [(CUDA_EP, {"device_id": "0"})], {FALLBACK_OFF: "1"}),
    "report CUDA graphs": (
        ("cuda:0", True, True),
        [(CUDA_EP, {"device_id": "0", "enable_cuda_graph": "1"})],
        {FALLBACK_OFF: "1"},
    ),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_asks_onnx_runtime_for_exactly_these_providers_and_options(mode: str) -> None:
    (device, strict, cuda_graph), providers, config_entries = MODES[mode]
    plan = runtime.session_plan(device, strict=strict, cuda_graph=cuda_graph)
    assert plan.ort_providers() == providers
    assert dict(plan.config) == config_entries
    # ORT refuses the CPU provider listed while its fallback is off: no mode may ask for both.
    assert not (FALLBACK_OFF in plan.config and any(name == CPU_EP for name, _ in plan.providers))


@pytest.mark.parametrize("mode", list(MODES))
def test_no_mode_is_the_combination_onnx_runtime_refuses(graphs, mode: str) -> None:
    """Each mode's session opened for real on this build: on a CPU build the CUDA-only ones fail, but for
    the missing CUDA kernels, never for a conflicting configuration (what every ORT-optimized row of the
    first H200 report failed with)."""
    (device, strict, cuda_graph), _, _ = MODES[mode]
    try:
        session = runtime.open_session(graphs["fp16"], device, strict=strict, cuda_graph=cuda_graph)
    except Exception as exc:
        assert "Conflicting session configuration" not in str(exc)
        assert not HAS_CUDA_PROVIDER and (strict or cuda_graph), exc  # CPU build, no CPU fallback allowed
        assert "fallback to CPU EP has been explicitly disabled" in str(exc)
    else:
        assert session.get_providers()[0] in (CPU_EP, CUDA_EP)


def test_the_refused_combination_is_refused_here_too(graphs) -> None:
    """The check above can fail: the first report's session (both providers, fallback off) is refused."""
    options, _ = runtime.session_options()
    options.add_session_config_entry(FALLBACK_OFF, "1")
    with pytest.raises(Exception, match="Conflicting session configuration"):
        ort.InferenceSession(str(graphs["fp16"]), options, providers=[(CUDA_EP, {"device_id": "0"}), CPU_EP])


def test_strict_sessions_and_cuda_graphs_need_a_cuda_device() -> None:
    for flags in ({"strict": True}, {"cuda_graph": True}):
        with pytest.raises(ValueError, match="need a CUDA device"):
            runtime.session_plan("cpu", **flags)


def test_windows_pad_into_a_bucket_of_rows_and_tokens_and_no_row_is_wholly_masked() -> None:
    feed = gpu_ort.random_feed(["input_ids", "attention_mask", "token_type_ids"], 3, 20, vocab=100)
    padded = cuda_graphs.pad_feed(feed, 4, 32)
    assert {v.shape for v in padded.values()} == {(4, 32)}
    np.testing.assert_array_equal(padded["input_ids"][:3, :20], feed["input_ids"])
    assert not padded["attention_mask"][:3, 20:].any() and not padded["input_ids"][3].any()
    assert padded["attention_mask"][3].tolist() == [1] + [0] * 31
    with pytest.raises(ValueError, match="do not fit"):
        cuda_graphs.pad_feed(feed, 2, 32)
    assert cuda_graphs.bucket_for(3, cuda_graphs.BATCH_BUCKETS) == 4
    assert cuda_graphs.bucket_for(17, cuda_graphs.BATCH_BUCKETS) == 32


def test_the_graph_runner_gives_a_plain_runs_logits_for_every_shape_on_cpu_buffers(graphs) -> None:
    """The engine's CUDA-graph path on the CPU provider: every bucket bound and run at capture, each call
    padded into its bucket and cut back, a call larger than every bucket run without a graph."""
    session = runtime.open_session(graphs["fp16"], "cpu")
    runner = cuda_graphs.GraphRunner(session, "cpu", 0, lengths=(16, 32), batches=(1, 2, 4)).capture()
    assert sorted(runner.shapes) == [(b, n) for b in (1, 2, 4) for n in (16, 32)]
    names = [i.name for i in session.get_inputs()]
    for rows, length in [(1, 5), (3, 16), (4, 32), (2, 17), (5, 8), (1, 40)]:
        feed = gpu_ort.random_feed(names, rows, length, vocab=100, seed=rows * 100 + length)
        start, end = runner.run(feed)
        plain_start, plain_end = session.run(None, feed)
        assert start.shape == (rows, length)
        np.testing.assert_allclose(start, plain_start, atol=2e-2)
        np.testing.assert_allclose(end, plain_end, atol=2e-2)
    assert runner.unbucketed == 2  # 5 windows, then 40 tokens: past the largest buckets
    assert cuda_graphs.execution_name(True, runner, False) == "CUDA graphs (6: 16/32 tokens)"
    assert cuda_graphs.execution_name(True, None, True) == "IOBinding (CUDA graphs not captured)"
    assert cuda_graphs.execution_name(False, None, True) == ""


def test_the_fp16_variant_asked_for_cuda_on_a_cpu_build_names_both_fallbacks_and_answers(graphs, monkeypatch) -> None:
    if HAS_CUDA_PROVIDER:
        pytest.skip("checks a CPU build's fallbacks")
    model = runtime.OrtQAModel(graphs["fp16"], "cuda:0")
    assert model.dtype == "fp16" and model.device == "cpu" and model.graphs is None
    assert any(n.startswith("CUDA graphs not captured") for n in model.notes)
    assert any("fell back to the CPU" in n for n in model.notes)
    feed = gpu_ort.random_feed(list(model.input_names), 2, 12, vocab=100)
    start, end = model.run(feed)
    assert start.shape == end.shape == (2, 12) and start.dtype == np.float32
    monkeypatch.setenv("VARIANTS_CUDA_GRAPHS", "0")  # graphs off: no capture tried, no note about it
    assert not any("CUDA graphs" in n for n in runtime.OrtQAModel(graphs["fp16"], "cuda:0").notes)


def test_plain_iobinding_with_ortvalues_matches_a_plain_run(graphs) -> None:
    session = runtime.open_session(graphs["opt"], "cpu")
    feed = gpu_ort.random_feed([i.name for i in session.get_inputs()], 2, 10, vocab=100)
    start, end = cuda_graphs.bound_run(session, feed, "cpu")
    plain = session.run(None, feed)
    np.testing.assert_allclose(start, plain[0], atol=1e-6)
    np.testing.assert_allclose(end, plain[1], atol=1e-6)


def test_records_name_the_version_of_the_module_that_runs_not_other_metadata(monkeypatch) -> None:
    """On the first H200 machine the CPU build's metadata said onnxruntime 1.30.0 while onnxruntime-gpu
    1.31.1, first on the path, answered: the imported module decides."""
    import sys  # noqa: PLC0415
    import types  # noqa: PLC0415

    from variants.core import versions  # noqa: PLC0415

    assert versions.record_versions()["onnxruntime"] == ort.__version__
    monkeypatch.setitem(sys.modules, "onnxruntime", types.SimpleNamespace(__version__="9.9.9"))
    assert versions.artifact_versions()["onnxruntime"] == "9.9.9"
    assert versions.module_version("no_such_module_here") is None
