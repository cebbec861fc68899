"""The engine's face over variants served elsewhere: each variant answered by its Ray Serve route.

``python app.py --backend http://HOST:8000`` gives the app a :class:`RemoteEngine` instead of loading the
models itself: the same cards, each variant's answer from ``POST {backend}/{variant}/v1/answer``
(:mod:`variants.serving.ray_serve`'s routes, through :class:`~variants.serving.remote.AnswerClient`, which
retries a request whose replica died). A variant the backend does not serve shows why on its card; the
others answer. Nothing here loads a model: the card's device, runtime and precision are what the replica
reports, with a note that says where it ran.

Timings: a card's latency follows the engine's one timing rule, measured here around each request, so it
includes the network hop (``python -m variants ray-bench`` measures the hop alone).

Not through a backend: the Benchmark tab's quick benchmark and "Try your own model" run models in this
process, so they refuse with a message (the quick benchmark, :meth:`RemoteEngine.answer_pairs`,
``add_variant``; app.py leaves "Try your own model" out with ``--backend``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from variants.answering.qa import Answer, NullThreshold
from variants.answering.runtime import QAModel
from variants.building.build import Progress
from variants.core import spec as specs
from variants.serving.engine import Engine, LoadedVariant
from variants.serving.outcome import VariantResult
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
        self.notes = (f"Answered by Ray Serve at {url}; the time shown includes the network hop.",)

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        raise RuntimeError(f"this variant runs at {self.url}, not in this process")

    def warmup(self, width: int = 64, batch: int = 1) -> None:
        """Nothing to warm here: the replica warmed itself when it loaded."""


@dataclass
class RemoteEngine(Engine):
    """An :class:`Engine` whose variants answer over HTTP from ``backend`` (a Ray Serve proxy's address)."""

    backend: str = ""
    clients: dict[str, AnswerClient] = field(default_factory=dict, repr=False)
    # the variants run elsewhere: this process's CPU time says nothing about theirs (no busy flag from here)
    measures_cpu: ClassVar[bool] = False

    def load(self, progress: Progress | None = None) -> RemoteEngine:
        """Ask the backend which variants it serves; a variant it does not serve carries the reason."""
        progress = progress or (lambda _f, _m: None)
        self.status.begin()
        for i, spec in enumerate(self.specs):
            progress(i / max(1, len(self.specs)), f"Asking {self.backend} for {spec.label}")
            url = self.backend.rstrip("/") + variant_route(spec.name)
            client = AnswerClient(url)
            loaded = LoadedVariant(spec)
            started = time.perf_counter()
            try:
                info = client.variants()[0]
                loaded.model = RemoteModel(url, info)
                # the replica's own, so that a card under "calibrated" shows the threshold it decided with
                loaded.calibrated_threshold = info.get("calibrated_threshold")
                self.clients[spec.name] = client
            except RemoteError as exc:
                loaded.error = not_served(url, spec.name, exc)
                log.warning("%s", loaded.error)
            loaded.load_seconds = time.perf_counter() - started
            self.variants = {**self.variants, spec.name: loaded}
            if loaded.error:
                self.status.failed(spec.name, loaded.error)
            else:
                self.status.ready(spec.name)
        progress(1.0, "Ready")
        return self

    def _prepare(self, name: str, null_threshold: NullThreshold | None) -> tuple[VariantResult, Callable | None]:
        """As in-process, with the call that answers being a request to the variant's route: the engine's one
        timing rule (:meth:`Engine.ask_stream`) times it here, so a card's latency includes the hop."""
        result, _ = super()._prepare(name, null_threshold)
        client = self.clients.get(name)
        if result.error or client is None:
            return result, None

        def run(question: str, context: str) -> Answer:
            try:
                reply = client.answer(question, context, null_threshold=null_threshold)
            except RemoteError as exc:
                raise RuntimeError(str(exc)) from None
            result.device, result.provider, result.dtype = reply["device"], reply["provider"], reply["dtype"]
            result.execution = reply.get("execution", "")
            text, score = reply["answer"], reply["score"]
            # decided by the replica: an answer keeps its text (no null beats it), a refusal stays one
            return Answer(text, reply["start"], reply["end"], score, score, 0.0 if text else score)

        return result, run

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
        chosen = specs.named(chosen, names)
    return RemoteEngine(chosen, device=device, preset=preset, backend=backend).load(progress)
