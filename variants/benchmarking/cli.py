"""``python -m variants bench``: its command line and the plain-text summary it prints."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from variants.answering.qa import NullThreshold, parse_null_threshold
from variants.answering.timing import Progress, busy
from variants.benchmarking.bench import benchmark, load_data, set_threads
from variants.benchmarking.long_inputs import long_input_view
from variants.benchmarking.options import BATCH_SIZES, DEFAULT_DATA, LATENCY_PASSES, SEQ_LENS, Options
from variants.benchmarking.peer import optimum_int8_runner, peer_runner, peers_missing
from variants.building.replica import LATENCY_ONLY
from variants.cli import add_model_arguments, engine_from_args, non_negative_int, positive_int
from variants.core.hardware import hardware_slug
from variants.records.cost import check_price, cost_sentence, find_price, record_costs
from variants.records.frontier import frontier_sentence
from variants.records.record import Record
from variants.records.results import RESULTS_DIR, save_record


def _ints(text: str) -> tuple[int, ...]:
    """An argparse type: comma-separated whole numbers, each at least 1, one at least."""
    values = tuple(positive_int(x) for x in text.split(",") if x.strip())
    if not values:
        raise argparse.ArgumentTypeError("give one number at least, e.g. 32,64")
    return values


def price_argument(text: str) -> float | str:
    """An argparse type: dollars per hour (a number, 0 or more) or a published machine's key (cpu-upgrade)."""
    try:
        value = float(text)
    except ValueError:
        try:
            return find_price(text).key
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("a price per hour is a number of dollars, 0 or more")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Benchmark options (the model options come from ``variants.__main__.add_model_arguments``)."""
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="SQuAD v2 JSON, CSV or JSON Lines file (as evaluate reads), or a Hub dataset name",
    )
    parser.add_argument("--split", default="validation", help="split of a Hub dataset")
    parser.add_argument("--limit", type=positive_int, default=None, help="use the first N questions only")
    parser.add_argument("--out", default=str(RESULTS_DIR), help="folder for the JSON record and the CSV")
    parser.add_argument(
        "--latency-samples", type=positive_int, default=200, help="timed questions per variant at batch 1"
    )
    parser.add_argument(
        "--warmup", type=non_negative_int, default=5, help="untimed questions per variant before timing"
    )
    parser.add_argument(
        "--latency-round", type=positive_int, default=25, help="questions per variant per turn at batch 1"
    )
    parser.add_argument(
        "--latency-passes",
        type=positive_int,
        default=LATENCY_PASSES,
        help=f"times the whole latency pass runs; speedups: median of the passes' ratios (default {LATENCY_PASSES})",
    )
    parser.add_argument(
        "--runs", type=positive_int, default=30, help="timed runs per point of the sequence-length sweep"
    )
    parser.add_argument("--skip-sweeps", action="store_true", help="no sequence-length or batch-size sweeps")
    parser.add_argument("--seq-lens", type=_ints, default=SEQ_LENS, help="comma-separated (default 32,...,384)")
    parser.add_argument("--batch-sizes", type=_ints, default=BATCH_SIZES, help="comma-separated (default 1,...,64)")
    parser.add_argument(
        "--sweep-questions", type=positive_int, default=64, help="questions per point of the batch sweep"
    )
    parser.add_argument("--sort-by-length", action="store_true", help="batch sweep: sort questions by length first")
    parser.add_argument("--accuracy-batch", type=positive_int, default=16, help="questions per call for accuracy")
    parser.add_argument(
        "--profile-questions", type=non_negative_int, default=100, help="questions profiled per variant (0: none)"
    )
    parser.add_argument(
        "--no-peer", action="store_true", help="skip the peers (transformers' pipeline, optimum's ORT INT8)"
    )
    parser.add_argument(
        "--threads", type=positive_int, default=None, help="CPU threads for PyTorch and ONNX Runtime alike"
    )
    parser.add_argument(
        "--price",
        type=price_argument,
        default=None,
        help="dollars per hour of this machine, or a published Spaces machine (cpu-basic, cpu-upgrade, t4-small, "
        "t4-medium, l4, a10g-small, a100-large; only one of this record's hardware): the summary adds the cost "
        "per million answers",
    )
    parser.add_argument(
        "--long-inputs",
        action="store_true",
        help="also ask every question about its whole article, under each window rule (the headline variants)",
    )


def run(args: argparse.Namespace, engine_from_args: Callable[..., Any]) -> int:
    """``python -m variants bench``: measure, write the record and CSV, print a summary.

    Returns 1 when a variant failed (the record is written anyway), else 0.
    """
    try:
        examples, data = load_data(args.data, args.split, args.limit)
    except RuntimeError as exc:  # e.g. a Hub dataset without the datasets package
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.threads:
        set_threads(args.threads)
    progress = _printer()
    engine = engine_from_args(args, progress=progress)
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    options = Options(
        latency_samples=args.latency_samples,
        warmup=args.warmup,
        latency_round=args.latency_round,
        latency_passes=args.latency_passes,
        runs=args.runs,
        seq_lens=tuple(args.seq_lens),
        batch_sizes=tuple(args.batch_sizes),
        sweep_questions=args.sweep_questions,
        sort_by_length=args.sort_by_length,
        skip_sweeps=args.skip_sweeps,
        accuracy_batch=args.accuracy_batch,
        profile_questions=args.profile_questions,
    )
    if not args.no_peer and (missing := peers_missing()):
        print(f"peers: {missing}; their columns carry this error", file=sys.stderr)
    peer = None if args.no_peer else peer_runner(engine, args)
    others = [] if args.no_peer else [optimum_int8_runner(engine, args)]
    record = benchmark(engine, examples, options, data, peer=peer, progress=progress, others=others)
    if args.long_inputs:
        record.long_inputs = long_input_view(engine, examples, progress=progress)
    json_path, csv_path = save_record(record, args.out)
    print(summary_table(record, view=_view_for(getattr(args, "null_threshold", 0.0)), price=args.price))
    if environments := environment_line(record):
        print(environments)
    if record.long_inputs:
        print(long_input_table(record.long_inputs))
    print(f"\nwrote {json_path}\n      {csv_path}")
    return 1 if any(v.error for v in record.variants) else 0


def _view_for(mode: NullThreshold) -> str:
    """The accuracy view the summary shows for a threshold mode (every view is in the record)."""
    return "calibrated" if parse_null_threshold(mode) == "calibrated" else "pipeline"


def summary_table(record: Record, view: str = "pipeline", price: float | str | None = None) -> str:
    """A plain-text table of the headline numbers, one line per variant and the peer, accuracy of ``view``; then
    the best trade-offs in a sentence and, with a ``price`` (dollars per hour, or a published machine's key),
    the cost per million answers (:func:`cost_lines`)."""

    def fmt(value: Any, spec: str) -> str:
        return f"{'-':>8}" if value is None else format(value, spec)

    columns = ("F1", "EM", "HasAns", "NoAns", "p50 ms", "p90 ms", "p99 ms", "q/s", "MB", "x base", "x peer", "agree")
    lines = [
        f"{record.preset} on {record.device} ({hardware_slug(record.hardware, record.device)}), "
        f"{record.n_questions} questions; accuracy view '{view}'",
        f"{'variant':<26}" + "".join(f"{c:>8}" for c in columns),
    ]
    for e in record.entries:
        acc, lat = e.view(view), e.latency_ms
        values = (
            (acc and acc.f1, "8.2f"),
            (acc and acc.exact, "8.2f"),
            (acc and acc.has_ans_f1, "8.2f"),
            (acc and acc.no_ans_f1, "8.2f"),
            (lat and lat.p50, "8.2f"),
            (lat and lat.p90, "8.2f"),
            (lat and lat.p99, "8.2f"),
            (e.throughput_qps, "8.1f"),
            (e.size_mb, "8.1f"),
            (e.speedup_vs_baseline, "8.2f"),
            (e.speedup_vs_peer, "8.2f"),
            (e.agreement_with_baseline, "8.3f"),
        )
        line = f"{e.variant:<26}" + "".join(fmt(v, spec) for v, spec in values)
        against, bounds = ("peer", e.speedup_vs_peer_range) if record.peer else ("base", e.speedup_vs_baseline_range)
        if bounds and not (e.is_peer or (against == "base" and e.variant == "baseline")):
            line += f"  x {against} {bounds[0]:.2f}-{bounds[1]:.2f} over {len(e.latency_pass_p50_ms)} passes"
        line += f"  ({LATENCY_ONLY})" if e.latency_only else ""
        line += f"  machine busy: runs took {e.stretch:.1f}x their computing time" if busy(e.stretch) else ""
        lines.append(line + (f"  ERROR: {e.error}" if e.error else ""))
    lines += cost_lines(record, price) if price is not None else []
    if any(busy(e.stretch) for e in record.entries):  # the timing rule's flag: no winner from a disturbed run
        lines.append("The machine was busy while timing: these latencies and speedups are unreliable; run it again.")
    elif best := frontier_sentence(record, view):
        lines.append(best)
    return "\n".join(lines)


def environment_line(record: Record) -> str | None:
    """Where the entries that ran outside the bench's own environment ran (the peers'), with their versions and the
    variants' where those differ; None when every entry ran in the bench's own."""
    libs = ("python", "torch", "transformers", "optimum", "optimum-onnx", "onnxruntime")
    groups: dict[str, list[Any]] = {}
    for entry in record.entries:
        if entry.environment:
            groups.setdefault(str(entry.environment.get("executable")), []).append(entry)
    lines = []
    for where, entries in groups.items():
        env = entries[0].environment
        theirs = ", ".join(f"{lib} {env[lib]}" for lib in libs if env.get(lib))
        differ = [lib for lib in libs if record.versions.get(lib) != env.get(lib)]
        ours = ", ".join(f"{lib} {record.versions.get(lib) or 'none'}" for lib in differ)
        names = " and ".join(e.variant for e in entries)
        line = f"{names} ran in the {env.get('name')} environment ({where}): {theirs}"
        lines.append(line + (f"; the variants ran with {ours}" if ours else ""))
    return "\n".join(lines) or None


def cost_lines(record: Record, price: float | str) -> list[str]:
    """The cost per million answers of every entry at ``price`` (dollars per hour, or a published machine's key,
    refused for hardware the record did not run on), at batch 1 and at its sweep's best batch."""
    if isinstance(price, str):
        machine = find_price(price)
        try:
            check_price(machine, record)
        except ValueError as exc:
            return [f"cost: not shown: {exc}"]
        if machine.free:
            return [f"cost: {machine.name} is free: answers cost nothing per hour there."]
        usd, where = machine.usd_per_hour, f"${machine.usd_per_hour:g}/hour ({machine.name})"
    else:
        usd, where = price, f"${price:g}/hour"
        if usd == 0:
            return ["cost: at a price of 0, answers cost nothing."]
    lines = [f"cost per million answers at {where}; batch 1: one process, one question at a time, 1000 / mean ms"]
    for cost in record_costs(record, usd):
        line = "  " + cost_sentence(cost)
        if cost.best_usd is not None:
            line += f"; at its best batch ({cost.best_batch}): " + cost_sentence(cost, best=True).split(": ", 1)[1]
        lines.append(line)
    return lines


def _printer(every: float = 5.0) -> Progress:
    """Progress lines on stderr: each new phase, and otherwise at most every ``every`` seconds."""
    state: dict[str, Any] = {"phase": None, "at": 0.0}

    def show(fraction: float, message: str) -> None:
        phase, now = message.split(":", maxsplit=1)[0], time.monotonic()
        if phase != state["phase"] or now - state["at"] >= every:
            print(f"[{fraction:4.0%}] {message}", file=sys.stderr, flush=True)
            state.update(phase=phase, at=now)

    return show


def main(argv: list[str]) -> int:

    parser = argparse.ArgumentParser(prog="python -m variants bench", description=__doc__)
    add_model_arguments(parser)
    add_arguments(parser)
    return run(parser.parse_args(argv), engine_from_args)


def long_input_table(view: dict[str, Any]) -> str:
    """The long-input view as text: per variant and window rule, answerable F1 and F1 on paragraphs and articles."""
    lines = [
        f"long inputs: {view['n_questions']} questions ({view['n_answerable']} answerable) about their paragraph "
        f"and their whole article ({view['n_articles']} articles), threshold 0",
        f"{'variant':<26}{'rule':<10}{'HasAns para':>12}{'HasAns art':>12}{'F1 para':>10}{'F1 art':>10}{'>1':>5}",
    ]
    for name, entry in view["variants"].items():
        for rule in view["rules"]:
            para, art = entry["paragraph"][rule], entry["article"][rule]
            lines.append(
                f"{name:<26}{rule:<10}{para['has_ans_f1']:>12.2f}{art['has_ans_f1']:>12.2f}"
                f"{para['f1']:>10.2f}{art['f1']:>10.2f}{art['scores_above_one']:>5}"
            )
    return "\n".join(lines)
