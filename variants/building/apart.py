"""A large model's ONNX build steps, each in a child process of its own, so the memory a step takes goes back when
it ends.

A step holds the graph it reads and the one it writes at once, and the libraries that do it keep copies of their
own: the exporter traces a copy of the torch model, ONNX Runtime's optimizer opens a session on the graph and loads
the model again, the quantizer writes a shape-inferred copy and reloads it. Python's allocator and glibc keep much of
that memory once it is freed, so a step run in the app's own process leaves the app gigabytes larger for good; in a
child process it is all given back at its exit (docs/usage.md, "Memory a build needs"). A child is a fresh
interpreter (``python -m variants.building.apart``, not a fork: the app's threads, ONNX Runtime's and OpenMP's, do
not survive a fork), so it costs the imports (a few seconds): only a model whose FP32 weights pass
:data:`APART_MIN_BYTES` builds this way; a small one (the shipped MiniLM, the tests' tiny models) builds in-process.

The child reads the model from its folder (its compaction done again from the stored weights, as
:func:`variants.building.storage.load_qa_model` does) and writes into the step's folder; what it says on failure is
the last line of its error output, raised here as a :class:`RuntimeError`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("variants.building.apart")

APART_MIN_BYTES = 256 * 2**20  # FP32 weights from which a model's ONNX steps each run in a child process
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds ``variants``, for the child's imports


def run_apart(task: str, **options: Any) -> None:
    """``task`` ("export" or "step", :func:`main`) with ``options`` (JSON values) in a child process; raises
    :class:`RuntimeError` with the child's last error line when it fails."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "variants.building.apart", task, json.dumps(options)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return
    if done.returncode in (-signal.SIGKILL, 137):  # the kernel's out-of-memory killer, most often
        raise RuntimeError(f"the {task} step was killed (out of memory?)")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    log.debug("the %s step failed:\n%s", task, done.stderr)
    raise RuntimeError(lines[-1] if lines else f"the {task} step failed (exit code {done.returncode})")


def export_folder(source: str, compacted: bool, out: str) -> None:
    """Export the QA model in folder ``source`` (compacted or not) to ONNX in ``out``, with its tokenizer."""
    from transformers import AutoTokenizer  # noqa: PLC0415

    from variants.building import export, storage  # noqa: PLC0415

    model = storage.load_qa_model(source, compacted=compacted)
    tokenizer = AutoTokenizer.from_pretrained(source, use_fast=True, trust_remote_code=False)
    export.export_onnx(model, tokenizer, Path(out), weights_outside=True)


def apply_step(step: str, src: str, out: str, for_gpu: bool) -> None:
    from variants.building import export  # noqa: PLC0415

    export.apply_step(step, Path(src), Path(out), for_gpu)


TASKS = {"export": export_folder, "step": apply_step}


def main(argv: list[str]) -> int:
    task, options = argv[0], json.loads(argv[1])
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        TASKS[task](**options)
    except Exception as exc:
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
