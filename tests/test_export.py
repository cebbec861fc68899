"""ONNX build steps on tiny models: export, ORT graph optimization, FP16, INT8, and the chain."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from transformers import AutoTokenizer, BertForQuestionAnswering

from variants.answering import runtime
from variants.building import export
from variants.building.cache import ArtifactCache
from variants.building.prune import compact
from variants.core import hardware

QUESTIONS = ["what is the capital of france?", "who built rome?", "when was it founded"]
CONTEXTS = [
    "paris is the capital of france and its largest city, with a population of two million people.",
    "rome was built by people.",
    "the city was founded in 1871 by the people of the river country and named after it.",
]


def encode(tokenizer, n: int = 3) -> dict[str, np.ndarray]:
    """A right-padded batch of question/context pairs of different lengths."""
    return dict(tokenizer(QUESTIONS[:n], CONTEXTS[:n], padding=True, return_tensors="np"))


def torch_logits(model, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feed.items()})
    return [out.start_logits.numpy(), out.end_logits.numpy()]


def ort_logits(path: Path, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return session.run(["start_logits", "end_logits"], {k: v for k, v in feed.items() if k in names})


def diff(a: list[np.ndarray], b: list[np.ndarray], mask: np.ndarray) -> float:
    """Max abs difference of logits over real (unpadded) tokens."""
    return max(float(np.abs((x - y)[mask.astype(bool)]).max()) for x, y in zip(a, b, strict=True))


def fp32_weight_products(path: Path) -> set[str]:
    """The MatMuls of a graph that multiply by a weight matrix in FP32 (not quantized)."""
    graph = onnx.load(str(path)).graph
    weights = {i.name for i in graph.initializer}
    return {n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights}


def quantization_report(folder: Path) -> dict:
    return json.loads((folder / runtime.QUANTIZATION_REPORT).read_text())


def op_counts(path: Path) -> Counter:
    return Counter(node.op_type for node in onnx.load(path).graph.node)


@pytest.fixture(scope="module", params=["tiny", "pruned"])
def case(request, tiny_qa_dir: Path, tiny_pruned_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The tiny model, or the tiny pruned model compacted (2 and 3 heads), exported once per module."""
    folder = tiny_qa_dir if request.param == "tiny" else tiny_pruned_dir
    model = BertForQuestionAnswering.from_pretrained(folder).eval()
    if request.param == "pruned":
        compact(model)
        assert [layer.attention.self.num_attention_heads for layer in model.bert.encoder.layer] == [2, 3]
        assert [layer.intermediate.dense.out_features for layer in model.bert.encoder.layer] == [48, 24]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    work = tmp_path_factory.mktemp(f"onnx-{request.param}")
    exported = export.export_onnx(model, tokenizer, work / "export")
    optimized = export.optimize_onnx(exported, work / "optimize", for_gpu=False)
    feed = encode(tokenizer)
    return {
        "name": request.param,
        "model": model,
        "tokenizer": tokenizer,
        "work": work,
        "exported": exported,
        "optimized": optimized,
        "feed": feed,
        "torch": torch_logits(model, feed),
    }


def test_export_matches_torch(case: dict) -> None:
    path, feed = case["exported"], case["feed"]
    graph = onnx.load(path).graph
    assert [i.name for i in graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in graph.output] == ["start_logits", "end_logits"]
    for value in [*graph.input, *graph.output]:  # dynamic batch and sequence axes
        assert all(d.dim_param for d in value.type.tensor_type.shape.dim), value
    assert diff(ort_logits(path, feed), case["torch"], feed["attention_mask"]) < 1e-4
    # Another batch size and sequence length through the same graph.
    small = encode(case["tokenizer"], n=1)
    assert diff(ort_logits(path, small), torch_logits(case["model"], small), small["attention_mask"]) < 1e-4
    # Config and tokenizer are saved beside the graph.
    assert AutoTokenizer.from_pretrained(path.parent).vocab_size == case["tokenizer"].vocab_size
    assert json.loads((path.parent / "config.json").read_text())["model_type"] == "bert"


def test_export_leaves_the_model_as_it_was(tiny_qa_dir: Path, tmp_path: Path) -> None:
    model = BertForQuestionAnswering.from_pretrained(tiny_qa_dir).train()
    export.export_onnx(model, AutoTokenizer.from_pretrained(tiny_qa_dir), tmp_path)
    assert model.training
    assert model.config._name_or_path == str(tiny_qa_dir)


def test_optimize_fuses_and_matches(case: dict) -> None:
    path, feed = case["optimized"], case["feed"]
    report = json.loads((path.parent / "optimization.json").read_text())
    fused = report["fused_operators"]
    # One fused attention per layer, even with different head counts per layer (pruned case).
    assert report["attention_fusion"] is True
    assert fused["Attention"] == 2
    # Residual + LayerNorm stay apart on the CPU (slower there; runtime.skip_layer_norm_fusion).
    assert fused["SkipLayerNormalization"] == 0 and op_counts(path)["LayerNormalization"] == 4
    assert report["skip_layer_norm_fusion"] is False
    assert fused["BiasGelu"] == 2
    assert fused["EmbedLayerNormalization"] == 1
    assert op_counts(path)["Attention"] == 2
    unoptimized = ort_logits(case["exported"], feed)
    assert diff(ort_logits(path, feed), unoptimized, feed["attention_mask"]) < 1e-4
    assert diff(ort_logits(path, feed), case["torch"], feed["attention_mask"]) < 1e-4


def test_optimize_drops_attention_fusion_when_it_changes_outputs(
    case: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_run = export.run_cpu

    def run_with_broken_attention(path: Path, feed: dict) -> list[np.ndarray]:
        outputs = real_run(path, feed)
        return [o + 1.0 for o in outputs] if op_counts(path)["Attention"] else outputs

    monkeypatch.setattr(export, "run_cpu", run_with_broken_attention)
    path = export.optimize_onnx(case["exported"], tmp_path, for_gpu=False)
    report = json.loads((tmp_path / "optimization.json").read_text())
    assert report["attention_fusion"] is False
    assert report["fused_operators"]["Attention"] == 0
    assert report["fused_operators"]["BiasGelu"] == 2  # the other fusions stay
    assert op_counts(path)["Attention"] == 0
    feed = case["feed"]
    assert diff(ort_logits(path, feed), case["torch"], feed["attention_mask"]) < 1e-4


def test_skip_layer_norm_is_fused_for_cuda_only(case: dict, tmp_path: Path) -> None:
    path = export.optimize_onnx(case["exported"], tmp_path, for_gpu=True)
    assert op_counts(path)["SkipLayerNormalization"] == 4
    assert export.step_options("optimize", True) != export.step_options("optimize", False)  # separate cache entries


def test_cpu_session_does_not_fuse_skip_layer_norm(case: dict, tmp_path: Path) -> None:
    """ORT's own session-level fusion is turned off too, or it would undo what the optimizer left apart.
    (The plain export is not fused by the session either way: its residual Add and LayerNorm do not match.)"""

    def fused_by_session(cuda: bool) -> int:
        options, disabled = runtime.session_options(cuda=cuda)
        options.optimized_model_filepath = str(tmp_path / f"session-{cuda}.onnx")
        ort.InferenceSession(str(case["optimized"]), options, ["CPUExecutionProvider"], disabled_optimizers=disabled)
        return op_counts(tmp_path / f"session-{cuda}.onnx")["SkipLayerNormalization"]

    assert fused_by_session(cuda=False) == 0
    assert fused_by_session(cuda=True) == 4  # what the session would do if left alone


# Measured max |INT8 - FP32| / logits' range on the tiny models: 0.026 (s8 weights with VNNI, on an AMD
# EPYC), 0.026 (u8 weights on an emulated AVX2-only Haswell, qemu), 0.018 and 0.044 (7-bit s8 weights, the
# no-VNNI choice, on an AMD EPYC with AVX2 only); 8-bit s8 weights on the emulated Haswell saturate: 0.19-0.29.
INT8_TOLERANCE = 0.06


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "exported"])
@pytest.mark.parametrize("cpu", ["this-cpu", "no-vnni"])
def test_int8_runs_and_stays_close(
    case: dict, optimized: bool, cpu: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On this CPU's choice, and on the choice for an AVX2-only x86 CPU (7-bit s8 weights) forced on any machine."""
    if cpu == "no-vnni":
        monkeypatch.setattr(hardware, "cpu_features", lambda: frozenset({"avx", "avx2", "fma"}))
        monkeypatch.setattr(hardware, "is_x86", lambda: True)
    settings = hardware.int8_settings()
    src = case["optimized"] if optimized else case["exported"]
    path = export.quantize_int8(src, tmp_path)
    report = quantization_report(tmp_path)
    assert report["weight_type"] == settings.weight_type
    assert export.quantized_weights(path)["types"] == ["UINT8" if settings.weight_type == "QUInt8" else "INT8"]
    if cpu == "no-vnni":
        assert (settings.weight_type, settings.reduce_range) == ("QInt8", True)
        expected = {"weight_type": "QInt8", "reduce_range": True, "fp32": "head"}
        assert export.step_options("int8")["int8"] == expected
        assert export.quantized_weights(path)["max_abs"] <= 64  # 7 bits: u8 x s8 pairs stay inside int16
    ops = op_counts(path)
    assert ops["MatMulInteger"] > 0
    assert not fp32_weight_products(path)  # every product INT8
    assert report["fp32_products"] == []
    model = runtime.OrtQAModel(tmp_path)  # records say which build they timed
    assert model.describe()["build"] == {"int8": report}
    assert runtime.OrtQAModel(src).build == {}
    assert model.pass_tokens == runtime.CPU_PASS_TOKENS == model.describe()["pass_tokens"]  # on the CPU
    assert runtime._onnx_parameters(Path(path))[1] == "int8" and runtime._onnx_parameters(Path(src))[1] == "fp32"
    if optimized:
        assert ops["QAttention"] == 2
    feed, reference = case["feed"], case["torch"]
    got = ort_logits(path, feed)
    scale = max(float(np.abs(r).max()) for r in reference)
    assert diff(got, reference, feed["attention_mask"]) < INT8_TOLERANCE * scale
    real = feed["attention_mask"].astype(bool)
    for g, r in zip(got, reference, strict=True):  # mostly the same most likely start and end token
        agree = np.where(real, g, -np.inf).argmax(1) == np.where(real, r, -np.inf).argmax(1)
        assert agree.mean() >= 2 / 3


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "exported"])
def test_int8_leaves_named_products_fp32(case: dict, optimized: bool, tmp_path: Path) -> None:
    """``fp32_products`` keeps those MatMuls FP32, by name: here each layer's FFN output product."""
    src = case["optimized"] if optimized else case["exported"]
    kept = export.ffn_output_products(src)
    path = export.quantize_int8(src, tmp_path, fp32_products=kept)
    assert len(kept) == 2 and quantization_report(tmp_path)["fp32_products"] == kept
    assert fp32_weight_products(path) == set(kept)
    feed, reference = case["feed"], case["torch"]
    scale = max(float(np.abs(r).max()) for r in reference)
    assert diff(ort_logits(path, feed), reference, feed["attention_mask"]) < INT8_TOLERANCE * scale


def test_int8_embeddings_quantizes_the_fused_embedding_tables(case: dict, tmp_path: Path) -> None:
    """``embeddings=True`` turns the optimized graph's fused embedding node into ``QEmbedLayerNormalization``:
    its tables stored INT8 (a smaller file), the logits still close; the report says so."""
    src = case["optimized"]
    plain = export.quantize_int8(src, tmp_path / "plain")
    path = export.quantize_int8(src, tmp_path / "emb", embeddings=True)
    assert op_counts(plain).get("EmbedLayerNormalization") == 1 and "QEmbedLayerNormalization" not in op_counts(plain)
    assert op_counts(path).get("QEmbedLayerNormalization") == 1 and "EmbedLayerNormalization" not in op_counts(path)
    assert quantization_report(tmp_path / "emb")["embeddings"] == "int8"
    assert "embeddings" not in quantization_report(tmp_path / "plain")
    assert path.stat().st_size < plain.stat().st_size
    feed, reference = case["feed"], case["torch"]
    scale = max(float(np.abs(r).max()) for r in reference)
    assert diff(ort_logits(path, feed), reference, feed["attention_mask"]) < INT8_TOLERANCE * scale


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "exported"])
def test_head_products_are_the_qa_head_and_stay_fp32(case: dict, optimized: bool, tmp_path: Path) -> None:
    """``head_products`` finds the one product that makes the logits (the QA head), whatever the graph's
    optimization; the chain's INT8 step leaves it, and only it, FP32, and the logits stay close."""
    src = case["optimized"] if optimized else case["exported"]
    head = export.head_products(src)
    assert len(head) == 1 and "qa_outputs" in head[0]
    assert not set(head) & set(export.ffn_output_products(src))
    path = export.apply_step("int8", src, tmp_path, for_gpu=False)  # the engine's chain keeps it FP32
    assert fp32_weight_products(path) == set(head) and quantization_report(tmp_path)["fp32_products"] == head
    feed, reference = case["feed"], case["torch"]
    scale = max(float(np.abs(r).max()) for r in reference)
    assert diff(ort_logits(path, feed), reference, feed["attention_mask"]) < INT8_TOLERANCE * scale


def test_head_products_do_not_follow_a_shape_read(tmp_path: Path) -> None:
    """A head whose output is reshaped by the hidden state's shape: the walk back from the outputs stops at the
    head's product and does not reach the encoder's through ``Shape``, which reads no values."""
    h = onnx.helper
    floats = onnx.TensorProto.FLOAT
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["hidden"], name="encoder/MatMul"),
        h.make_node("MatMul", ["hidden", "w2"], ["logits"], name="qa_outputs/MatMul"),
        h.make_node("Shape", ["hidden"], ["shape"], name="Shape"),
        h.make_node("Slice", ["shape", "zero", "two"], ["leading"], name="Slice"),
        h.make_node("Concat", ["leading", "two"], ["target"], axis=0, name="Concat"),
        h.make_node("Reshape", ["logits", "target"], ["y"], name="Reshape"),
    ]
    inits = [
        onnx.numpy_helper.from_array(np.ones((8, 8), np.float32), "w1"),
        onnx.numpy_helper.from_array(np.ones((8, 2), np.float32), "w2"),
        onnx.numpy_helper.from_array(np.array([0], np.int64), "zero"),
        onnx.numpy_helper.from_array(np.array([2], np.int64), "two"),
    ]
    graph = h.make_graph(
        nodes, "head", [h.make_tensor_value_info("x", floats, [1, 4, 8])],
        [h.make_tensor_value_info("y", floats, [1, 4, 2])], inits,
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, tmp_path / "model.onnx")
    assert export.head_products(tmp_path / "model.onnx") == ["qa_outputs/MatMul"]


def test_fp16_conversion(case: dict, tmp_path: Path) -> None:
    path = export.to_fp16(case["optimized"], tmp_path)
    graph = onnx.load(path).graph
    types = Counter(onnx.TensorProto.DataType.Name(t.data_type) for t in graph.initializer)
    assert types["FLOAT16"] > 0
    assert types["FLOAT"] == 0
    assert {i.type.tensor_type.elem_type for i in graph.input} == {onnx.TensorProto.INT64}
    assert {o.type.tensor_type.elem_type for o in graph.output} == {onnx.TensorProto.FLOAT}
    # ONNX Runtime's CPU provider runs this graph too: a loose numeric check without a GPU.
    feed, reference = case["feed"], case["torch"]
    scale = max(float(np.abs(r).max()) for r in reference)
    assert diff(ort_logits(path, feed), reference, feed["attention_mask"]) < 1e-2 * scale


def cuda_session(path: Path) -> ort.InferenceSession:
    """A session on the CUDA provider, or skip: onnxruntime-gpu lists CUDA even where it cannot load."""
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        pytest.skip("onnxruntime has no CUDAExecutionProvider")
    session = ort.InferenceSession(str(path), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    if session.get_providers()[0] != "CUDAExecutionProvider":
        pytest.skip("CUDAExecutionProvider is listed but cannot create a session (no GPU or CUDA/cuDNN libraries)")
    return session


def test_fp16_on_cuda(case: dict, tmp_path: Path) -> None:
    path = export.to_fp16(case["optimized"], tmp_path)
    session = cuda_session(path)
    feed, reference = case["feed"], case["torch"]
    got = session.run(["start_logits", "end_logits"], feed)
    scale = max(float(np.abs(r).max()) for r in reference)
    assert got[0].dtype == np.float32
    assert diff(got, reference, feed["attention_mask"]) < 1e-2 * scale


@pytest.mark.parametrize("steps", [(), ("optimize", "int8"), ("optimize", "fp16"), ("int8",)])
def test_build_onnx_chain(case: dict, steps: tuple[str, ...], tmp_path: Path) -> None:
    path = export.build_onnx_chain(case["model"], case["tokenizer"], steps, tmp_path, for_gpu="fp16" in steps)
    assert path == tmp_path / "model.onnx"
    names = {p.name for p in tmp_path.iterdir()}
    assert {"model.onnx", "config.json", "tokenizer.json", "build.json"} <= names
    assert ".work" not in names
    assert ("optimization.json" in names) == ("optimize" in steps)
    assert json.loads((tmp_path / "build.json").read_text())["steps"] == ["export", *steps]
    feed, reference = case["feed"], case["torch"]
    scale = max(float(np.abs(r).max()) for r in reference)
    int8 = INT8_TOLERANCE * scale
    tolerance = {(): 1e-4, ("optimize", "int8"): int8, ("int8",): int8}.get(steps, 1e-2 * scale)
    assert diff(ort_logits(path, feed), reference, feed["attention_mask"]) < tolerance


@pytest.mark.parametrize("steps", [("fp16", "optimize"), ("optimize", "fp16", "int8"), ("prune",)])
def test_build_onnx_chain_rejects_bad_steps(case: dict, steps: tuple[str, ...], tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        export.build_onnx_chain(case["model"], case["tokenizer"], steps, tmp_path, for_gpu=False)


def test_chain_in_artifact_cache(case: dict, tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "cache")
    builds = []

    def build(tmp: Path) -> None:
        builds.append(tmp)
        export.build_onnx_chain(case["model"], case["tokenizer"], ("optimize",), tmp, for_gpu=False)

    def validate(folder: Path) -> None:
        ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])

    first = cache.get_or_build("tiny-opt", build, validate)
    second = cache.get_or_build("tiny-opt", build, validate)
    assert first == second == tmp_path / "cache" / "tiny-opt"
    assert len(builds) == 1
    manifest = json.loads((first / "manifest.json").read_text())
    assert "model.onnx" in manifest["files"]
    feed = case["feed"]
    assert diff(ort_logits(first / "model.onnx", feed), case["torch"], feed["attention_mask"]) < 1e-4


def test_an_int8_graph_is_labelled_int8_even_when_fp32_embeddings_outweigh_it(tmp_path: Path) -> None:
    # A heavily pruned model: the FP32 word embeddings hold most weights, the quantized layers few.
    h = onnx.helper
    embeddings = h.make_tensor("emb", onnx.TensorProto.FLOAT, [1000, 8], np.zeros(8000, np.float32))
    weight = h.make_tensor("w", onnx.TensorProto.INT8, [8, 8], np.zeros(64, np.int8).tobytes(), raw=True)
    nodes = [
        h.make_node("Gather", ["emb", "ids"], ["x"]),
        h.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        h.make_node("MatMulInteger", ["xq", "w", "xz"], ["y"]),
    ]
    ids = h.make_tensor_value_info("ids", onnx.TensorProto.INT64, [4])
    out = h.make_tensor_value_info("y", onnx.TensorProto.INT32, [4, 8])
    graph = h.make_graph(nodes, "g", [ids], [out], [embeddings, weight])
    onnx.save(h.make_model(graph), tmp_path / "model.onnx")
    assert runtime._onnx_parameters(tmp_path / "model.onnx") == (8064, "int8")
