"""The model options shared by the app and every command (``--preset``, ``--baseline``, ``--device`` ...),
and the engine they describe: argument parsing at the edge, over :mod:`variants.core.config`'s
settings. Nothing here imports model code until an engine is loaded (:func:`engine_from_args`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from variants.answering.qa import WINDOW_RULES, DecodeSettings, InputError, parse_null_threshold
from variants.answering.runtime import resolve_device
from variants.answering.timing import DEFAULT_BUDGET_S, DEFAULT_RUNS, TimingRule
from variants.building.replica import LATENCY_ONLY
from variants.core import spec as specs
from variants.core.config import (
    BASELINE_ENV,
    BATCH_WAIT_ENV,
    BATCHING_ENV,
    CACHE_DIR_ENV,
    DEVICE_ENV,
    MAX_BATCH_ENV,
    MAX_CONTEXT_CHARS,
    MAX_CONTEXT_ENV,
    NAMES_ENV,
    PRESET_ENV,
    PRUNED_ENV,
    WINDOWS_ENV,
    env_flag,
    env_number,
    env_text,
)
from variants.serving.batching import BatchingConfig
from variants.serving.engine import Engine, load_engine


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (thousands separators allowed)."""
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Which variants to load (a preset, per-variant sources, or a config file) and how they serve.

    Defaults come from the ``VARIANTS_*`` variables named in each help text.
    """
    parser.add_argument(
        "--preset",
        default=env_text(PRESET_ENV),
        help=f"one of {sorted(specs.FAMILIES)} (default ${PRESET_ENV} or {specs.DEFAULT_PRESET})",
    )
    parser.add_argument(
        "--baseline",
        default=env_text(BASELINE_ENV),
        help=f"Hub id or local folder of the baseline model (${BASELINE_ENV})",
    )
    parser.add_argument(
        "--pruned", default=env_text(PRUNED_ENV), help=f"Hub id or local folder of the pruned model (${PRUNED_ENV})"
    )
    parser.add_argument("--config", default=None, help="TOML or JSON file with preset / baseline / pruned / variants")
    parser.add_argument(
        "--device", default=env_text(DEVICE_ENV) or "auto", help=f"auto, cpu or cuda[:N] (${DEVICE_ENV})"
    )
    parser.add_argument(
        "--variants",
        default=env_text(NAMES_ENV),
        help=f"comma-separated variant names to load (${NAMES_ENV}; default all)",
    )
    parser.add_argument(
        "--cache-dir", default=None, help=f"where built artifacts are cached (default ${CACHE_DIR_ENV})"
    )
    parser.add_argument("--no-fallback", action="store_true", help="fail instead of falling back to 'embedded'")
    parser.add_argument(
        "--max-context-chars",
        type=positive_int,
        default=None,
        help=f"longest context accepted, in characters (default ${MAX_CONTEXT_ENV} or {MAX_CONTEXT_CHARS:,})",
    )
    parser.add_argument(
        "--batching",
        action="store_true",
        default=bool(env_flag(BATCHING_ENV)),
        help=f"dynamic batching: concurrent requests to one variant run as one batch (env {BATCHING_ENV}=1)",
    )
    parser.add_argument(
        "--batch-wait-ms",
        type=float,
        default=env_number(BATCH_WAIT_ENV, float, 5.0),
        help=f"with --batching, how long a request waits for others (default ${BATCH_WAIT_ENV} or 5 ms)",
    )
    parser.add_argument(
        "--max-batch",
        type=positive_int,
        default=env_number(MAX_BATCH_ENV, int, 16),
        help=f"with --batching, most requests in one batch (default ${MAX_BATCH_ENV} or 16)",
    )
    parser.add_argument(
        "--null-threshold",
        type=parse_null_threshold,
        default=0.0,
        help="'no answer' when ln(null score / best span score) is above this: a number (default 0, the rule of "
        "transformers' pipeline) or 'calibrated' (each model's threshold from its config.json, else 0)",
    )
    parser.add_argument(
        "--windows",
        choices=WINDOW_RULES,
        default=env_text(WINDOWS_ENV) or DecodeSettings.windows,
        help="how a long context's windows are combined: 'window' (the best single window's span against that "
        "window's own 'no answer'), 'max' (against the lowest 'no answer' of any window) or 'pipeline' "
        f"(transformers' rule: a text's scores added over windows); default ${WINDOWS_ENV} or "
        f"{DecodeSettings.windows!r}",
    )


def batching_from_args(args: argparse.Namespace) -> BatchingConfig | None:
    """The :class:`~variants.serving.batching.BatchingConfig` the arguments ask for, or None."""

    if not getattr(args, "batching", False):
        return None
    return BatchingConfig(max_wait_ms=args.batch_wait_ms, max_batch_size=args.max_batch)


def engine_from_args(args: argparse.Namespace, progress=None) -> Engine:
    """Load the engine the arguments describe (a ``--config`` file fills what the flags leave open)."""

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
        null_threshold=getattr(args, "null_threshold", 0.0),
        settings=DecodeSettings(windows=getattr(args, "windows", None) or DecodeSettings.windows),
    )


# --- python -m variants ask | build -----------------------------------------------------------------


def cmd_ask(args: argparse.Namespace) -> int:
    engine = engine_from_args(args)
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    rule = TimingRule(runs=args.repeats, budget_s=args.budget or None)
    try:
        results = engine.ask(args.question, args.context, rule=rule)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2, ensure_ascii=False))
        return 0
    print("\n".join(answer_line(r) for r in results))
    timing = next((r.timing for r in results if r.timing), "")
    if timing:
        # on stderr: stdout stays one line per variant
        print(f"latency: {timing}; every variant warmed up before any was timed, then timed in turns", file=sys.stderr)
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
        f"{r.device} / {r.provider} / {r.dtype}" + (f"  ({LATENCY_ONLY})" if r.latency_only else "")
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


def ask_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m variants ask", description="Answer one question with every variant."
    )
    add_model_arguments(parser)
    parser.add_argument("--context", required=True)
    parser.add_argument("--question", required=True)
    parser.add_argument("--json", action="store_true", help="print a JSON list, one object per variant")
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=DEFAULT_RUNS,
        help=f"timed runs per variant at most, after one untimed run of every variant; the variants take turns, one "
        f"run each per round (default {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--budget",
        type=seconds,
        default=DEFAULT_BUDGET_S,
        help=f"seconds for the whole call: another round of timed runs starts only if it fits, at least one runs "
        f"(default {DEFAULT_BUDGET_S:g}; 0: no limit, always --repeats runs)",
    )
    return cmd_ask(parser.parse_args(argv))


def build_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m variants build", description="Build and cache every variant.")
    add_model_arguments(parser)
    return cmd_build(parser.parse_args(argv))
