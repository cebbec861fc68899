"""Students with fewer layers than their teacher: the layer cut, its choice by loss, and the stored result."""

from __future__ import annotations

import argparse
import copy
import json

import pytest
import torch
from squad_data import write_squad
from transformers import AutoModelForQuestionAnswering

from variants.building import prune, storage
from variants.training import cli as train_cli
from variants.training import distill, oneshot
from variants.training import settings as train_settings
from variants.training.cards import layers_note

SMALL = {"epochs": 1.0, "batch_size": 4, "max_length": 64, "stride": 16, "threads": 1}


def test_keeping_the_first_layer_gives_that_layers_output(tiny_qa_dir):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, dtype=torch.float32).eval()
    ids = torch.randint(5, 60, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        after_first = model.base_model(input_ids=ids, output_hidden_states=True).hidden_states[1]
        prune.keep_layers(model, [0])
        alone = model.base_model(input_ids=ids).last_hidden_state
    assert model.config.num_hidden_layers == 1 and len(prune.encoder_layers(model)) == 1
    torch.testing.assert_close(alone, after_first)


@pytest.mark.parametrize("layers", [[], [1, 0], [0, 0], [2], [-1]])
def test_a_layer_list_that_is_not_distinct_ascending_and_in_range_is_refused(tiny_qa_dir, layers):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)
    with pytest.raises(ValueError, match="distinct, ascending"):
        prune.keep_layers(model, layers)


def test_a_student_with_a_dropped_layer_is_stored_as_a_plain_model_and_a_compact_one(tiny_qa_dir, tmp_path):
    data = str(write_squad(tmp_path / "d.json"))
    tuned = tmp_path / "tuned"
    oneshot.finetune(train_settings.TrainConfig("finetune", str(tiny_qa_dir), data, str(tuned), **SMALL))
    pruned = tmp_path / "pruned"
    cfg = train_settings.TrainConfig("prune", "", data, str(pruned), teacher=str(tuned), head_share=0.25,
                                     ffn_share=0.5, calib_examples=8, drop_layers=1, freeze_embeddings=True,
                                     **SMALL)  # fmt: skip
    oneshot.prune_and_distill(cfg)

    record = json.loads((pruned / "train_config.json").read_text())
    kept = record["teacher_layers_kept"]
    assert len(kept) == 1 and kept[0] in (0, 1)
    dense = AutoModelForQuestionAnswering.from_pretrained(pruned, dtype=torch.float32).eval()  # plain transformers
    compact = storage.load_qa_model(pruned / "compact", compacted=True)
    assert dense.config.num_hidden_layers == compact.config.num_hidden_layers == 1
    ids = torch.randint(5, 60, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = dense(input_ids=ids).start_logits
        torch.testing.assert_close(compact(input_ids=ids).start_logits, expected, atol=2e-2, rtol=0)  # FP16 storage
    teacher = AutoModelForQuestionAnswering.from_pretrained(tuned)
    student = prune.encoder_layers(dense)[0].attention.self.value.weight  # dense: zeros where heads were cut
    kept_rows = student.abs().sum(dim=1) > 0
    distance = {i: (student - layer.attention.self.value.weight)[kept_rows].abs().mean().item()
                for i, layer in enumerate(prune.encoder_layers(teacher))}  # fmt: skip
    assert min(distance, key=distance.get) == kept[0]  # started from the kept layer, then trained a little

    refined = tmp_path / "refined"  # recipe "refine" from it: each layer learns from the teacher layer it kept
    again = train_settings.TrainConfig("prune", "", data, str(refined), teacher=str(tuned), recipe="refine",
                                       init=str(pruned), hidden_weight=1.0, attention_weight=0.5, null_weight=1.0,
                                       freeze_embeddings=True, **SMALL)  # fmt: skip
    distill.gradual_prune(again)
    record = json.loads((refined / "train_config.json").read_text())
    assert record["teacher_layers_kept"] == kept and {"hidden", "attention", "null"} <= record["log"][0].keys()
    assert storage.load_qa_model(refined / "compact", compacted=True).config.num_hidden_layers == 1


def test_drop_layers_drops_the_layer_whose_absence_costs_least(tiny_qa_dir, monkeypatch):
    """The greedy choice: with a loss that rises only when layer 1 is missing, layer 0 goes."""
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    for i, layer in enumerate(prune.encoder_layers(model)):
        layer.teacher_index = i  # survives the trial copies

    def loss(trial, _batch):
        kept = {layer.teacher_index for layer in prune.encoder_layers(trial)}
        return torch.tensor(0.0 if 1 in kept else 1.0)

    monkeypatch.setattr(prune, "qa_loss", loss)
    monkeypatch.setattr(oneshot, "calibration_pool", lambda features: [0])
    monkeypatch.setattr(oneshot, "collate", lambda features, ids: {})
    cfg = train_settings.TrainConfig("prune", "", "", "", drop_layers=1)
    assert oneshot.chosen_layers(model, [{}], cfg) == [1]


def test_the_layer_choice_is_given_by_keep_layers_or_made_by_drop_layers(tiny_qa_dir, tmp_path):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    cfg = train_settings.TrainConfig("prune", "", "", "", keep_layers="1")
    assert oneshot.chosen_layers(model, [], cfg) == [1]
    assert oneshot.chosen_layers(model, [], train_settings.TrainConfig("prune", "", "", "")) is None
    with pytest.raises(ValueError, match="at least one"):
        oneshot.chosen_layers(model, [], train_settings.TrainConfig("prune", "", "", "", drop_layers=2))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--recipe", "refine", "--keep-layers", "0"], "does not use --keep-layers"),
        (["--keep-layers", "0", "--drop-layers", "1"], "give one of the two"),
    ],
)
def test_the_command_line_refuses_layer_flags_a_recipe_would_ignore(flags, message):
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args(["prune", "--data", "d.json", "--out", "o", "--teacher", "t", *flags])
    with pytest.raises(SystemExit, match=message):
        train_cli.run(args)


def test_the_card_names_the_teacher_layers_a_shorter_student_kept():
    assert (
        layers_note({"teacher_layers_kept": [0, 1, 3, 5]})
        == " (the fine-tuned model's layers 0, 1, 3, 5, numbered from 0)"
    )
    assert layers_note({}) == ""


def test_a_shorter_student_learns_each_layer_from_the_teacher_layer_it_kept(tiny_qa_dir, tmp_path):
    """Recipe "refine" from a layer-dropped --init: hidden states and attention matched layer by layer."""
    teacher = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir, dtype=torch.float32).eval()
    teacher.set_attn_implementation("eager")
    student = copy.deepcopy(teacher)
    prune.keep_layers(student, [0])  # the teacher's first layer as it is: it computes what that layer computes
    ids = torch.randint(5, 60, (2, 12), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "start_positions": torch.tensor([1, 2]),
             "end_positions": torch.tensor([2, 3])}  # fmt: skip
    cfg = train_settings.TrainConfig("prune", "", "", "", hidden_weight=1.0, attention_weight=1.0)
    _, parts = distill.teacher_loss(teacher, cfg, None, [0])(student, batch, [0, 1])
    assert parts["hidden"] == pytest.approx(0.0, abs=1e-10) and parts["attention"] == pytest.approx(0.0, abs=1e-6)
    _, wrong = distill.teacher_loss(teacher, cfg, None, [1])(student, batch, [0, 1])
    assert wrong["hidden"] > 1e-3  # against the layer it did not keep, the states differ

    init = tmp_path / "init"  # which layers: the one-shot run's record says
    student.save_pretrained(init)
    (init / "train_config.json").write_text(json.dumps({"teacher_layers_kept": [0]}))
    assert distill.layers_learned_from(str(init), student, teacher) == [0]
    assert distill.layers_learned_from(str(init), teacher, teacher) is None  # as many layers: one to one
    (init / "train_config.json").write_text("{}")
    with pytest.raises(SystemExit, match="teacher_layers_kept"):
        distill.layers_learned_from(str(init), student, teacher)
