"""Candidate ONNX graphs of one model answering the same questions in turns: what the probes in
``experiments/`` (static INT8, INT8 weight formats) compare before a build choice changes."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from transformers import AutoTokenizer

from variants.answering.qa import answer_pairs
from variants.answering.runtime import OrtQAModel, cpu_threads
from variants.answering.timing import latency_pass, summarize
from variants.building.export import build_onnx_chain
from variants.building.storage import load_qa_model
from variants.core.squad import QAExample, paired_bootstrap, question_f1, squad_v2_scores
from variants.training.evaluation import held_out_questions


def held_out_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a probe that builds graphs of one pruned model and asks its held-out training questions."""
    parser.add_argument("--model", required=True, help="a trained pruned model folder (train_config.json beside)")
    parser.add_argument("--data", required=True, help="the training SQuAD v2 JSON file (its held-out articles)")
    parser.add_argument("--threads", type=int, default=0, help="0: VARIANTS_THREADS, else all cores")
    parser.add_argument("--limit", type=int, default=0, help="at most this many questions (0: all)")
    parser.add_argument("--out", required=True)


def held_out_setup(args: argparse.Namespace) -> tuple[list[str], list[QAExample], int]:
    """For :func:`held_out_arguments`: the held-out articles, their questions (the first ``--limit``) and the
    threads to run on."""
    titles, examples = held_out_questions(args.data, [args.model])
    return titles, examples[: args.limit or None], args.threads or cpu_threads()


def held_out_start(argv: list[str] | None, doc: str) -> tuple[argparse.Namespace, list[str], list[QAExample], int, Any]:
    """A held-out probe's start: its options (:func:`held_out_arguments`, described by ``doc``'s first line) parsed
    from ``argv``, then :func:`held_out_setup`'s articles, questions and threads, and the model's tokenizer."""
    parser = argparse.ArgumentParser(description=doc.split("\n", maxsplit=1)[0])
    held_out_arguments(parser)
    args = parser.parse_args(argv)
    titles, examples, threads = held_out_setup(args)
    return args, titles, examples, threads, AutoTokenizer.from_pretrained(args.model)


def cpu_fp32_graph(model_dir: str, tokenizer: Any, folder: Path) -> Path:
    """The compacted model's ORT-optimized FP32 graph for the CPU, built into ``folder``: what the INT8 probes
    quantize in their several ways (the engine's INT8 step reads the same graph)."""
    model = load_qa_model(model_dir, compacted=True)
    return build_onnx_chain(model, tokenizer, ["optimize"], Path(folder), for_gpu=False)


def graphs_in_turns(
    graphs: dict[str, Path | Any], tokenizer: Any, examples: list[QAExample], threads: int, warmup: int = 5
) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    """Each graph answers every question in ``examples`` at batch 1, the graphs taking turns as in the
    bench's latency pass, with the bench's session settings; answers decided at threshold 0. A graph is an
    ONNX file (run in the engine's ONNX Runtime session) or a model already made with the engine's
    ``LogitsModel`` interface and the ``path`` and ``size_bytes`` of its ONNX file.

    Returns, per graph, its scores, latency summary, size and operator counts (or its error), and
    each question's F1 in percent, for paired comparisons (:func:`variants.core.squad.paired_bootstrap`).
    """
    models = {name: OrtQAModel(g, threads=threads) if isinstance(g, Path) else g for name, g in graphs.items()}

    def answerer(model: Any) -> Callable[[list[tuple[str, str]], int], list[tuple[str, None]]]:
        return lambda pairs, _batch: [(a.text, None) for a in answer_pairs(model, tokenizer, pairs)]

    timings = latency_pass({n: answerer(m) for n, m in models.items()}, examples, len(examples), warmup=warmup)
    results: dict[str, dict] = {}
    per_question: dict[str, np.ndarray] = {}
    for name, t in timings.items():
        if t.error:
            results[name] = {"error": t.error}
            continue
        scores = squad_v2_scores(examples, t.preds)
        ops = Counter(node.op_type for node in onnx.load(str(models[name].path)).graph.node)
        results[name] = {
            "f1_at_zero": round(scores.f1, 2),
            "has_ans_f1": None if scores.has_ans_f1 is None else round(scores.has_ans_f1, 2),
            "latency_ms": summarize(t.times_ms),
            "size_mb": round(models[name].size_bytes / 1e6, 1),
            "operators": dict(sorted(ops.items())),
        }
        per_question[name] = np.array([100 * question_f1(e, t.preds[e.id]) for e in examples])
    return results, per_question


def speed_against(results: dict[str, dict], reference: str, key: str) -> None:
    """Add ``key``: each graph's speed as the reference's p50 over its own (above 1: faster)."""
    base = results.get(reference, {}).get("latency_ms", {}).get("p50")
    for r in results.values():
        if base and "latency_ms" in r:
            r[key] = round(base / r["latency_ms"]["p50"], 3)


def f1_against(results: dict[str, dict], per_question: dict[str, np.ndarray], reference: str, key: str) -> None:
    """Add ``key``: each other graph's F1 minus the reference's, question by question, with the paired
    bootstrap's 95% interval and how many questions differ."""
    for name, f1 in per_question.items():
        if name != reference and reference in per_question:
            diffs = f1 - per_question[reference]
            low, high = paired_bootstrap(diffs)
            results[name][key] = {
                "difference": round(float(diffs.mean()), 2),
                "interval_95": [round(low, 2), round(high, 2)],
                "questions_that_differ": int((diffs != 0).sum()),
            }


def data_facts(data: str | Path, titles: list[str], examples: list[QAExample]) -> dict[str, Any]:
    """A probe record's ``data``: the file, its held-out articles and how many questions they hold."""
    return {
        "file": Path(data).name,
        "titles": titles,
        "questions": len(examples),
        "unanswerable": sum(e.is_impossible for e in examples),
    }
