"""The model options shared by the app and every command (``--preset``, ``--baseline``, ``--device`` ...),
and the engine they describe: argument parsing at the edge, over :mod:`variants.core.config`'s
settings. Nothing here imports model code until an engine is loaded (:func:`engine_from_args`)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from functools import partial
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
    env_choice,
    env_flag,
    env_number,
    env_text,
)
from variants.serving.batching import BatchingConfig
from variants.serving.build_status import BUILDING
from variants.serving.engine import Engine, prepare_engine
from variants.serving.outcome import busy_words


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (thousands separators allowed)."""
    return _whole_number(text, 1)


def non_negative_int(text: str) -> int:
    """An argparse type: a whole number >= 0 (thousands separators allowed)."""
    return _whole_number(text, 0)


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
        help=f"one of {sorted(specs.FAMILIES)} (default ${PRESET_ENV}, else {specs.GPU_PRESET} with a CUDA GPU and "
        f"{specs.CPU_PRESET} on the CPU, {specs.OFFLINE_PRESET} there with HF_HUB_OFFLINE=1; a preset whose models "
        f"cannot be had falls back to {specs.FALLBACK_PRESET})",
    )
    parser.add_argument(
        "--baseline",
        default=env_text(BASELINE_ENV),
        help=f"Hub id or local folder of the baseline model (${BASELINE_ENV})",
    )
    parser.add_argument(
        "--pruned",
        default=env_text(PRUNED_ENV),
        help=f"Hub id or local folder of the baseline's pruned partner (${PRUNED_ENV}); none: the baseline alone, with "
        "the steps that need no training (a --baseline named without --pruned stands alone too)",
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
        default=env_choice(WINDOWS_ENV, WINDOW_RULES, DecodeSettings.windows),
        help="how a long context's windows are combined: 'near' (as 'focus', each span also weighed by how much "
        "of the question's wording stands in its sentence), 'focus' (as 'odds', each window weighed by how much of "
        "the question's wording it holds), 'odds' (the span whose window rates it highest against "
        "that window's own 'no answer'), 'logits' (BERT's SQuAD v2 rule: raw start + end logits across windows "
        "against the lowest 'no answer' logits), 'window' (the best single window's span against that window's "
        "own 'no answer'), 'max' (a text's best single-window probability against the lowest 'no answer' of any "
        "window) or 'pipeline' (transformers' rule: a text's scores added over windows); default "
        f"${WINDOWS_ENV} or "
        f"{DecodeSettings.windows!r}",
    )


def batching_from_args(args: argparse.Namespace) -> BatchingConfig | None:
    """The :class:`~variants.serving.batching.BatchingConfig` the arguments ask for, or None."""

    if not getattr(args, "batching", False):
        return None
    return BatchingConfig(max_wait_ms=args.batch_wait_ms, max_batch_size=args.max_batch)


def variant_names(text: str | None) -> list[str] | None:
    """``--variants``' names: comma-separated, spaces around them ignored; None (all) when none are given."""
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    return names or None


def engine_from_args(args: argparse.Namespace, progress=None, build: bool = True) -> Engine:
    """Load the engine the arguments describe (a ``--config`` file fills what the flags leave open); with
    ``build=False`` nothing is fetched or built yet (``Engine.build``, ``Engine.build_in_background``)."""

    device = resolve_device(args.device)
    config = specs.load_config(args.config) if args.config else {}
    device = resolve_device(config.get("device", device)) if args.device == "auto" else device
    preset = args.preset or config.get("preset") or specs.default_preset(device)
    overrides = {k: v for k in ("baseline", "pruned") if (v := getattr(args, k) or config.get(k))}
    custom = specs.specs_from_config(config, device) if config.get("variants") else None
    names = variant_names(args.variants)
    engine = prepare_engine(
        preset,
        device,
        overrides,
        custom,
        fallback=not args.no_fallback,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        names=names,
        max_context_chars=getattr(args, "max_context_chars", None),
        batching=batching_from_args(args),
        null_threshold=getattr(args, "null_threshold", 0.0),
        settings=DecodeSettings(windows=getattr(args, "windows", None) or DecodeSettings.windows),
    )
    return engine.build(progress) if build else engine


def remote_engine_from_args(args: argparse.Namespace, progress=None) -> Engine:
    """The variants the arguments name, answered by the Ray Serve routes at ``args.backend`` (nothing loads here)."""
    from variants.serving.remote_engine import remote_engine  # noqa: PLC0415 - only with --backend

    if args.config:
        raise ValueError("--config is not supported with --backend: name a --preset and --variants")
    device = resolve_device(args.device)
    overrides = {k: v for k in ("baseline", "pruned") if (v := getattr(args, k))}
    names = variant_names(args.variants)
    preset = args.preset or specs.default_preset(device)
    return remote_engine(args.backend, preset, device, names, overrides, progress)


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
    failed = 1 if any(r.error for r in results) else 0  # a script sees that a variant did not answer
    notice = next((r.notice for r in results if r.notice), "")
    for line in filter(None, [notice, busy_words(results)]):  # on stderr, with --json too: stdout stays the answers
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=2, ensure_ascii=False))
        return failed
    print("\n".join(answer_line(r) for r in results))
    timings = {r.variant: r.timing for r in results if r.timing}
    if len(set(timings.values())) == 1:
        print(f"latency: {next(iter(timings.values()))}", file=sys.stderr)
    else:  # the budget cut some short, or some were not warmed up: each says so
        print("\n".join(f"latency, {name}: {timing}" for name, timing in timings.items()), file=sys.stderr)
    if timings:
        print("the variants answered the fastest first, then were timed in turns", file=sys.stderr)
    return failed


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

    engine = engine_from_args(args, build=False)  # a refused pair or setting: its sentence alone, no bar
    # each variant let go once built and warmed up, so the build's memory is one step's; --keep-loaded: held, as
    # the app holds them (what a visitor's model needs in the app: variants.core.memory.CHAIN_FACTOR)
    engine.hold = args.keep_loaded
    started = time.perf_counter()
    bar = tqdm(total=100, desc="build", unit="%")

    def progress(fraction: float, message: str) -> None:
        bar.set_description(message[:60])
        bar.n = int(fraction * 100) if fraction else bar.n
        bar.refresh()

    if args.memory_record:
        record_memory(engine, progress, args)
    else:
        engine.build(progress)
    bar.close()
    if engine.notice:
        print(engine.notice, file=sys.stderr)
    failed = 0
    for v in engine.loaded:
        status = f"ERROR: {v.error}" if v.error else f"ok ({v.load_seconds:.1f} s) {v.artifact or ''}"
        failed += bool(v.error)
        print(f"{v.spec.name:<24} {status}")
    print(f"{len(engine.loaded)} variants built or found in {time.perf_counter() - started:.1f} s")
    return 1 if failed else 0


def record_memory(engine: Engine, progress, args: argparse.Namespace) -> Path:
    """Build while sampling resident memory per step (:class:`~variants.core.memory.PeakSampler`); write the
    record (peak per step, hardware, versions) to ``args.memory_record`` (a file, or a folder for a named one)."""
    from variants.core import memory  # noqa: PLC0415

    before = memory.memory_facts(versions=True)
    with memory.PeakSampler(partial(building_step, engine)) as sampler:
        engine.build(progress)
    configs = [engine.source(s).path / "config.json" for s in {s.source: s for s in engine.specs}.values()]
    record = memory.build_record(sampler, [s.name for s in engine.specs], configs, before, sys.argv)
    record["variants_kept_loaded"] = engine.hold
    path = Path(args.memory_record)
    if path.suffix != ".json":
        path = path / memory.record_name(engine.preset, record)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(memory.summary(record), file=sys.stderr)
    print(f"wrote {path}", file=sys.stderr)
    return path


def building_step(engine: Engine) -> str:
    """What the engine's build is doing now, for the memory record: "fetch", "<variant>: <step>" or ""."""
    snapshot = engine.status.snapshot()
    if snapshot.stage:
        return "fetch"
    now = next((v for v in snapshot.variants if v.state == BUILDING), None)
    return f"{now.name}: {now.step}" if now is not None else ""


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
        help=f"timed runs per variant at most; every variant answers once first (untimed, unless that run took over "
        f"a second), then they take turns, one run each per round (default {DEFAULT_RUNS})",
    )
    parser.add_argument(
        "--budget",
        type=seconds,
        default=DEFAULT_BUDGET_S,
        help=f"seconds for the whole call: a variant's next timed run starts only if it ends within them, so the "
        f"slowest give up runs first; each answers once whatever the budget (default {DEFAULT_BUDGET_S:g}; 0: no "
        "limit, always --repeats runs)",
    )
    return cmd_ask(parser.parse_args(argv))


def build_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m variants build", description="Build and cache every variant.")
    add_model_arguments(parser)
    parser.add_argument(
        "--memory-record",
        default=None,
        metavar="PATH",
        help="sample resident memory while building and write a record there (a .json file, or a folder): the peak "
        "of each step, with the hardware and versions",
    )
    parser.add_argument(
        "--keep-loaded",
        action="store_true",
        help="keep each variant loaded once built, as the app does (by default each is let go once it has answered "
        "its warm-up, so the build holds one step at a time)",
    )
    return cmd_build(parser.parse_args(argv))


# --- python -m variants serve --ray --------------------------------------------------------------------


def serve_main(argv: list[str]) -> int:
    """Each chosen variant as a Ray Serve deployment (see :mod:`variants.serving.ray_serve`)."""
    parser = argparse.ArgumentParser(
        prog="python -m variants serve",
        description="Serve the variants with Ray Serve: each chosen variant a deployment of N replicas with its own "
        "route, POST /<variant>/v1/answer (the JSON of the app's /v1/answer), on a local Ray cluster or a running "
        "one (--address). Needs the serve extra: pip install -e '.[serve]'.",
    )
    parser.add_argument("--ray", action="store_true", help="serve through Ray Serve (the one backend of this command)")
    add_model_arguments(parser)
    parser.add_argument("--replicas", type=positive_int, default=1, help="replicas per variant (default 1)")
    parser.add_argument("--num-cpus", type=float, default=1.0, help="CPUs each replica reserves (default 1)")
    parser.add_argument("--num-gpus", type=float, default=0.0, help="GPU share per replica, e.g. 0.25 (default 0)")
    parser.add_argument(
        "--address",
        default=None,
        help="a running Ray cluster to join ('auto': the one on this machine); default: "
        "start a local cluster for as long as this command runs",
    )
    parser.add_argument("--cluster-cpus", type=positive_int, default=None, help="CPUs of the local cluster (all)")
    parser.add_argument("--host", default="127.0.0.1", help="where Serve's HTTP proxy listens (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="Serve's HTTP port (default 8000)")
    args = parser.parse_args(argv)
    if not args.ray:
        parser.error("say --ray: Ray Serve is the only backend here (app.py serves in one process)")
    if args.config:
        parser.error("--config is not supported with --ray yet: name a --preset, --baseline/--pruned and --variants")
    try:
        from variants.serving import ray_serve  # noqa: PLC0415 - Ray is an optional extra, only for this command
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    device = resolve_device(args.device)
    chain = specs.preset(
        args.preset or specs.default_preset(device),
        device,
        {k: getattr(args, k) for k in ("baseline", "pruned") if getattr(args, k)},
    )
    if args.variants:
        names = args.variants.split(",")
    else:  # the fastest headline variant of the chain, as the app's /v1/answer defaults to
        names = [[s.name for s in chain if s.headline][-1]]
    options = [
        ray_serve.VariantOptions(
            variant=name,
            preset=args.preset or specs.default_preset(device),
            baseline=args.baseline,
            pruned=args.pruned,
            device=device,
            cache_dir=args.cache_dir,
            null_threshold=args.null_threshold,
            max_context_chars=args.max_context_chars,
            max_batch=args.max_batch,
            batch_wait_ms=args.batch_wait_ms,
        )
        for name in names
    ]
    try:
        for option in options:
            option.spec()  # an unknown variant name fails here, before a cluster starts
    except ray_serve.VariantLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    ray_serve.start(args.address, args.cluster_cpus, args.host, args.port)
    try:
        try:
            routes = ray_serve.deploy(options, args.replicas, args.num_cpus, args.num_gpus)
        except ray_serve.VariantLoadError as exc:  # the replica's own reason, in one line
            print(f"error: {exc}", file=sys.stderr)
            return 1
        for name, prefix in routes.items():
            print(f"{name:<24} POST http://{args.host}:{args.port}{prefix}/v1/answer  ({args.replicas} replicas)")
        if args.address:  # the applications stay on the cluster: `serve status`, `serve shutdown`
            return 0
        print("serving; Ctrl-C stops the local cluster", flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if not args.address:
            ray_serve.stop()
    return 0
