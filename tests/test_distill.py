"""Interruptible training and the gradual pruning recipe, on the tiny fixture model and a tiny SQuAD file."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
from dataclasses import replace

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from squad_data import write_squad
from transformers import AutoModelForQuestionAnswering

from variants.building import prune, storage
from variants.building import prune as pruning
from variants.core.spec import VariantSpec
from variants.core.squad import load_squad
from variants.serving.engine import load_engine
from variants.training import cards, distill, oneshot, recipes
from variants.training import cli as train_cli
from variants.training import features as train_features
from variants.training import loop as train_loop_mod
from variants.training import settings as train_settings
from variants.training.checkpoint import Checkpointer, Interrupted

SMALL = {"batch_size": 4, "max_length": 64, "stride": 16, "threads": 1}


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def assert_same_run(a, b) -> None:
    """Same weights bit for bit and the same loss log (times aside)."""
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key
    log_a, log_b = (json.loads((f / "train_config.json").read_text())["log"] for f in (a, b))
    assert [{k: v for k, v in e.items() if k != "elapsed_s"} for e in log_a] == [
        {k: v for k, v in e.items() if k != "elapsed_s"} for e in log_b
    ]


@pytest.fixture
def one_thread():
    """Bit-identical runs need one thread: a parallel reduction may split differently from one call to the next
    on a loaded machine (seen once in CI-like runs with two)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_an_interrupted_finetune_resumes_to_the_same_model(tiny_qa_dir, tmp_path, one_thread):
    data = str(write_squad(tmp_path / "d.json", n=24))
    cfg = train_settings.TrainConfig("finetune", str(tiny_qa_dir), data, str(tmp_path / "whole"), epochs=2.0, **SMALL)
    oneshot.finetune(cfg)  # 6 batches an epoch, 12 steps, dropout on: resuming must restore the RNGs too

    run = tmp_path / "run"
    parted = train_settings.TrainConfig(
        "finetune", str(tiny_qa_dir), data, str(tmp_path / "parted"), epochs=2.0, **SMALL
    )
    with pytest.raises(Interrupted, match="step 8 of 12"):  # stops mid-epoch, after the first epoch's reshuffle
        oneshot.finetune(parted, Checkpointer(run, every_s=1e9, stop_after_steps=8, config=vars(parted)))
    assert not (tmp_path / "parted").exists() and (run / "checkpoint.pt").is_file()
    with pytest.raises(ValueError, match=r"other settings.*'lr': \(0.0001, 0.0002\)"):  # not the same run
        oneshot.finetune(parted, Checkpointer(run, resume=True, config=vars(replace(parted, lr=2e-4))))
    oneshot.finetune(parted, Checkpointer(run, resume=True, config=vars(replace(parted, threads=2))))
    assert_same_run(tmp_path / "whole", tmp_path / "parted")


def test_an_interrupted_one_shot_prune_resumes_to_the_same_model_without_the_teachers_logits_again(
    tiny_qa_dir, tmp_path, one_thread, monkeypatch
):
    data = str(write_squad(tmp_path / "d.json", n=16))
    fields = dict(teacher=str(tiny_qa_dir), epochs=2.0, calib_examples=8, min_neurons=8, **SMALL)
    whole = train_settings.TrainConfig("prune", "", data, str(tmp_path / "whole"), **fields)
    oneshot.prune_and_distill(whole)

    run = tmp_path / "run"
    parted = replace(whole, out=str(tmp_path / "parted"))
    with pytest.raises(Interrupted, match="step 5 of 8"):
        oneshot.prune_and_distill(parted, Checkpointer(run, every_s=1e9, stop_after_steps=5, config=vars(parted)))
    assert (run / "teacher_logits.pt").is_file()

    def not_again(*_args, **_kwargs):
        raise AssertionError("the teacher's logits were computed again on resume")

    monkeypatch.setattr(oneshot, "teacher_logits", not_again)
    oneshot.prune_and_distill(parted, Checkpointer(run, resume=True, config=vars(parted)))
    assert_same_run(tmp_path / "whole", tmp_path / "parted")
    with pytest.raises(AssertionError, match="computed again"):  # a fresh run makes its own
        oneshot.prune_and_distill(replace(parted, out=str(tmp_path / "fresh")), Checkpointer(tmp_path / "run2"))


def test_a_checkpoint_older_than_a_setting_resumes_when_the_setting_keeps_its_default(tmp_path):
    Checkpointer(tmp_path, config={"lr": 1e-4, "out": "a"}).save({"step": 3})  # saved before "teacher_inputs" existed
    defaults = {"lr": 1e-4, "teacher_inputs": 0.0}
    now = {"lr": 1e-4, "teacher_inputs": 0.0, "out": "b"}
    assert Checkpointer(tmp_path, resume=True, config=now, defaults=defaults).load()["step"] == 3
    with pytest.raises(ValueError, match=r"'teacher_inputs': \(0.0, 1.0\)"):  # the old run did not use it
        Checkpointer(tmp_path, resume=True, config={**now, "teacher_inputs": 1.0}, defaults=defaults).load()
    with pytest.raises(ValueError, match=r"'teacher_inputs': \(None, 0.0\)"):  # no defaults: nothing to assume
        Checkpointer(tmp_path, resume=True, config=now).load()


def test_sigterm_checkpoints_after_the_current_step_and_stops(tiny_qa_dir, tmp_path):
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir)
    tokenizer_features = train_features.build_train_features(
        __import__("transformers").AutoTokenizer.from_pretrained(tiny_qa_dir),
        load_squad(str(write_squad(tmp_path / "d.json")), split="train"), 64, 16,
    )  # fmt: skip
    cfg = train_settings.TrainConfig("finetune", "", "", "", epochs=3.0, **SMALL)
    calls = []
    usual = train_loop_mod.logits_loss(cfg)

    def loss_fn(m, batch, idx):
        calls.append(len(idx))
        if len(calls) == 2:
            signal.raise_signal(signal.SIGTERM)  # as `kill PID` would, in the middle of a step
        return usual(m, batch, idx)

    checkpoint = Checkpointer(tmp_path / "run", every_s=1e9)
    with checkpoint.stop_on_signals(), pytest.raises(Interrupted, match="step 2 of 6"):
        train_loop_mod.train_loop(model, tokenizer_features, cfg, loss_fn=loss_fn, checkpoint=checkpoint)
    state = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert state["step"] == 2 and len(calls) == 2
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is gone again


def gradual_config(teacher, data, out, **extra) -> train_settings.TrainConfig:
    small = {**train_settings.RECIPES["gradual"], "min_neurons": 8, "min_heads": 1, **SMALL, **extra}
    return train_settings.TrainConfig(
        "prune", "", data, str(out), teacher=str(teacher), epochs=2.0, calib_examples=8, **small
    )


def test_the_gradual_recipe_cuts_in_steps_keeps_the_embeddings_and_resumes_across_steps(
    tiny_qa_dir, tmp_path, one_thread
):
    data = str(write_squad(tmp_path / "d.json", n=16))
    whole = tmp_path / "whole"
    distill.gradual_prune(gradual_config(tiny_qa_dir, data, whole, bf16=True))
    record = json.loads((whole / "train_config.json").read_text())
    assert [e["prune_step"] for e in record["log"]] == [1, 2, 3]  # one log line per step (each ends its loop)
    assert {"hard", "kd", "hidden", "null"} <= record["log"][0].keys()
    assert sum(len(v) for v in record["heads_removed"].values()) == 4  # half of 2 layers x 4 heads
    assert sum(record["ffn_kept"].values()) == 128 - round(train_settings.RECIPES["gradual"]["ffn_share"] * 128)

    teacher, student = (AutoModelForQuestionAnswering.from_pretrained(f).eval() for f in (tiny_qa_dir, whole))
    kept = student.bert.embeddings.state_dict()
    for name, param in teacher.bert.embeddings.state_dict().items():  # frozen: shareable with the teacher
        assert torch.equal(kept[name], param.half().float()), name
    report = prune.compact(student)
    assert report.num_heads_removed == 4 and report.params_after == record["parameters_compacted"]
    stored = storage.load(whole / "compact")  # the same model, compacted, embeddings from the teacher's folder
    ids = torch.randint(5, 60, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(stored(input_ids=ids).start_logits, student(input_ids=ids).start_logits)

    cards.card(str(whole), data)  # the model card names the recipe and the one command that makes it
    readme = (whole / "README.md").read_text()
    assert "3 growing steps" in readme and "--recipe gradual" in readme
    assert "## Recipes compared" in readme and "| `gradual" in readme and "train ship" in readme
    row = json.loads((whole / "recipes.json").read_text())[0]
    low, high = row["speedup_iqr"]
    assert row["rounds"] == 15 and 0 < low <= row["speedup"] <= high  # the median of 15 pairs and their spread
    assert f"middle half of 15 pairs {low:.2f}-{high:.2f}x" in readme

    shipped = storage.ship(whole, tmp_path / "models" / "pruned")  # what goes to assets/models
    assert {"README.md", "recipes.json", "compact.json", "model.safetensors"} <= {f.name for f in shipped.iterdir()}
    with torch.no_grad():
        again = storage.load_qa_model(shipped, compacted=True)
        torch.testing.assert_close(again(input_ids=ids).start_logits, student(input_ids=ids).start_logits)
    card = (shipped / "README.md").read_text()  # its "Load it" names the folder it now lives in
    assert 'load_qa_model("assets/models/pruned"' in card and f"assets/models/{whole.name}" not in card
    base = storage.ship(tiny_qa_dir, tmp_path / "models" / "base")  # a plain model: its folder as it is
    paired = storage.ship(whole, tmp_path / "models" / "paired", embeddings_from=base)  # beside its shipped teacher
    assert json.loads((paired / "compact.json").read_text())["embeddings"]["from"] == "../base"
    shipped_with = f"train ship --out {whole.as_posix()} --to {paired.as_posix()} --embeddings-from {base.as_posix()}\n"
    assert shipped_with in (paired / "README.md").read_text()  # the card names the ship command used
    with torch.no_grad():
        again = storage.load_qa_model(paired, compacted=True)
        torch.testing.assert_close(again(input_ids=ids).start_logits, student(input_ids=ids).start_logits)

    parted, run = tmp_path / "parted", tmp_path / "run"
    cfg = gradual_config(tiny_qa_dir, data, parted, bf16=True)
    with pytest.raises(Interrupted, match="step 1 of 2"):  # prune steps of 2, 2 and 5 steps: stop inside the 2nd
        distill.gradual_prune(cfg, Checkpointer(run, every_s=1e9, stop_after_steps=3))
    assert torch.load(run / "checkpoint.pt", weights_only=False)["stage"] == 1
    distill.gradual_prune(cfg, Checkpointer(run, resume=True))
    assert_same_run(whole, parted)


def test_the_one_shot_recipe_keeps_the_teachers_embeddings_when_asked_and_stores_the_compact_model(
    tiny_qa_dir, tmp_path
):
    data, out = str(write_squad(tmp_path / "d.json", n=16)), tmp_path / "oneshot"
    cfg = train_settings.TrainConfig("prune", "", data, str(out), teacher=str(tiny_qa_dir), epochs=1.0,
                                     calib_examples=8, min_neurons=8, freeze_embeddings=True, **SMALL)  # fmt: skip
    oneshot.prune_and_distill(cfg)
    teacher, student = (AutoModelForQuestionAnswering.from_pretrained(f).eval() for f in (tiny_qa_dir, out))
    for name, param in teacher.bert.embeddings.state_dict().items():  # frozen: shareable with the teacher
        assert torch.equal(student.bert.embeddings.state_dict()[name], param.half().float()), name
    assert storage.is_compact(out / "compact")
    ids = torch.randint(5, 60, (2, 20), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        stored = storage.load(out / "compact")
        torch.testing.assert_close(stored(input_ids=ids).start_logits, student(input_ids=ids).start_logits)
    cards.card(str(out), data)
    readme = (out / "README.md").read_text()
    assert "embeddings kept frozen" in readme and "--freeze-embeddings" in readme
    record = json.loads((out / "train_config.json").read_text())
    record["config"]["long_contexts"] = 0.2  # a run with whole-article windows says so in plain words
    (out / "train_config.json").write_text(json.dumps(record))
    cards.card(str(out), data)
    assert "20% of the questions again with their paragraph among 3 consecutive" in (out / "README.md").read_text()


def test_the_refine_recipe_is_one_command_the_one_shot_cut_then_distillation_with_the_teachers_embeddings(
    tiny_qa_dir, tmp_path
):
    data, out = str(write_squad(tmp_path / "d.json", n=16)), tmp_path / "refined"
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    train_cli.run(parser.parse_args([
        "prune", "--recipe", "refine", "--data", data, "--out", str(out), "--teacher", str(tiny_qa_dir),
        "--epochs", "1.0", "--calib-examples", "8", "--min-neurons", "8", "--batch-size", "4", "--max-length", "64",
        "--stride", "16", "--threads", "1", "--run-dir", str(tmp_path / "run"), "--attention-weight", "0.5",
        "--teacher-inputs", "0.5",
    ]))  # fmt: skip
    first = json.loads((out / "oneshot" / "train_config.json").read_text())
    record = json.loads((out / "train_config.json").read_text())
    assert first["config"]["recipe"] == "oneshot" and first["config"]["epochs"] == 3.0  # the one-shot stage's own
    assert not first["config"]["freeze_embeddings"] and first["config"]["hidden_weight"] == 0
    assert first["config"]["teacher_inputs"] == 0 and record["config"]["teacher_inputs"] == 0.5
    assert record["config"]["init"] == str(out / "oneshot") and {"hidden", "null"} <= record["log"][0].keys()
    assert "attention" in record["log"][0] and "attention" not in first["log"][0]  # the refinement's own term
    assert record["heads_removed"] == first["heads_removed"] and record["ffn_kept"] == first["ffn_kept"]
    assert sum(len(v) for v in record["heads_removed"].values()) == round(0.55 * 8)

    teacher, oneshot, refined = (AutoModelForQuestionAnswering.from_pretrained(f).eval()
                                 for f in (tiny_qa_dir, out / "oneshot", out))  # fmt: skip
    for name, param in teacher.bert.embeddings.state_dict().items():  # put back and frozen: shareable
        assert torch.equal(refined.bert.embeddings.state_dict()[name], param.half().float()), name
    assert distill.cut_in(refined).heads == distill.cut_in(oneshot).heads  # the one-shot model's cut, kept
    assert all(torch.equal(a, b) for a, b in zip(distill.cut_in(refined).kept.values(),
                                                 distill.cut_in(oneshot).kept.values(), strict=True))  # fmt: skip
    assert storage.is_compact(out / "compact")

    cards.card(str(out), data)
    row = json.loads((out / "recipes.json").read_text())[0]
    assert row["recipe"].startswith("refine --epochs 1.0 ") and "--head-share" not in row["recipe"]
    assert "--recipe refine" in row["command"] and "--init" not in row["command"]  # the one command
    first_s = first["training_seconds"]
    assert row["training_minutes"] == round((record["training_seconds"] + first_s) / 60)
    assert "refined for 1 more epoch on" in (out / "README.md").read_text()
    assert "its null margin ([CLS]" in (out / "README.md").read_text()
    assert "attention distributions of the heads it kept" in (out / "README.md").read_text()
    assert "The refinement also saw unlabelled" in (out / "README.md").read_text()
    assert "labelled by the fine-tuned model alone" in (out / "README.md").read_text()
    record["config"]["null_loss"] = "decision"  # the card names the null term the run was trained with
    (out / "train_config.json").write_text(json.dumps(record))
    cards.card(str(out), data)
    assert "its null decision (cross-entropy" in (out / "README.md").read_text()
    for term in ("hidden_weight", "attention_weight", "null_weight"):  # logits alone: the card names no other term
        record["config"][term] = 0.0
    (out / "train_config.json").write_text(json.dumps(record))
    cards.card(str(out), data)
    text = (out / "README.md").read_text()
    assert "refined for 1 more epoch on its logits, with the fine-tuned model's embeddings" in text
    assert "hidden states" not in text and "null decision" not in text and "attention distributions" not in text


def test_the_attention_loss_compares_each_kept_head_with_the_same_teacher_head_on_real_tokens():
    torch.manual_seed(0)
    teacher = [torch.softmax(torch.randn(2, 4, 5, 5), dim=-1) for _ in range(2)]
    kept = {0: [0, 2, 3], 1: [1]}
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    same = [t[:, kept[i]] for i, t in enumerate(teacher)]
    assert distill.attention_loss(same, teacher, kept, mask).item() == pytest.approx(0.0, abs=1e-6)
    other = [same[0], teacher[1][:, [2]]]  # layer 1's head compared with the wrong teacher head
    assert distill.attention_loss(other, teacher, kept, mask) > 0.01
    padded = [s.clone() for s in same]
    padded[0][0, :, 3:] = torch.softmax(torch.randn(3, 2, 5), dim=-1)  # padding query rows: not compared
    assert distill.attention_loss(padded, teacher, kept, mask).item() == pytest.approx(0.0, abs=1e-6)


def test_the_null_decision_loss_is_smallest_where_the_student_decides_as_the_teacher():
    teacher = torch.tensor([-3.0, 0.5, 4.0])
    for kind in ("margin", "decision"):
        at_teacher = distill.null_term(teacher.clone(), teacher, kind)
        for shift in (-2.0, -0.5, 0.5, 2.0):
            assert distill.null_term(teacher + shift, teacher, kind) > at_teacher, (kind, shift)
    student = teacher.clone().requires_grad_()
    distill.null_term(student, teacher, "decision").backward()
    assert torch.allclose(student.grad, torch.zeros(3), atol=1e-7)  # matching the teacher's P(no answer)
    with pytest.raises(ValueError, match="'margin' or 'decision'"):
        distill.null_term(teacher, teacher, "sign")


def test_a_named_recipe_is_one_flag_and_given_flags_override_it():
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args(["prune", "--data", "train.json", "--out", "p", "--teacher", "t", "--recipe", "gradual",
                              "--head-share", "0.45", "--bf16"])  # fmt: skip
    cfg = train_cli.config_from(args)
    assert cfg.recipe == "gradual" and cfg.prune_steps == 3 and cfg.freeze_embeddings and cfg.head_share == 0.45
    command = cards.reproduce_command({**vars(cfg)})
    assert "--recipe gradual" in command and "--head-share 0.45" in command and "--prune-steps" not in command
    assert train_cli.config_from(
        parser.parse_args(["prune", "--data", "d", "--out", "p"])
    ) == train_settings.TrainConfig("prune", train_settings.DEFAULT_BASE, "d", "p")


def test_the_one_shot_recipe_refuses_the_flags_only_the_distilling_recipes_read():
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    base = ["prune", "--data", "d", "--out", "runs/p", "--teacher", "t"]
    with pytest.raises(SystemExit, match="does not use --hidden-weight --null-loss: --recipe gradual or refine"):
        train_cli.run(parser.parse_args([*base, "--hidden-weight", "1.0", "--null-loss", "decision"]))
    assert (
        train_settings.unused_by_oneshot(train_cli.config_from(parser.parse_args([*base, "--freeze-embeddings"]))) == []
    )
    refine = train_cli.config_from(parser.parse_args([*base, "--recipe", "refine"]))
    assert (
        train_settings.unused_by_oneshot(train_settings.oneshot_stage(refine)) == []
    )  # refine's own one-shot stage is clean


def test_a_refine_run_keeps_its_cut_flags_unless_it_started_from_another_model():
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    args = parser.parse_args(["prune", "--data", "d", "--out", "runs/p", "--teacher", "t", "--recipe", "refine",
                              "--min-heads", "4", "--min-neurons", "256"])  # fmt: skip
    cfg = vars(train_cli.config_from(args))
    one_command = {**cfg, "init": "runs/p/oneshot"}  # what the command saves: the cut was its own
    assert "--min-heads 4 --min-neurons 256" in cards.recipe_name(one_command)
    command = cards.reproduce_command(one_command)
    assert "--min-heads 4" in command and "--min-neurons 256" in command and "--init" not in command
    from_elsewhere = {**cfg, "init": "runs/other"}  # the cut came with that model: these flags did nothing
    assert cards.recipe_name(from_elsewhere) == "refine"
    assert "--min-heads" not in cards.reproduce_command(from_elsewhere)
    assert cards.reproduce_command(from_elsewhere).endswith("--init runs/other")  # the model it started from


def test_the_card_lists_only_the_settings_a_run_read():
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    prune = ["prune", "--data", "d", "--out", "runs/p", "--teacher", "t"]
    oneshot = vars(train_cli.config_from(parser.parse_args(prune)))
    assert "head_share" not in cards.unused_settings(oneshot) and "hidden_weight" in cards.unused_settings(oneshot)
    assert "base" in cards.unused_settings(oneshot)  # a prune starts from its teacher
    refine = vars(train_cli.config_from(parser.parse_args([*prune, "--recipe", "refine"])))
    one_command = {**refine, "init": "runs/p/oneshot"}  # made its own cut: read its cut settings, not the steps
    assert {"prune_steps", "keep_layers"} <= set(cards.unused_settings(one_command))
    assert "head_share" not in cards.unused_settings(one_command)
    from_elsewhere = {**refine, "init": "runs/other"}  # the cut came with that model
    assert {"head_share", "ffn_share", "calib_examples", "prune_steps"} <= set(cards.unused_settings(from_elsewhere))
    assert not {"init", "alpha", "hidden_weight", "epochs"} & set(cards.unused_settings(from_elsewhere))
    finetune = vars(train_cli.config_from(parser.parse_args(["finetune", "--data", "d", "--out", "runs/f"])))
    assert {"teacher", "head_share", "alpha", "recipe"} <= set(cards.unused_settings(finetune))
    assert not {"epochs", "lr", "freeze_embeddings", "long_contexts"} & set(cards.unused_settings(finetune))


def test_a_switch_is_named_alone_in_the_recipe_and_its_command():
    parser = argparse.ArgumentParser()
    train_cli.add_arguments(parser)
    cfg = vars(train_cli.config_from(parser.parse_args(["prune", "--data", "d", "--out", "runs/p", "--teacher", "t",
                                                    "--freeze-embeddings", "--min-heads", "4"])))  # fmt: skip
    assert cards.recipe_name(cfg) == "oneshot --freeze-embeddings --min-heads 4"
    assert "  --freeze-embeddings \\\n" in cards.reproduce_command(cfg)


def test_a_compact_store_sharing_the_teachers_embeddings_loads_back_the_same_model(tiny_qa_dir, tmp_path):
    base = tmp_path / "baseline"
    AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).half().save_pretrained(base)  # FP16, as shipped
    student = AutoModelForQuestionAnswering.from_pretrained(base, dtype=torch.float32).eval()
    cut = pruning.Cut({0: [1, 3], 1: [0]}, {0: torch.arange(0, 64, 2), 1: torch.arange(20, 64)})
    pruning.apply_cut(student, cut)
    with torch.no_grad():
        for layer in prune.encoder_layers(student):  # trained weights: not the teacher's
            layer.output.dense.weight.mul_(1.5)
    student.half().float()
    stored = tmp_path / "pruned"
    storage.save(student, cut.heads, cut.kept, stored, share_embeddings_with=base)
    assert storage.is_compact(stored) and not storage.is_compact(base)
    assert (stored / "model.safetensors").stat().st_size < (base / "model.safetensors").stat().st_size / 2

    ids = torch.randint(5, 60, (2, 20), generator=torch.Generator().manual_seed(0))
    compact, dense = storage.load(stored), storage.load(stored, dense=True)
    with torch.no_grad():
        expected = student(input_ids=ids).start_logits
        torch.testing.assert_close(compact(input_ids=ids).start_logits, expected, atol=0, rtol=0)
        torch.testing.assert_close(dense(input_ids=ids).start_logits, expected, atol=1e-5, rtol=0)
    assert prune.compact(dense).num_heads_removed == 3

    student.bert.embeddings.word_embeddings.weight.data[0, 0] += 1  # embeddings of its own: not shareable
    with pytest.raises(ValueError, match="cannot be shared"):
        storage.save(student, cut.heads, cut.kept, tmp_path / "other", share_embeddings_with=base)


def test_the_engine_runs_a_compact_store_as_it_runs_the_dense_folder(tiny_qa_dir, tmp_path, artifacts_dir):
    """The shipped pruned model is stored compacted with the baseline's embeddings: every variant built from
    it (dense with zeros, compacted, ONNX) computes what it computes from the dense-with-zeros folder."""

    def with_tokenizer(folder):
        for f in tiny_qa_dir.iterdir():
            if f.name not in ("model.safetensors", "config.json"):
                shutil.copy(f, folder / f.name)
        return folder

    base = tmp_path / "baseline"
    AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).half().save_pretrained(base)
    student = AutoModelForQuestionAnswering.from_pretrained(base, dtype=torch.float32).eval()
    cut = pruning.Cut({0: [1, 3], 1: [0]}, {0: torch.arange(0, 64, 2), 1: torch.arange(20, 64)})
    pruning.apply_cut(student, cut)
    student.half().float()
    storage.save(student, cut.heads, cut.kept, tmp_path / "compact", share_embeddings_with=base)
    template = AutoModelForQuestionAnswering.from_pretrained(base, dtype=torch.float32)
    prune.expand_to_dense(student, template, cut.kept).save_pretrained(tmp_path / "dense")

    def outputs(folder) -> dict[str, list[np.ndarray]]:
        specs = [VariantSpec("pruned-dense", "d", str(folder)), VariantSpec("pruned", "p", str(folder), ("compact",)),
                 VariantSpec("pruned-onnx", "o", str(folder), ("compact", "onnx"))]  # fmt: skip
        engine = load_engine("embedded", "cpu", variant_specs=specs, fallback=False, cache_dir=artifacts_dir)
        feed = {"input_ids": np.tile(np.arange(5, 25), (2, 1)), "attention_mask": np.ones((2, 20), dtype=np.int64),
                "token_type_ids": np.zeros((2, 20), dtype=np.int64)}  # fmt: skip
        assert all(v.ok for v in engine.loaded), [v.error for v in engine.loaded]
        return {v.spec.name: v.model.run(feed) for v in engine.loaded}

    compact, dense = outputs(with_tokenizer(tmp_path / "compact")), outputs(with_tokenizer(tmp_path / "dense"))
    assert compact["pruned"][0].shape == dense["pruned"][0].shape
    for name in dense:
        for a, b in zip(compact[name], dense[name], strict=True):
            np.testing.assert_allclose(a, b, atol=1e-4)


def test_a_speed_measured_on_a_busy_cpu_says_so_and_keeps_an_idle_one(tmp_path):
    row = {
        "recipe": "oneshot",
        "f1": 46.6,
        "has_ans_f1": 52.2,
        "no_ans_f1": 41.6,
        "best_f1": 56.4,
        "heads_removed": 29,
        "tokens": 384,
        "baseline_ms": 251.3,
        "pruned_ms": 122.8,
        "rounds": 15,
        "speed_hardware": "AMD EPYC, 2 cores",
        "training_minutes": 115,
        "training_hardware": "AMD EPYC, 2 threads",
    }
    idle = row | {"speedup": 2.19, "speedup_iqr": [2.19, 2.21]}  # an idle CPU: the middle half within 1%
    busy = row | {"speedup": 2.05, "speedup_iqr": [1.84, 3.13]}  # beside a training run
    assert not recipes.measured_busy(idle) and recipes.measured_busy(busy)
    idle_line, busy_line = recipes.table([idle, busy]).splitlines()[2:]
    assert "busy" not in idle_line and "1.84-3.13x, too wide: the CPU was busy, measure again" in busy_line
    recipes.update(tmp_path, idle)  # a card made again on a busy CPU keeps the idle speed, and its new scores
    assert recipes.update(tmp_path, busy | {"f1": 47.0}) == [idle | {"f1": 47.0}]
    assert recipes.update(tmp_path, busy | {"recipe": "other"})[1] == busy | {"recipe": "other"}


def test_a_distilling_card_names_each_term_the_run_was_trained_with():
    from variants.training.cards import _distill_targets  # noqa: PLC0415

    assert _distill_targets({}, "its logits") == "its logits"
    assert (
        _distill_targets({"hidden_weight": 1.0}, "its logits") == "its logits and its hidden states after every layer"
    )
    assert _distill_targets({"attention_weight": 1.0, "null_weight": 0.5}, "L") == (
        "L, the attention distributions of the heads it kept, after every layer and its null margin ([CLS] against "
        "the best span)"
    )
    both = _distill_targets(
        {"hidden_weight": 1.0, "attention_weight": 1.0, "null_loss": "decision", "null_weight": 1}, "L"
    )
    assert both.startswith("L, its hidden states and the attention distributions") and "null decision" in both
