"""Dynamic batching: the Batcher on its own (a stub run function), then the engine with it on the tiny
models, whose answers must not change."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from app_helpers import TINY_SETTINGS, tiny_engine

from variants.answering.qa import InputError
from variants.answering.timing import TimingRule
from variants.core.squad import load_squad_json
from variants.serving.batching import Batcher, BatchingConfig
from variants.serving.engine import load_engine

SAMPLE = Path(__file__).resolve().parent.parent / "assets" / "data" / "squad_v2_dev_sample.json"


class Recorder:
    """A run function that answers each pair with its question upper-cased and records every batch."""

    def __init__(self, fail_on: str | None = None, delay: float = 0.0) -> None:
        self.batches: list[list[tuple[str, str]]] = []
        self.fail_on, self.delay = fail_on, delay
        self.lock = threading.Lock()

    def __call__(self, pairs: list[tuple[str, str]]) -> list[str]:
        with self.lock:
            self.batches.append(list(pairs))
        time.sleep(self.delay)
        if self.fail_on and any(q == self.fail_on for q, _ in pairs):
            raise RuntimeError(f"cannot answer {self.fail_on}")
        return [q.upper() for q, _ in pairs]


def batcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("batcher-")]


def ask_together(batcher: Batcher, pairs: list[tuple[str, str]]) -> list:
    """Every pair submitted from its own thread at the same moment; answers or exceptions, in order."""
    start = threading.Barrier(len(pairs))

    def one(pair: tuple[str, str]):
        start.wait()
        try:
            return batcher.answer(*pair)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(pairs)) as pool:
        return list(pool.map(one, pairs))


def test_concurrent_requests_meet_in_one_batch() -> None:
    run = Recorder()
    batcher = Batcher(run, BatchingConfig(max_wait_ms=200, max_batch_size=8), name="t1")
    try:
        pairs = [(f"q{i}", "c" * (10 - i)) for i in range(8)]
        assert ask_together(batcher, pairs) == [q.upper() for q, _ in pairs]  # each caller gets its own answer
        assert len(run.batches) == 1 and len(run.batches[0]) == 8  # full: no need to wait the 200 ms
        lengths = [len(c) for _, c in run.batches[0]]
        assert lengths == sorted(lengths)  # grouped by length
        assert batcher.stats.requests == 8 and batcher.stats.batches == 1 and batcher.stats.mean_batch == 8
    finally:
        batcher.close()


def test_batches_are_capped_and_a_lone_request_waits_only_max_wait() -> None:
    run = Recorder(delay=0.05)
    batcher = Batcher(run, BatchingConfig(max_wait_ms=20, max_batch_size=3), name="t2")
    try:
        started = time.perf_counter()
        assert batcher.answer("alone", "c") == "ALONE"
        assert time.perf_counter() - started < 1.0
        run.batches.clear()
        answers = ask_together(batcher, [(f"q{i}", "c") for i in range(7)])
        assert answers == [f"Q{i}" for i in range(7)]
        assert max(len(b) for b in run.batches) <= 3 and sum(len(b) for b in run.batches) == 7
    finally:
        batcher.close()


def test_groups_and_failures_stay_with_their_requests() -> None:
    run = Recorder(fail_on="bad")

    def key(pair: tuple[str, str]) -> int:
        if pair[0] == "too long":
            raise InputError("The question is too long.", "question")
        return len(pair[0]) % 2  # two groups

    batcher = Batcher(run, BatchingConfig(max_wait_ms=200, max_batch_size=6), key, name="t3")
    try:
        answers = ask_together(batcher, [("ab", "c"), ("abc", "c"), ("too long", "c"), ("bad", "c"), ("de", "c")])
        assert answers[0] == "AB" and answers[1] == "ABC" and answers[4] == "DE"
        assert isinstance(answers[2], InputError)  # its key failed: it alone
        assert isinstance(answers[3], RuntimeError) and "bad" in str(answers[3])  # its batch failed: re-run one by one
        assert all(len({len(q) % 2 for q, _ in b}) == 1 for b in run.batches)  # never mixed across groups
    finally:
        batcher.close()


def test_close_answers_what_is_queued_and_ends_the_thread() -> None:
    run = Recorder(delay=0.05)
    batcher = Batcher(run, BatchingConfig(max_wait_ms=1000, max_batch_size=100), name="t4")
    futures = [batcher.submit(f"q{i}", "c") for i in range(5)]
    batcher.close()
    assert [f.result(timeout=5) for f in futures] == [f"Q{i}" for i in range(5)]
    assert not batcher.alive
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit("late", "c")
    assert "batcher-t4" not in [t.name for t in batcher_threads()]


def test_the_idle_hook_runs_once_the_queue_is_empty() -> None:
    idle = threading.Event()
    run = Recorder(delay=0.05)
    batcher = Batcher(run, BatchingConfig(max_wait_ms=50, max_batch_size=2), name="t5", on_idle=idle.set)
    try:
        futures = [batcher.submit(f"q{i}", "c") for i in range(4)]  # two batches of two
        assert [f.result(timeout=5) for f in futures] == [f"Q{i}" for i in range(4)]
        assert idle.wait(5) and len(run.batches) == 2
    finally:
        batcher.close()


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="max_wait_ms"):
        BatchingConfig(max_wait_ms=-1)
    with pytest.raises(ValueError, match="max_batch_size"):
        BatchingConfig(max_batch_size=0)


# --- the engine -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    """Real questions and contexts of mixed lengths (several windows, several strides with the tiny vocabulary)."""
    examples = load_squad_json(SAMPLE)
    return list(dict.fromkeys((e.question, e.context) for e in examples[::7]))[:24]


@pytest.fixture(scope="module")
def plain(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


def test_batched_engine_gives_the_same_answers(plain, pairs, tiny_qa_dir, tiny_pruned_dir, artifacts_dir) -> None:
    batched = load_engine(
        "embedded",
        "cpu",
        {"baseline": str(tiny_qa_dir), "pruned": str(tiny_pruned_dir)},
        fallback=False,
        cache_dir=artifacts_dir,
        settings=TINY_SETTINGS,
        batching=BatchingConfig(max_wait_ms=30, max_batch_size=8),
    )
    with batched:
        assert all(v.ok for v in batched.loaded) and all(v.batcher is not None for v in batched.loaded)
        expected = [plain.ask(q, c) for q, c in pairs]
        with ThreadPoolExecutor(12) as pool:
            got = list(pool.map(lambda p: batched.ask(*p), pairs))
        for want, have in zip(expected, got, strict=True):
            for a, b in zip(want, have, strict=True):
                assert (b.variant, b.error, b.answer, b.start, b.end) == (a.variant, None, a.answer, a.start, a.end)
                assert b.score == pytest.approx(a.score, abs=1e-3)
                assert b.latency_ms > 0
        stats = batched.batch_stats()
        assert max(s["largest"] for s in stats.values()) > 1, stats  # requests really met
        assert stats["pruned-onnx-opt-int8"]["largest"] == 1  # dynamic INT8 never mixes requests
        assert all(s["requests"] == len(pairs) for s in stats.values())
    assert not [t for t in batcher_threads() if t.is_alive() and t.name.startswith("batcher-")]


def batched_baseline(tiny_qa_dir: Path, artifacts_dir: Path):
    """The tiny baseline alone, with batching on (a context manager: its batcher stops at the end)."""
    return load_engine(
        "embedded",
        "cpu",
        {"baseline": str(tiny_qa_dir)},
        fallback=False,
        cache_dir=artifacts_dir,
        settings=TINY_SETTINGS,
        names=["baseline"],
        batching=BatchingConfig(max_wait_ms=1),
    )


def test_input_errors_still_reach_the_caller_with_batching(tiny_qa_dir, artifacts_dir) -> None:
    with batched_baseline(tiny_qa_dir, artifacts_dir) as engine:
        with pytest.raises(InputError, match="too long"):
            engine.ask("why " * 200, "paris is the capital of france.")  # too many tokens for a 128-token window
        assert engine.ask("what is the capital?", "paris is the capital of france.")[0].error is None


def test_a_request_running_on_a_variant_that_is_removed_finishes(tiny_qa_dir, artifacts_dir) -> None:
    """Replacing or removing a variant closes its batcher; a request already timing on it goes on alone."""
    with batched_baseline(tiny_qa_dir, artifacts_dir) as engine:
        stream = engine.ask_stream("what is the capital?", "paris is the capital of france.", rule=TimingRule(runs=3))
        assert next(stream).phase == "answering"  # answered once, its timed runs still to come
        engine.remove_variant("baseline")
        *_, last = stream
        result = last.results["baseline"]
        assert result.error is None and result.timed_runs == 3 and result.answer
