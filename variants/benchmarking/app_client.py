"""Driving the app's /answer API from this machine: shared by the load test and the soak test.

Launch ``app.py`` on loopback (or attach to a running one), send requests from a few concurrent
``gradio_client`` clients (bounded in count and time), and watch the server process's resident memory.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from variants.core.squad import load_squad_json
from variants.core.versions import artifact_versions

ROOT = Path(__file__).resolve().parents[2]

SAMPLE_FILE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_CLIENTS, MAX_REQUESTS, MAX_SECONDS = 256, 20_000, 3_600

Pair = tuple[str, str]  # (question, context)
Handler = Callable[[int, "list[dict] | Exception", float], None]


# --- inputs ---------------------------------------------------------------------------------------


def sample_pairs(n: int, path: Path = SAMPLE_FILE) -> list[Pair]:
    """``n`` distinct (question, context) pairs spread over the SQuAD v2 sample (short and long contexts)."""

    examples = load_squad_json(path)
    step = max(1, len(examples) // n)
    pairs = list(dict.fromkeys((e.question, e.context) for e in examples[::step]))
    return pairs[:n]


def check_url(url: str) -> str:
    """``url`` with a trailing slash, if it points at this machine; ValueError otherwise."""
    host = urlparse(url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"{url} is not on this machine: this script only targets 127.0.0.1 / localhost")
    return url.rstrip("/") + "/"


def check_reachable(url: str, timeout_s: float = 5.0) -> str:
    """``url``, if something accepts connections at its host and port; ValueError saying so otherwise (before
    any client starts, rather than a traceback from the first request)."""
    parts = urlparse(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=timeout_s):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"nothing answers at {url} ({reason}): start the app first, or leave --url out") from None
    return url


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: a whole number in [low, high]."""

    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}")
        return value

    return parse


# --- memory ---------------------------------------------------------------------------------------


def server_pid(url: str) -> int | None:
    """The process listening on ``url``'s port on this machine, if it can be found."""
    import psutil  # noqa: PLC0415

    port = urlparse(url).port
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return conn.pid
    except (psutil.AccessDenied, PermissionError):
        return None
    return None


def rss_mb(pid: int | None) -> float | None:
    """Resident memory of process ``pid`` in MiB, or None when it cannot be read."""
    import psutil  # noqa: PLC0415

    if not pid:
        return None
    try:
        return round(psutil.Process(pid).memory_info().rss / 2**20, 1)
    except psutil.Error:
        return None


class RssSampler:
    """Resident memory of one process, sampled every ``interval`` seconds in a background thread."""

    def __init__(self, pid: int | None, interval: float = 0.2) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        if (mb := rss_mb(self.pid)) is not None:
            self.samples.append(mb)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> RssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def summary(self) -> dict[str, float | int | None]:
        mb = self.samples
        return {
            "start": mb[0] if mb else None,
            "end": mb[-1] if mb else None,
            "max": max(mb) if mb else None,
            "samples": len(mb),
        }


# --- clients --------------------------------------------------------------------------------------


def client_address(n: int) -> str:
    """The address load client ``n`` (0-based) says it comes from, in 198.51.0.0/16 (198.51.100.0/24 is TEST-NET-2,
    for documentation): only a header names it, nothing is sent there."""
    return f"198.51.{100 + n // 254}.{1 + n % 254}"


def drive(url: str, pairs: list[Pair], clients: int, requests: int, timeout_s: float, handle: Handler) -> dict:
    """Send ``requests`` requests (the pairs in turn) from ``clients`` concurrent clients.

    ``handle(i, results_or_exception, ms)`` is called for each request, one call at a time (under a
    lock). No request is sent after ``timeout_s``. Returns how many were sent and the wall time.

    Each client says it is a visitor of its own (``X-Forwarded-For``, :func:`client_address`): an app that trusts
    this machine as its proxy (``--trusted-proxy 127.0.0.1``) counts them as that many visitors; any other app counts
    them as one, whose few places in the models' line (variants.serving.guard) refuse the rest.
    """
    from gradio_client import Client  # noqa: PLC0415

    pool = [Client(url, verbose=False, headers={"X-Forwarded-For": client_address(n)}) for n in range(clients)]
    lock = threading.Lock()
    state = {"next": 0}
    deadline = time.monotonic() + timeout_s

    def take() -> int | None:
        with lock:
            i = state["next"]
            if i >= requests or time.monotonic() > deadline:
                return None
            state["next"] += 1
            return i

    def client_loop(client) -> None:
        while (i := take()) is not None:
            question, context = pairs[i % len(pairs)]
            started = time.perf_counter()
            try:
                # one answer a request: the load is requests, not the Ask tab's timing rounds
                outcome: Any = client.predict(context, question, runs=1, budget_s=0, api_name="/answer")
            except Exception as exc:
                outcome = exc
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                handle(i, outcome, elapsed)

    threads = [threading.Thread(target=client_loop, args=(c,), name=f"client-{n}") for n, c in enumerate(pool)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"sent": state["next"], "wall_s": round(time.perf_counter() - started, 2)}


# --- launching the app ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def add_server_arguments(parser: argparse.ArgumentParser, out_dir: Path) -> None:
    """Which app the clients talk to (one already running, else one launched: :func:`add_launch_arguments`)
    and where the record goes: the options the load and soak tests share."""
    parser.add_argument("--url", default=None, help="a running app on this machine (else app.py is launched)")
    parser.add_argument("--pid", type=int, default=None, help="with --url: the server process, for its memory")
    parser.add_argument("--label", default="", help="with --url: a note on how that server is configured")
    parser.add_argument("--out", default=None, help=f"JSON file or folder (default {out_dir.relative_to(ROOT)})")
    add_launch_arguments(parser)


def add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """How ``app.py`` is started when no ``--url`` is given."""
    launch = parser.add_argument_group("launching app.py (without --url)")
    launch.add_argument("--preset", default="embedded")
    launch.add_argument("--baseline", default=None)
    launch.add_argument("--pruned", default=None)
    launch.add_argument("--variants", default=None, help="comma-separated variant names (default: all)")
    launch.add_argument("--cache-dir", default=None)
    launch.add_argument("--device", default="cpu")
    launch.add_argument("--batching", choices=("off", "on", "both"), default="both")
    launch.add_argument("--batch-wait-ms", type=float, default=5.0)
    launch.add_argument("--max-batch", type=bounded(1, 256), default=16)
    launch.add_argument("--concurrency", type=bounded(1, 64), default=1, help="model concurrency without batching")
    launch.add_argument("--startup-timeout-s", type=float, default=1800)


def batching_modes(args: argparse.Namespace) -> list[bool]:
    return {"off": [False], "on": [True], "both": [False, True]}[args.batching]


def app_command(args: argparse.Namespace, port: int, batching: bool) -> list[str]:
    """The ``app.py`` command line for :func:`add_launch_arguments`' options, on 127.0.0.1:``port``."""
    cmd = [sys.executable, str(ROOT / "app.py"), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--device", args.device, "--max-queue", str(max(32, args.clients + 8))]
    cmd += ["--trusted-proxy", "127.0.0.1"]  # each client a visitor of its own (its X-Forwarded-For, see drive)
    for flag in ("preset", "baseline", "pruned", "variants", "cache_dir"):
        if getattr(args, flag):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if batching:
        cmd += ["--batching", "--batch-wait-ms", str(args.batch_wait_ms), "--max-batch", str(args.max_batch)]
    else:
        cmd += ["--concurrency", str(args.concurrency)]
    return cmd


def server_settings(args: argparse.Namespace, cmd: list[str], batching: bool) -> dict[str, Any]:
    """How a launched server was configured, for the result file."""
    return {
        "launched": True,
        "command": cmd[1:],
        "batching": {"max_wait_ms": args.batch_wait_ms, "max_batch_size": args.max_batch} if batching else None,
        "concurrency_limit": max(args.concurrency, args.max_batch) if batching else args.concurrency,
    }


@contextlib.contextmanager
def launched(cmd: list[str], url: str, timeout_s: float, log_file: Path) -> Iterator[subprocess.Popen]:
    """Start the app, wait until it answers HTTP, and stop it afterwards (its output goes to ``log_file``)."""
    env = {k: v for k, v in os.environ.items() if k != "SPACE_ID"}  # never serve on 0.0.0.0
    env.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    with open(log_file, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the app exited with status {proc.returncode}; see {log_file}")
            try:
                with urllib.request.urlopen(url + "config", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"the app did not start within {timeout_s:.0f} s; see {log_file}")
            time.sleep(1)
        yield proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def launched_app(
    args: argparse.Namespace, batching: bool, name: str
) -> Iterator[tuple[str, subprocess.Popen, list[str]]]:
    """``app.py`` as :func:`add_launch_arguments`' options ask, on a free port: yields (url, process, command)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    cmd = app_command(args, port, batching)
    print(f"launching: {' '.join(cmd[1:])}", flush=True)
    log_file = Path(tempfile.gettempdir()) / f"{name}-app-{port}.log"
    with launched(cmd, url, args.startup_timeout_s, log_file) as proc:
        yield url, proc, cmd


def result_path(out: str | None, default_dir: Path, stem: str) -> Path:
    """``out`` if it names a .json file, else ``<out or default_dir>/<stem>-<UTC timestamp>.json``."""
    name = f"{stem}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    if out is None:
        return default_dir / name
    path = Path(out)
    return path if path.suffix == ".json" else path / name


def versions() -> dict[str, str | None]:
    """Python and the libraries that serve a request, for the result file."""
    from importlib import metadata  # noqa: PLC0415

    found: dict[str, str | None] = {"python": platform.python_version(), **artifact_versions()}
    for dist in ("gradio", "gradio_client", "psutil"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found
