"""Training code on tiny data: answer labelling, oversampling, and both stages end to end."""

from __future__ import annotations

import argparse
import json
import logging
import math

import pytest
import torch
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from variants import prune, train
from variants.qa import CALIBRATED_THRESHOLD, Answer
from variants.record import load_records
from variants.spec import EMBEDDED_MODELS
from variants.squad import QAExample

CONTEXT = "the capital of france is paris and the largest city of italy is rome ."


def squad_file(path, n: int = 8, articles: int = 1, context: str = CONTEXT):
    """A small SQuAD v2 file: answerable questions about paris/rome and unanswerable ones, in
    ``articles`` articles (titles t0, t1, ...) that each hold all ``n`` questions."""
    paragraphs = [[{"context": context, "qas": qas(n, a, context)}] for a in range(articles)]
    data = {"version": "v2.0", "data": [{"title": f"t{a}", "paragraphs": p} for a, p in enumerate(paragraphs)]}
    path.write_text(json.dumps(data))
    return path


def import_script(name: str):
    """A module of scripts/ (they are run as files, not installed)."""
    import importlib  # noqa: PLC0415
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def qas(n: int, article: int, context: str = CONTEXT) -> list[dict]:
    qas = []
    for i in range(n):
        if i % 4 == 3:
            qas.append({"id": f"a{article}q{i}", "question": "who built it ?", "answers": [], "is_impossible": True})
        else:
            word = "paris" if i % 2 else "rome"
            qas.append({"id": f"a{article}q{i}", "question": f"what is {word} ?", "is_impossible": False,
                        "answers": [{"text": word, "answer_start": context.index(word)}]})  # fmt: skip
    return qas


def test_answer_spans_are_labelled_on_the_right_tokens(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    answerable = QAExample("a", "where ?", CONTEXT, ("paris",), (CONTEXT.index("paris"),))
    impossible = QAExample("b", "who ?", CONTEXT)
    features = train.build_train_features(tokenizer, [answerable, impossible], max_length=64, stride=16)
    first = features[0]
    span = first["input_ids"][first["start_positions"] : first["end_positions"] + 1]
    assert tokenizer.decode(span) == "paris"
    assert (features[1]["start_positions"], features[1]["end_positions"]) == (0, 0)


def test_an_answer_outside_a_window_points_at_cls(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    context = "the city is old . " * 20 + "the capital is paris ."
    example = QAExample("a", "where ?", context, ("paris",), (context.index("paris"),))
    features = train.build_train_features(tokenizer, [example], max_length=32, stride=8)
    assert len(features) > 2
    labelled = [f for f in features if f["start_positions"] > 0]
    assert len(labelled) >= 1 and features[0]["start_positions"] == 0


def test_pairs_only_the_teacher_labels_add_no_gold_span_and_no_label_loss(tiny_qa_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    answerable = QAExample("a", "where ?", CONTEXT, ("paris",), (CONTEXT.index("paris"),))
    features = train.build_train_features(tokenizer, [answerable], 64, 16)
    features += train.build_train_features(tokenizer, [answerable], 64, 16, labelled=False)
    assert features[1]["start_positions"] == features[1]["end_positions"] == train.UNLABELLED
    batch = train.collate(features, [0, 1])
    torch.manual_seed(0)
    start, end = torch.randn(2, len(features[0]["input_ids"])), torch.randn(2, len(features[0]["input_ids"]))
    labelled_only = train.collate(features, [0])
    assert torch.equal(train.qa_loss(start, end, batch), train.qa_loss(start[:1], end[:1], labelled_only))
    none = train.collate(features, [1, 1])
    start.requires_grad_()
    loss = train.qa_loss(start, end, none)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(start.grad, torch.zeros_like(start))


def test_unanswerable_questions_can_be_oversampled(tmp_path):
    cfg = train.TrainConfig("finetune", "", str(squad_file(tmp_path / "d.json")), "", impossible_repeat=3)
    examples, held_out = train.load_examples(cfg)
    assert len(examples) == 8 + 2 * 2 and held_out == []
    assert sum(e.is_impossible for e in examples) == 6


def test_finetune_then_prune_end_to_end(tiny_qa_dir, tmp_path):
    data = str(squad_file(tmp_path / "d.json"))
    small = {"epochs": 1.0, "batch_size": 4, "max_length": 64, "stride": 16, "threads": 1}
    tuned = tmp_path / "tuned"
    train.finetune(train.TrainConfig("finetune", str(tiny_qa_dir), data, str(tuned), **small))
    pruned = tmp_path / "pruned"
    train.prune_and_distill(train.TrainConfig("prune", "", data, str(pruned), teacher=str(tuned),
                                              head_share=0.25, ffn_share=0.5, calib_examples=8, bf16=True,
                                              **small))  # fmt: skip

    record = json.loads((pruned / "train_config.json").read_text())
    assert record["config"]["teacher"] == str(tuned) and record["log"] and record["config"]["bf16"] is True
    assert all(math.isfinite(entry["loss"]) for entry in record["log"])  # BF16 autocast trains, no NaN
    model = AutoModelForQuestionAnswering.from_pretrained(pruned, dtype=torch.float32).eval()
    assert model.config.pruned_heads == {}  # stored dense, with zeros
    ids = torch.randint(5, 60, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = model(input_ids=ids).start_logits
    report = prune.compact(model)
    assert report.num_heads_removed == 2  # 25% of 2 layers x 4 heads
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).start_logits, before, atol=1e-3, rtol=0)


def test_command_line_flags_round_trip_through_the_reproduce_command():
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    args = parser.parse_args(["finetune", "--data", "train.json", "--out", "m", "--bf16", "--impossible-repeat", "3"])
    assert args.bf16 is True and args.impossible_repeat == 3
    assert parser.parse_args(["finetune", "--data", "d", "--out", "m"]).bf16 is False
    cfg = {**vars(args), "teacher": ""}
    command = train.reproduce_command({k: v for k, v in cfg.items() if k in train.TrainConfig.__dataclass_fields__})
    assert "--bf16 \\" in command or command.endswith("--bf16")
    assert "--impossible-repeat 3" in command and "--bf16 True" not in command


def test_held_out_articles_stay_out_of_training_and_calibrate_the_null_threshold(tiny_qa_dir, tmp_path):
    data = str(squad_file(tmp_path / "d.json", articles=3))
    cfg = train.TrainConfig("finetune", str(tiny_qa_dir), data, str(tmp_path / "m"), epochs=1.0, batch_size=4,
                            max_length=64, stride=16, threads=1, holdout_articles=1)  # fmt: skip
    examples, held_out = train.load_examples(cfg)
    assert len(held_out) == 1 and len(examples) == 16 and held_out[0] not in {e.title for e in examples}
    assert train.load_examples(cfg) == (examples, held_out)  # the seed fixes the split
    with pytest.raises(ValueError, match="only 3 articles"):
        train.load_examples(train.TrainConfig("finetune", "", data, "", holdout_articles=4))

    train.finetune(cfg)
    calibration = train.calibrate(cfg.out, data)
    record = json.loads((tmp_path / "m" / "train_config.json").read_text())
    assert record["holdout_titles"] == held_out and record["calibration"] == calibration
    assert calibration["questions"] == 8 and calibration["unanswerable"] == 2
    assert calibration["f1"] >= calibration["f1_at_zero"]  # the search never does worse than the pipeline's 0
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config[CALIBRATED_THRESHOLD] == calibration["null_threshold"]


def test_calibrating_a_model_trained_on_every_article_says_how_to_fix_it(tiny_qa_dir, tmp_path):
    data = str(squad_file(tmp_path / "d.json"))
    out = tmp_path / "m"
    train.finetune(train.TrainConfig("finetune", str(tiny_qa_dir), data, str(out), epochs=0.5, batch_size=4,
                                     max_length=64, stride=16, threads=1))  # fmt: skip
    with pytest.raises(SystemExit, match="--holdout-articles"):
        train.calibrate(out, data)


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


def test_the_fit_gap_record_scores_each_model_on_training_and_held_out_questions(tiny_qa_dir, tmp_path, monkeypatch):
    import shutil  # noqa: PLC0415

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's torch threads
    model = tmp_path / "model"
    shutil.copytree(tiny_qa_dir, model)
    (model / "train_config.json").write_text(json.dumps({"holdout_titles": ["t1"]}))
    other = tmp_path / "other"  # its own calibration article is left out too
    shutil.copytree(tiny_qa_dir, other)
    (other / "train_config.json").write_text(json.dumps({"holdout_titles": ["t2"]}))
    data = squad_file(tmp_path / "train.json", n=8, articles=3)
    dev = squad_file(tmp_path / "dev.json", n=3)  # answerable questions only: no NoAns score
    fit_gap = import_script("fit_gap")
    out = tmp_path / "fit.json"
    record = fit_gap.main(["--data", str(data), "--dev", str(dev), "--models", str(model), str(other),
                           "--questions", "6", "--out", str(out)])  # fmt: skip
    assert json.loads(out.read_text()) == record
    assert record["questions"] == {"training articles": 6, "dev": 3}  # t1 and t2 left out: 8 questions to draw from
    assert record["data"]["left out of the training sample"] == ["t1", "t2"]
    scores = record["models"][str(model)]
    assert set(scores) == {"training articles", "dev"} and record["models"][str(other)] == scores
    assert all(0 <= s[k] <= 100 for s in scores.values() for k in ("f1", "has_ans_f1", "span_f1", "best_f1"))
    assert scores["dev"]["no_ans_f1"] is None and 0 <= scores["training articles"]["no_ans_f1"] <= 100


def test_the_holdout_comparison_scores_two_models_on_the_same_held_out_questions(tiny_qa_dir, tmp_path, monkeypatch):
    import shutil  # noqa: PLC0415

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's torch threads
    compare = import_script("compare_holdout")
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, titles in ((a, ["t1"]), (b, ["t1"])):
        shutil.copytree(tiny_qa_dir, folder)
        (folder / "train_config.json").write_text(json.dumps({"holdout_titles": titles}))
    data = squad_file(tmp_path / "train.json", n=8, articles=3)
    out = tmp_path / "compare.json"
    record = compare.main(["--data", str(data), "--a", str(a), "--b", str(b), "--rounds", "200", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert record["questions"] == 8 and record["unanswerable"] == 2 and record["titles"] == ["t1"]
    assert record["a"]["f1"] == record["b"]["f1"] and record["difference"] == 0 and record["interval"] == [0, 0]
    assert record["views"]["a"] == record["views"]["b"] and record["views"]["a"]["f1"] == record["a"]["f1"]
    assert all(0 <= record["views"]["a"][k] <= 100 for k in ("has_ans_f1", "no_ans_f1", "best_f1", "span_f1"))
    assert record["span_f1_difference"] == {"questions": 6, "difference": 0, "interval": [0, 0]}  # the answerable
    assert record["answer_sentence"] is None  # a one-sentence paragraph has no shorter context to ask about
    elsewhere = squad_file(tmp_path / "other.json", n=4, articles=1)  # article t0 only
    with pytest.raises(SystemExit, match="none of the held-out articles"):
        compare.main(["--data", str(elsewhere), "--a", str(a), "--b", str(b), "--out", str(out)])
    (b / "train_config.json").write_text(json.dumps({"holdout_titles": ["t2"]}))
    with pytest.raises(SystemExit, match="same held-out articles"):
        compare.main(["--data", str(data), "--a", str(a), "--b", str(b), "--out", str(out)])


def test_the_holdout_comparison_asks_both_models_the_same_answer_sentences(
    tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch
):
    import shutil  # noqa: PLC0415

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's torch threads
    compare = import_script("compare_holdout")
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, source in ((a, tiny_qa_dir), (b, tiny_pruned_dir)):  # two different models
        shutil.copytree(source, folder)
        (folder / "train_config.json").write_text(json.dumps({"holdout_titles": ["t1"]}))
    asked = []
    predict = compare.predict_spans

    def recording(folder, examples):
        asked.append((folder.rsplit("/", 1)[-1], [(e.id, e.context) for e in examples]))
        return predict(folder, examples)

    monkeypatch.setattr(compare, "predict_spans", recording)
    data = squad_file(tmp_path / "two.json", n=8, articles=3, context=CONTEXT.replace(" and ", " . "))
    out = tmp_path / "compare.json"
    record = compare.main(["--data", str(data), "--a", str(a), "--b", str(b), "--rounds", "200", "--out", str(out)])
    (_, on_a), (_, on_b) = asked[2:]  # after the paragraphs, the sentences: the same ones, in the same order
    assert [name for name, _ in asked] == ["a", "b", "a", "b"] and on_a == on_b
    assert len(on_a) == 6 and all(c in CONTEXT.replace(" and ", " . ") and len(c) < len(CONTEXT) for _, c in on_a)
    sentence = record["answer_sentence"]
    assert sentence["questions"] == 6 and abs(sentence["difference"] - (sentence["b_f1"] - sentence["a_f1"])) <= 0.011
    low, high = sentence["interval"]
    assert low <= sentence["difference"] <= high


def test_the_teacher_gap_is_zero_for_the_teacher_and_compares_students_question_by_question(
    tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch
):
    import shutil  # noqa: PLC0415

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's torch threads
    gap = import_script("teacher_gap")
    same, other = tmp_path / "same", tmp_path / "other"
    for folder, source in ((same, tiny_qa_dir), (other, tiny_pruned_dir)):
        shutil.copytree(source, folder)
        (folder / "train_config.json").write_text(json.dumps({"holdout_titles": ["t1"]}))
    data = squad_file(tmp_path / "train.json", n=8, articles=3)
    out = tmp_path / "gap.json"
    args = ["--data", str(data), "--teacher", str(tiny_qa_dir), "--rounds", "200", "--out", str(out)]
    record = gap.main([*args, "--models", str(same), str(other)])
    assert json.loads(out.read_text()) == record and record["questions"] == 8 and record["titles"] == ["t1"]
    first, second = record["models"][str(same)], record["models"][str(other)]
    assert first == {"kl": 0.0, "same_answer_pct": 100.0}  # the teacher itself: no distance
    assert second["kl"] > 0 and second["kl_vs_first"]["difference"] == second["kl"]  # another model: some
    low, high = second["kl_vs_first"]["interval"]
    assert 0 < low <= second["kl"] <= high
    (other / "train_config.json").write_text(json.dumps({"holdout_titles": ["t2"]}))
    with pytest.raises(SystemExit, match="same held-out articles"):
        gap.main([*args, "--models", str(same), str(other)])


def test_the_int8_format_probe_compares_three_weight_formats_on_held_out_articles(tiny_pruned_dir, tmp_path):
    import shutil  # noqa: PLC0415

    model = tmp_path / "model"
    shutil.copytree(tiny_pruned_dir, model)
    config = model / "train_config.json"
    record = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**record, "holdout_titles": ["t1"]}))
    data = squad_file(tmp_path / "train.json", n=6, articles=3)
    probe = import_script("int8_format_probe")
    out = tmp_path / "probe.json"
    record = probe.main(["--model", str(model), "--data", str(data), "--threads", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "int8-format-probe"
    assert record["data"]["questions"] == 6 and record["data"]["titles"] == ["t1"]  # one article of three
    results = record["results"]
    assert set(results) == {"FP32 (ORT-optimized)", "U8U8", "U8S7", "U8S8"}
    assert all(r["latency_ms"]["n"] == 6 and 0 <= r["f1_at_zero"] <= 100 for r in results.values())
    assert results["U8U8"]["speed_vs_U8U8"] == 1.0 and "f1_vs_U8U8" not in results["U8U8"]
    low, high = results["U8S7"]["f1_vs_U8U8"]["interval_95"]
    assert low <= results["U8S7"]["f1_vs_U8U8"]["difference"] <= high
    assert results["U8U8"]["weights"]["types"] == ["UINT8"]
    assert results["U8S7"]["weights"]["types"] == ["INT8"] and results["U8S7"]["weights"]["max_abs"] <= 64
    assert results["U8S8"]["weights"]["types"] == ["INT8"] and results["U8S8"]["weights"]["max_abs"] > 64
    assert record["settings"]["threads"] == 1
    assert results["U8U8"]["operators"].get("MatMulInteger")
    assert "MatMulInteger" not in results["FP32 (ORT-optimized)"]["operators"]
    (model / "train_config.json").write_text(json.dumps({"holdout_titles": []}))
    with pytest.raises(SystemExit, match="no held-out articles"):
        probe.main(["--model", str(model), "--data", str(data), "--out", str(out)])


def test_the_static_int8_probe_records_three_graphs_of_one_model(tiny_pruned_dir, tmp_path, caplog):
    data = squad_file(tmp_path / "d.json", n=8)
    static_int8_probe = import_script("static_int8_probe")
    out = tmp_path / "probe.json"
    record = static_int8_probe.main(["--model", str(tiny_pruned_dir), "--calibration", str(data), "--data", str(data),
                                     "--calib-questions", "4", "--questions", "6", "--threads", "1",
                                     "--out", str(out)])  # fmt: skip
    assert json.loads(out.read_text()) == record
    results = record["results"]
    assert set(results) == {"fp32 optimized", "int8 dynamic (shipped)", "int8 static + dynamic attention"}
    assert all(r["latency_ms"]["n"] == 6 and 0 <= r["f1_at_zero"] <= 100 for r in results.values())
    assert results["int8 dynamic (shipped)"]["speed_vs_dynamic"] == 1.0
    static_ops = results["int8 static + dynamic attention"]["operators"]
    assert static_ops.get("QuantizeLinear") and static_ops.get("QAttention")  # static MatMuls, dynamic attention
    assert "QuantizeLinear" not in results["int8 dynamic (shipped)"]["operators"]
    assert record["calibration"]["questions"] == 4 and record["data"]["questions"] == 6
    with caplog.at_level(logging.WARNING, logger="variants.record"):
        assert load_records(out.parent) == []  # beside benchmark records it is skipped by its kind, quietly
    assert "probe.json" not in caplog.text


def test_the_op_profile_adds_up_each_build_s_kernel_time_by_operator(tiny_pruned_dir, tmp_path, caplog):
    data = squad_file(tmp_path / "d.json", n=4)
    out = tmp_path / "ops.json"
    record = import_script("ort_op_profile").main(
        ["--model", str(tiny_pruned_dir), "--data", str(data), "--threads", "1", "--out", str(out)]
    )
    assert json.loads(out.read_text()) == record and record["data"]["n_questions"] == 4
    assert record["int8"]["format"] and record["settings"]["threads"] == 1
    assert set(record["results"]) == {"ORT-optimized FP32", "INT8"}
    for result in record["results"].values():
        by_op = result["by_operator"]
        assert sum(r["share"] for r in by_op.values()) == pytest.approx(1.0, abs=0.01)
        assert all(r["nodes"] >= 1 and r["ms_per_question"] >= 0 for r in by_op.values())
        summed = sum(r["ms_per_question"] for r in by_op.values())
        assert summed == pytest.approx(result["kernels_ms_per_question"], abs=0.001 * len(by_op))
        assert 0 < result["run_ms_median"] and 0 < result["run_ms_mean"]
    integer_ops = {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "QAttention", "DynamicQuantizeLinear"}
    assert integer_ops & set(record["results"]["INT8"]["by_operator"])
    assert not integer_ops & set(record["results"]["ORT-optimized FP32"]["by_operator"])
    with caplog.at_level(logging.WARNING, logger="variants.record"):
        assert load_records(out.parent) == []  # beside benchmark records it is skipped by its kind, quietly


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
    at_zero = train.score_spans(examples, spans, 0.0)
    assert at_zero["has_ans_answered"] == 50.0 and at_zero["f1"] == pytest.approx(200 / 3)
    assert train.score_spans(examples, spans, 2.0)["has_ans_answered"] == 100.0  # a wide margin answers everything
