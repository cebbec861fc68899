"""Every chosen variant on a file of someone's own questions: the app's "Your questions" tab, the gradio
``/evaluate`` API and ``python -m variants evaluate`` all run this.

The file is read by :mod:`variants.core.question_files` (the bench reads ``--data`` with it too). Each question
is answered once per variant at batch 1 with the bench's decoding (:func:`~variants.benchmarking.bench.
engine_answerer`) and timed end to end; the answers are decided at null threshold 0 (the app's rule) and scored
with the official SQuAD v2 metric of :mod:`variants.core.squad`, as the bench's pipeline view scores them, so
the F1 here and ``bench --data`` on the same file agree. Without answers in the file, agreement with the
baseline stands in for accuracy.

An :class:`Evaluation` runs in chunks (:meth:`Evaluation.step`) of about ``chunk_s`` seconds: a block holds as
many questions as the slowest variant answers in that time, the variants take turns on each block, as in the
bench's latency pass, and a chunk holds as many turns as fit (the slowest variant's alone, the fast ones'
together). The app runs one chunk per turn of its model queue, so that a question asked on the Ask tab meanwhile
waits for one chunk, not the run.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from variants.answering.timing import Progress, Timing, TimingRule, busy, describe
from variants.benchmarking.accuracy import agreement, decisions, fill_accuracy
from variants.benchmarking.bench import compare, fill_latency, make_record, variant_runners
from variants.benchmarking.options import METHOD, Options, Runner
from variants.cli import add_model_arguments, engine_from_args
from variants.core import safe_csv
from variants.core.question_files import QuestionSet, read_questions
from variants.core.squad import QAExample, compute_f1, normalize_answer
from variants.records.record import Record
from variants.records.results import save_record

# Model time per chunk: an Ask question asked meanwhile waits about this long for its turn. An Ask question (three
# variants, one untimed and up to five timed runs each) takes about 0.5 s on 2 cores; a chunk shorter than that keeps
# it within twice its usual time, and longer chunks cost fewer trips through the queue.
CHUNK_S = 0.4
LATENCY_METHOD = (
    "batch 1, one question end to end (tokenize, every window, decode), each question once per variant; the "
    "variants take turns on blocks of questions (as many as the slowest answers in about chunk_s seconds), each "
    "turn after one untimed question where the variant runs under the timing rule's settle_below_ms. On the "
    "visitor's own questions, as they were given; the machine may have served other requests between chunks"
)


@dataclass
class VariantScore:
    """One variant's numbers on the questions answered so far (percent, ms); None where not measured."""

    variant: str
    label: str
    f1: float | None = None  # SQuAD v2 F1 at threshold 0, where the file gives answers
    exact: float | None = None
    agree_exact: float | None = None  # % of questions whose normalized answer is the baseline's
    agree_f1: float | None = None  # mean token F1 against the baseline's answer, %
    answered: float | None = None  # % of questions given an answer (not "no answer")
    p50_ms: float | None = None
    p90_ms: float | None = None
    n: int = 0
    error: str | None = None
    # The timing rule's "the machine was busy" flag (each run's CPU time and wait for a CPU beside its wall
    # time, variants.answering.timing.stretch): None on a quiet machine; the tab and the CLI show it beside p90.
    busy: str | None = None
    stretch: float | None = None  # wall time over computing time, set with ``busy``


class Evaluation:
    """One run of ``names`` (default: every loaded variant) over ``questions``; call :meth:`step` until it
    returns False (or :func:`evaluate` for the whole run). ``max_seconds``: model time after which it stops."""

    def __init__(
        self,
        engine: Any,
        questions: QuestionSet,
        names: list[str] | None = None,
        *,
        chunk_s: float = CHUNK_S,
        max_seconds: float | None = None,
        data_bytes: bytes | None = None,
    ) -> None:
        if not questions.examples:
            raise ValueError("no questions to run")
        self.engine, self.questions, self.chunk_s, self.max_seconds = engine, questions, chunk_s, max_seconds
        runners, self.entries = variant_runners(engine)
        wanted = names or [r.name for r in runners]
        unknown = [n for n in wanted if n not in {e.variant for e in self.entries}]
        if unknown:
            raise ValueError(f"no loaded variant named {', '.join(map(repr, unknown))}")
        self.runners: list[Runner] = sorted(
            (r for r in runners if r.name in wanted), key=lambda r: r.name != "baseline"
        )
        self.entries = [e for e in self.entries if e.variant in wanted]
        self.timings = {r.name: Timing() for r in self.runners}
        for entry in self.entries:
            if entry.error:
                self.timings[entry.variant] = Timing(error=entry.error)
        self.position, self.seconds, self.chunks = 0, 0.0, 0
        self.stopped: str | None = None  # why it ended early ("stopped", "time limit"), None otherwise
        self.created = datetime.now(UTC)
        self.sha256 = hashlib.sha256(data_bytes).hexdigest() if data_bytes is not None else None
        self._per_question_s: dict[str, float] = {}  # each variant's seconds per question so far
        self._block: list[QAExample] | None = None  # the questions the variants are taking turns on
        self._turns: list[Runner] = []  # the variants yet to answer the block
        self._last_ms: dict[str, float] = {}
        self._rule = TimingRule()

    # --- running -------------------------------------------------------------------------------

    @property
    def examples(self) -> list[QAExample]:
        return self.questions.examples

    @property
    def total(self) -> int:
        return len(self.examples)

    @property
    def finished(self) -> bool:
        return self.stopped is not None or self.position >= self.total or not self.live_runners

    @property
    def live_runners(self) -> list[Runner]:
        return [r for r in self.runners if not self.timings[r.name].error]

    @property
    def fraction(self) -> float:
        """Share of the questions answered by every variant (a block counts as its turns go)."""
        if self._block is None or self.finished:
            return self.position / self.total
        live = max(1, len(self.live_runners))
        return (self.position + len(self._block) * (1 - len(self._turns) / live)) / self.total

    def stop(self, reason: str = "stopped") -> None:
        """End the run where it is (the questions answered so far are scored)."""
        if not self.finished:
            self.stopped = reason

    def block_size(self) -> int:
        """Questions in the next block: as many as the slowest variant answers in ``chunk_s``, by its times so far."""
        slowest = max((self._per_question_s.get(r.name, 0.0) for r in self.live_runners), default=0.0)
        return 1 if not slowest else max(1, min(64, int(self.chunk_s / slowest)))

    def step(self) -> bool:
        """One chunk: variants' turns on blocks of questions (the variants take turns, as in the bench's latency
        pass), as many turns as fit in ``chunk_s`` by the times so far, one at least; True while questions are left."""
        if self.finished:
            return False
        started = time.perf_counter()
        self.chunks += 1
        while True:
            self._turn()
            upcoming = self._next_turn_s()
            if self.finished or upcoming is None or time.perf_counter() - started + upcoming > self.chunk_s:
                return not self.finished

    def _next_turn_s(self) -> float | None:
        """The expected seconds of the next turn (None where not known yet, or a new block is next)."""
        if self._block is None or not self._turns:
            return None
        own = self._per_question_s.get(self._turns[0].name)
        return None if own is None else own * len(self._block)

    def _turn(self) -> None:
        """One variant's turn on the current block (a new block first, where the last one is done)."""
        if self._block is None:  # a new block: every variant still running answers it, one turn each
            self._block = self.examples[self.position : self.position + self.block_size()]
            self._turns = list(self.live_runners)
        started = time.perf_counter()
        runner, block = self._turns.pop(0), self._block
        timing = self.timings[runner.name]
        try:
            first = runner.name not in self._last_ms  # its first turn in this process (a resumed run's too)
            if first or self._rule.settle(self._last_ms.get(runner.name)):
                runner.answer([(block[0].question, block[0].context)], 1)  # untimed: warm-up, or settle after another
            for e in block:
                timing.time_one(runner.answer, e)  # its wall time, and its CPU time and wait (the busy flag)
                self._last_ms[runner.name] = timing.times_ms[-1]
        except Exception as exc:  # this variant drops out; the others go on
            timing.error = describe(exc)
        elapsed = time.perf_counter() - started
        self.seconds += elapsed
        own = self._per_question_s.get(runner.name)
        self._per_question_s[runner.name] = elapsed / len(block) if own is None else (own + elapsed / len(block)) / 2
        if not self._turns:  # every variant has answered the block
            self.position += len(block)
            self._block = None
        over = self.max_seconds is not None and self.seconds >= self.max_seconds
        if over and self._block is None and self.position < self.total:  # at the end of a block: it counts whole
            self.stopped = "time limit"

    # --- resuming -------------------------------------------------------------------------------

    def checkpoint(self) -> dict[str, Any]:
        """What the run has measured, as JSON, for :meth:`resume` in another process: the questions every variant
        has answered (a block half done is left out and measured again), each variant's times, CPU times, waits
        and answers on them, and the model time so far."""
        n, done = self.position, {e.id for e in self.done}
        variants = {
            name: {
                "times_ms": t.times_ms[:n], "cpu_ms": t.cpu_ms[:n], "wait_ms": t.wait_ms[:n], "error": t.error,
                "preds": {q: a for q, a in t.preds.items() if q in done},
                "na_probs": {q: m for q, m in t.na_probs.items() if q in done},
            }
            for name, t in self.timings.items()
        }  # fmt: skip
        created = self.created.isoformat()
        ids = [e.id for e in self.examples]
        return {"position": n, "seconds": self.seconds, "created": created, "questions": ids, "variants": variants}

    def resume(self, state: dict[str, Any]) -> bool:
        """Go on from :meth:`checkpoint`'s ``state`` where it is of these questions and these variants (False,
        and nothing changed, otherwise). Each variant's first turn here starts with an untimed warm-up, as a new
        run's does."""
        variants = state.get("variants") or {}
        if state.get("questions") != [e.id for e in self.examples] or set(variants) != set(self.timings):
            return False
        position = int(state.get("position") or 0)
        for name, saved in variants.items():
            if self.timings[name].error:  # failed to load here: it stays out, whatever it did before
                continue
            times = [float(t) for t in saved.get("times_ms") or []]
            self.timings[name] = Timing(
                times_ms=times,
                preds={str(q): str(a) for q, a in (saved.get("preds") or {}).items()},
                na_probs={str(q): float(m) for q, m in (saved.get("na_probs") or {}).items()},
                error=saved.get("error"),
                cpu_ms=[float(t) for t in saved.get("cpu_ms") or []],
                wait_ms=[None if t is None else float(t) for t in saved.get("wait_ms") or []],
            )
        self.position, self.seconds = min(position, self.total), float(state.get("seconds") or 0.0)
        self.created = datetime.fromisoformat(state["created"]) if state.get("created") else self.created
        return True

    # --- results ---------------------------------------------------------------------------------

    @property
    def done(self) -> list[QAExample]:
        return self.examples[: self.position]

    def answers(self) -> dict[str, dict[str, str]]:
        """Each variant's answers so far (question id -> text, "" for no answer), decided at threshold 0."""
        out, done = {}, {e.id for e in self.done}  # a block stopped half-way is left out
        for runner in self.runners:
            timing = self.timings[runner.name]
            preds = {q: text for q, text in timing.preds.items() if q in done}
            if timing.error or not preds:
                continue
            margins = {q: timing.na_probs[q] for q in preds if q in timing.na_probs}
            out[runner.name] = decisions(preds, margins, 0.0) if len(margins) == len(preds) else preds
        return out

    def record(self) -> Record:
        """The run as a benchmark record (kind "quick": a run from the app, which the Benchmark tab can show)."""
        done, labelled = self.done, self.questions.labelled
        for entry in self.entries:
            timing = self.timings[entry.variant]
            entry.error = timing.error
            if timing.error or not timing.times_ms:
                continue
            fill_latency(entry, timing)
            if labelled and not entry.latency_only and (spans := {e.id: timing.preds[e.id] for e in done}):
                fill_accuracy(entry, done, spans, {q: timing.na_probs[q] for q in spans if q in timing.na_probs})
        compare(self.entries, None, self.answers())
        counts = QuestionSet(done, labelled, self.questions.format).counts
        data = {
            "file": self.questions.name or None,
            "format": self.questions.format,
            "sha256": self.sha256,
            "sample": "the visitor's own questions, in their order",
            "labelled": labelled,
            "n_total": self.total,
            "stopped": self.stopped,
            **counts,
        }
        options = Options(
            latency_samples=len(done), warmup=1, latency_round=0, runs=0, seq_lens=(), batch_sizes=(),
            skip_sweeps=True, accuracy_batch=1, profile_questions=0,
        )  # fmt: skip
        record = make_record(self.engine, self.entries, None, data, options, self.created, kind="quick")
        record.method = {**METHOD, "latency_ms": LATENCY_METHOD, "chunk_s": self.chunk_s}
        return record

    def scores(self, record: Record | None = None) -> list[VariantScore]:
        """Per variant: F1 and EM (where the file gives answers), agreement with the baseline, the share
        answered, latency p50 and p90 on these questions. ``record``: :meth:`record` as it stands, where the
        caller has it already (scoring every question again is the costly part)."""
        record, answers = record or self.record(), self.answers()
        base = answers.get("baseline")
        out = []
        for entry in record.variants:
            score = VariantScore(entry.variant, entry.short_label, error=entry.error)
            mine = answers.get(entry.variant)
            if mine:
                score.n = len(mine)
                score.answered = round(100 * sum(bool(a) for a in mine.values()) / len(mine), 2)
            view = entry.view("pipeline") if self.questions.labelled else None
            if view is not None:
                score.f1, score.exact = view.f1, view.exact
            if mine and base:
                same = agreement(mine, base)
                score.agree_exact = None if same is None else round(100 * same, 2)
                common = [q for q in mine if q in base]
                score.agree_f1 = round(100 * sum(compute_f1(base[q], mine[q]) for q in common) / len(common), 2)
            if entry.latency_ms:
                score.p50_ms, score.p90_ms = entry.latency_ms.p50, entry.latency_ms.p90
            stretched = entry.stretch  # the timing rule's busy-machine measure, kept in the record too
            if busy(stretched):
                score.busy = f"machine busy: runs took {stretched:.1f}× their computing time"
                score.stretch = stretched
            out.append(score)
        return out

    def disagreements(self) -> list[dict[str, Any]]:
        """The questions whose (normalized) answers differ between the variants: id, question, gold, answers."""
        answers = self.answers()
        rows = []
        for e in self.done:
            given = {name: a[e.id] for name, a in answers.items() if e.id in a}
            if len({normalize_answer(t) for t in given.values()}) > 1:
                rows.append({"id": e.id, "question": e.question, "gold": list(e.answers), "answers": given})
        return rows

    def write_answers_csv(self, path: str | Path) -> Path:
        """One row per question answered: id, question, the gold answers (where given), then each variant's
        answer (:data:`~variants.core.safe_csv.NO_ANSWER` where it found none, as the page says) and its
        milliseconds; every cell neutralized (:mod:`variants.core.safe_csv`: a visitor's text is never a formula)."""
        answers, labels = self.answers(), {e.variant: e.short_label for e in self.entries}
        times = {name: dict(zip(t.preds, t.times_ms, strict=False)) for name, t in self.timings.items()}
        names = [r.name for r in self.runners if r.name in answers]
        gold = ["gold answers"] if self.questions.labelled else []
        rows = [["id", "question", *gold, *[f"{labels[n]}{suffix}" for n in names for suffix in ("", " ms")]]]
        for e in self.done:
            cells = []
            for n in names:
                ms = times[n].get(e.id)
                cells += [safe_csv.answer_cell(answers[n].get(e.id)), None if ms is None else round(ms, 2)]
            golds = [" | ".join(e.answers) or safe_csv.NO_ANSWER] if self.questions.labelled else []
            rows.append([e.id, e.question, *golds, *cells])
        return safe_csv.write_rows(path, rows)


def evaluate(
    engine: Any,
    questions: QuestionSet,
    names: list[str] | None = None,
    progress: Progress | None = None,
    max_seconds: float | None = None,
    chunk_s: float = CHUNK_S,
) -> Evaluation:
    """The whole run at once (the command line, the API): chunk after chunk until the questions are done."""
    run = Evaluation(engine, questions, names, max_seconds=max_seconds, chunk_s=chunk_s)
    while run.step():
        if progress:
            progress(run.fraction, f"{run.position}/{run.total} questions")
    return run


# --- python -m variants evaluate --------------------------------------------------------------------


def score_table(scores: list[VariantScore], labelled: bool) -> str:
    """The scores as a plain-text table (the command line's summary)."""

    def num(value: float | None, unit: str = "") -> str:
        return "-" if value is None else f"{value:.2f}{unit}"

    head = ["variant", *(["F1", "EM"] if labelled else []), "same as baseline", "F1 vs baseline", "answered"]
    head += ["p50", "p90", "n"]
    rows = [head]
    for s in scores:
        acc = [num(s.f1), num(s.exact)] if labelled else []
        latency = [num(s.p50_ms, " ms"), num(s.p90_ms, " ms") + (f" ({s.busy})" if s.busy else "")]
        row = [s.label, *acc, num(s.agree_exact, "%"), num(s.agree_f1, "%"), num(s.answered, "%"), *latency, str(s.n)]
        rows.append(row if not s.error else [s.label, f"error: {s.error}"])
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip() for r in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m variants evaluate",
        description="Every variant on a file of your own questions: F1 and EM where it gives answers, agreement "
        "with the baseline, the share answered, latency p50 and p90.",
    )
    add_model_arguments(parser)
    parser.add_argument("--data", required=True, help="SQuAD v1.1/v2 JSON, CSV or JSON Lines (context, question, ...)")
    parser.add_argument("--out", default=None, help="folder for the record (JSON, CSV) and the answers CSV")
    parser.add_argument("--max-seconds", type=float, default=None, help="stop after this much model time")
    args = parser.parse_args(argv)
    questions = read_questions(args.data)
    engine = engine_from_args(args)
    started = time.perf_counter()
    run = evaluate(
        engine, questions, None, lambda f, m: print(f"\r[{f:4.0%}] {m}", end="", file=sys.stderr), args.max_seconds
    )
    print(file=sys.stderr)
    what = "with answers: F1 and EM at threshold 0" if questions.labelled else "without answers: agreement only"
    print(f"{run.position} of {run.total} questions ({what}) in {time.perf_counter() - started:.1f} s")
    record = run.record()
    print(score_table(run.scores(record), questions.labelled))
    if args.out:
        json_path, _ = save_record(record, args.out)
        csv_path = run.write_answers_csv(Path(args.out) / f"{json_path.stem}-answers.csv")
        print(f"record: {json_path}\nanswers: {csv_path}")
    return 0
