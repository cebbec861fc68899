"""Builds that fit the machine: a model's FP32 weights counted from its config, the memory free (a container's limit
too), a visitor's model refused before any download where its chain would not fit (free memory stood in for), the
sampler that attributes memory to build steps, and a large model's ONNX steps in a child process. Gradio's private
temporary folder: test_files.py. The BERT-large replica's measured peaks: experiments/records/memory/ (``python -m
variants build --memory-record``)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from app_helpers import MB, MODEL_ID, SMALL, FakeHub
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import ExternalDataInfo, uses_external_data

from variants.building import apart, export, outside
from variants.building.build import VariantBuilder
from variants.building.custom import CustomModelRefused, inspect_model
from variants.core import memory
from variants.core import spec as specs

# --- what a model weighs, what the machine has ------------------------------------------------------------------


def test_fp32_weights_are_counted_from_the_config_as_the_model_has_them(tiny_qa_dir: Path) -> None:
    from transformers import AutoModelForQuestionAnswering  # noqa: PLC0415

    config = json.loads((tiny_qa_dir / "config.json").read_text())
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)
    params = sum(p.numel() for p in model.parameters())
    assert memory.fp32_bytes(config) == 4 * params
    large = {"vocab_size": 30522, "hidden_size": 1024, "num_hidden_layers": 24, "intermediate_size": 4096}
    large |= {"max_position_embeddings": 512, "type_vocab_size": 2}
    assert memory.fp32_bytes(large) == pytest.approx(1.336e9, rel=1e-3)  # BERT-large: 334M parameters
    assert memory.fp32_bytes({"model_type": "bert"}) is None


def test_a_containers_limit_is_what_it_has_left(tmp_path: Path) -> None:
    limit, usage = tmp_path / "memory.max", tmp_path / "memory.current"
    limit.write_text("16000000000\n")
    usage.write_text("6000000000\n")
    assert memory.cgroup_free_bytes(((limit, usage),)) == 10_000_000_000
    limit.write_text("max\n")  # no limit: the machine's own memory counts
    assert memory.cgroup_free_bytes(((limit, usage),)) is None
    assert memory.cgroup_free_bytes(((tmp_path / "none", usage),)) is None
    assert 0 < memory.available_bytes() <= memory.psutil.virtual_memory().total


# --- a visitor's model, refused before its weights are downloaded ------------------------------------------------


def test_a_visitors_model_that_would_not_fit_is_refused_before_any_download(
    tiny_qa_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    weights = memory.fp32_bytes(json.loads((tiny_qa_dir / "config.json").read_text()))
    assert weights is not None
    need = memory.build_need_bytes(weights)
    monkeypatch.setattr(memory, "available_bytes", lambda: need - 1)
    hub = FakeHub(tiny_qa_dir / "config.json", SMALL).install(monkeypatch, tmp_path)
    with pytest.raises(CustomModelRefused) as refused:
        inspect_model(MODEL_ID)
    sentence = str(refused.value)
    assert sentence.startswith(f"{MODEL_ID} would not fit in this machine's memory: building its chain takes about")
    assert sentence.count(". ") == 0 and sentence.endswith("are free.")
    assert hub.downloads == ["config.json"]  # its config alone: no weights
    monkeypatch.setattr(memory, "available_bytes", lambda: need)
    assert inspect_model(MODEL_ID).model_id == MODEL_ID


def test_without_sizes_in_its_config_a_visitors_model_counts_its_files(tmp_path: Path, monkeypatch) -> None:
    config = {"architectures": ["BertForQuestionAnswering"], "model_type": "bert"}  # no sizes
    FakeHub(config, {"config.json": 600, "model.safetensors": 400 * MB}).install(monkeypatch, tmp_path)
    monkeypatch.setattr(memory, "available_bytes", lambda: int(400 * MB * memory.CHAIN_FACTOR) - 1)
    with pytest.raises(CustomModelRefused, match="would not fit"):
        inspect_model(MODEL_ID)


# --- the sampler -------------------------------------------------------------------------------------------------


def test_the_sampler_counts_each_step_its_own_peak() -> None:
    step = {"now": "a: export"}
    with memory.PeakSampler(lambda: step["now"], interval=0.01) as sampler:
        sampler.sample()
        step["now"] = "a: optimize"
        held = bytearray(64 * 2**20)  # 64 MB touched: resident
        sampler.sample()
        step["now"] = ""
        sampler.sample()
        del held
    result = sampler.result()
    steps = {s["step"]: s for s in result["steps"]}
    assert list(steps) == ["a: export", "a: optimize"]  # "" (between steps) is left out
    assert steps["a: optimize"]["peak_gb"] >= steps["a: export"]["start_gb"] + 0.05
    assert result["peak_gb"] >= steps["a: optimize"]["peak_gb"]
    assert result["kernel_max_rss_gb"]["this_process"] >= result["before_build_gb"]


# --- a large model's steps in a child process --------------------------------------------------------------------


@pytest.mark.slow  # three child processes, each importing torch and ONNX Runtime
def test_a_large_models_steps_run_apart_and_build_the_same_graph(
    tiny_qa_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    spec = next(s for s in specs.chain(specs.Family("t", str(tiny_qa_dir), None, ""), "cpu") if s.name.endswith("opt"))
    builder = VariantBuilder("cpu", tmp_path / "here")
    assert not builder.builds_apart(spec)  # a tiny model builds in-process
    monkeypatch.setattr(apart, "APART_MIN_BYTES", 0)
    assert builder.builds_apart(spec)
    calls = []
    real = apart.run_apart
    monkeypatch.setattr("variants.building.build.run_apart", lambda task, **kw: (calls.append(task), real(task, **kw)))
    path = builder.onnx_artifact(spec, builder.tokenizer(spec), lambda _f, _m: None)
    assert calls == ["export", "step"]
    assert export.attention_heads(path)  # fused: the optimizer ran in the child
    feed = export.dummy_inputs(path)
    monkeypatch.setattr(apart, "APART_MIN_BYTES", 2**62)
    here = VariantBuilder("cpu", tmp_path / "apart-off").onnx_artifact(spec, builder.tokenizer(spec), lambda *_: None)
    assert export.max_abs_diff(export.run_cpu(path, feed), export.run_cpu(here, feed)) < 1e-4


@pytest.mark.slow
def test_a_step_that_fails_apart_says_why_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "none.onnx"
    with pytest.raises(RuntimeError) as failed:
        apart.run_apart("step", step="optimize", src=str(missing), out=str(tmp_path / "o"), for_gpu=False)
    said = str(failed.value)
    assert "\n" not in said and re.match(r"^\w+: ", said) and "none.onnx" in said, said  # "Type: message"


def test_the_build_command_writes_a_memory_record(tiny_qa_dir: Path, tmp_path: Path) -> None:
    from variants.cli import build_main  # noqa: PLC0415

    path = tmp_path / "records" / "build.json"
    argv = ["--baseline", str(tiny_qa_dir), "--pruned", "none", "--variants", "baseline,baseline-onnx", "--device"]
    argv += ["cpu", "--cache-dir", str(tmp_path / "cache"), "--memory-record", str(path)]
    assert build_main(argv) == 0
    record = json.loads(path.read_text())
    assert record["kind"] == "build-memory" and record["variants"] == ["baseline", "baseline-onnx"]
    assert record["variants_kept_loaded"] is False  # the build command lets each go; --keep-loaded: the app's way
    steps = [s["step"] for s in record["steps"]]
    assert "baseline-onnx: export" in steps and all(s["peak_gb"] >= s["start_gb"] > 0 for s in record["steps"])
    assert record["model_fp32_gb"] == pytest.approx(
        memory.fp32_bytes(json.loads((tiny_qa_dir / "config.json").read_text())) / 1e9, abs=1e-3
    )
    assert record["hardware"]["cpu"] and record["versions"]["onnxruntime"] and "load_average" in record["memory_before"]
    assert build_main([*argv[:-1], str(tmp_path / "folder")]) == 0  # a folder: a record named in it
    assert [p.name.startswith("build-memory-") for p in (tmp_path / "folder").iterdir()] == [True]


# --- a large model's weights outside its graph, read and written a tensor at a time -------------------------------


def _graph_with_weights(rows: int = 64) -> onnx.ModelProto:
    """y = x @ W + b: W large enough to go outside (rows x 64 FP32), b small enough to stay in the graph."""

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((rows, 64)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])],
        [weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def test_weights_go_outside_one_at_a_time_and_the_graph_answers_the_same(tmp_path: Path) -> None:

    model = _graph_with_weights()
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    expected = export.run_cpu(_saved(model, tmp_path / "whole" / "model.onnx"), {"x": x})
    path = tmp_path / "out" / "model.onnx"
    path.parent.mkdir()
    assert not outside.has_outside_weights(path)
    outside.save(model, path)
    assert outside.has_outside_weights(path) and outside.data_path(path).name == "model.onnx.data"
    graph = onnx.load(str(path), load_external_data=False).graph
    weights = {t.name: t for t in graph.initializer}
    assert uses_external_data(weights["W"]) and not uses_external_data(weights["b"])  # 64 floats stay in
    assert int(ExternalDataInfo(weights["W"]).offset or 0) % outside.ALIGN == 0
    assert path.stat().st_size < 2048 and outside.data_path(path).stat().st_size == 64 * 64 * 4
    assert export.max_abs_diff(expected, export.run_cpu(path, {"x": x})) == 0.0
    # Saved again over itself, reading its weights from the file it replaces: the same answers, no leftovers.
    again = onnx.load(str(path), load_external_data=False)
    outside.save(again, path, path.parent)
    assert export.max_abs_diff(expected, export.run_cpu(path, {"x": x})) == 0.0
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx", "model.onnx.data"]


def _saved(model, path: Path) -> Path:

    path.parent.mkdir(parents=True)
    onnx.save(model, str(path))
    return path


def test_a_weight_that_points_outside_its_folder_is_refused(tmp_path: Path) -> None:

    (tmp_path / "secret").write_bytes(b"\0" * 64 * 64 * 4)
    for location in ("../secret", str(tmp_path / "secret")):
        model = _graph_with_weights()
        weight = model.graph.initializer[0]
        weight.ClearField("raw_data")
        weight.data_location = onnx.TensorProto.EXTERNAL
        entry = weight.external_data.add()
        entry.key, entry.value = "location", location
        folder = tmp_path / "graph"
        folder.mkdir(exist_ok=True)
        with pytest.raises(ValueError, match="points outside its folder"):
            outside.save(model, folder / "model.onnx")
        assert list(folder.iterdir()) == []  # nothing half-written left behind


def test_the_build_command_lets_each_variant_go_once_built(tiny_qa_dir: Path, tmp_path: Path) -> None:
    from variants.serving.engine import prepare_engine  # noqa: PLC0415

    names = ["baseline", "baseline-onnx"]
    engine = prepare_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=tmp_path, names=names)
    engine.hold = False
    engine.build()
    assert [(v.spec.name, v.model, v.error) for v in engine.loaded] == [(n, None, None) for n in names]
    assert {v.name: v.state for v in engine.status.snapshot().variants} == dict.fromkeys(names, "ready")
    held = prepare_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=tmp_path, names=names).build()
    assert all(v.ok for v in held.loaded)  # the app's engine, from what the build left in the cache


def test_an_export_without_its_weights_gets_them_from_the_model_one_at_a_time(tmp_path: Path) -> None:
    """What a large model's export does (onnx_trace.trace_to_onnx): the graph's weights are its inputs, filled from
    the module's state; an input with no weight to give it is refused before anything is written."""
    import torch  # noqa: PLC0415

    model = _graph_with_weights()
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    expected = export.run_cpu(_saved(model, tmp_path / "whole" / "model.onnx"), {"x": x})
    state = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    for tensor in list(model.graph.initializer):  # as exported with export_params=False
        model.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
        model.graph.initializer.remove(tensor)
    path = _saved(model, tmp_path / "bare" / "model.onnx")
    with pytest.raises(RuntimeError, match="no weight to give them: b"):
        outside.attach(path, {"W": state["W"]}, ["x"])
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.onnx"]
    outside.attach(path, state, ["x"])
    assert [i.name for i in onnx.load(str(path), load_external_data=False).graph.input] == ["x"]
    assert outside.has_outside_weights(path)
    assert export.max_abs_diff(expected, export.run_cpu(path, {"x": x})) == 0.0
