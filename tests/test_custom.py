"""A user's own Hub model: the id, architecture and size checks (with the Hub stood in for by a local
config and fake file listings) and the feature switch in the app; building it into its chain: test_visitor.py."""

from __future__ import annotations

from pathlib import Path

import gradio as gr
import httpx2
import huggingface_hub
import pytest
import requests
from app_helpers import MB, MODEL_ID, SMALL, FakeHub
from huggingface_hub.errors import RepositoryNotFoundError

import app
from variants.building import custom
from variants.building.custom import CustomModelRefused, check_model_id, custom_models_allowed, inspect_model
from variants.serving.engine import load_engine

# --- the id ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model_id", ["deepset/roberta-base-squad2", "a/b", "Org_1/model.v2-x", "  distilbert/distilbert-base-cased  "]
)
def test_plain_hub_ids_pass(model_id: str) -> None:
    assert check_model_id(model_id) == model_id.strip()


@pytest.mark.parametrize(
    "model_id",
    [
        "/etc/passwd",
        "./model",
        "../models/x",
        "~/models/x",
        "a/b/c",
        "C:\\models\\x",
        "models\\x",
        "file:///tmp/x",
        "hf://org/name",
        "org/../../etc",
    ],
)
def test_paths_are_refused(model_id: str) -> None:
    with pytest.raises(CustomModelRefused, match="never file paths"):
        check_model_id(model_id)


@pytest.mark.parametrize(
    ("model_id", "message"),
    [
        ("", "Type a Hub model id"),
        ("   ", "Type a Hub model id"),
        ("bert-base-uncased", "full Hub id org/name"),
        ("org/", "not a Hub model id"),
        ("a/-b", "not a Hub model id"),
        ("a/b-", "not a Hub model id"),
        ("a b/c", "not a Hub model id"),
        ("a/b;rm -rf", "not a Hub model id"),
        ("a--b/c", "not a Hub model id"),
        ("<script>/x", "not a Hub model id"),
        ("x" * 97 + "/y", "not a Hub model id"),
    ],
)
def test_bad_ids_are_refused(model_id: str, message: str) -> None:
    with pytest.raises(CustomModelRefused, match=message):
        check_model_id(model_id)


# --- the Hub, stood in for ------------------------------------------------------------------------


def test_a_small_bert_qa_model_passes(tiny_qa_dir: Path, tmp_path, monkeypatch) -> None:
    hub = FakeHub(tiny_qa_dir / "config.json", SMALL).install(monkeypatch, tmp_path)
    checked = inspect_model(MODEL_ID)
    assert (checked.model_type, checked.architecture) == ("bert", "BertForQuestionAnswering")
    assert checked.revision == hub.sha and checked.download_mb == pytest.approx(20.9, abs=0.1)
    assert hub.downloads == ["config.json"] and hub.info_calls == [MODEL_ID]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"architectures": ["BertForMaskedLM"], "model_type": "bert"}, "not an extractive question-answering model"),
        ({"model_type": "bert"}, "not an extractive question-answering model"),
        ({"architectures": ["T5ForQuestionAnswering"], "model_type": "t5"}, "is a t5 model"),
        ({"architectures": ["BertForQuestionAnswering"], "model_type": "bert", "auto_map": {"x": "y"}}, "never run"),
    ],
)
def test_configs_that_are_refused(config: dict, message: str, tmp_path, monkeypatch) -> None:
    FakeHub(config, SMALL).install(monkeypatch, tmp_path)
    with pytest.raises(CustomModelRefused, match=message):
        inspect_model(MODEL_ID)


def test_size_cap(tiny_qa_dir: Path, tmp_path, monkeypatch) -> None:
    config = tiny_qa_dir / "config.json"
    big = {"config.json": 600, "model.safetensors": 600 * MB}
    FakeHub(config, big).install(monkeypatch, tmp_path)
    with pytest.raises(CustomModelRefused, match=r"too large.*600 MB.*at most 500 MB"):
        inspect_model(MODEL_ID)
    # Only what would be downloaded counts: other weight formats next to safetensors, ONNX exports.
    mixed = {"config.json": 600, "model.safetensors": 300 * MB, "pytorch_model.bin": 300 * MB, "onnx/m.onnx": 900 * MB}
    FakeHub(config, mixed).install(monkeypatch, tmp_path)
    checked = inspect_model(MODEL_ID)
    assert checked.download_mb == pytest.approx(300, abs=1) and "*.bin" in checked.extra_ignore
    monkeypatch.setenv(custom.MAX_MB_ENV, "100")
    with pytest.raises(CustomModelRefused, match="at most 100 MB"):
        inspect_model(MODEL_ID)
    assert inspect_model(MODEL_ID, max_mb=1000).download_mb == pytest.approx(300, abs=1)
    FakeHub(config, {"config.json": 600, "model.safetensors": None}).install(monkeypatch, tmp_path)
    with pytest.raises(CustomModelRefused, match="file sizes"):
        inspect_model(MODEL_ID)
    FakeHub(config, {"model.safetensors": MB}).install(monkeypatch, tmp_path)
    with pytest.raises(CustomModelRefused, match=r"no config\.json"):
        inspect_model(MODEL_ID)


def test_offline_and_unknown_models(tmp_path, monkeypatch) -> None:
    hub = FakeHub({}, SMALL).install(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CustomModelRefused) as info:
        inspect_model(MODEL_ID)
    assert "cannot be reached" in str(info.value) and "HF_HUB_OFFLINE" in str(info.value)
    assert hub.info_calls == []  # offline: not even the listing is asked for
    monkeypatch.delenv("HF_HUB_OFFLINE")

    def unreachable(*_a, **_kw):
        raise requests.ConnectionError("Max retries exceeded")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", unreachable)
    with pytest.raises(CustomModelRefused, match=r"cannot be reached \(ConnectionError\)"):
        inspect_model(MODEL_ID)

    def refused(*_a, **_kw):  # huggingface-hub 2 with no network: httpx2's error, not an OSError
        raise httpx2.ConnectError("[Errno -2] Name or service not known")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", refused)
    with pytest.raises(CustomModelRefused, match=r"cannot be reached \(ConnectError\)"):
        inspect_model(MODEL_ID)

    def missing(*_a, **_kw):
        url = f"https://huggingface.co/api/models/{MODEL_ID}"
        raise RepositoryNotFoundError(
            "404 Client Error", response=httpx2.Response(404, request=httpx2.Request("GET", url))
        )

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", missing)
    with pytest.raises(CustomModelRefused, match="no public model someone/tiny-qa"):
        inspect_model(MODEL_ID)


# --- the switch -----------------------------------------------------------------------------------


def test_feature_switch() -> None:
    allow = custom.ALLOW_ENV
    assert not custom_models_allowed(False, {})
    assert custom_models_allowed(True, {})  # --allow-custom-models, locally
    assert not custom_models_allowed(True, {"SPACE_ID": "me/space"})  # off on a Space ...
    assert custom_models_allowed(False, {"SPACE_ID": "me/space", allow: "1"})  # ... unless the Space says so
    assert not custom_models_allowed(True, {allow: "0"})
    assert app.parse_args(["--allow-custom-models"]).allow_custom_models
    assert not app.parse_args([]).allow_custom_models


def test_the_ui_is_absent_when_off(tiny_qa_dir: Path, artifacts_dir: Path, tmp_path) -> None:
    engine = load_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=artifacts_dir, names=["baseline"])

    def custom_parts(demo: gr.Blocks) -> tuple[list, list]:
        blocks = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "custom-model"]
        fns = [fn for fn in demo.fns.values() if fn.concurrency_id == "custom-model"]
        return blocks, fns

    assert custom_parts(app.build_demo(engine, results_dir=tmp_path)) == ([], [])
    blocks, fns = custom_parts(app.build_demo(engine, results_dir=tmp_path, allow_custom_models=True))
    assert len(blocks) == 1 and blocks[0].label == "Try your own model" and len(fns) == 1
    assert fns[0].api_visibility == "private" and fns[0].concurrency_limit == 1


def test_the_page_takes_no_file_paths(tiny_qa_dir: Path, artifacts_dir: Path, tmp_path) -> None:
    """Every input of every handler is text, a choice, a number, an example's index or server-side state
    (and /answer's two strings and optional threshold, /evaluate's text, names and numbers): nothing names a
    file, but for the one upload of the "Your questions" tab, which Gradio hands over as a file it received
    itself (it refuses a path a caller names that is not in its upload folder)."""
    engine = load_engine("embedded", "cpu", {"baseline": str(tiny_qa_dir)}, cache_dir=artifacts_dir, names=["baseline"])
    demo = app.build_demo(engine, results_dir=tmp_path, allow_custom_models=True)
    choices = (gr.CheckboxGroup, gr.Checkbox, gr.Radio, gr.Dropdown)
    allowed = (gr.Textbox, *choices, gr.Slider, gr.Number, gr.State, gr.Dataset)
    apis = ("answer", "evaluate")
    inputs = [block for fn in demo.fns.values() if fn.api_name not in apis for block in fn.inputs]
    uploads = [b for b in inputs if isinstance(b, gr.File)]
    assert {b.elem_id for b in uploads} == {"questions-file"}  # the one upload, wherever it is an input
    inputs = [b for b in inputs if not isinstance(b, gr.File)]
    assert inputs and all(isinstance(block, allowed) for block in inputs), {type(b).__name__ for b in inputs}
    evaluate = gr.Blocks.get_api_info(demo)["named_endpoints"]["/evaluate"]["parameters"]
    assert [p["parameter_name"] for p in evaluate] == ["data", "variants", "run", "max_seconds"]
    assert "filepath" not in str(evaluate).lower() and "FileData" not in str(evaluate)
    api = gr.Blocks.get_api_info(demo)["named_endpoints"]["/answer"]["parameters"]
    assert [(p["parameter_name"], p["type"].get("type")) for p in api[:2]] == [
        ("context", "string"),
        ("question", "string"),
    ]
    kinds = {t["type"] for t in api[2]["type"]["anyOf"]}
    assert api[2]["parameter_name"] == "null_threshold" and kinds == {"number", "string", "null"}
    files = [b for b in demo.blocks.values() if isinstance(b, (gr.File, gr.UploadButton, gr.FileExplorer))]
    assert {b.elem_id for b in files} == {"questions-file"}  # the one upload
