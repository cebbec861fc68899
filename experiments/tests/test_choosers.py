"""The recipe choosers and INT8 probes of experiments/ on tiny models: each writes the record it promises."""

from __future__ import annotations

import json
import logging

import pytest
import torch
from squad_data import CONTEXT, write_squad

from experiments import (
    compare_holdout,
    fit_gap,
    int8_embedding_probe,
    int8_format_probe,
    ort_op_profile,
    static_int8_probe,
    teacher_gap,
)
from variants.records.record import load_records


def test_the_fit_gap_record_scores_each_model_on_training_and_held_out_questions(tiny_qa_dir, tmp_path, monkeypatch):
    import shutil  # noqa: PLC0415

    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)  # keep this process's torch threads
    model = tmp_path / "model"
    shutil.copytree(tiny_qa_dir, model)
    (model / "train_config.json").write_text(json.dumps({"holdout_titles": ["t1"]}))
    other = tmp_path / "other"  # its own calibration article is left out too
    shutil.copytree(tiny_qa_dir, other)
    (other / "train_config.json").write_text(json.dumps({"holdout_titles": ["t2"]}))
    data = write_squad(tmp_path / "train.json", n=8, articles=3)
    dev = write_squad(tmp_path / "dev.json", n=3)  # answerable questions only: no NoAns score
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
    compare = compare_holdout
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, titles in ((a, ["t1"]), (b, ["t1"])):
        shutil.copytree(tiny_qa_dir, folder)
        (folder / "train_config.json").write_text(json.dumps({"holdout_titles": titles}))
    data = write_squad(tmp_path / "train.json", n=8, articles=3)
    out = tmp_path / "compare.json"
    record = compare.main(["--data", str(data), "--a", str(a), "--b", str(b), "--rounds", "200", "--out", str(out)])
    assert json.loads(out.read_text()) == record
    assert record["questions"] == 8 and record["unanswerable"] == 2 and record["titles"] == ["t1"]
    assert record["a"]["f1"] == record["b"]["f1"] and record["difference"] == 0 and record["interval"] == [0, 0]
    assert record["views"]["a"] == record["views"]["b"] and record["views"]["a"]["f1"] == record["a"]["f1"]
    assert all(0 <= record["views"]["a"][k] <= 100 for k in ("has_ans_f1", "no_ans_f1", "best_f1", "span_f1"))
    assert record["span_f1_difference"] == {"questions": 6, "difference": 0, "interval": [0, 0]}  # the answerable
    assert record["answer_sentence"] is None  # a one-sentence paragraph has no shorter context to ask about
    elsewhere = write_squad(tmp_path / "other.json", n=4, articles=1)  # article t0 only
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
    compare = compare_holdout
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
    data = write_squad(tmp_path / "two.json", n=8, articles=3, context=CONTEXT.replace(" and ", " . "))
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
    gap = teacher_gap
    same, other = tmp_path / "same", tmp_path / "other"
    for folder, source in ((same, tiny_qa_dir), (other, tiny_pruned_dir)):
        shutil.copytree(source, folder)
        (folder / "train_config.json").write_text(json.dumps({"holdout_titles": ["t1"]}))
    data = write_squad(tmp_path / "train.json", n=8, articles=3)
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


def held_out_pruned_model(tiny_pruned_dir, tmp_path):
    """A copy of the tiny pruned model whose training held out article t1, and a training file of 3 articles."""
    import shutil  # noqa: PLC0415

    model = tmp_path / "model"
    shutil.copytree(tiny_pruned_dir, model)
    config = model / "train_config.json"
    record = json.loads(config.read_text()) if config.exists() else {}
    config.write_text(json.dumps({**record, "holdout_titles": ["t1"]}))
    return model, write_squad(tmp_path / "train.json", n=6, articles=3)


def test_the_int8_format_probe_compares_three_weight_formats_on_held_out_articles(tiny_pruned_dir, tmp_path):
    model, data = held_out_pruned_model(tiny_pruned_dir, tmp_path)
    probe = int8_format_probe
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


def test_the_int8_embedding_probe_compares_the_engine_build_with_int8_tables(tiny_pruned_dir, tmp_path):
    model, data = held_out_pruned_model(tiny_pruned_dir, tmp_path)
    out = tmp_path / "probe.json"
    probe = int8_embedding_probe
    record = probe.main(["--model", str(model), "--data", str(data), "--threads", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "int8-embedding-probe"
    results = record["results"]
    assert set(results) == {"FP32", probe.ENGINE, probe.EMBEDDINGS}
    assert all(r["latency_ms"]["n"] == 6 and 0 <= r["f1_at_zero"] <= 100 for r in results.values())
    assert results[probe.ENGINE]["speed_vs_engine_int8"] == 1.0 and "f1_vs_engine_int8" not in results[probe.ENGINE]
    compared = results[probe.EMBEDDINGS]["f1_vs_engine_int8"]
    assert compared["interval_95"][0] <= compared["difference"] <= compared["interval_95"][1]
    assert results[probe.EMBEDDINGS]["operators"].get("QEmbedLayerNormalization") == 1
    assert results[probe.ENGINE]["operators"].get("EmbedLayerNormalization") == 1
    assert results[probe.EMBEDDINGS]["size_mb"] <= results[probe.ENGINE]["size_mb"]


def test_the_static_int8_probe_records_three_graphs_of_one_model(tiny_pruned_dir, tmp_path, caplog):
    data = write_squad(tmp_path / "d.json", n=8)
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


def test_the_op_profile_adds_up_each_build_s_kernel_time_by_operator(tiny_pruned_dir, tmp_path, caplog):
    data = write_squad(tmp_path / "d.json", n=4)
    out = tmp_path / "ops.json"
    record = ort_op_profile.main(
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
    with caplog.at_level(logging.WARNING, logger="variants.records.record"):
        assert load_records(out.parent) == []  # beside benchmark records it is skipped by its kind, quietly
