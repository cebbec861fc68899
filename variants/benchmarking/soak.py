"""Soak test: does the app's memory stay flat under a long run of requests of mixed lengths?

    python -m variants soak                                # launch app.py (embedded preset), without and
                                                          # with --batching, 4 clients, 1,000 requests each
    python -m variants soak --batching off --requests 300
    python -m variants soak --url http://127.0.0.1:7860 --pid 1234   # an app that is already running

The clients send held-out-style (question, context) pairs from the SQuAD v2 sample in turn, with
contexts of mixed lengths: single paragraphs, and whole articles (several paragraphs, several
384-token windows), so that buffers sized by the longest input get their chance to grow. The server
process's resident memory (RSS) is read every ``--every`` requests. ``rss_growth_mb`` is the last
sample less the one after warm-up (``--warmup`` requests: sessions, thread pools and arenas reach
their working size); the target is under 50 MB. The app's malloc settings trade some of it for latency:
they keep up to 32 MiB free per arena for the next run (:func:`variants.answering.runtime.limit_native_memory`;
docs/results.md, "Memory"), so growth levels off after a warm-up rather than staying flat. The record goes to
``experiments/records/soak/soak-<hardware>-<timestamp>.json`` (or ``--out``) with the samples, the inputs'
length mix, hardware and versions. Exit status 1 when a request failed or memory grew past the limit.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from variants.benchmarking.app_client import (
    MAX_REQUESTS,
    MAX_SECONDS,
    SAMPLE_FILE,
    Pair,
    add_server_arguments,
    batching_modes,
    bounded,
    check_reachable,
    check_url,
    drive,
    launched_app,
    result_path,
    rss_mb,
    server_pid,
    server_settings,
    versions,
)
from variants.core.hardware import current_hardware, hardware_slug
from variants.core.spec import EMBEDDED_MODELS
from variants.core.squad import load_squad_json
from variants.records.results import SOAK_DIR

OUT_DIR = SOAK_DIR
GROWTH_LIMIT_MB = 50.0
LONG_EVERY = 4  # one request in four asks about a whole article
LONG_MAX_CHARS = 6_000  # several windows (about 1,500 tokens), under the app's 25,000-character limit


def mixed_pairs(n: int, path: Path = SAMPLE_FILE) -> list[Pair]:
    """``n`` (question, context) pairs: mostly single paragraphs, every ``LONG_EVERY``-th a whole article.

    The article is the question's own paragraph with the rest of its article around it (up to
    ``LONG_MAX_CHARS``), so the question stays answerable where it was; the order is deterministic.
    """

    examples = load_squad_json(path)
    articles: dict[str, list[str]] = {}
    for e in examples:
        articles.setdefault(e.title, [])
        if e.context not in articles[e.title]:
            articles[e.title].append(e.context)
    step = max(1, len(examples) // n)
    chosen = list(dict.fromkeys((e.question, e.context, e.title) for e in examples[::step]))[:n]
    pairs: list[Pair] = []
    for i, (question, context, title) in enumerate(chosen):
        long = i % LONG_EVERY == LONG_EVERY - 1
        pairs.append((question, _with_article(context, articles[title]) if long else context))
    return pairs


def _with_article(paragraph: str, article: list[str]) -> str:
    """``paragraph`` followed by the article's other paragraphs, up to ``LONG_MAX_CHARS``."""
    text = paragraph
    for other in article:
        if other == paragraph:
            continue
        if len(text) + 1 + len(other) > LONG_MAX_CHARS:
            break
        text = f"{text}\n{other}"
    return text


def length_mix(pairs: list[Pair]) -> dict[str, Any]:
    """The contexts' lengths, in characters and (with the embedded baseline's tokenizer) tokens."""
    chars = [len(c) for _, c in pairs]
    mix: dict[str, Any] = {"pairs": len(pairs), "long_every": LONG_EVERY, "context_chars": _spread(chars)}
    try:
        from transformers import AutoTokenizer  # noqa: PLC0415

        tokenizer = AutoTokenizer.from_pretrained(EMBEDDED_MODELS / "minilm-squad2")
        # Counted, never run through a model: no "longer than the maximum sequence length" warning.
        tokens = [len(tokenizer(q, c, verbose=False)["input_ids"]) for q, c in pairs]
        mix["tokens"] = _spread(tokens)
        mix["windows_of_384"] = {
            "1": sum(t <= 384 for t in tokens),
            "2-3": sum(384 < t <= 1000 for t in tokens),
            "4+": sum(t > 1000 for t in tokens),
        }
    except (OSError, ImportError):  # the tokenizer is only for the record
        pass
    return mix


def _spread(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "min": ordered[0],
        "median": statistics.median(ordered),
        "p90": ordered[int(0.9 * (len(ordered) - 1))],
        "max": ordered[-1],
    }


def soak(
    url: str, pid: int | None, pairs: list[Pair], clients: int, requests: int, every: int, warmup: int, timeout_s: float
) -> dict[str, Any]:
    """Send the requests, reading the server's RSS before the first and after every ``every``-th."""
    samples = [{"requests": 0, "rss_mb": rss_mb(pid)}]
    state = {"done": 0, "errors": 0}
    errors: list[str] = []

    def handle(_i: int, results: list[dict] | Exception, _ms: float) -> None:
        state["done"] += 1
        if isinstance(results, Exception):
            errors.append(f"{type(results).__name__}: {results}"[:300])
        else:
            errors.extend(f"{r['variant']}: {r['error']}"[:300] for r in results if r["error"])
        if state["done"] % every == 0 or state["done"] == requests:
            samples.append({"requests": state["done"], "rss_mb": rss_mb(pid)})

    sent = drive(url, pairs, clients, requests, timeout_s, handle)
    after_warmup = next((s for s in samples if s["requests"] >= warmup and s["rss_mb"] is not None), None)
    last = samples[-1]
    growth = None
    if after_warmup and last["rss_mb"] is not None and last["requests"] > after_warmup["requests"]:
        growth = round(last["rss_mb"] - after_warmup["rss_mb"], 1)
    return {
        "clients": clients,
        "requests": requests,
        "completed": state["done"],
        "timed_out": sent["sent"] < requests,
        "wall_s": sent["wall_s"],
        "throughput_rps": round(state["done"] / sent["wall_s"], 2) if sent["wall_s"] else None,
        "errors": len(errors),
        "error_examples": errors[:5],
        "server_pid": pid,
        "samples": samples,
        "warmup_requests": warmup,
        "rss_after_warmup_mb": after_warmup["rss_mb"] if after_warmup else None,
        "rss_growth_mb": growth,
        "within_limit": growth is not None and growth < GROWTH_LIMIT_MB,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m variants soak", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=bounded(1, 16), default=4, help="concurrent clients (4)")
    parser.add_argument("--requests", type=bounded(1, MAX_REQUESTS), default=1000, help="requests per mode (1000)")
    parser.add_argument("--every", type=bounded(1, 10_000), default=100, help="read RSS every N requests (100)")
    parser.add_argument("--warmup", type=bounded(0, MAX_REQUESTS), default=100, help="requests before the baseline")
    parser.add_argument("--pairs", type=bounded(4, 500), default=200, help="distinct (question, context) pairs")
    parser.add_argument("--timeout-s", type=bounded(1, MAX_SECONDS), default=MAX_SECONDS, help="stop sending after")
    add_server_arguments(parser, OUT_DIR)
    args = parser.parse_args(argv)
    if args.warmup >= args.requests:  # no growth could be measured: the run would end "failed" on a clean server
        parser.error(f"--warmup ({args.warmup}) must be below --requests ({args.requests})")
    return args


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    pairs = mixed_pairs(args.pairs)
    settings = (args.clients, args.requests, args.every, args.warmup, args.timeout_s)
    modes: dict[str, dict[str, Any]] = {}
    try:
        if args.url:
            url = check_reachable(check_url(args.url))
            run = soak(url, args.pid or server_pid(url), pairs, *settings)
            modes[args.label or "attached"] = {"server": {"url": url, "launched": False}, **run}
        else:
            for batching in batching_modes(args):
                with launched_app(args, batching, "soak") as (url, proc, cmd):
                    run = soak(url, proc.pid, pairs, *settings)
                modes["batching" if batching else "no_batching"] = {
                    "server": server_settings(args, cmd, batching),
                    **run,
                }
        for name, run in modes.items():
            print(
                f"{name}: {run['completed']}/{run['requests']} requests, {run['errors']} errors; RSS "
                f"{' '.join(str(s['rss_mb']) for s in run['samples'])} MB; growth after warm-up "
                f"{run['rss_growth_mb']} MB",
                flush=True,
            )
    except (ValueError, RuntimeError, TimeoutError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    hardware = current_hardware()
    record = {
        "kind": "soak",
        "created": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "hardware": hardware,
        "versions": versions(),
        "settings": {
            "clients": args.clients,
            "requests": args.requests,
            "every": args.every,
            "warmup": args.warmup,
            "preset": None if args.url else args.preset,
            "device": args.device,
            "growth_limit_mb": GROWTH_LIMIT_MB,
        },
        "inputs": length_mix(pairs),
        "modes": modes,
    }
    path = result_path(args.out, OUT_DIR, f"soak-{hardware_slug(hardware, args.device)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False), encoding="utf-8")
    print(f"wrote {path}")
    return 0 if all(r["errors"] == 0 and r["within_limit"] and not r["timed_out"] for r in modes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
