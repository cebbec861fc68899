"""Pruning a model of the user's own: other shapes than MiniLM-L6's, end to end to the pruned step of its chain.

The tiny models (``tiny_shapes.py``) stand for a user's fine-tuned QA model: a 3-layer BERT with another width,
head size and FFN; DistilBERT's layout; RoBERTa's. ``train prune`` cuts and distills one (interrupted and
resumed), ``train card`` writes its card with F1 and speed, and the output folder is the ``pruned`` of a chain
whose baseline is the teacher: every variant answers.
"""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import torch
from squad_data import write_tiny_squad
from tiny_shapes import SHAPES, make_tiny

from variants.answering.qa import DecodeSettings
from variants.building import prune, storage
from variants.core import spec as specs
from variants.serving.engine import load_engine
from variants.training import cli as train_cli

CONTEXT = "paris is the capital of france and its largest city ."
QUESTION = "what is the capital of france ?"


@pytest.fixture(scope="module", params=SHAPES)
def teacher(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    make_tiny(request.param, folder)
    return folder


def _inputs(folder):
    from transformers import AutoTokenizer  # noqa: PLC0415

    return AutoTokenizer.from_pretrained(folder)(QUESTION, CONTEXT, return_tensors="pt")


def test_a_cut_is_stored_dense_and_compacted_back_to_the_same_outputs_on_each_layout(teacher):
    """Every head of layer 0 and half of each layer's FFN neurons cut, then stored dense with zeros (as
    ``train prune`` saves) and compacted (as the chain's ``pruned`` step loads): the outputs stay the cut
    model's, and the compacted shape is the cut's, on BERT's, DistilBERT's and RoBERTa's layouts."""
    model = storage.load_qa_model(teacher)
    layers = prune.encoder_layers(model)
    cut = prune.Cut({0: list(range(prune.head_count(layers[0]))), 1: [0]},
                    {i: torch.arange(0, prune.ffn_width(layer), 2) for i, layer in enumerate(layers)})  # fmt: skip
    student = copy.deepcopy(model)
    prune.apply_cut(student, cut)
    dense = prune.expand_to_dense(student, model, cut.kept)
    inputs = _inputs(teacher)
    with torch.no_grad():
        expected = student(**inputs).start_logits
        torch.testing.assert_close(dense(**inputs).start_logits, expected, atol=1e-5, rtol=0)
        report = prune.compact(dense)
        torch.testing.assert_close(dense(**inputs).start_logits, expected, atol=1e-5, rtol=0)
    counts = [prune.head_count(layer) for layer in prune.encoder_layers(dense)]
    assert counts[:2] == [0, prune.head_count(layers[1]) - 1]
    assert report.num_heads_removed == len(cut.heads[0]) + 1
    assert [prune.ffn_width(layer) for layer in prune.encoder_layers(dense)] == [len(k) for k in cut.kept.values()]


def test_the_pruning_path_runs_end_to_end_and_its_output_is_the_pruned_step_of_the_teachers_chain(
    teacher, tmp_path, monkeypatch
):
    data = str(write_tiny_squad(tmp_path))
    out, run_dir = tmp_path / "pruned", tmp_path / "run"
    command = ["prune", "--teacher", str(teacher), "--data", data, "--out", str(out), "--run-dir", str(run_dir),
               "--epochs", "3", "--batch-size", "2", "--max-length", "64", "--stride", "16", "--threads", "1",
               "--head-share", "0.25", "--ffn-share", "0.5", "--min-neurons", "4", "--calib-examples", "8",
               "--freeze-embeddings", "--device", "cpu"]  # fmt: skip
    with pytest.raises(SystemExit, match="resume with the same command and --resume"):
        train_cli.main([*command, "--stop-after-steps", "2"])  # interrupted: a checkpoint, no model yet
    assert (run_dir / "checkpoint.pt").is_file() and not (out / "train_config.json").exists()
    train_cli.main([*command, "--resume"])
    record = json.loads((out / "train_config.json").read_text())
    assert record["log"][-1]["step"] == record["log"][-1]["of"] == 9  # 6 features, batch 2, 3 epochs
    assert sum(len(v) for v in record["heads_removed"].values()) >= 1
    assert storage.is_compact(out / "compact")  # the embeddings shared with the teacher's folder
    assert record["base_model"] == str(teacher)  # a model of the user's own: its card is named after it

    monkeypatch.setattr("variants.training.recipes.SPEED_LENGTH", 64)  # a tiny model: a short speed pair
    train_cli.main(["card", "--data", data, "--out", str(out)])
    card = (out / "README.md").read_text()
    assert f"# {teacher.name}, pruned and distilled" in card and "MiniLM" not in card
    assert "| 0 (pipeline; the default) |" in card  # its F1 on the evaluation file
    (row,) = json.loads((out / "recipes.json").read_text())
    assert row["speedup"] > 0 and row["heads_total"] == sum(
        prune.head_count(layer) for layer in prune.encoder_layers(storage.load_qa_model(teacher))
    )

    for pruned in (out, out / "compact"):  # the run's folder, or its compact store as `train ship` copies it
        overrides = {"baseline": str(teacher), "pruned": str(pruned)}
        chain = specs.preset("embedded", "cpu", overrides)
        engine = load_engine("embedded", "cpu", variant_specs=chain, fallback=False, cache_dir=tmp_path / "cache",
                             settings=DecodeSettings(max_length=64, stride=16))  # fmt: skip
        assert all(v.ok for v in engine.loaded), [(v.spec.name, v.error) for v in engine.loaded]
        results = {r.variant: r for r in engine.ask(QUESTION, CONTEXT)}
        assert set(results) == {s.name for s in chain} and len(results) == 6
        for r in results.values():
            assert r.error is None, r
            assert CONTEXT[r.start : r.end] == r.answer
        # Compaction, ONNX and graph optimization change the arithmetic, not the answer
        for name in ("pruned", "pruned-onnx", "pruned-onnx-opt"):
            assert results[name].answer == results["pruned-dense"].answer
        assert results["pruned"].parameters < results["baseline"].parameters


def test_a_model_pruning_cannot_take_is_refused_in_one_sentence_before_any_work(tmp_path):
    albert = tmp_path / "albert"
    albert.mkdir()
    (albert / "config.json").write_text(
        json.dumps({"model_type": "albert", "architectures": ["AlbertForQuestionAnswering"]})
    )
    masked = tmp_path / "masked"
    masked.mkdir()
    (masked / "config.json").write_text(
        json.dumps({"model_type": "distilbert", "architectures": ["DistilBertForMaskedLM"]})
    )
    run_dir = tmp_path / "run"
    for folder, reason in ((albert, "ALBERT shares one set of layer weights"),
                           (masked, "is not a question-answering model"),
                           (tmp_path / "absent", "is not a folder")):  # fmt: skip
        command = ["prune", "--teacher", str(folder), "--data", str(tmp_path / "no.json"), "--out",
                   str(tmp_path / "out"), "--run-dir", str(run_dir)]  # fmt: skip
        with pytest.raises(SystemExit) as refused:
            train_cli.main(command)
        message = str(refused.value)
        assert reason in message and "\n" not in message and message.count(". ") == 0
    assert not run_dir.exists() and not (tmp_path / "out").exists()  # nothing read, nothing written


def test_a_gpu_asked_for_where_torch_sees_none_is_refused_in_one_sentence(tmp_path, monkeypatch):
    from variants.training.loop import training_device  # noqa: PLC0415
    from variants.training.settings import TrainConfig  # noqa: PLC0415

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        training_device(TrainConfig("prune", "", "", "", device="cuda"))
    assert training_device(TrainConfig("prune", "", "", "")).type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert training_device(TrainConfig("prune", "", "", "")).type == "cuda"  # a GPU when there is one
    assert training_device(TrainConfig("prune", "", "", "", device="cpu")).type == "cpu"


def test_a_teacher_whose_held_out_articles_the_data_lacks_is_pruned_and_not_calibrated(tiny_qa_dir, tmp_path, capsys):
    """The shipped baseline held two SQuAD articles out; pruned on a user's file without them, the run ends with
    its model saved and one line saying why the null threshold stays 0 (it once ended in a tokenizer traceback)."""
    teacher = tmp_path / "teacher"
    shutil.copytree(tiny_qa_dir, teacher)
    (teacher / "train_config.json").write_text(json.dumps({"config": {"stage": "finetune"}, "holdout_titles": ["X"]}))
    data, out = str(write_tiny_squad(tmp_path)), tmp_path / "pruned"
    train_cli.main(["prune", "--teacher", str(teacher), "--data", data, "--out", str(out), "--run-dir",
                    str(tmp_path / "run"), "--epochs", "1", "--batch-size", "4", "--max-length", "64", "--stride",
                    "16", "--threads", "1", "--calib-examples", "4"])  # fmt: skip
    assert (out / "train_config.json").is_file()
    assert "not calibrated: " in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"holds none of .* held-out articles"):
        train_cli.main(["calibrate", "--data", data, "--out", str(out)])
