"""Gradio app: optimized variants of an extractive QA transformer, side by side.

A thin UI over :mod:`variants`: the page opens at once and the models build in a background thread
(``prepare_models``, then ``Engine.build_in_background``); every request shares them, each variant joining
when it is ready. ``build_demo(engine)`` makes the page from an engine built or still building (tests use
tiny models). Run ``python app.py [--preset NAME] [--port N]``; on a Hugging Face Space (``SPACE_ID`` set)
it serves on 0.0.0.0:7860. The API endpoint ``/answer`` takes (context, question) and returns one
dict per variant, the same fields as ``python -m variants ask --json``.

This file only parses options and wires the tabs of :mod:`ui` to the engine; no model code, no HTML.
"""

import argparse
import errno
import functools
import logging
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import ui.own_files  # noqa: F401  # isort: skip - first: gradio's temporary folder, before gradio is imported
import gradio as gr
import uvicorn
from fastapi import FastAPI
from huggingface_hub import constants as hf_constants

from ui import SAMPLE_FILE
from ui.about import about_html, page_intro
from ui.ask import ask_tab, make_answer_api
from ui.benchmark import benchmark_tab
from ui.questions import make_evaluate_api, questions_tab
from ui.report import benchmark_report_file, questions_report_file
from ui.startup import STARTUP_CSS, header_html, make_header_refresh, when_changed
from ui.styles import html_block, launch_style
from ui.text import notice_html
from variants.answering.gpu_check import gpu_check
from variants.benchmarking.evaluate import Evaluation
from variants.benchmarking.quick import QuickRun
from variants.benchmarking.self_bench import SelfBench
from variants.building import custom
from variants.building.cache import default_cache_dir
from variants.cli import add_model_arguments, engine_from_args, positive_int, remote_engine_from_args
from variants.core import config
from variants.core.spec import short_label
from variants.records.own import OwnStatus
from variants.serving import edge
from variants.serving import http as serve
from variants.serving.engine import Engine
from variants.serving.guard import MAX_LONG_RUNS, ModelLine, RunBook
from variants.serving.visitor import VisitorChains, beside

RESULTS_ENV = config.RESULTS_ENV  # folder of benchmark records (default: the engine's assets/results)
CONCURRENCY_GROUP = "models"  # every handler that runs a model shares this queue group
# gradio queue places beyond twice the line: /answer calls pass through gradio's queue before their line refuses
# them, and a burst of them (five at once with --max-queue 1 in test_faults) filled a queue of 2 * max_queue
BACKSTOP = 64


def build_demo(
    engine: Engine,
    *,
    results_dir: str | Path | None = None,
    concurrency_limit: int = 1,
    max_queue: int = 32,
    sample_file: Path = SAMPLE_FILE,
    allow_custom_models: bool = False,
    max_custom_mb: float | None = None,
    visitor_chains: VisitorChains | None = None,
    self_bench: SelfBench | None = None,
) -> gr.Blocks:
    """The page for an engine, built or still building, its queue configured: every handler that runs a model is in
    one concurrency group (``concurrency_limit`` at once, 1 by default: parallel runs would distort the
    latencies shown; with the engine's dynamic batching on, as many as make a batch), and at most
    ``max_queue`` requests wait. The Ask tab's questions and ``/answer`` take turns in one line of that length
    (:class:`~variants.serving.guard.ModelLine`), which tells a question that finds it full how long to wait;
    gradio's own queue, which cannot say so, is a backstop with room for a burst of calls that have not reached the
    line yet (``BACKSTOP``), so the line's sentence is what a visitor reads. ``allow_custom_models`` adds
    "Try your own model" (absent otherwise). ``self_bench``: the app's measurement of its own chain, whose chunks
    take their turns in the same line, shown on the Benchmark tab."""
    results_dir = results_dir or config.results_dir()
    results_dir = Path(results_dir) if results_dir else None
    group = {"concurrency_id": CONCURRENCY_GROUP, "concurrency_limit": concurrency_limit}
    chains = None  # the visitors' own chains ("Try your own model"); None leaves the feature out
    if allow_custom_models:
        chains = visitor_chains or VisitorChains(engine, max_mb=max_custom_mb)
    engine_for = functools.partial(visitor_view, engine, chains)  # a session's engine: the preset's, and its chain
    # from the specs, known before anything builds (the fallback to `embedded` keeps the chain's names)
    headline = [s.name for s in engine.specs if s.headline]
    steps = [(short_label(s.name, s.label), s.name) for s in engine.specs if not s.headline]
    line = ModelLine(slots=concurrency_limit, max_waiting=max_queue, name="question")
    own = None  # where the app's measurement of its own chain stands, for the Benchmark tab
    if self_bench is not None:
        self_bench.turn = line.queued_turn  # a turn per chunk, behind the questions that came first
        own = self_bench.status
    with gr.Blocks(title="QA variants side by side") as demo:
        intro = gr.Markdown(page_intro(engine))  # redrawn with the About tab: a fallback changes the variants
        # above every tab: the model, the preset, the hardware, and the build while it runs
        header = html_block(header_html(engine.snapshot()), css=STARTUP_CSS, elem_id="qa-header")
        notice = html_block(  # the fallback banner, once, on every tab (decided while the build fetches)
            notice_html(engine.notice, "Fallback") if engine.notice else "",
            elem_id="notice",
            visible=bool(engine.notice),
        )
        timer = gr.Timer(1.0)  # polls the engine's build state; stops once the build is over
        with gr.Tab("Ask"):
            ask_tab(engine, headline, steps, group, sample_file, chains, line, page=demo, timer=timer)
        with gr.Tab("Benchmark"):
            report = benchmark_report_file
            benchmark_tab(
                engine,
                results_dir,
                group,
                sample_file,
                QuickRun,
                report,
                line=line,
                engine_for=engine_for,
                own=own,
                page=demo,
            )
        runs = RunBook()  # the app's one book of runs: the tab's and /evaluate's together
        with gr.Tab("Your questions"):
            questions_tab(engine, group, Evaluation, runs, questions_report_file, line=line, engine_for=engine_for)
        with gr.Tab("About"):
            about = html_block(about_html(engine))
        gr.on(  # at once for a page opened later, then every tick while the build runs
            [demo.load, timer.tick],
            make_header_refresh(engine),
            None,
            [header, notice, timer],
            queue=False,
            show_progress="hidden",
            api_visibility="private",
        )
        seen = gr.State(-1)
        gr.on(  # on load too: a page opened after the build (the timer has stopped by then)
            [demo.load, timer.tick],
            when_changed(engine, lambda: (about_html(engine), page_intro(engine)), 2),
            [seen],
            [seen, about, intro],
            queue=False,
            show_progress="hidden",
            api_visibility="private",
        )
        # its own group, not limited by gradio: each call waits in ``line`` (async), refused there when it is full
        gr.api(make_answer_api(engine, line), api_name="answer", concurrency_id="answer-api", concurrency_limit=None)
        # its own group too: each chunk takes a turn in ``line``, so an Ask question waits for one chunk, not one call
        gr.api(
            make_evaluate_api(engine, Evaluation, runs, line),
            api_name="evaluate",
            concurrency_id="evaluate-api",
            concurrency_limit=MAX_LONG_RUNS,
        )
    demo.queue(max_size=2 * max_queue + BACKSTOP, default_concurrency_limit=concurrency_limit)
    return demo


def visitor_view(engine: Engine, chains: VisitorChains | None, owner: str) -> Engine:
    """The engine a session's long runs measure: the preset's, with that visitor's ready chain beside it."""
    chain = chains.get(owner) if chains is not None else None
    return beside(engine, chain)


# --- start-up -------------------------------------------------------------------------------------


def console_progress(fraction: float, message: str) -> None:
    """Model-loading progress on the console (the engine reports build sub-steps as 0, "label: step")."""
    sub_step = fraction == 0 and ": " in message
    prefix = "      " if sub_step else f"[{fraction:4.0%}]"
    print(f"{prefix} {message}", flush=True)


def console_line(line: str) -> None:
    """One line of the build's progress (a step begins, a variant is ready or failed), with its seconds."""
    print(line, flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Gradio app: QA variants side by side")
    add_model_arguments(parser)  # defaults from the VARIANTS_* environment
    serving = config.serving_defaults()
    parser.add_argument("--port", type=port_number, default=7860, help="local port (default 7860)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to serve on (a Space always uses 0.0.0.0)")
    parser.add_argument("--share", action="store_true", help="also make a temporary public gradio.live link")
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=serving["concurrency"],
        help="model requests run at once (default 1: concurrent runs would distort the latencies)",
    )
    parser.add_argument(
        "--max-queue",
        type=positive_int,
        default=serving["max_queue"],
        help="requests that may wait in the queue; more are turned away (default 32)",
    )
    parser.add_argument(
        "--backend",
        default=None,
        metavar="URL",
        help="answer through the variants' Ray Serve routes at URL (python -m variants serve --ray) instead of "
        "loading the models here",
    )
    parser.add_argument(
        "--demo-replicas",
        type=int,
        default=0,
        metavar="N",
        help="with --backend: run this page itself as a Ray Serve deployment of N replicas at /demo on the running "
        "Ray cluster (the one `python -m variants serve --ray` started), instead of serving it here",
    )
    parser.add_argument(
        "--trusted-proxy",
        default=None,
        metavar="ADDRESSES",
        help="proxies (addresses or networks, comma-separated) whose X-Forwarded-For names the visitor, as uvicorn's "
        f"--forwarded-allow-ips (env {config.TRUSTED_PROXIES_ENV}; on a Space its own proxy; default none: the "
        "header changes nothing)",
    )
    parser.add_argument("--results-dir", default=None, help=f"benchmark records folder (env {RESULTS_ENV})")
    parser.add_argument(
        "--allow-custom-models",
        action="store_true",
        help="let users load a Hub model of their own as an extra variant (off by default; on a Space only with "
        f"{custom.ALLOW_ENV}=1)",
    )
    return parser.parse_args(argv)


def model_concurrency(args: argparse.Namespace, engine: Engine) -> int:
    """Model requests let in at once: ``--concurrency``, or with dynamic batching enough to fill a batch
    (they meet in each variant's batcher, which still runs its model one batch at a time)."""
    if engine.batching is None:
        return args.concurrency
    return max(args.concurrency, engine.batching.max_batch_size)


def prepare_models(args: argparse.Namespace) -> Engine:
    """The engine the options describe, nothing built yet (``Engine.build_in_background`` builds it once the page
    serves); its build prints one line per step."""
    engine = engine_from_args(args, build=False)
    engine.status.set_log(console_line)
    gpu = gpu_check()  # on a machine with an NVIDIA GPU: what torch and ONNX Runtime make of it, in one line
    if gpu is not None:
        print(gpu.log_line(), flush=True)
    artifacts = engine.cache_dir or default_cache_dir()
    hub = config.hub_cache() or Path(hf_constants.HF_HUB_CACHE)
    where = config.persistent_dir()
    kept = f"; kept across restarts in {where}" if where else ""
    print(
        f"Preset {engine.preset!r} on {engine.device}: {len(engine.specs)} variants to build; built artifacts in "
        f"{artifacts}, Hub downloads in {hub}{kept}",
        flush=True,
    )
    return engine


def serve_address(args: argparse.Namespace) -> tuple[str, int]:
    """Where to serve: ``--host``/``--port``; on a Space 0.0.0.0:7860, where it routes visitors (gradio's own
    ``GRADIO_SERVER_NAME``/``GRADIO_SERVER_PORT`` move it, as for a stand-in Space on a shared machine)."""
    if config.on_space():
        host = config.env_text("GRADIO_SERVER_NAME") or "0.0.0.0"
        return host, port_number(config.env_text("GRADIO_SERVER_PORT") or "7860")
    return args.host, args.port


def bind_error(host: str, port: int) -> OSError | None:
    """Why ``port`` on ``host`` cannot be served on, or None: bound the way uvicorn binds (SO_REUSEADDR, so a port
    left in TIME_WAIT by an app just stopped counts as free). The standard library's socket is all it takes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:  # socket.gaierror (an unknown host name) is one too
            return exc
    return None


def port_in_use(host: str, port: int) -> bool:
    """Whether ``port`` on ``host`` cannot be served on (:func:`bind_error`)."""
    return bind_error(host, port) is not None


def port_message(host: str, port: int, error: OSError | None = None) -> str:
    """What stops serving on ``host``:``port`` (``error``, :func:`bind_error`'s; found again when not given), in
    one line: a busy port, or the interface's own error."""
    error = error or bind_error(host, port)
    if error is None or error.errno == errno.EADDRINUSE:
        return f"error: port {port} on {host} is already in use; start with --port N to serve on another port"
    return f"error: cannot serve on {host} port {port}: {error.strerror or error}; check --host and --port"


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 1 to 65535."""
    port = int(text)
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 1 to 65535, not {port}")
    return port


def backend_app(argv: list[str]) -> FastAPI:
    """What each Serve replica of the demo serves, built from app.py's own arguments: the page over ``--backend``
    mounted with Gradio's own ``mount_gradio_app`` (theme and CSS as at launch), beside the lean /v1 routes."""
    args = parse_args(argv)
    engine = remote_engine_from_args(args)
    demo = build_demo(
        engine, results_dir=args.results_dir, concurrency_limit=args.concurrency, max_queue=args.max_queue
    )
    app = FastAPI(**edge.app_kwargs(demo))
    app.include_router(serve.router(engine))
    return gr.mount_gradio_app(app, demo, path="/", **launch_style())


def deploy_demo(args: argparse.Namespace, argv: list[str]) -> int:
    """``--demo-replicas N``: the page as a Serve deployment on the running Ray cluster; it stays after this exits."""
    from variants.serving import ray_serve  # noqa: PLC0415 - Ray is an optional extra, only for this option

    ray_serve.start(address="auto")
    url = ray_serve.deploy_demo(functools.partial(backend_app, argv), args.demo_replicas)
    print(f"The demo runs as {args.demo_replicas} Serve replicas at {args.backend.rstrip('/')}{url}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = parse_args(argv)  # its defaults read the VARIANTS_* variables
    except ValueError as exc:  # e.g. VARIANTS_MAX_BATCH=abc: the variable and its value, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.demo_replicas:
        if not args.backend:
            print("error: --demo-replicas needs --backend (the replicas answer through it)", file=sys.stderr)
            return 2
        return deploy_demo(args, argv)  # each replica parses the same options (and ignores --demo-replicas)
    host, port = serve_address(args)
    error = bind_error(host, port)
    if error is not None:  # before the models load (a minute), not after
        print(port_message(host, port, error), file=sys.stderr)
        return 2
    try:
        allow_custom = custom.custom_models_allowed(args.allow_custom_models)
        custom_mb = custom.max_custom_mb() if allow_custom else None
        engine = remote_engine_from_args(args, console_progress) if args.backend else prepare_models(args)
        allow_custom = allow_custom and not args.backend  # the backend loads the models, not this app
        self_bench = None if args.backend else SelfBench(engine, say=console_line)  # VARIANTS_SELF_BENCH; 0: off
    except (ValueError, FileNotFoundError) as exc:  # an unknown preset, a bad config file or setting
        print(f"error: {exc}", file=sys.stderr)
        return 2
    demo = build_demo(
        engine,
        results_dir=args.results_dir,
        concurrency_limit=model_concurrency(args, engine),
        max_queue=args.max_queue,
        allow_custom_models=allow_custom,
        max_custom_mb=custom_mb,
        self_bench=self_bench,
    )
    own = self_bench.status if self_bench is not None else None
    exit_on_sigterm()
    trusted = config.trusted_proxies(args.trusted_proxy)  # who the visitor is: the proxies that may say
    if config.on_space():  # gradio's launch() would start its Spaces hot reloader (see serve_mounted)
        try:
            server = serve_mounted(demo, engine, host, port, trusted, own=own)
        except OSError:
            print(port_message(host, port), file=sys.stderr)  # taken meanwhile
            return 2
        print(launch_message(f"http://{host}:{port}/", None), flush=True)
        if not args.backend:
            start_models(engine, self_bench)
        server.join()
        return 0
    lean = serve.router(engine, own=own).routes  # POST /v1/answer: one variant, no UI queue (served latency)
    edge.trust_proxies(trusted)  # read by uvicorn at launch
    try:  # quiet: gradio's own lines would tell a visitor to set share=True in launch(); ours name --share
        demo.launch(
            server_name=host,
            server_port=port,
            share=args.share,
            app_kwargs=edge.app_kwargs(demo, lean),  # every route behind the edge's limits
            quiet=True,
            prevent_thread_lock=True,
            **launch_style(),
        )
    except OSError:
        if not port_in_use(host, port):
            raise
        print(port_message(host, port), file=sys.stderr)  # taken meanwhile
        return 2
    print(launch_message(demo.local_url, demo.share_url if args.share else None), flush=True)
    if not args.backend:
        start_models(engine, self_bench)  # the page already answers; each variant joins when it is ready
    demo.block_thread()
    return 0


def start_models(engine: Engine, self_bench: SelfBench | None) -> None:
    """The build in the background, then the app's measurement of the chain it built (when it measures itself)."""
    build = engine.build_in_background()
    if self_bench is not None:
        self_bench.start(after=build)


def exit_on_sigterm() -> None:
    """A host stops the app with SIGTERM (a Space, systemd, ``kill``): exit as after Ctrl+C, so that what runs at
    exit does, and this process's temporary folder goes (gradio's, with visitors' uploads, is inside it:
    :func:`ui.files.gradio_folder`). Python's default for SIGTERM ends the process without running it."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(0))


def serve_mounted(
    demo: gr.Blocks,
    engine: Engine,
    host: str,
    port: int,
    trusted: str = "",
    start_s: float = 60.0,
    own: Callable[[], OwnStatus] | None = None,
) -> threading.Thread:
    """Serve the page on a Space: mounted with gradio's public ``mount_gradio_app`` (theme and CSS as at launch)
    beside the lean /v1 routes, on a uvicorn server of our own, running in a thread that is returned once the port
    answers. Gradio's ``launch()`` starts its Spaces hot reloader whenever ``SYSTEM=spaces``, with no option to
    keep it off; its watcher needs the ``spaces`` package (a traceback at every start where it is missing) and
    opens a code-reload server on port 7887. This app is not edited live, so it does without. Every route is
    behind the edge (:mod:`variants.serving.edge`); the server reads ``X-Forwarded-For`` from ``trusted`` only and
    bounds its connections (:func:`variants.serving.edge.server_options`)."""
    app = FastAPI(**edge.app_kwargs(demo))
    app.include_router(serve.router(engine, own=own))
    app = gr.mount_gradio_app(app, demo, path="/", **launch_style())
    config_ = uvicorn.Config(app, host=host, port=port, log_level="warning", **edge.server_options(trusted))
    server = uvicorn.Server(config_)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + start_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise OSError(errno.EADDRINUSE, f"the server did not start on {host}:{port}")
        time.sleep(0.05)
    return thread


def launch_message(local_url: str, share_url: str | None) -> str:
    """Where the page is, and how to get a public link (this app's --share, not gradio's launch argument)."""
    lines = [f"* Running on local URL:  {local_url}"]
    if share_url:
        lines.append(f"* Running on public URL: {share_url}")
    elif not config.on_space():  # a Space has its own public address
        lines.append("* To create a public link, start the app with --share.")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
