"""The app measures its own chain on its own machine, once the chain is built (``VARIANTS_SELF_BENCH`` questions).

A :class:`SelfBench` is the Benchmark tab's quick run (:class:`~variants.benchmarking.quick.QuickRun`: the same
questions drawn from the shipped SQuAD v2 sample, answerable and not, the same chunks, timing and scoring) run by
the app itself in a thread of its own: each chunk (about 0.4 s of model time) takes a turn in the models' line
(``turn``: :meth:`variants.serving.guard.ModelLine.queued_turn`), so a question asked meanwhile waits for one
chunk at most. Every few seconds the measurement so far is kept (:mod:`variants.records.own`) beside the built
artifacts, so a restart goes on from it; the record, once saved there, is found by its key (:meth:`SelfBench.key`:
the chain, its weights, the decoding, the hardware and the code), and a start with the same key measures nothing.

    python -m variants self-bench [--preset P ...]            # the record of this chain on this machine, if any
    python -m variants self-bench --measure [--questions N]   # measure it here, as the app would, and keep it
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from filelock import FileLock

from variants.answering.timing import describe
from variants.benchmarking.evaluate import CHUNK_S, VariantScore, score_table
from variants.benchmarking.quick import QuickRun
from variants.building.cache import cache_key, default_cache_dir
from variants.cli import add_model_arguments, engine_from_args
from variants.core import config
from variants.core.hardware import current_hardware, device_kind
from variants.core.spec import ASSETS
from variants.core.squad import QAExample, load_squad_json
from variants.core.versions import CHECKOUT, dist_version, record_versions
from variants.records import own
from variants.records.own import OwnStatus
from variants.records.record import SELF, Record
from variants.records.results import save_record

log = logging.getLogger("variants.benchmarking.self_bench")

SAMPLE = ASSETS / "data" / "squad_v2_dev_sample.json"
# a chain of random weights (the replicas) has no accuracy to measure: its latency's median needs no more questions,
# and BERT-large's chain takes seconds a question on 2 cores
LATENCY_ONLY_QUESTIONS = 50
CHECKPOINT_S = 5.0  # the measurement so far is kept at most this often: a restart measures this much again at most
PAUSE_S = 0.05  # between two chunks: the page's own work (a question's tokenizing, a render) gets the cores
# what names the machine in the key: the CPU and its instruction set, the cores the process may use, the GPU
HARDWARE_KEYS = ("cpu", "cpu_id", "cpu_isa", "usable_cores", "int8", "gpu", "gpu_count", "gpu_memory_gb")
METHOD = (
    "measured by the app itself once its chain was built, on the machine it serves from: each chunk of questions "
    "takes a turn in the models' line behind visitors' questions, and the measurement so far is kept every few "
    "seconds, so a restart goes on from it"
)

Turn = Callable[[], AbstractContextManager[Any]]


def code_identity() -> str:
    """The code that measures: its git commit (``+changes`` with edits), else the package's version, else a digest
    of the package's source (a Space's copy has no git and no installed package)."""
    commit = record_versions().get("code")
    if commit:
        return commit
    version = dist_version("qa-variants")
    if version:
        return f"qa-variants {version}"
    digest = hashlib.sha256()
    for path in sorted((CHECKOUT / "variants").rglob("*.py")):
        digest.update(path.relative_to(CHECKOUT).as_posix().encode() + b"\0" + path.read_bytes())
    return "source sha256:" + digest.hexdigest()[:16]


class SelfBench:
    """The app's measurement of ``engine``'s chain on ``n`` questions (default ``$VARIANTS_SELF_BENCH``; 0: off),
    kept in ``folder`` (default: beside the engine's built artifacts). :meth:`start` runs it in a thread once the
    build is over; :meth:`status` says where it stands, from any thread."""

    def __init__(
        self,
        engine: Any,
        n: int | None = None,
        folder: Path | None = None,
        examples: list[QAExample] | None = None,
        *,
        turn: Turn | None = None,
        pause_s: float = PAUSE_S,
        checkpoint_s: float = CHECKPOINT_S,
        chunk_s: float = CHUNK_S,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.engine = engine
        self.n = config.self_bench_questions() if n is None else n
        self.folder = Path(folder) if folder else own.own_folder(engine.cache_dir or default_cache_dir())
        self._examples = examples
        self.turn: Turn = turn or nullcontext  # the models' line: the app sets it to ModelLine.queued_turn
        self.pause_s, self.checkpoint_s, self.chunk_s = pause_s, checkpoint_s, chunk_s
        self.say = say or log.info  # a line when it begins and ends (the app's console)
        self._status = OwnStatus(own.WAITING if self.n > 0 else own.OFF, total=self.n)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    # --- where it stands ----------------------------------------------------------------------

    def status(self) -> OwnStatus:
        with self._lock:
            return self._status

    def _set(self, **changes: Any) -> None:
        with self._lock:
            self._status = replace(self._status, **changes)

    # --- what it measures ---------------------------------------------------------------------

    @property
    def examples(self) -> list[QAExample]:
        if self._examples is None:
            self._examples = load_squad_json(SAMPLE)
        return self._examples

    def identity(self) -> dict[str, Any]:
        """What the record depends on, as the artifacts' cache keys its files (each variant's source, steps and
        weights, the libraries' versions), and the questions, the decoding, the device, this machine's CPU or GPU
        and the code that measures."""
        engine, hardware = self.engine, current_hardware()
        specs = [v.spec for v in engine.loaded] or list(engine.specs)
        return {
            "preset": engine.preset,
            "chain": dict(getattr(engine, "chain", None) or {}),
            "variants": [[s.name, s.source, list(s.steps), s.revision, s.latency_only] for s in specs],
            "weights": engine.weights(),
            "questions": self.n,
            "sample": hashlib.sha256(json.dumps([e.id for e in self.examples]).encode()).hexdigest()[:16],
            "settings": asdict(engine.settings),
            "null_threshold": engine.null_threshold,
            "device": device_kind(engine.device),
            "hardware": {k: hardware.get(k) for k in HARDWARE_KEYS},
            "versions": {k: v for k, v in record_versions().items() if k != "code"},
            "code": code_identity(),
        }

    def key(self) -> str:
        return cache_key(self.identity())

    # --- running ------------------------------------------------------------------------------

    def start(self, after: threading.Thread | None = None) -> threading.Thread | None:
        """:meth:`measure` in a daemon thread, once ``after`` (the build's thread) has ended; None when off."""
        if self.n <= 0:
            return None

        def run() -> None:
            if after is not None:
                after.join()
            self.measure()

        self._thread = threading.Thread(target=run, name="variants-self-bench", daemon=True)
        self._thread.start()
        return self._thread

    def measure(self) -> OwnStatus:
        """The whole measurement, chunk by chunk, each in a turn of :attr:`turn` (blocking): the record found for
        this key, or measured (going on from a checkpoint of this key) and saved. A failure is its status's
        error, never raised: the app goes on serving."""
        if self.n <= 0:
            return self.status()
        try:
            self._measure()
        except Exception as exc:  # the app serves whatever this does
            log.exception("the measurement of this chain on this machine failed")
            self._set(state=own.FAILED, error=describe(exc))
        return self.status()

    def _measure(self) -> None:
        if not any(v.ok for v in self.engine.loaded):
            self._set(state=own.FAILED, error="no variant of the chain was built.")
            return
        if all(v.spec.latency_only for v in self.engine.loaded):
            self.n = min(self.n, LATENCY_ONLY_QUESTIONS)
            self._set(total=self.n)
        key = self.key()
        self.folder.mkdir(parents=True, exist_ok=True)
        with FileLock(self.folder / f"{key}.lock"):  # two processes on one folder (replicas): one measures
            self._measure_key(key)

    def _measure_key(self, key: str) -> None:
        found = own.find_own(self.folder, key)
        if found is not None:
            self.say(f"This chain was measured on this machine already: {self.folder / str(found.file)}")
            self._set(state=own.DONE, done=found.n_questions or 0, record=found, found=True, file=found.file)
            return
        run = QuickRun(self.engine, self.examples, self.n, chunk_s=self.chunk_s)
        self.n = run.total  # the sample may hold fewer than asked
        saved = own.read_checkpoint(self.folder, key)
        resumed = run.position if saved and run.resume(saved) else 0
        going_on = f", going on from question {resumed} (kept by the last start)" if resumed else ""
        self.say(f"Measuring this chain on this machine: {run.total} questions{going_on}, behind visitors' questions")
        self._set(state=own.MEASURING, done=run.position, total=run.total, resumed_at=resumed)
        started = kept = time.perf_counter()
        kept_at = run.position
        while not run.finished:
            with self.turn():
                run.step()
            if run.position != kept_at and time.perf_counter() - kept >= self.checkpoint_s:
                own.write_checkpoint(self.folder, key, run.checkpoint())
                kept, kept_at = time.perf_counter(), run.position
            self._set(done=run.position)
            time.sleep(self.pause_s)
        record = self.record(run, key, resumed)
        record.data["wall_s"] = round(time.perf_counter() - started, 1)  # this start's, visitors' turns included
        json_path, _ = save_record(record, self.folder)
        own.drop_checkpoint(self.folder, key)
        took = f"{run.seconds:.0f} s of model time in {record.data['wall_s']:.0f} s"
        self.say(f"Measured this chain on this machine ({took}): {json_path}")
        self._set(state=own.DONE, done=run.position, record=record, file=json_path.name)

    def record(self, run: QuickRun, key: str, resumed_at: int = 0) -> Record:
        """The run's record, of kind :data:`~variants.records.record.SELF`, with its key and how it was taken."""
        record = run.record()
        record.kind = SELF
        sample = f"{record.data['sample']} from the shipped SQuAD v2 sample"
        file = SAMPLE.relative_to(ASSETS.parent).as_posix()
        record.data = {**record.data, "file": file, "sample": sample, "model_s": round(run.seconds, 1)}
        record.data |= {"key": key, "code": code_identity()}
        if resumed_at:
            record.data["resumed_at"] = resumed_at
        record.method = {**record.method, "self_bench": METHOD}
        return record


# --- python -m variants self-bench ------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m variants self-bench",
        description="The record the app keeps of its own chain measured on this machine (VARIANTS_SELF_BENCH), "
        "read from beside the built artifacts; --measure takes it here, as the app would.",
    )
    add_model_arguments(parser)
    parser.add_argument("--questions", type=int, default=None, help=f"questions (default ${config.SELF_BENCH_ENV} "
                        f"or {config.SELF_BENCH})")  # fmt: skip
    parser.add_argument("--measure", action="store_true", help="build the chain and measure it unless it was")
    parser.add_argument("--json", action="store_true", help="the status and the record as JSON")
    args = parser.parse_args(argv)
    engine = engine_from_args(args, build=args.measure)
    bench = SelfBench(engine, args.questions if args.questions is not None else max(1, config.self_bench_questions()))
    if args.measure:
        with engine:
            status = bench.measure()
    else:
        found = own.find_own(bench.folder, bench.key())
        state = own.DONE if found else own.OFF
        done = (found.n_questions or 0) if found else 0
        status = OwnStatus(state, done, bench.n, found, found=True, file=found.file if found else None)
    if args.json:
        print(json.dumps(status.as_dict(), indent=1, ensure_ascii=False))
        return 0 if status.record is not None else 1
    if status.record is None:
        print(status.words() or f"This chain has not been measured on this machine (looked in {bench.folder}).")
        earlier = [r for r in own.own_records(bench.folder) if r.lineup == (engine.chain.get("name") or engine.preset)]
        if earlier:  # by other code, weights or settings: another key
            code = earlier[0].data.get("code") or earlier[0].versions.get("code")
            print(f"Its newest record of {earlier[0].lineup} is another key's (code {code}, not {code_identity()}): "
                  f"{bench.folder / str(earlier[0].file)}")  # fmt: skip
        return 1
    print(status.words())
    print(f"record: {bench.folder / (status.file or '')}")
    print(status.record.title())
    print(score_table(record_scores(status.record), labelled=True))
    return 0


def record_scores(record: Record) -> list[VariantScore]:
    """The record's variants as :func:`~variants.benchmarking.evaluate.score_table` rows (from the record alone)."""
    rows = []
    for e in record.variants:
        view = e.view("pipeline")
        lat = e.latency_ms
        rows.append(VariantScore(e.variant, e.short_label, f1=view.f1 if view else None,
                                 exact=view.exact if view else None, p50_ms=lat.p50 if lat else None,
                                 p90_ms=lat.p90 if lat else None, n=lat.n if lat else 0, error=e.error))  # fmt: skip
    return rows
