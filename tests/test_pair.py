"""The pair check: a baseline and its pruned partner are one model and its pruned version, or refused in one
sentence before anything is fetched or built, by every command, the host's variables and the config file."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import huggingface_hub
import pytest

from variants import __main__ as commands
from variants import cli
from variants.benchmarking import report
from variants.building import pair
from variants.core import spec as specs
from variants.records.record import Record

ROOT = Path(__file__).resolve().parent.parent
CONTEXT = "paris is the capital of france ."
QUESTION = "what is the capital of france ?"
MINILM = str(specs.EMBEDDED_MODELS / "minilm-squad2")


def edited(source: Path, folder: Path, config: dict | None = None, vocab: str = "") -> Path:
    """A copy of the model folder ``source`` with ``config`` merged into its config.json; ``vocab`` "swap": two
    tokens trade ids, "grow": one token more (in tokenizer.json and vocab.txt alike)."""
    shutil.copytree(source, folder)
    settings = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**settings, **(config or {})}))
    if vocab:
        tok = json.loads((folder / "tokenizer.json").read_text())
        words = tok["model"]["vocab"]
        if vocab == "swap":
            words["paris"], words["france"] = words["france"], words["paris"]
        else:
            words["bordeaux"] = len(words)
        (folder / "tokenizer.json").write_text(json.dumps(tok))
        ordered = sorted(words, key=words.get)
        (folder / "vocab.txt").write_text("\n".join(ordered) + "\n")
    return folder


@pytest.fixture(scope="module")
def other_vocab(tiny_pruned_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return edited(tiny_pruned_dir, tmp_path_factory.mktemp("pair") / "other-vocab", vocab="swap")


def test_a_pair_whose_vocabularies_differ_is_refused_in_one_sentence_with_nothing_built(
    tiny_qa_dir: Path, other_vocab: Path, tmp_path: Path
):
    cache = tmp_path / "cache"
    cmd = [sys.executable, "-m", "variants", "ask", "--baseline", str(tiny_qa_dir), "--pruned", str(other_vocab),
           "--cache-dir", str(cache), "--context", CONTEXT, "--question", QUESTION, "--json"]  # fmt: skip
    started = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    seconds = time.perf_counter() - started
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith("error: The baseline ") and "do not share a tokenizer vocabulary (2 of " in lines[0]
    assert not cache.exists() or not any(cache.iterdir()), "nothing may be built for a refused pair"
    assert seconds < 120, f"refused after {seconds:.0f} s: the check reads two configs and two vocabularies"


@pytest.mark.parametrize("command", ["ask", "build", "bench", "evaluate"])
def test_every_command_takes_the_rule(command, tiny_qa_dir, other_vocab, squad_file, tmp_path, capsys):
    argv = [command, "--baseline", str(tiny_qa_dir), "--pruned", str(other_vocab), "--cache-dir", str(tmp_path)]
    argv += {"ask": ["--context", CONTEXT, "--question", QUESTION], "build": [],
             "bench": ["--data", str(squad_file), "--out", str(tmp_path / "out")],
             "evaluate": ["--data", str(squad_file)]}[command]  # fmt: skip
    assert commands.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "do not share a tokenizer vocabulary" in err
    assert list(tmp_path.iterdir()) == [], "nothing built, no record written"


def test_the_hosts_variables_and_the_config_file_take_the_same_rule(tiny_qa_dir, other_vocab, tmp_path, monkeypatch):
    def engine(argv: list[str]):
        parser = cli.argparse.ArgumentParser()
        cli.add_model_arguments(parser)
        return cli.engine_from_args(parser.parse_args(["--device", "cpu", *argv]), build=False)

    monkeypatch.setenv("VARIANTS_BASELINE", str(tiny_qa_dir))  # no VARIANTS_PRUNED: the baseline alone
    alone = engine(["--preset", "bert-large-replica"])
    assert [s.name for s in alone.specs][-1] == "baseline-onnx-opt-int8"
    assert {s.source for s in alone.specs} == {str(tiny_qa_dir)}
    assert alone.chain == {"name": f"{tiny_qa_dir.name} alone", "baseline": str(tiny_qa_dir), "pruned": None}
    monkeypatch.setenv("VARIANTS_PRUNED", str(other_vocab))
    with pytest.raises(pair.PairRefused, match="do not share a tokenizer vocabulary"):
        engine([])
    monkeypatch.delenv("VARIANTS_BASELINE")
    monkeypatch.delenv("VARIANTS_PRUNED")
    config = tmp_path / "pair.toml"
    config.write_text(f'baseline = "{tiny_qa_dir}"\npruned = "{other_vocab}"\n')
    with pytest.raises(pair.PairRefused, match="do not share a tokenizer vocabulary"):
        engine(["--config", str(config)])
    config.write_text(f'preset = "embedded"\nbaseline = "{tiny_qa_dir}"\n')
    assert engine(["--config", str(config)]).specs[-1].source == str(tiny_qa_dir)
    assert engine(["--preset", "embedded"]).chain == {}, "the preset's own chain"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"config": {"model_type": "roberta"}}, "is a bert model and the pruned partner .* a roberta model"),
        ({"config": {"architectures": ["BertForMaskedLM"]}}, "is not an extractive question-answering model"),
        ({"config": {"num_hidden_layers": 4}}, r"is larger than the baseline .* \(about 0M parameters against 0M\)"),
        ({"vocab": "grow"}, r"do not share a tokenizer vocabulary \(\d+ tokens against \d+\)"),
        ({"vocab": "swap"}, r"do not share a tokenizer vocabulary \(2 of \d+ tokens differ\)"),
    ],
)
def test_what_differs_is_said(change, says, tiny_qa_dir, tiny_pruned_dir, tmp_path):
    partner = edited(tiny_pruned_dir, tmp_path / "partner", **change)
    with pytest.raises(pair.PairRefused, match=says) as refused:
        pair.check_pair(str(tiny_qa_dir), str(partner))
    message = str(refused.value)
    assert message.endswith(".") and not re.search(r"\.\s+[A-Z]", message), "one sentence"


def test_pairs_that_belong_together_pass():
    pair.check_pair(MINILM, str(specs.EMBEDDED_MODELS / "minilm-squad2-pruned"))  # compacted store, same vocab
    pair.check_pair("replica:bert-large", "replica:bert-large-x2.63")  # heads removed: smaller
    pair.check_pair(MINILM, None)  # no partner: nothing to compare
    with pytest.raises(pair.PairRefused, match="larger than the baseline"):
        pair.check_pair(MINILM, "replica:bert-large-x2.63")


def test_parameters_from_configs_of_other_families():
    distilbert = {"model_type": "distilbert", "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072,
                  "vocab_size": 30522, "max_position_embeddings": 512}  # fmt: skip
    assert pair.parameters(distilbert) == pytest.approx(66.4e6, rel=0.02)  # distilbert-base: 66M
    bert_base = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
                 "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}  # fmt: skip
    assert pair.parameters(bert_base) == pytest.approx(108.9e6, rel=0.02)  # bert-base: 109M with its pooler
    pruned = {**bert_base, "pruned_heads": {"0": [0, 1], "3": [5]}}
    assert pair.parameters(pruned) == pair.parameters(bert_base) - 3 * (4 * 64 * 768 + 3 * 64)
    assert pair.parameters({"model_type": "t5"}) is None


def hub_cache_copy(root: Path, repo: str, folder: Path, commit: str = "a" * 40) -> None:
    """``folder``'s config and tokenizer files as the Hub cache lays out a download of ``repo`` at ``commit``."""
    base = root / f"models--{repo.replace('/', '--')}"
    snapshot = base / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json", "vocab.txt"):
        shutil.copy(folder / name, snapshot / name)
    (base / "refs").mkdir()
    (base / "refs" / "main").write_text(commit)


def test_hub_models_are_checked_from_the_local_hub_cache(tiny_qa_dir, other_vocab, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    hub_cache_copy(tmp_path, "org/tiny-qa", tiny_qa_dir)
    hub_cache_copy(tmp_path, "org/tiny-other", other_vocab)
    facts = pair.model_facts("org/tiny-qa")
    assert facts is not None and facts.model_type == "bert" and isinstance(facts.vocab, dict)
    with pytest.raises(pair.PairRefused, match="The baseline org/tiny-qa and the pruned partner org/tiny-other do"):
        pair.check_pair("org/tiny-qa", "org/tiny-other")
    pair.check_pair("org/tiny-qa", str(tiny_qa_dir))  # a Hub baseline and a local partner of the same model
    # Not in the cache and offline: not checked here; the build then says it cannot be fetched, as before.
    assert pair.model_facts("org/not-cached") is None
    pair.check_pair("org/not-cached", str(other_vocab))
    assert os.environ["HF_HUB_OFFLINE"] == "1"


def test_a_chain_records_report_loads_that_chain(monkeypatch):
    record = Record(created="2026-11-29T08:00:00Z", device="cpu", preset="bert-large-replica",
                    chain={"name": "minilm-squad2 alone", "baseline": MINILM, "pruned": None})  # fmt: skip
    asked = {}

    def load_engine(preset, device, overrides=None, **options):
        asked.update(preset=preset, overrides=overrides)
        raise ValueError("stop here")

    monkeypatch.setattr(report, "load_engine", load_engine)
    assert "stop here" in report.examples_for(record, "cpu").how
    assert asked == {"preset": "bert-large-replica", "overrides": {"baseline": MINILM, "pruned": "none"}}
    assert record.lineup == "minilm-squad2 alone" and record.name().startswith("minilm-squad2-alone-cpu-")
    again = Record.from_dict(record.to_dict())
    assert again.chain == record.chain and Record.from_dict({**record.to_dict(), "chain": {}}).lineup == record.preset


def test_a_partner_whose_config_cannot_be_read_is_left_to_the_build(tiny_qa_dir, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    pair.check_pair(str(tiny_qa_dir), str(broken))  # its variants fail to build, each with its reason, the rest go on
    assert pair.model_facts(str(broken)) is None
