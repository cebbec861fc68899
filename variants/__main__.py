"""Command line: ``python -m variants COMMAND [options]``; ``python -m variants COMMAND -h`` for a command's options.

This module only dispatches: each command lives with its concern and parses its own arguments, and only
the chosen command's code is imported (the app's model options are :mod:`variants.cli`'s).
"""

from __future__ import annotations

import importlib
import logging
import sys

from variants.building.sources import SourceUnavailable

# command: (module, function taking the rest of the command line, what it does)
COMMANDS = {
    "ask": ("variants.cli", "ask_main", "answer one question with every variant"),
    "build": ("variants.cli", "build_main", "build and cache every variant of a preset"),
    "bench": ("variants.benchmarking.cli", "main", "SQuAD v2 accuracy and latency records"),
    "deploy": ("variants.deploy", "main", "upload the working tree to a Hugging Face Space (--dry-run: list it)"),
    "serve": ("variants.cli", "serve_main", "each variant a Ray Serve deployment (--ray; the serve extra)"),
    "train": ("variants.training.cli", "main", "fine-tune or prune the embedded demo family"),
    "evaluate": (
        "variants.benchmarking.evaluate",
        "main",
        "every variant on your own questions (SQuAD JSON, CSV, JSONL)",
    ),
    "self-bench": (
        "variants.benchmarking.self_bench",
        "main",
        "the record the app keeps of its chain measured on this machine (--measure: take it here)",
    ),
    "plot": ("variants.benchmarking.plot", "main", "chart F1 against latency for a benchmark record"),
    "report": ("variants.benchmarking.report", "main", "a benchmark record as one self-contained HTML report"),
    "load-test": ("variants.benchmarking.load_test", "main", "concurrent clients against the app's /answer"),
    "soak": ("variants.benchmarking.soak", "main", "long mixed load on /answer, the server's memory over time"),
    "served-latency": ("variants.benchmarking.served_latency", "main", "one variant over HTTP, p50/p99 per length"),
    "ray-bench": (
        "variants.benchmarking.ray_bench",
        "main",
        "Ray Serve at 1 and 2 replicas against the in-process app",
    ),
    "replica-bench": ("variants.benchmarking.replica_bench", "main", "the BERT-large replica's chain on this CPU"),
    "gpu-report": ("variants.benchmarking.gpu.report", "main", "every backend and mode on a GPU (or --device cpu)"),
    "gpu-app": ("variants.benchmarking.gpu.app", "main", "the app with the card's three variants, asked on a GPU"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {what}" for name, (_, _, what) in COMMANDS.items()]
    return "usage: python -m variants COMMAND [options]\n\ncommands:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"unknown command {argv[0]!r}\n{usage()}", file=sys.stderr)
        return 2
    module, function, _ = COMMANDS[argv[0]]
    try:
        result = getattr(importlib.import_module(module), function)(argv[1:])
    except (SourceUnavailable, ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
