"""The roberta-base presets: deepset's published pair (a baseline and its distilled partner) and its replica.

The chain runs from the distilled partner as published (no stored-dense step, nothing to compact) and every
label says "Distilled"; ONNX Runtime's fusions on RoBERTa (its position ids count from the padding index, not
from 0 as BERT's: no EmbedLayerNormalization) are counted on the chain's own export of a tiny RoBERTa pair made
here with the replica's builder; the CPU default falls back to ``embedded``, saying so in the header.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from app_helpers import TINY_SETTINGS
from huggingface_hub.errors import LocalEntryNotFoundError
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from ui.about import page_intro
from ui.point_labels import label_lines, tags
from ui.startup import header_html
from variants.__main__ import main
from variants.building import replica
from variants.core import config
from variants.core import spec as specs
from variants.records.record import VariantEntry
from variants.serving.engine import load_engine, prepare_engine

QUESTION, CONTEXT = (
    "When was the lighthouse built?",
    "The lighthouse at Saint Aubin was built in 1871 by Marthe Delcour.",
)
CHAIN = ["baseline", "pruned", "pruned-onnx", "pruned-onnx-opt", "pruned-onnx-opt-int8"]
TINY = {"num_layers": 2, "hidden_size": 64, "num_heads": 4, "intermediate_size": 128}


def tiny_structure(layers: int) -> replica.Structure:
    """RoBERTa-base's config scaled down (hidden 64, 4 heads), with ``layers`` layers and the real vocabulary."""
    return replica.Structure.roberta().scaled(**{**TINY, "num_layers": layers})


def op_counts(path: Path) -> Counter:
    return Counter(node.op_type for node in onnx.load(str(path), load_external_data=False).graph.node)


# --- the presets -------------------------------------------------------------------------------------


@pytest.mark.parametrize("preset", ["roberta-base", "roberta-base-replica"])
@pytest.mark.parametrize(("device", "last"), [("cpu", "int8"), ("cuda:0", "fp16")])
def test_the_distilled_partner_chain_has_no_cut_and_says_distilled(preset: str, device: str, last: str) -> None:
    chain = specs.preset(preset, device)
    assert [s.name for s in chain] == [*CHAIN[:-1], f"pruned-onnx-opt-{last}"]
    assert not any("compact" in s.steps for s in chain), "a distilled model has no zeros to cut"
    assert [s.name for s in chain if s.headline] == ["baseline", "pruned", f"pruned-onnx-opt-{last}"]
    partner = [specs.short_label(s.name, s.label) for s in chain[1:]]
    assert partner[0] == "Distilled, 6 of 12 layers"
    assert all(label.startswith("Distilled") for label in partner), partner
    described = " ".join(s.description for s in chain[1:]).lower()
    assert "distilled" in described and "compacted" not in described
    assert all(s.latency_only for s in chain) == preset.endswith("replica")
    family = specs.FAMILIES[preset]
    assert (family.partner, "6 of 12 layers") == ("distilled", family.partner_label.split(", ")[1])


def test_the_published_pair_and_a_hosts_partner() -> None:
    family = specs.FAMILIES["roberta-base"]
    assert (family.baseline, family.pruned) == ("deepset/roberta-base-squad2", "deepset/tinyroberta-squad2")
    # a partner the host names is whatever --pruned says: the pruned chain, with its compaction
    mine = specs.preset("roberta-base", "cpu", {"pruned": "/models/my-pruned"})
    assert "pruned-dense" in [s.name for s in mine] and specs.short_label("pruned", mine[2].label) == "Pruned"


def test_the_cpu_default_is_the_published_pair_unless_offline(monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert specs.default_preset("cpu") == "roberta-base" and specs.default_preset("cuda:0") == "bert-large"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert specs.default_preset("cpu") == "embedded" and specs.default_preset("cuda:0") == "bert-large"


def test_the_replica_has_the_cards_shapes_and_ships_its_tokenizer() -> None:
    base, partner = replica.structure_for("replica:roberta-base"), replica.structure_for("replica:roberta-base-l6")
    assert (base.num_layers, partner.num_layers, base.model_type) == (12, 6, "roberta")
    assert base.parameters() == 124_056_578  # the card: about 124M
    assert partner.parameters() == 81_529_346  # the card: 81.5M
    assert partner.config == {**base.config, "num_hidden_layers": 6}
    folder = replica.ROBERTA_TOKENIZER_DIR
    assert folder.is_relative_to(specs.ASSETS) and "shared" not in folder.parts
    tokenizer = AutoTokenizer.from_pretrained(base.tokenizer_dir)  # tokenizer.json unpacked from its .xz
    assert len(tokenizer) == 50_265 == base.config["vocab_size"]
    pieces = tokenizer.tokenize(" The Eiffel Tower")  # GPT-2's byte-level pieces, as RoBERTa's tokenizer gives
    assert pieces == ["ĠThe", "ĠE", "iff", "el", "ĠTower"]
    ids = tokenizer("Who?", "Paris.")["input_ids"]
    assert ids[0] == tokenizer.cls_token_id == 0 and ids.count(tokenizer.sep_token_id) == 3  # <s> q </s></s> c </s>


# --- a tiny RoBERTa pair through the chain: fusions counted on the chain's own export ---------------------------


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 2-layer RoBERTa and its 1-layer "distilled" partner (random weights, the replica's builder)."""
    root = tmp_path_factory.mktemp("tiny-roberta")
    replica.write_model(tiny_structure(2), root / "base")
    replica.write_model(tiny_structure(1), root / "partner")
    return root / "base", root / "partner"


@pytest.fixture(scope="module")
def tiny_engine(tiny_pair, tmp_path_factory: pytest.TempPathFactory):
    base, partner = tiny_pair
    family = specs.Family("tiny-roberta", str(base), str(partner), "tiny", **specs.ROBERTA_PARTNER)
    chain = specs.chain(family, "cpu")
    cache = tmp_path_factory.mktemp("tiny-roberta-cache")
    with load_engine(variant_specs=chain, device="cpu", cache_dir=cache, settings=TINY_SETTINGS) as engine:
        yield engine


def test_every_variant_of_the_tiny_chain_answers(tiny_engine) -> None:
    results = tiny_engine.ask(QUESTION, CONTEXT)
    assert [r.variant for r in results] == CHAIN and [r.error for r in results] == [None] * len(CHAIN)
    assert {r.variant: r.dtype for r in results}["pruned-onnx-opt-int8"] == "int8"


def test_ort_fuses_attention_and_gelu_but_not_robertas_embeddings(tiny_engine) -> None:
    """ONNX Runtime's optimizer (model type "bert", the one it has for RoBERTa) fuses each layer's attention and
    GELU; it leaves RoBERTa's embeddings unfused, since their position ids count from the padding index + 1 (a
    CumSum over the mask) and its EmbedLayerNormalization kernel counts from 0 (fusion_embedlayer.py's RoBERTa
    matcher is commented out). Residual Add + LayerNorm stay apart on the CPU (runtime.skip_layer_norm_fusion)."""
    layers = 1
    optimized = tiny_engine.variants["pruned-onnx-opt"].artifact
    report = json.loads((optimized.parent / "optimization.json").read_text())
    assert report["attention_fusion"] and report["attention_heads"] == [TINY["num_heads"]] * layers
    ops = op_counts(optimized)
    assert ops["Attention"] == layers
    assert ops["BiasGelu"] + ops["FastGelu"] + ops["Gelu"] == layers
    assert ops["EmbedLayerNormalization"] == 0 and ops["CumSum"] == 1  # RoBERTa's position ids, as exported
    assert ops["SkipLayerNormalization"] == 0 and ops["LayerNormalization"] == 2 * layers + 1
    fused = report["fused_operators"]  # the optimizer's own counts agree with the graph's
    assert (fused["Attention"], fused["EmbedLayerNormalization"], fused["SkipLayerNormalization"]) == (layers, 0, 0)
    int8 = op_counts(tiny_engine.variants["pruned-onnx-opt-int8"].artifact)
    assert int8["QAttention"] == layers and int8["Attention"] == 0
    # per layer the attention output, FFN in and FFN out; the QA head stays FP32 (one MatMul)
    assert int8["MatMulInteger"] == 3 * layers and int8["MatMul"] == 1


def test_the_optimized_graph_keeps_robertas_positions(tiny_engine, tiny_pair) -> None:
    """On a right-padded batch of two lengths the optimized and INT8 graphs give PyTorch's logits (positions from
    2, padding ignored): a fusion that counted positions from 0 would move every logit."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_pair[1])
    feed = dict(tokenizer([QUESTION, "Who?"], [CONTEXT, "Marthe Delcour built it."], padding=True, return_tensors="np"))
    model = AutoModelForQuestionAnswering.from_pretrained(tiny_pair[1]).eval()
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in feed.items()})
    expected = [out.start_logits.numpy(), out.end_logits.numpy()]
    mask = feed["attention_mask"].astype(bool)
    for name, tolerance in (("pruned-onnx-opt", 1e-4), ("pruned-onnx-opt-int8", 0.05)):
        path = tiny_engine.variants[name].artifact
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = session.run(["start_logits", "end_logits"], {i.name: feed[i.name] for i in session.get_inputs()})
        scale = max(float(np.abs(e[mask]).max()) for e in expected)
        worst = max(float(np.abs((g - e)[mask]).max()) for g, e in zip(got, expected, strict=True))
        assert worst <= tolerance * max(1.0, scale), (name, worst)


# --- ask --preset roberta-base-replica --json ------------------------------------------------------------


def test_ask_json_answers_with_every_variant_labelled_and_latency_only(monkeypatch, tmp_path: Path, capsys) -> None:
    """The replica's CLI path at a scaled-down size (the full one builds 206M parameters' ONNX chain: minutes)."""
    real = replica.structure_for
    small = {"replica:roberta-base": tiny_structure(2), "replica:roberta-base-l6": tiny_structure(1)}
    monkeypatch.setattr(replica, "structure_for", lambda source: small.get(source) or real(source))
    args = ["ask", "--preset", "roberta-base-replica", "--device", "cpu", "--cache-dir", str(tmp_path), "--json"]
    assert main([*args, "--no-fallback", "--question", QUESTION, "--context", CONTEXT]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["variant"] for r in rows] == CHAIN and all(r["error"] is None for r in rows)
    assert all(r["latency_only"] is True for r in rows)
    labels = {r["variant"]: r["label"] for r in rows}
    assert (
        labels["pruned"] == "Distilled, 6 of 12 layers" and labels["pruned-onnx-opt-int8"] == "Distilled + ONNX + INT8"
    )
    assert not any("runed" in label for label in labels.values())


# --- what the page says -----------------------------------------------------------------------------------


def test_charts_and_sentences_say_distilled() -> None:
    assert label_lines("pruned", "Distilled, 6 of 12 layers", 2.0, 50.0, 51.0, size_mb=326)[0] == "Distilled · 326 MB"
    assert label_lines("pruned", "Pruned", 2.0, 50.0, 51.0)[0] == "Pruned"
    entries = [VariantEntry(s.name, s.label, s.headline) for s in specs.preset("roberta-base", "cpu")]
    assert [e.short_label for e in entries] == ["Baseline", "Distilled, 6 of 12 layers", "Distilled + ONNX",
                                                "Distilled + ONNX, optimized", "Distilled + ONNX + INT8"]  # fmt: skip
    assert list(tags(SimpleNamespace(entries=entries)).values()) == [
        "Baseline", "Distilled", "+ ONNX", "+ ORT-opt.", "INT8"]  # fmt: skip
    # a record from before there was one name keeps the chain's short name for its long label
    assert VariantEntry("pruned-onnx-opt-int8", "Pruned + ONNX Runtime INT8 (quantized)").short_label == (
        "Pruned + ONNX + INT8"
    )


def test_the_header_names_the_pair_its_cost_and_the_other_preset(monkeypatch) -> None:
    for name in ("SPACE_ID", "SYSTEM", config.PRESET_ENV):
        monkeypatch.delenv(name, raising=False)
    engine = prepare_engine("roberta-base-replica", "cpu", fallback=False)
    header = header_html(engine.snapshot())
    assert "distilled 6-layer partner" in header and "on 2 CPU cores" in header and "random weights" in header
    assert "--preset embedded" in header
    assert "**distilled**" in page_intro(engine) and "**pruned**" not in page_intro(engine)


def test_on_a_space_without_the_hub_the_header_says_the_pair_fell_back(
    tiny_qa_dir, tiny_pruned_dir, tmp_path, monkeypatch
) -> None:
    """SYSTEM=spaces, no preset named, a CPU, the Hub out of reach (the download fails as without network):
    the page opens on the published pair, then says it could not load and which preset it shows instead."""
    import huggingface_hub  # noqa: PLC0415

    def no_network(*_args, **_kwargs):
        raise LocalEntryNotFoundError("Cannot find the requested files: the connection to the Hub failed")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    for name, value in {"SYSTEM": "spaces", "SPACE_ID": "someone/demo", config.PERSIST_ENV: "0"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(config.PRESET_ENV, raising=False)
    tiny = specs.Family("embedded", str(tiny_qa_dir), str(tiny_pruned_dir), "tiny stand-in")
    monkeypatch.setitem(specs.FAMILIES, "embedded", tiny)
    args = ["--device", "cpu", "--cache-dir", str(tmp_path), "--variants", "baseline"]
    from app import parse_args  # noqa: PLC0415
    from variants.cli import engine_from_args  # noqa: PLC0415

    engine = engine_from_args(parse_args(args), build=False)
    engine.settings = TINY_SETTINGS
    assert engine.preset == "roberta-base"  # the CPU default while the Hub may answer
    engine.build_in_background().join(120)
    assert (engine.preset, engine.fallback_from) == ("embedded", "roberta-base")
    header = header_html(engine.snapshot())
    assert "preset</b> <code>embedded</code>" in header
    said = "The published pair (deepset/roberta-base-squad2 and its distilled deepset/tinyroberta-squad2) could not"
    assert said in header and "so this page shows the preset embedded instead" in header
    assert "Settings → Variables and secrets" in engine.notice and "no network" in engine.notice
    assert "VARIANTS_PRESET=roberta-base" not in header  # the preset that just failed is not offered again
    assert engine.ask(QUESTION, CONTEXT)[0].error is None


def test_the_peers_of_a_replica_are_timed_not_scored() -> None:
    """transformers' pipeline and optimum's INT8 run the replica's random baseline too: latency only, as it is."""
    from variants.benchmarking.peer import baseline_latency_only  # noqa: PLC0415

    assert baseline_latency_only(SimpleNamespace(specs=specs.preset("roberta-base-replica", "cpu")))
    assert not baseline_latency_only(SimpleNamespace(specs=specs.preset("roberta-base", "cpu")))
