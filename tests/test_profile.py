"""Operation counts of the profile against a count by hand, and the stage timings' shape."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoModelForQuestionAnswering, AutoTokenizer

from variants.answering.qa import DecodeSettings, model_passes, tokenize
from variants.answering.runtime import TorchQAModel
from variants.benchmarking import profile
from variants.building.prune import compact
from variants.core.squad import QAExample


def bert_flops(config, width: int, heads: list[int], ffn: list[int]) -> float:
    """Multiply-adds x 2 of a BERT encoder plus the QA head, per window of ``width`` tokens."""
    h, d = config.hidden_size, config.hidden_size // config.num_attention_heads
    total = 0
    for kept_heads, kept_ffn in zip(heads, ffn, strict=True):
        inner = kept_heads * d
        total += 3 * width * h * inner + width * inner * h  # Q, K, V, output projections
        total += 2 * width * width * inner  # scores and weighted values
        total += 2 * width * h * kept_ffn  # the two FFN products
    total += width * h * 2  # QA head
    return 2.0 * total


def test_flop_count_matches_a_count_by_hand(tiny_qa_dir: Path, tiny_pruned_dir: Path) -> None:
    dense = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    config = dense.config
    layers = config.num_hidden_layers
    count = profile.flop_counter(dense)
    expected = bert_flops(config, 32, [config.num_attention_heads] * layers, [config.intermediate_size] * layers)
    assert count(1, 32) == pytest.approx(expected)
    assert count(3, 32) == pytest.approx(3 * expected)

    pruned = AutoModelForQuestionAnswering.from_pretrained(tiny_pruned_dir).eval()
    compact(pruned)
    heads = [layer.attention.self.num_attention_heads for layer in pruned.bert.encoder.layer]
    ffn = [layer.intermediate.dense.out_features for layer in pruned.bert.encoder.layer]
    assert profile.flop_counter(pruned)(1, 32) == pytest.approx(bert_flops(pruned.config, 32, heads, ffn))


def test_profile_stages_times_each_stage(tiny_qa_dir: Path) -> None:
    torch_model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    examples = [QAExample(str(i), "where did the cat sit", "the cat sat on the mat") for i in range(4)]
    out = profile.profile_stages(TorchQAModel(torch_model), tokenizer, examples, DecodeSettings(max_length=64),
                                 profile.flop_counter(torch_model))  # fmt: skip
    assert out["n"] == 4 and out["tokens"] > 0
    assert out["forward_ms"] > 0 and out["tokenize_ms"] > 0 and out["decode_ms"] > 0
    assert out["gflop"] > 0
    assert out["gflops_achieved"] == pytest.approx(out["gflop"] / out["forward_ms"] * 1000, rel=0.5)


def test_machine_peak_is_measured() -> None:
    peak = profile.machine_peak(1)
    assert peak["fp32_gflops"] > 1 and peak["int8_gops"] > 1


class _Logged:
    """A model that writes its name into ``log`` on every call, and raises from call ``fail_at`` on."""

    def __init__(self, model, name: str, log: list[str], fail_at: int | None = None) -> None:
        self.model, self.name, self.log, self.fail_at = model, name, log, fail_at
        self.input_names = model.input_names

    def run(self, inputs):
        self.log.append(self.name)
        if self.fail_at is not None and self.log.count(self.name) >= self.fail_at:
            raise RuntimeError("session lost")
        return self.model.run(inputs)


def test_profile_in_turns_interleaves_variants_and_keeps_a_failure_apart(tiny_qa_dir: Path) -> None:
    model = TorchQAModel(AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval())
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    examples = [QAExample(str(i), "where did the cat sit", "the cat sat on the mat") for i in range(4)]
    settings, log = DecodeSettings(max_length=64), []
    timers = {
        name: profile.StageTimer(_Logged(model, name, log, fail_at), tokenizer, settings)
        for name, fail_at in (("a", None), ("b", None), ("broken", 5))
    }
    out = profile.profile_in_turns(timers, examples, warmup=1, round_size=2)
    # warm-up (1 each), then per round of 2: one untimed settle question and 2 timed, a's turn then b's.
    assert log[:3] == ["a", "b", "broken"]
    assert log[3:9] == ["a"] * 3 + ["b"] * 3 and log[9:12] == ["broken"] * 3
    assert log[12:18] == ["a"] * 3 + ["b"] * 3
    assert out["a"]["n"] == out["b"]["n"] == 4 and out["a"]["forward_ms"] > 0
    assert out["broken"] == {"error": "RuntimeError: session lost"}
    assert log.count("broken") == 5  # it dropped out at its failure


def test_the_flop_count_follows_the_passes_a_capped_model_makes(tiny_qa_dir: Path) -> None:
    """A model that caps a pass's tokens runs a long context's windows in several trimmed passes; the count
    adds up those passes, not one pass of every window at the widest window's width."""
    torch_model = AutoModelForQuestionAnswering.from_pretrained(tiny_qa_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_qa_dir)
    context = "the cat sat on the mat and looked at the garden for a long while . " * 12
    examples = [QAExample("0", "where did the cat sit", context)]
    count = profile.flop_counter(torch_model)
    settings = DecodeSettings(max_length=64, stride=16)
    uncapped = profile.profile_stages(TorchQAModel(torch_model), tokenizer, examples, settings, count, warmup=0)
    capped_model = TorchQAModel(torch_model)
    capped_model.pass_tokens = 64
    capped = profile.profile_stages(capped_model, tokenizer, examples, settings, count, warmup=0)
    windows = tokenize(tokenizer, [(examples[0].question, context)], settings)
    passes = model_passes(capped_model, windows, settings.batch_size)
    assert len(passes) == len(windows.owner) > 1  # one 64-token window a pass
    assert capped["gflop"] == pytest.approx(sum(count(r.stop - r.start, w) for r, w in passes) / 1e9, rel=1e-3)
    assert uncapped["gflop"] == pytest.approx(count(*windows.context_mask.shape) / 1e9, rel=1e-3)
