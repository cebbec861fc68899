"""Command line: ``python -m variants ask | build | bench | train``.

The model and engine options are :mod:`variants.config`'s (the app shares them without importing
this module, which pulls in the training code).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from variants import train
from variants.config import add_model_arguments, batching_from_args, engine_from_args, positive_int
from variants.qa import InputError
from variants.sources import SourceUnavailable

__all__ = ["add_model_arguments", "batching_from_args", "engine_from_args", "main", "positive_int"]


def cmd_ask(args: argparse.Namespace) -> int:
    engine = engine_from_args(args)
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    try:
        results = engine.ask(args.question, args.context, repeats=args.repeats)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2, ensure_ascii=False))
        return 0
    print("\n".join(answer_line(r) for r in results))
    return 0


def answer_line(r) -> str:
    """One variant's answer as text: the answer and its confidence, or "no answer" with the best guess it beat;
    then the median latency (and spread) over the timed runs, the speedup and where it ran."""
    if r.error:
        return f"{r.variant:<24} ERROR: {r.error}"
    if r.answer:
        said = f"{r.answer!r} (confidence {r.score:.0%})"
    elif r.guess:
        said = f"no answer (best guess {r.guess!r}, confidence {r.guess_score:.0%}; no-answer score {r.score:.0%})"
    else:
        said = f"no answer (no-answer score {r.score:.0%})"
    speed = f"{r.speedup:5.2f}x" if r.speedup else "   -  "
    spread = f" ({r.latency_min_ms:.1f}-{r.latency_max_ms:.1f})" if len(r.latency_runs) > 1 else ""
    return (
        f"{r.variant:<24} {said:<44} median {r.latency_ms:.1f} ms{spread} over {len(r.latency_runs)} runs  {speed}  "
        f"{r.device} / {r.provider} / {r.dtype}"
    )


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
    ask.add_argument(
        "--repeats", type=positive_int, default=5, help="timed runs per variant, after one untimed run (default 5)"
    )

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
