"""Load test of the app's /answer API: N concurrent gradio_client clients, on loopback only.

    python scripts/load_test.py                                 # launch app.py (embedded preset), without and
                                                                # with dynamic batching, 32 clients, 1,000 requests
    python scripts/load_test.py --baseline DIR --pruned DIR --batching on --clients 8 --requests 100
    python scripts/load_test.py --url http://127.0.0.1:7860 --pid 1234   # an app that is already running

Each (question, context) pair is first answered by a single client; then the clients send the requests
(bounded in count and time), and every answer must equal the single-client one (per variant: text and
offsets). Per-request latency (the client's wall time, queueing and batching included), throughput and
the server process's resident memory (sampled through the run) go to a JSON file in
``assets/results/load/`` (or ``--out``). Exit status 1 when any request failed or answered differently.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
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
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from variants.results import current_hardware  # noqa: E402

log = logging.getLogger("load_test")

SAMPLE_FILE = ROOT / "assets" / "data" / "squad_v2_dev_sample.json"
OUT_DIR = ROOT / "assets" / "results" / "load"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_CLIENTS, MAX_REQUESTS, MAX_SECONDS = 256, 20_000, 3_600

Pair = tuple[str, str]  # (question, context)


# --- inputs ---------------------------------------------------------------------------------------


def sample_pairs(n: int, path: Path = SAMPLE_FILE) -> list[Pair]:
    """``n`` distinct (question, context) pairs spread over the SQuAD v2 sample (short and long contexts)."""
    from variants.squad import load_squad_json  # noqa: PLC0415

    examples = load_squad_json(path)
    step = max(1, len(examples) // n)
    pairs = list(dict.fromkeys((e.question, e.context) for e in examples[::step]))
    return pairs[:n]


def answer_key(results: list[dict]) -> list[tuple]:
    """What must not change under load: per variant, the answer text, its offsets, and whether it failed."""
    return [(r["variant"], r["answer"], r["start"], r["end"], r["error"]) for r in results]


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (linear interpolation), or None without values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    lo = int(position)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (position - lo)


def check_url(url: str) -> str:
    """``url`` with a trailing slash, if it points at this machine; ValueError otherwise."""
    host = urlparse(url).hostname
    if host not in LOOPBACK:
        raise ValueError(f"{url} is not on this machine: the load test only targets 127.0.0.1 / localhost")
    return url.rstrip("/") + "/"


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


class RssSampler:
    """Resident memory of one process, sampled every ``interval`` seconds in a background thread."""

    def __init__(self, pid: int | None, interval: float = 0.2) -> None:
        import psutil  # noqa: PLC0415

        self.process = psutil.Process(pid) if pid else None
        self.interval = interval
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self) -> None:
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.samples.append(self.process.memory_info().rss)

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
        mb = [s / 2**20 for s in self.samples]
        return {
            "start": round(mb[0], 1) if mb else None,
            "end": round(mb[-1], 1) if mb else None,
            "max": round(max(mb), 1) if mb else None,
            "samples": len(mb),
        }


# --- one run --------------------------------------------------------------------------------------


def run_load(
    url: str, pid: int | None, pairs: list[Pair], clients: int, requests: int, timeout_s: float
) -> dict[str, Any]:
    """Reference answers from one client, then ``requests`` requests from ``clients`` concurrent clients."""
    from gradio_client import Client  # noqa: PLC0415

    single = Client(url, verbose=False)
    references = [single.predict(context, question, api_name="/answer") for question, context in pairs]
    expected = [answer_key(r) for r in references]
    models = [
        {k: r.get(k) for k in ("variant", "label", "device", "provider", "dtype", "size_mb", "parameters")}
        for r in references[0]
    ]
    pool = [Client(url, verbose=False) for _ in range(clients)]

    lock = threading.Lock()
    state = {"next": 0}
    latencies: list[float] = []
    variant_ms: dict[str, list[float]] = {}
    errors: list[str] = []
    mismatches: list[dict] = []
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
                results = client.predict(context, question, api_name="/answer")
            except Exception as exc:
                with lock:
                    errors.append(f"{type(exc).__name__}: {exc}"[:300])
                continue
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                latencies.append(elapsed)
                for r in results:
                    if r.get("latency_ms") is not None:
                        variant_ms.setdefault(r["variant"], []).append(r["latency_ms"])
                failed = [f"{r['variant']}: {r['error']}" for r in results if r["error"]]
                errors.extend(failed)
                if answer_key(results) != expected[i % len(pairs)]:
                    mismatches.append({"request": i, "question": question, "got": answer_key(results)})

    threads = [threading.Thread(target=client_loop, args=(c,), name=f"client-{n}") for n, c in enumerate(pool)]
    with RssSampler(pid) as rss:
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - started
    completed = len(latencies)
    return {
        "clients": clients,
        "requests": requests,
        "sent": state["next"],
        "completed": completed,
        "errors": len(errors),
        "error_examples": errors[:5],
        "mismatches": len(mismatches),
        "mismatch_examples": mismatches[:3],
        "timed_out": state["next"] < requests,
        "wall_s": round(wall, 2),
        "throughput_rps": round(completed / wall, 2) if wall else None,
        "latency_ms": {
            "p50": _round(percentile(latencies, 50)),
            "p95": _round(percentile(latencies, 95)),
            "mean": _round(sum(latencies) / completed if completed else None),
            "max": _round(max(latencies) if latencies else None),
        },
        "variant_latency_p50_ms": {k: _round(percentile(v, 50)) for k, v in variant_ms.items()},
        "rss_mb": rss.summary(),
        "server_pid": pid,
        "models": models,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


# --- launching the app ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def app_command(args: argparse.Namespace, port: int, batching: bool) -> list[str]:
    cmd = [sys.executable, str(ROOT / "app.py"), "--host", "127.0.0.1", "--port", str(port)]
    cmd += ["--device", args.device, "--max-queue", str(max(32, args.clients + 8))]
    for flag in ("preset", "baseline", "pruned", "variants", "cache_dir"):
        if getattr(args, flag):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if batching:
        cmd += ["--batching", "--batch-wait-ms", str(args.batch_wait_ms), "--max-batch", str(args.max_batch)]
    else:
        cmd += ["--concurrency", str(args.concurrency)]
    return cmd


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


# --- the command ----------------------------------------------------------------------------------


def versions() -> dict[str, str | None]:
    from importlib import metadata  # noqa: PLC0415

    from variants.cache import library_versions  # noqa: PLC0415

    found: dict[str, str | None] = {"python": platform.python_version(), **library_versions()}
    for dist in ("gradio", "gradio_client", "psutil"):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = None
    return found


def bounded(low: int, high: int):
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}")
        return value

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=None, help="a running app on this machine (else app.py is launched)")
    parser.add_argument("--pid", type=int, default=None, help="with --url: the server process, for its memory")
    parser.add_argument("--label", default="", help="with --url: a note on how that server is configured")
    parser.add_argument("--clients", type=bounded(1, MAX_CLIENTS), default=32, help="concurrent clients (32)")
    parser.add_argument("--requests", type=bounded(1, MAX_REQUESTS), default=1000, help="requests in all (1000)")
    parser.add_argument("--pairs", type=bounded(1, 500), default=16, help="distinct (question, context) pairs")
    parser.add_argument("--timeout-s", type=bounded(1, MAX_SECONDS), default=1800, help="stop sending after this")
    parser.add_argument("--out", default=None, help=f"JSON file or folder (default {OUT_DIR.relative_to(ROOT)})")
    parser.add_argument("--note", default="", help="a note stored with the results (e.g. which models these are)")
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
    return parser.parse_args(argv)


def output_path(out: str | None, preset: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"load-{preset}-{stamp}.json"
    if out is None:
        return OUT_DIR / name
    path = Path(out)
    return path if path.suffix == ".json" else path / name


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    pairs = sample_pairs(args.pairs)
    runs: list[dict[str, Any]] = []
    try:
        if args.url:
            url = check_url(args.url)
            pid = args.pid or server_pid(url)
            run = run_load(url, pid, pairs, args.clients, args.requests, args.timeout_s)
            runs.append({"server": {"url": url, "launched": False, "label": args.label}, **run})
            print(summary_line(runs[-1]), flush=True)
        else:
            modes = {"off": [False], "on": [True], "both": [False, True]}[args.batching]
            for batching in modes:
                port = free_port()
                url = f"http://127.0.0.1:{port}/"
                cmd = app_command(args, port, batching)
                log_file = Path(tempfile.gettempdir()) / f"load-test-app-{port}.log"
                print(f"launching: {' '.join(cmd[1:])}", flush=True)
                with launched(cmd, url, args.startup_timeout_s, log_file) as proc:
                    run = run_load(url, proc.pid, pairs, args.clients, args.requests, args.timeout_s)
                server = {
                    "launched": True,
                    "command": cmd[1:],
                    "batching": {"max_wait_ms": args.batch_wait_ms, "max_batch_size": args.max_batch}
                    if batching
                    else None,
                    "concurrency_limit": max(args.concurrency, args.max_batch) if batching else args.concurrency,
                }
                runs.append({"server": server, **run})
                print(summary_line(runs[-1]), flush=True)
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    record = {
        "kind": "load-test",
        "created": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "hardware": current_hardware(),
        "versions": versions(),
        "settings": {
            "clients": args.clients,
            "requests": args.requests,
            "pairs": len(pairs),
            "timeout_s": args.timeout_s,
            "preset": None if args.url else args.preset,
            "baseline": args.baseline,
            "pruned": args.pruned,
            "device": args.device,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "variants_threads": os.environ.get("VARIANTS_THREADS"),
            "note": args.note,
        },
        "runs": runs,
    }
    path = output_path(args.out, args.preset if not args.url else "url")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {path}")
    return 0 if all(r["errors"] == 0 and r["mismatches"] == 0 and not r["timed_out"] for r in runs) else 1


def summary_line(run: dict[str, Any]) -> str:
    server = run.get("server") or {}
    batching = server.get("batching")
    if batching:
        mode = f"batching {batching['max_wait_ms']:g} ms x {batching['max_batch_size']}"
    else:
        mode = "no batching" if server.get("launched") else f"{server.get('url')} {server.get('label', '')}".strip()
    lat, rss = run["latency_ms"], run["rss_mb"]
    return (
        f"{mode}: {run['completed']}/{run['requests']} requests from {run['clients']} clients, "
        f"{run['errors']} errors, {run['mismatches']} answers differing; p50 {lat['p50']} ms, p95 {lat['p95']} ms, "
        f"{run['throughput_rps']} req/s; RSS {rss['start']} -> {rss['end']} MB (max {rss['max']})"
    )


if __name__ == "__main__":
    sys.exit(main())
