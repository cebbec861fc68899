"""Command line: ``python -m variants ask | build | bench | train``."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from variants import spec as specs
from variants import train
from variants.qa import DecodeSettings, InputError
from variants.replica import LATENCY_ONLY
from variants.sources import SourceUnavailable


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Which variants to load (a preset, per-variant sources, or a config file) and how they serve."""
    parser.add_argument(
        "--preset", default=None, help=f"one of {sorted(specs.FAMILIES)} (default {specs.DEFAULT_PRESET})"
    )
    parser.add_argument("--baseline", default=None, help="Hub id or local folder of the baseline model")
    parser.add_argument("--pruned", default=None, help="Hub id or local folder of the pruned model")
    parser.add_argument("--config", default=None, help="TOML or JSON file with preset / baseline / pruned / variants")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:N]")
    parser.add_argument("--variants", default=None, help="comma-separated variant names to load (default: all)")
    parser.add_argument("--cache-dir", default=None, help="where built artifacts are cached")
    parser.add_argument("--no-fallback", action="store_true", help="fail instead of falling back to 'embedded'")
    parser.add_argument(
        "--max-context-chars",
        type=positive_int,
        default=None,
        help="longest context accepted, in characters (default $VARIANTS_MAX_CONTEXT_CHARS or 25,000)",
    )
    parser.add_argument(
        "--batching",
        action="store_true",
        help="dynamic batching: concurrent requests to one variant run as one batch (env VARIANTS_BATCHING=1)",
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        default=5.0,
        help="with --batching, how long a request waits for others (default 5 ms)",
    )
    parser.add_argument(
        "--max-batch", type=positive_int, default=16, help="with --batching, most requests in one batch (default 16)"
    )
    parser.add_argument(
        "--null-threshold",
        type=float,
        default=None,
        help="'no answer' when ln(null score / best span score) is above this (default: each model's calibrated "
        "threshold from its config.json, else 0; 0 decides as transformers' pipeline does)",
    )


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (thousands separators allowed)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def batching_from_args(args: argparse.Namespace):
    """The :class:`~variants.batching.BatchingConfig` the arguments ask for, or None."""
    from variants.batching import BatchingConfig  # noqa: PLC0415

    if not getattr(args, "batching", False):
        return None
    return BatchingConfig(max_wait_ms=args.batch_wait_ms, max_batch_size=args.max_batch)


def engine_from_args(args: argparse.Namespace, progress=None):
    """Load the engine the arguments describe."""
    from pathlib import Path  # noqa: PLC0415

    from variants.engine import load_engine  # noqa: PLC0415
    from variants.runtime import resolve_device  # noqa: PLC0415

    device = resolve_device(args.device)
    config = specs.load_config(args.config) if args.config else {}
    device = resolve_device(config.get("device", device)) if args.device == "auto" else device
    preset = args.preset or config.get("preset", specs.DEFAULT_PRESET)
    overrides = {k: v for k in ("baseline", "pruned") if (v := getattr(args, k) or config.get(k))}
    custom = specs.specs_from_config(config, device) if config.get("variants") else None
    names = args.variants.split(",") if args.variants else None
    return load_engine(
        preset,
        device,
        overrides,
        custom,
        fallback=not args.no_fallback,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        names=names,
        progress=progress,
        max_context_chars=getattr(args, "max_context_chars", None),
        batching=batching_from_args(args),
        settings=DecodeSettings(null_threshold=getattr(args, "null_threshold", None)),
    )


def cmd_ask(args: argparse.Namespace) -> int:
    engine = engine_from_args(args)
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    try:
        results = engine.ask(args.question, args.context)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2, ensure_ascii=False))
        return 0
    for r in results:
        if r.error:
            print(f"{r.variant:<24} ERROR: {r.error}")
            continue
        speed = f"{r.speedup:5.2f}x" if r.speedup else "   -  "
        text = r.answer or "(no answer)"
        note = f"  ({LATENCY_ONLY})" if r.latency_only else ""
        print(
            f"{r.variant:<24} {text!r:<40} score {r.score:.3f}  {r.latency_ms:8.1f} ms  {speed}  "
            f"{r.device} / {r.provider} / {r.dtype}{note}"
        )
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm  # noqa: PLC0415

    bar = tqdm(total=100, desc="build", unit="%")

    def progress(fraction: float, message: str) -> None:
        bar.set_description(message[:60])
        bar.n = int(fraction * 100) if fraction else bar.n
        bar.refresh()

    engine = engine_from_args(args, progress=progress)
    bar.close()
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    failed = 0
    for v in engine.loaded:
        status = f"ERROR: {v.error}" if v.error else f"ok ({v.load_seconds:.1f} s) {v.artifact or ''}"
        failed += bool(v.error)
        print(f"{v.spec.name:<24} {status}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(prog="python -m variants", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    ask = sub.add_parser("ask", help="answer one question with every variant")
    add_model_arguments(ask)
    ask.add_argument("--context", required=True)
    ask.add_argument("--question", required=True)
    ask.add_argument("--json", action="store_true", help="print a JSON list, one object per variant")

    build = sub.add_parser("build", help="build and cache every variant of a preset")
    add_model_arguments(build)

    try:
        from variants import bench  # noqa: PLC0415
    except ImportError:  # the benchmark lands separately
        bench = None
    if bench is not None:
        bench_parser = sub.add_parser("bench", help="SQuAD v2 accuracy and latency records")
        add_model_arguments(bench_parser)
        bench.add_arguments(bench_parser)

    train.add_arguments(sub.add_parser("train", help="fine-tune or prune the embedded demo family"))
    args = parser.parse_args(argv)
    try:
        if args.command == "ask":
            return cmd_ask(args)
        if args.command == "build":
            return cmd_build(args)
        if args.command == "bench":
            return bench.run(args, engine_from_args)
        train.run(args)
        return 0
    except (SourceUnavailable, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
