"""The latency and memory probes of experiments/ on tiny models: each writes the record it promises."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from squad_data import QUESTIONS

from experiments import backbone_probe, common, core_share_probe, malloc_probe, pass_tokens_probe, short_context_eval


def test_the_malloc_probe_times_each_setting_in_its_own_process(tiny_qa_dir, tmp_path):

    probe = malloc_probe
    out = tmp_path / "malloc.json"
    args = ["--baseline", str(tiny_qa_dir), "--variant", "baseline", "--questions", "3", "--warmup", "1"]
    record = probe.main([*args, "--rounds", "2", "--timeout", "300", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "malloc-probe"
    assert set(record["runs"]) == set(probe.SETTINGS) and all(len(runs) == 2 for runs in record["runs"].values())
    pids = set()
    for name, runs in record["runs"].items():
        mmap, trim = probe.SETTINGS[name]
        for r in runs:
            assert r["n"] == 3 and r["p50_ms"] > 0 and r["mmap_threshold"] == mmap and r["trim_threshold"] == trim
            assert r["applied"] is True  # glibc, as on every machine this project runs on
            if r["mmaps_4mib_block"] is not None:  # the setting took effect: a 4 MiB block is mmapped below it only
                assert r["mmaps_4mib_block"] is (probe.CHECK_BLOCK > mmap)
            pids.add(r["pid"])
    assert len(pids) == 4  # each run in a process of its own
    assert set(record["median_of_rounds"]) == set(probe.SETTINGS)
    assert record["hardware"]["cpu"] and record["versions"]["onnxruntime"]


@pytest.mark.skip(
    reason="the probe sets the in-process pipeline's threads; the peers now run in their own environment's process"
)
def test_the_core_share_probe_times_four_runners_in_blocks(tiny_qa_dir, tiny_pruned_dir, squad_file, tmp_path):
    import torch  # noqa: PLC0415

    probe = core_share_probe
    out = tmp_path / "cores.json"
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--variant", "pruned-onnx"]
    args += ["--data", str(squad_file)]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        record = probe.main([*args, "--seconds", "1", "--block", "2", "--gain-split", "0.5", "--out", str(out)])
        assert torch.get_num_threads() == 2  # the pipeline's threads given back
    finally:
        torch.set_num_threads(threads)
    assert json.loads(out.read_text()) == record and record["kind"] == "core-share-probe"
    blocks = record["blocks"]
    assert blocks and all(set(b["p50_ms"]) == set(b["ms"]) == set(probe.RUNNERS) for b in blocks)
    assert all(len(times) == 2 for b in blocks for times in b["ms"].values()) and blocks[0]["questions"] == [0, 1]
    assert [b["order"][0] for b in blocks[:2]] == list(probe.RUNNERS[: min(2, len(blocks))])  # the order rotates
    assert record["threads_seen"] == {probe.PIPELINE: 2, probe.PIPELINE_ONE_THREAD: 1}
    assert all(b["guest"]["others_cpu_s"] >= 0 and b["guest"]["steal_s"] >= 0 for b in blocks)
    assert record["summary"]["all blocks"]["blocks"] == len(blocks)
    assert set(record["slow_share"]) == set(probe.RUNNERS)
    assert record["data"]["questions_per_block"] == 2 and record["data"]["n_questions"] == len(QUESTIONS)
    assert record["hardware"]["cpu"] and record["versions"]["onnxruntime"]


def test_slow_share_counts_questions_slower_than_their_own_median():

    probe = core_share_probe

    def block(questions, variant_ms):
        ms = {name: [10.0] * len(questions) for name in probe.RUNNERS}
        ms[probe.ALL_CORES] = variant_ms
        return {"questions": questions, "ms": ms}

    # question 0 takes 4 ms as a rule and once 6 (slow); question 1 takes 20 ms, once 24 (not above 1.25x)
    blocks = [block([0, 1], [4.0, 20.0]), block([0, 1], [4.0, 24.0]), block([0, 1], [6.0, 20.0])]
    shares = probe.slow_share(blocks)
    assert shares[probe.ALL_CORES] == round(1 / 6, 4) and shares[probe.PIPELINE] == 0.0


def test_guest_cpu_seconds_count_this_process_and_the_whole_guest():

    probe = core_share_probe
    before = probe.guest_cpu_seconds()
    spin_until = time.process_time() + 0.3
    while time.process_time() < spin_until:
        pass
    after = probe.guest_cpu_seconds()
    assert after["own"] - before["own"] >= 0.25
    if Path("/proc/stat").exists():  # the guest's busy time includes this process's
        assert after["busy"] - before["busy"] >= 0.2
    reading = probe.guest_between({"busy": 10.0, "steal": 1.0, "own": 3.0}, {"busy": 14.0, "steal": 1.5, "own": 5.0})
    assert reading == {"others_cpu_s": 2.0, "steal_s": 0.5}


def test_core_share_groups_split_blocks_by_gain():

    probe = core_share_probe

    def block(all_cores, one, pipe):
        times = {probe.ALL_CORES: all_cores, probe.ONE_THREAD: one, probe.PIPELINE: pipe}
        times[probe.PIPELINE_ONE_THREAD] = 48.0
        guest = {"others_cpu_s": 0.1, "steal_s": 0.0}
        return {"p50_ms": times, "core_gain": one / all_cores, "pipeline_core_gain": 48.0 / pipe, "guest": guest}

    blocks = [block(4.0, 7.0, 32.0), block(5.0, 7.5, 30.0), block(7.0, 7.0, 35.0)]
    summary = probe.group_summary(blocks, 1.25)
    assert summary["core_gain >= 1.25"]["blocks"] == 2 and summary["core_gain < 1.25"]["blocks"] == 1
    assert summary["core_gain >= 1.25"]["pipeline_over_variant"] == 7.0  # median of 8.0 and 6.0
    assert summary["core_gain < 1.25"]["p50_ms"][probe.ALL_CORES] == 7.0
    assert summary["all blocks"]["pipeline_over_variant_range"] == [5.0, 8.0]
    assert summary["core_gain < 1.25"]["core_gain"] == 1.0
    assert summary["core_gain >= 1.25"]["pipeline_core_gain"] == 1.55  # median of 48/32 and 48/30
    assert probe.group_summary(blocks[:1], 2.0)["core_gain >= 2.0"] == {"blocks": 0}


def test_the_short_context_eval_asks_each_question_twice(tiny_qa_dir, tiny_pruned_dir, squad_file, tmp_path):

    probe = short_context_eval
    out = tmp_path / "short.json"
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--data", str(squad_file)]
    record = probe.main([*args, "--variants", "baseline,pruned-onnx", "--rounds", "200", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "short-context-eval"
    answerable = sum(1 for _q, _c, answer in QUESTIONS if answer is not None)
    assert record["data"]["answerable_asked"] == answerable
    for name in ("baseline", "pruned-onnx"):
        for kind in ("paragraph", "answer sentence"):
            entry = record["results"][name][kind]
            assert 0 <= entry["f1"] <= 100 and 0 <= entry["no_answer_share"] <= 1
            assert ("f1_minus_baseline" in entry) is (name != "baseline")
    short, whole = (record["data"]["median_context_chars"][k] for k in ("answer sentence", "paragraph"))
    assert 0 < short <= whole


def test_a_probe_exits_naming_the_variant_that_did_not_load(tiny_qa_dir, tmp_path):
    engine = common.probe_engine("embedded", ["baseline"], baseline=str(tiny_qa_dir))
    assert engine.variants["baseline"].ok and engine.settings_for(engine.variants["baseline"]).max_length == 128
    engine.close()
    with pytest.raises(SystemExit, match=r"^baseline: "):
        common.probe_engine("embedded", ["baseline"], baseline=str(tmp_path / "no-such-model"))


def test_the_pass_tokens_probe_times_each_cap_and_shape_and_gives_the_engines_cap_back(tiny_qa_dir, tiny_pruned_dir,
                                                                                       tmp_path):  # fmt: skip
    out = tmp_path / "pass.json"
    args = ["--baseline", str(tiny_qa_dir), "--pruned", str(tiny_pruned_dir), "--variants", "pruned,pruned-onnx-opt"]
    args += ["--caps", "0,128", "--runs", "1", "--widths", "32", "--batches", "1,2", "--chars", "3000"]
    record = pass_tokens_probe.main([*args, "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "pass-tokens-probe"
    passage = record["long_passage"]
    assert passage["characters"] >= 3000 and passage["windows"] > 2
    assert [r["cap_tokens"] for r in passage["rows"]] == [None, 128]
    assert all(set(r["median_ms"]) == set(r["answers"]) == {"pruned", "pruned-onnx-opt"} for r in passage["rows"])
    assert [(r["width"], r["batch"], r["tokens"]) for r in record["shapes"]] == [(32, 1, 32), (32, 2, 64)]
    from variants.answering.runtime import CPU_PASS_TOKENS  # noqa: PLC0415

    assert record["engine_pass_tokens"] == {"pruned": None, "pruned-onnx-opt": CPU_PASS_TOKENS}  # given back


def test_the_backbone_probe_times_each_model_against_the_first(tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch):
    import torch  # noqa: PLC0415

    monkeypatch.setattr(backbone_probe, "uses_bf16", lambda: False)  # the same arithmetic on every CPU
    threads = torch.get_num_threads()
    out = tmp_path / "backbones.json"
    args = ["--reference", str(tiny_qa_dir), "--backbone", f"pruned={tiny_pruned_dir}", "--steps", "2", "--batch", "2"]
    record = backbone_probe.main([*args, "--length", "32", "--window", "16", "--runs", "2", "--out", str(out)])
    assert json.loads(out.read_text()) == record and record["kind"] == "backbone-probe"
    assert torch.get_num_threads() == threads
    reference, other = record["results"]["shipped baseline"], record["results"]["pruned"]
    assert reference["train_step_vs_reference"] == reference["forward_vs_reference"] == 1.0
    assert len(reference["train_step_seconds"]) == 1  # the first step is warm-up
    assert other["layers"] == reference["layers"] and other["parameters_m"] <= reference["parameters_m"]
    assert other["forward_ms_median"] > 0 and other["train_step_vs_reference"] > 0
    with pytest.raises(SystemExit):
        backbone_probe.main(["--backbone", "no-folder"])


def test_the_ort_version_probe_compares_each_graph_and_puts_a_difference_in_graph_or_runtime(tiny_pruned_dir, tmp_path):
    """One build, in this interpreter, compared with itself: every graph the same, logits the same to the bit (the
    record's two interpreters run in subprocesses, too slow for the suite; the committed record is such a run)."""
    import shutil  # noqa: PLC0415

    from experiments import ort_version_probe as probe  # noqa: PLC0415

    facts = probe.this_interpreter(tiny_pruned_dir, tmp_path / "run-0")
    assert facts["graphs"]["optimize-gpu"]["fused_operators"]["Attention"] == 2  # the tiny model's two layers
    assert facts["graphs"]["int8"]["operators"].get("com.microsoft:QAttention") == 2
    compared = probe.compare(facts, facts)
    assert set(compared) == set(probe.GRAPHS)
    same = ("same_operators", "same_fusions", "same_attention_heads")
    assert all(row[key] for row in compared.values() for key in same)
    assert compared["optimize-gpu"]["logits_max_abs_diff"] == 0.0
    shutil.copytree(tmp_path / "run-0", tmp_path / "run-1")
    logits = probe.logits_of([tmp_path / "run-0", tmp_path / "run-1"])
    apart = probe.kernels_or_graphs([logits, logits], ["a", "b"])
    assert set(apart) == {"optimize-cpu", "int8"} and set(apart["int8"].values()) == {0.0}
    other = {**facts, "graphs": {**facts["graphs"], "int8": {**facts["graphs"]["int8"], "operators": {}}}}
    assert probe.compare(facts, other)["int8"]["same_operators"] is False  # a difference is found
