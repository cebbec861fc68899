"""The bert-large-replica preset: counts from the published structure, and the whole chain on a
scaled-down replica (same per-layer proportions, 4 layers, hidden 64) through the engine and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForQuestionAnswering

from ui.benchmark import benchmark_outputs
from ui.cards import card_html, summary_html
from ui.charts import accuracy_figure, latency_figure, no_answer_floor, seq_len_figure
from ui.record_table import record_frame
from variants.__main__ import main
from variants.benchmarking import bench
from variants.benchmarking import cli as bench_cli
from variants.benchmarking import options as bench_options
from variants.benchmarking import quick as quick_bench
from variants.building.prune import compact, count_parameters
from variants.building.replica import LATENCY_ONLY, STRUCTURE_FILE, Structure, structure_for, write_model
from variants.building.sources import resolve
from variants.building.storage import load_qa_model
from variants.core import spec as specs
from variants.core.spec import ASSETS
from variants.core.squad import load_squad
from variants.records.record import VIEWS, Record
from variants.serving.engine import load_engine

QUESTION, CONTEXT = "What is the capital of France?", "Paris is the capital and largest city of France."


def test_published_counts_match_the_published_figures() -> None:
    pruned = Structure.published("x2.63")
    assert sum(len(p) for p in pruned.pruned_heads) == 190
    assert sum(pruned.ffn_kept) == 11_328
    assert pruned.dense().parameters() == 334_094_338
    assert pruned.parameters(zeros_cut=False) == 284_250_498  # as stored: heads cut, FFN zeros kept
    assert pruned.parameters() == 106_036_674  # compacted
    other = Structure.published("x2.15")
    assert (other.parameters(zeros_cut=False), other.parameters()) == (293_432_258, 131_594_042)


def test_operation_count_ratio_at_384_tokens() -> None:
    pruned = Structure.published()
    ratio = pruned.dense().matmul_flops(384) / pruned.matmul_flops(384)
    assert 3.7 < ratio < 4.0  # 246.4 vs 64.2 GFLOP
    assert pruned.matmul_flops(384, zeros_cut=False) > 3 * pruned.matmul_flops(384)


def test_structure_file_is_the_projects_copy() -> None:
    assert STRUCTURE_FILE.is_file() and "shared" not in STRUCTURE_FILE.parts
    assert structure_for("replica:bert-large").parameters() == 334_094_338
    with pytest.raises(ValueError, match="unknown replica"):
        resolve("replica:bert-large-x9")


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Structure, Path, Path]:
    structure = Structure.published().scaled(num_layers=4, hidden_size=64, num_heads=4, intermediate_size=256)
    root = tmp_path_factory.mktemp("replica")
    write_model(structure.dense(), root / "dense")
    write_model(structure, root / "pruned")
    return structure, root / "dense", root / "pruned"


def test_scaled_replica_has_the_structure_and_compacts_to_its_count(scaled) -> None:
    structure, dense_dir, pruned_dir = scaled
    dense = AutoModelForQuestionAnswering.from_pretrained(dense_dir)
    pruned = load_qa_model(pruned_dir)  # heads absent as config.pruned_heads says (transformers 5 ignores it)
    assert count_parameters(dense) == structure.dense().parameters()
    assert count_parameters(pruned) == structure.parameters(zeros_cut=False)
    layers = pruned.bert.encoder.layer
    assert [layer.attention.self.num_attention_heads for layer in layers] == structure.heads_per_layer
    ids = torch.randint(1000, 2000, (1, 24))
    before = pruned(input_ids=ids).start_logits
    report = compact(pruned)
    assert report.params_after == count_parameters(pruned) == structure.parameters()
    assert [report.ffn_kept[i] for i in range(4)] == list(structure.ffn_kept)
    torch.testing.assert_close(pruned(input_ids=ids).start_logits, before, atol=1e-5, rtol=1e-5)


def test_whole_chain_on_the_scaled_replica(scaled, tmp_path: Path) -> None:
    structure, dense_dir, pruned_dir = scaled
    chain = specs.preset("bert-large-replica", "cpu", {"baseline": str(dense_dir), "pruned": str(pruned_dir)})
    assert all(s.latency_only for s in chain)
    with load_engine(variant_specs=chain, device="cpu", cache_dir=tmp_path) as engine:
        results = engine.ask(QUESTION, CONTEXT)
        assert [r.error for r in results] == [None] * 6
        assert all(r.latency_only and r.latency_ms > 0 for r in results)
        by_name = {r.variant: r for r in results}
        assert by_name["pruned"].parameters == structure.parameters()
        assert by_name["pruned-onnx-opt-int8"].dtype == "int8"
        optimized = engine.variants["pruned-onnx-opt"].artifact.parent / "optimization.json"
        # Each fused attention node keeps its own layer's head count.
        assert json.loads(optimized.read_text())["attention_heads"] == structure.heads_per_layer


def test_cli_marks_the_replica_latency_only(scaled, tmp_path: Path, capsys) -> None:
    _, dense_dir, pruned_dir = scaled
    args = ["ask", "--preset", "bert-large-replica", "--baseline", str(dense_dir), "--pruned", str(pruned_dir)]
    args += ["--device", "cpu", "--variants", "baseline,pruned", "--cache-dir", str(tmp_path), "--no-fallback"]
    assert main([*args, "--question", QUESTION, "--context", CONTEXT]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and all(LATENCY_ONLY in line for line in lines)


# --- latency only: the benchmark measures no accuracy, the UI shows none -------------------------------


@pytest.fixture(scope="module")
def replica_engine(scaled, tmp_path_factory: pytest.TempPathFactory):
    _, dense_dir, pruned_dir = scaled
    chain = specs.preset("bert-large-replica", "cpu", {"baseline": str(dense_dir), "pruned": str(pruned_dir)})
    cache = tmp_path_factory.mktemp("cache")
    with load_engine(variant_specs=chain, device="cpu", cache_dir=cache, names=["baseline", "pruned"]) as engine:
        yield engine


@pytest.fixture(scope="module")
def replica_record(replica_engine) -> Record:
    examples = load_squad(ASSETS / "data" / "squad_v2_dev_sample.json")[:6]
    options = bench_options.Options(
        latency_samples=4, warmup=1, runs=2, seq_lens=(32,), batch_sizes=(1,), sweep_questions=4
    )
    return bench.benchmark(replica_engine, examples, options)


def test_bench_measures_only_the_latency_of_random_weights(replica_engine, replica_record: Record) -> None:
    again = Record.from_dict(json.loads(json.dumps(replica_record.to_dict())))
    for record in (replica_record, again):
        assert [e.variant for e in record.variants] == ["baseline", "pruned"]
        for entry in record.variants:
            assert entry.latency_only and entry.error is None and entry.latency_ms.p50 > 0
            assert entry.accuracy == dict.fromkeys(VIEWS) and all(entry.view(v) is None for v in VIEWS)
            assert entry.agreement_with_baseline is None and entry.seq_len_sweep
    assert replica_record.variants[1].speedup_vs_baseline > 0
    rows = [
        line for line in bench_cli.summary_table(replica_record).splitlines() if line.startswith(("baseline", "pruned"))
    ]
    assert len(rows) == 2 and all(f"({LATENCY_ONLY})" in row for row in rows)  # a busy machine adds a line of its own
    examples = load_squad(ASSETS / "data" / "squad_v2_dev_sample.json")[:4]
    quick = quick_bench.quick_benchmark(replica_engine, examples, 4)
    assert all(e.latency_only and e.latency_ms and e.accuracy == dict.fromkeys(VIEWS) for e in quick.variants)


def test_cards_say_random_weights_and_show_no_confidence(replica_engine) -> None:
    results = {r.variant: r for r in replica_engine.ask(QUESTION, CONTEXT, repeats=2)}
    for view in replica_engine.snapshot().loaded:
        assert LATENCY_ONLY in card_html(view)  # before any question too
        html = card_html(view, results[view.name], CONTEXT, "done", results["baseline"])
        assert html.count(LATENCY_ONLY) == 1 and "answer not shown" in html
        assert "<mark>" not in html and "<span>confidence</span>" not in html and "Best guess" not in html
        assert "no confidence: random weights" in html and "ms</b>" in html  # the latency stays
    summary = summary_html(replica_engine.snapshot(results), list(results), running=False)
    assert "not compared" in summary and "match the baseline" not in summary
    bars = latency_figure(replica_engine.snapshot(results), list(results)).data[0]
    assert len(bars.x) == 2 and all("random weights" in label for label in bars.y)


def test_records_plot_latency_but_no_f1_for_random_weights(replica_record: Record) -> None:
    fig = accuracy_figure(record_frame(replica_record), no_answer_floor(replica_record))
    assert not fig.data and any("no F1 to plot" in a.text for a in fig.layout.annotations)
    sweep = seq_len_figure(replica_record).data
    assert len(sweep) == 2 and all(LATENCY_ONLY in line.name for line in sweep)
    header, scatter, table, _every, _sweep, _why, _profile, _long_note, _long, _csv = benchmark_outputs(
        replica_record, ""
    )
    assert LATENCY_ONLY in header and "Latency on 6" in header and "Accuracy" not in header
    assert not scatter.data and table["F1"].isna().all()
    assert table["Variant"].str.endswith(f"({LATENCY_ONLY})").all()
