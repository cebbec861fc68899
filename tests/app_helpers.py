"""Shared by the app, browser and custom-model tests: a tiny engine, a running app, a fake benchmark
record, and a stand-in for the Hugging Face Hub.

Not a conftest: the fixtures stay in the test modules; this module only holds plain helpers (the
engine is cached per process so both modules share one build of the tiny ONNX variants).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest

from variants.answering.qa import DecodeSettings
from variants.building import custom
from variants.core.hardware import current_hardware
from variants.serving.engine import Engine, load_engine

# The tiny fixture models have 128 position embeddings: windows must fit in them.
TINY_SETTINGS = DecodeSettings(max_length=128, stride=32)
CONTEXT = "paris is the capital of france and its largest city, with a population of two million people."
QUESTION = "what is the capital of france?"
MODEL_ID = "someone/tiny-qa"  # a user's "Hub model", stood in for by the tiny QA model
MB = 1_000_000
VIEW_SHIFTS = (("pipeline", 0.0, 0.0), ("best", 2.0, -1.5), ("calibrated", 1.0, -3.0))  # fake F1 offset, threshold
SMALL = {"config.json": 600, "model.safetensors": 20 * MB, "vocab.txt": 200_000, "tokenizer.json": 700_000}


@functools.cache
def tiny_engine(baseline: str, pruned: str, cache_dir: str) -> Engine:
    """Every variant of the embedded chain, built from the tiny fixture models (cached per process)."""
    return load_engine(
        "embedded",
        "cpu",
        {"baseline": baseline, "pruned": pruned},
        fallback=False,
        cache_dir=Path(cache_dir),
        settings=TINY_SETTINGS,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running(demo, trusted_proxies: str = "", routes: list | None = None) -> Iterator[str]:
    """Serve ``demo`` on a free localhost port in background threads as app.py does (every route behind the edge,
    ``routes`` beside the page, the forwarded address read from ``trusted_proxies`` only); yields its URL."""
    from ui.styles import launch_style  # noqa: PLC0415
    from variants.serving import edge  # noqa: PLC0415

    before = os.environ.get("FORWARDED_ALLOW_IPS")
    edge.trust_proxies(trusted_proxies)  # read by uvicorn as the server starts
    try:
        _, url, _ = demo.launch(
            server_name="127.0.0.1",
            server_port=free_port(),
            prevent_thread_lock=True,
            quiet=True,
            app_kwargs=edge.app_kwargs(demo, routes),
            **launch_style(),
        )
    finally:
        if before is None:
            os.environ.pop("FORWARDED_ALLOW_IPS", None)
        else:
            os.environ["FORWARDED_ALLOW_IPS"] = before
    try:
        yield url
    finally:
        demo.close()


def write_fake_record(folder: Path, engine: Engine) -> Path:
    """A small schema-valid benchmark record for ``engine``'s variants, measured "here" (a test fixture)."""
    variants = []
    for i, loaded in enumerate(engine.loaded):
        info = loaded.model.describe() if loaded.ok else {}
        p50 = 40.0 / (1 + i)
        variants.append(
            {
                "variant": loaded.spec.name,
                "label": loaded.spec.label,
                "headline": loaded.spec.headline,
                "backend": loaded.spec.backend,
                "device": info.get("device", "cpu"),
                "provider": info.get("provider"),
                "dtype": info.get("dtype"),
                "size_mb": info.get("size_mb"),
                "parameters": info.get("parameters"),
                "accuracy": {  # the three views of schema 2: at threshold 0, the best threshold, the calibrated one
                    view: {
                        "f1": 74.0 - i + shift,
                        "exact": 70.0 - i + shift,
                        "threshold": threshold,
                        "n": 20,
                        "has_ans_f1": 72.0 - i + shift,
                        "no_ans_f1": 76.0 - i + shift,
                        "has_ans_n": 10,
                        "no_ans_n": 10,
                    }
                    for view, shift, threshold in (
                        ("pipeline", 0.0, 0.0),
                        ("best", 2.0, -1.5),
                        ("calibrated", 1.0, -3.0),
                    )
                },
                "latency_ms": {"p50": p50, "p90": p50 * 1.2, "p99": p50 * 1.5, "mean": p50, "std": 1.0, "n": 30},
                "throughput_qps": 1000 / p50,
                "speedup_vs_baseline": 1.0 + i,
                "latency_pass_p50_ms": [p50 * 0.95, p50, p50 * 1.1],  # three passes
                "speedup_vs_baseline_range": [0.9 + i, 1.1 + i],
                "seq_len_sweep": [{"seq_len": n, "p50_ms": p50 * n / 128, "n": 5} for n in (32, 64, 128)],
                "batch_sweep": [],
                "profile": {
                    "tokenize_ms": 0.5,
                    "forward_ms": p50 - 1,
                    "decode_ms": 0.5,
                    "tokens": 150,
                    "gflop": 3.0,
                    "gflops_achieved": 3000 / (p50 - 1),
                    "n": 20,
                },
                "error": None,
            }
        )
    record = {
        "schema_version": 2,
        "kind": "full",
        "preset": engine.preset,
        "created": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "device": engine.device,
        "hardware": {**current_hardware(), "measured_peak": {"threads": 2, "fp32_gflops": 200.0, "int8_gops": 800.0}},
        "versions": {},
        "data": {"file": "assets/data/squad_v2_dev_sample.json", "n_questions": 20, "has_answer": 10, "no_answer": 10},
        "variants": variants,
        "peer": None,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fake-record.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


class FakeHub:
    """model_info with a file listing, and hf_hub_download serving a local config.json; records calls."""

    def __init__(self, config: dict | Path, files: dict[str, int], sha: str = "0123456789abcdef") -> None:
        self.config, self.files, self.sha = config, files, sha
        self.info_calls: list[str] = []
        self.downloads: list[str] = []

    def install(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeHub:
        hub = self

        def model_info(_api, repo_id: str, files_metadata: bool = False, **_kw):
            assert files_metadata, "sizes are needed"
            hub.info_calls.append(repo_id)
            siblings = [SimpleNamespace(rfilename=n, size=s) for n, s in hub.files.items()]
            return SimpleNamespace(sha=hub.sha, siblings=siblings)

        def hf_hub_download(repo_id: str, filename: str, revision: str | None = None, **_kw) -> str:
            hub.downloads.append(filename)
            assert revision == hub.sha, "the config of the checked commit"
            if isinstance(hub.config, Path):
                return str(hub.config)
            path = tmp_path / "config.json"
            path.write_text(json.dumps(hub.config), encoding="utf-8")
            return str(path)

        def no_snapshot(*_a, **_kw):
            raise AssertionError("nothing but config.json may be downloaded during the checks")

        monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", no_snapshot)
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv(custom.MAX_MB_ENV, raising=False)
        return self


class SlowRun:
    """An evaluation that takes many chunks (the tiny models finish a real one in one): only what /evaluate and
    the tab read."""

    def __init__(self, engine, questions, names, *, max_seconds=None, data_bytes=None, total: int = 6) -> None:
        self.questions, self.total, self.position, self.seconds, self.stopped = questions, total, 0, 0.0, None

    @property
    def finished(self) -> bool:
        return self.position >= self.total or self.stopped is not None

    def step(self) -> bool:
        self.position, self.seconds = self.position + 1, self.seconds + 0.5
        return not self.finished

    def record(self) -> SimpleNamespace:
        return SimpleNamespace(to_dict=lambda: {"answered": self.position})

    def scores(self, record) -> list:
        return []

    def answers(self) -> dict:
        return {"baseline": {"row-2": "Paris"}}

    def stop(self, why: str = "stopped") -> None:
        self.stopped = why
