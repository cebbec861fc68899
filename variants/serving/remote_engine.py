"""The engine's face over variants served elsewhere: each variant answered by its Ray Serve route.

``python app.py --backend http://HOST:8000`` gives the app a :class:`RemoteEngine` instead of loading the
models itself: the same cards, each variant's answer from ``POST {backend}/{variant}/v1/answer``
(:mod:`variants.serving.ray_serve`'s routes, through :class:`~variants.serving.remote.AnswerClient`, which
retries a request whose replica died). A variant the backend does not serve shows why on its card; the
others answer. Nothing here loads a model: the card's device, runtime and precision are what the replica
reports, with a note that says where it ran.

Timings: a card's latency is the replica's own (tokenize, run, decode), the same measure as in-process
cards; the network hop is not in it (``python -m variants ray-bench`` measures the hop).

Not through a backend: the Benchmark tab's quick benchmark and "Try your own model" run models in this
process, so they refuse with a message (the quick benchmark, :meth:`RemoteEngine.answer_pairs`,
``add_variant``; app.py leaves "Try your own model" out with ``--backend``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from variants.answering.qa import NullThreshold
from variants.answering.runtime import QAModel
from variants.building.build import Progress
from variants.core import spec as specs
from variants.serving.engine import Engine, LoadedVariant, VariantResult
from variants.serving.remote import AnswerClient, RemoteError, variant_route

log = logging.getLogger("variants.serving.remote_engine")


class RemoteModel(QAModel):
    """Stands for a model that runs behind ``url``: what its replica reports (device, runtime, precision, size).
    It has no weights here, so :meth:`run` refuses."""

    backend = "remote"

    def __init__(self, url: str, info: dict[str, Any]) -> None:
        self.url = url
        self.device = info.get("device", "")
        self.provider = info.get("provider", "")
        self.dtype = info.get("dtype", "")
        self.size_bytes = int((info.get("size_mb") or 0) * 1e6)
        self.num_parameters = int(info.get("parameters") or 0)
        self.notes = (f"Answered by Ray Serve at {url}; the time shown is the replica's own.",)

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        raise RuntimeError(f"this variant runs at {self.url}, not in this process")

    def warmup(self, width: int = 64, batch: int = 1) -> None:
        """Nothing to warm here: the replica warmed itself when it loaded."""


@dataclass
class RemoteEngine(Engine):
    """An :class:`Engine` whose variants answer over HTTP from ``backend`` (a Ray Serve proxy's address)."""

    backend: str = ""
    clients: dict[str, AnswerClient] = field(default_factory=dict, repr=False)

    def load(self, progress: Progress | None = None) -> RemoteEngine:
        """Ask the backend which variants it serves; a variant it does not serve carries the reason."""
        progress = progress or (lambda _f, _m: None)
        for i, spec in enumerate(self.specs):
            progress(i / max(1, len(self.specs)), f"Asking {self.backend} for {spec.label}")
            url = self.backend.rstrip("/") + variant_route(spec.name)
            client = AnswerClient(url)
            loaded = LoadedVariant(spec)
            started = time.perf_counter()
            try:
                info = client.variants()[0]
                loaded.model = RemoteModel(url, info)
                self.clients[spec.name] = client
            except RemoteError as exc:
                loaded.error = not_served(url, spec.name, exc)
                log.warning("%s", loaded.error)
            loaded.load_seconds = time.perf_counter() - started
            self.variants = {**self.variants, spec.name: loaded}
        progress(1.0, "Ready")
        return self

    def answer_one(
        self,
        name: str,
        question: str,
        context: str,
        *,
        repeats: int = 1,
        null_threshold: NullThreshold | None = None,
    ) -> VariantResult:
        """One variant's answer from its route: ``repeats`` requests (one untimed before them when > 1), the
        replica's own times. The threshold mode travels with the request."""
        if repeats < 1:
            raise ValueError(f"repeats must be at least 1, not {repeats}")
        loaded = self.variants.get(name)
        if loaded is None:
            return VariantResult(name, name, error="This variant is not served.")
        spec = loaded.spec
        result = VariantResult(spec.name, spec.label, latency_only=spec.latency_only)
        result.null_threshold = self.threshold_for(name, null_threshold)
        if not loaded.ok:
            result.error = loaded.error or "not served"
            return result
        client = self.clients[name]
        try:
            reply: dict[str, Any] = {}
            for i in range(repeats + (repeats > 1)):
                reply = client.answer(question, context, null_threshold=null_threshold)
                if repeats == 1 or i > 0:  # the first of several is the untimed warm-up, as in-process
                    result.latency_runs.append(reply["latency_ms"])
        except RemoteError as exc:
            result.error = str(exc)
            return result
        result.answer, result.score, result.start, result.end = (
            reply["answer"],
            reply["score"],
            reply["start"],
            reply["end"],
        )
        result.device, result.provider, result.dtype = reply["device"], reply["provider"], reply["dtype"]
        model = loaded.model
        result.size_mb, result.parameters = round(model.size_bytes / 1e6, 1), model.num_parameters
        runs = sorted(result.latency_runs)
        result.latency_ms = round(float(np.median(runs)), 2)
        result.latency_min_ms, result.latency_max_ms = round(runs[0], 2), round(runs[-1], 2)
        return result

    def answer_pairs(self, name: str, pairs: list[tuple[str, str]]) -> list:
        raise RuntimeError(
            f"the benchmark runs models in this process; {name} is served at {self.backend} "
            "(measure it there: python -m variants ray-bench)"
        )

    def add_variant(self, spec: specs.VariantSpec, source=None, progress: Progress | None = None) -> LoadedVariant:
        raise RuntimeError(f"variants are loaded by the backend at {self.backend}, not by this app")

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def not_served(url: str, name: str, exc: RemoteError) -> str:
    """A card's one line for a variant the backend does not answer for, with how to serve it."""
    if exc.status == 404:
        return f"Not served at {url}: start it with python -m variants serve --ray --variants {name}"
    return f"Not served at {url}: {exc}"


def remote_engine(
    backend: str,
    preset: str = specs.DEFAULT_PRESET,
    device: str = "cpu",
    names: list[str] | None = None,
    overrides: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> RemoteEngine:
    """The variants of ``preset`` (or ``names`` of them) answered by the Ray Serve proxy at ``backend``."""
    chosen = specs.preset(preset, device, overrides)
    if names:
        chosen = [s for s in chosen if s.name in names]
    return RemoteEngine(chosen, device=device, preset=preset, backend=backend).load(progress)
