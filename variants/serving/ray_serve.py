"""The variants as Ray Serve deployments: one application per variant, each with its own HTTP route.

Ray Serve (an optional extra: ``pip install -e '.[serve]'``) replaces, past one machine, what this project
does in one process: it runs each variant as a deployment of N replicas (actors, each with its CPU or GPU
share), batches concurrent requests with its own ``@serve.batch``, replaces a replica that dies, and runs
on a laptop (a local Ray cluster) as on a Kubernetes cluster (KubeRay). Each replica loads the one variant
it serves through the engine (:func:`variants.serving.engine.load_engine`), so answers come from the one
decoding path, as in the app.

Routes (the same JSON as :mod:`variants.serving.http`): the application of variant ``NAME`` is mounted at
``/NAME``, so ``POST /NAME/v1/answer`` takes ``{"question", "context"}`` and returns an
:class:`~variants.serving.http.AnswerResponse`, and ``GET /NAME/v1/variants`` lists that variant.

    python -m variants serve --ray --variants pruned-onnx-opt-int8 --replicas 2   # local cluster
    serve run deploy/serve-config.yaml                                            # the same, from a config

Batching: a request waits up to ``batch_wait_ms`` for others (at most ``max_batch`` together), as
:mod:`variants.serving.batching` does in one process. A model whose answers depend on what shares its batch
(INT8 with dynamic quantization: ``QAModel.batch_invariant`` is False) answers each request of a gathered
batch alone, as the engine's own batcher does, so answers equal the in-process engine's.

Limits as ``/v1`` has them in the app: every route behind the app's edge (:mod:`variants.serving.edge`: a body over
1 MB refused with 413 before it is read, a stalled one with 408, refusals quoting an excerpt), and a bounded line:
each replica takes ``max_ongoing_requests`` at once (its batches gather from them), and the requests past those
wait in Serve's own line at the proxy, at most :data:`~variants.serving.guard.MAX_WAITING`
(``max_queued_requests``); one more is refused at once by Serve (503), not left to wait without end.

A replica that cannot load its variant raises :class:`VariantLoadError` from its constructor with the
engine's one-line reason; Serve then marks the deployment ``DEPLOY_FAILED`` with that message (and
``serve.run`` raises it).
"""

# No `from __future__ import annotations` here: Serve's FastAPI ingress reads the route methods' annotations
# (the request body's model) as objects.
import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException

from variants.answering.qa import InputError, NullThreshold, with_null_decision
from variants.answering.timing import SERVED, TimingRule
from variants.core import config
from variants.core import spec as specs
from variants.serving.edge import app_kwargs
from variants.serving.engine import Engine, load_engine
from variants.serving.guard import MAX_WAITING, request_rule
from variants.serving.http import PREFIX, AnswerRequest, AnswerResponse, answer_response, request_threshold
from variants.serving.remote import variant_route as route

try:  # the whole module is Ray's; nothing else in variants imports it, so Ray stays optional
    import ray
    from ray import serve
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("Ray Serve is an optional extra: pip install -e '.[serve]' (ray[serve])") from exc

DEPLOYMENT = "VariantDeployment"
Item = tuple[str, str, NullThreshold | None]  # (question, context, the request's null threshold mode)


class VariantLoadError(RuntimeError):
    """A replica could not load its variant; the message says why (Serve shows it as the deployment's status)."""


@dataclass(frozen=True)
class VariantOptions:
    """What one variant's replicas load and how they serve: everything is plain data (a Serve config's ``args``)."""

    variant: str
    preset: str = specs.FALLBACK_PRESET
    baseline: str | None = None
    pruned: str | None = None
    device: str = "cpu"
    cache_dir: str | None = None
    null_threshold: float | str = 0.0
    max_context_chars: int | None = None
    max_batch: int = 16
    batch_wait_ms: float = 5.0

    def spec(self) -> specs.VariantSpec:
        overrides = {k: v for k in ("baseline", "pruned") if (v := getattr(self, k))}
        chain = specs.preset(self.preset, self.device, overrides)
        found = [s for s in chain if s.name == self.variant]
        if not found:
            raise VariantLoadError(
                f"no variant {self.variant!r} in preset {self.preset!r} on {self.device}; "
                f"known: {[s.name for s in chain]}"
            )
        return found[0]


def replica_threads(num_cpus: float) -> int:
    """ONNX Runtime threads for a replica with ``num_cpus`` CPUs: its whole share, at least one."""
    return max(1, int(num_cpus))


# Serve pickles the deployment class when it is decorated: what its methods use must be defined above it.
api = FastAPI(title="QA variant (Ray Serve)", docs_url=None, redoc_url=None, **app_kwargs())
ONGOING = 32  # requests one replica takes at once (what its batches gather from)


@serve.deployment(
    name=DEPLOYMENT,
    max_ongoing_requests=ONGOING,
    max_queued_requests=MAX_WAITING,  # the line at the proxy past those, bounded as /v1's is
    health_check_period_s=2,
    graceful_shutdown_timeout_s=5,
)
@serve.ingress(api)
class VariantDeployment:
    """One replica: the engine with one variant loaded, behind the ``/v1`` routes of :mod:`variants.serving.http`."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = VariantOptions(**options)
        # Inference threads: this replica's CPU share, wherever it was set (code or a Serve config); Ray already
        # sets OMP_NUM_THREADS (torch) to it. An explicit VARIANTS_THREADS in the runtime env wins.
        cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 0)
        os.environ.setdefault(config.THREADS_ENV, str(replica_threads(cpus)))
        spec = self.options.spec()
        self.engine: Engine = load_engine(
            variant_specs=[spec],
            device=self.options.device,
            fallback=False,
            cache_dir=Path(self.options.cache_dir) if self.options.cache_dir else None,
            max_context_chars=self.options.max_context_chars,
            null_threshold=self.options.null_threshold,
        )
        self.name = spec.name
        loaded = self.engine.variants[self.name]
        if not loaded.ok:
            raise VariantLoadError(f"{self.name} failed to load: {loaded.error}")
        self.model = loaded.model
        self.answer_batch.set_max_batch_size(self.options.max_batch)
        self.answer_batch.set_batch_wait_timeout_s(self.options.batch_wait_ms / 1000)

    @api.get("/v1/variants")
    def variants(self) -> list[dict]:
        """The same shape as the in-process ``GET /v1/variants``: this replica's one variant."""
        loaded, info = self.engine.variants[self.name], self.model.describe()
        runtime = {k: info[k] for k in ("device", "provider", "dtype", "size_mb", "parameters")}
        return [
            {"name": loaded.spec.name, "label": loaded.spec.label, "ok": True, "error": None, **runtime}
            | {"calibrated_threshold": loaded.calibrated_threshold, "replica": self.whoami()}
        ]

    @api.post("/v1/answer", response_model=AnswerResponse)
    async def answer(self, request: AnswerRequest) -> AnswerResponse:
        if request.variant and request.variant != self.name:
            raise HTTPException(404, f"this route serves {self.name!r}, not {request.variant!r}")
        try:
            self.engine.check_input(request.question, request.context)
            threshold = request_threshold(request)
            rule = request_rule(request.runs, request.budget_s, request.warmup)
        except (InputError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None
        if rule == replace(SERVED, cap_s=rule.cap_s):  # one run as served: it may share a batch with other requests
            result = await self.answer_batch((request.question, request.context, threshold))
        else:  # timed runs asked for: timed alone, by the engine's rule, as the in-process route does
            result = await asyncio.to_thread(self._one, request.question, request.context, threshold, rule)
        if isinstance(result, InputError):  # found while tokenizing, e.g. a question too long for the window
            raise HTTPException(422, str(result))
        if isinstance(result, str):
            raise HTTPException(500, result)
        return result

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.005)  # set from the options in __init__
    async def answer_batch(self, items: list[Item]) -> list[AnswerResponse | InputError | str]:
        """The requests Serve gathered, answered off the event loop (so the next batch gathers meanwhile)."""
        return await asyncio.to_thread(self._answer_all, items)

    def _answer_all(self, items: list[Item]) -> list[AnswerResponse | InputError | str]:
        if not self.model.batch_invariant or len(items) == 1:  # alone, as the engine's batcher runs such models
            return [self._one(*item) for item in items]
        started = time.perf_counter()
        try:
            answers = self.engine.answer_pairs(self.name, [(q, c) for q, c, _ in items])
        except Exception:  # one bad batch: each request again alone, so only a bad one fails
            return [self._one(*item) for item in items]
        ms = round((time.perf_counter() - started) * 1000, 3)
        return [
            self._response(with_null_decision(a, self.engine.threshold_for(self.name, t)), ms, len(items))
            for a, (_, _, t) in zip(answers, items, strict=True)
        ]

    def _one(
        self, question: str, context: str, threshold: NullThreshold | None = None, rule: TimingRule = SERVED
    ) -> AnswerResponse | InputError | str:
        """One request alone, timed by ``rule``: its response, its bad input (returned, not raised: the others
        in its batch go on), or its variant's error."""
        try:
            result = self.engine.answer_one(self.name, question, context, null_threshold=threshold, rule=rule)
        except InputError as exc:
            return exc
        if result.skipped:  # past the request's cap: the passage is too long for this variant
            return InputError(result.error or "")
        return result.error or answer_response(result)

    def _response(self, ans: Any, latency_ms: float, batch: int) -> AnswerResponse:
        """A request answered in a batch of ``batch``: its latency is the batch's, which it waited for."""
        model, spec = self.model, self.engine.variants[self.name].spec
        return AnswerResponse(
            variant=self.name,
            answer=ans.text,
            score=round(ans.score, 4),
            start=ans.start,
            end=ans.end,
            latency_ms=latency_ms,
            timed_runs=1,
            timing=f"1 timed run, in a batch of {batch} request{'s' if batch != 1 else ''}",
            device=model.device,
            provider=model.provider,
            dtype=model.dtype,
            latency_only=spec.latency_only,
        )

    def whoami(self) -> dict:
        """This replica's actor name (Serve's replicas live in the "serve" namespace: ``ray.get_actor(name,
        namespace="serve")``) and process id."""
        return {"actor": ray.get_runtime_context().get_actor_name(), "pid": os.getpid()}


def variant_app(
    options: VariantOptions,
    replicas: int = 1,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    constructor_retries: int | None = None,
) -> serve.Application:
    """One variant's application: ``replicas`` replicas, each reserving ``num_cpus`` CPUs and ``num_gpus`` of a GPU
    (a fraction lets several replicas share one), its inference threads its CPU share. A replica whose
    constructor fails is started again up to ``constructor_retries`` times (None: Serve's default) before the
    deployment is marked failed."""
    actor = {"num_cpus": num_cpus, "num_gpus": num_gpus}
    retries = {} if constructor_retries is None else {"max_constructor_retry_count": constructor_retries}
    deployment = VariantDeployment.options(num_replicas=replicas, ray_actor_options=actor, **retries)
    return deployment.bind(options.__dict__)


def build_app(args: dict[str, Any]) -> serve.Application:
    """The application builder a Serve config names (``import_path: variants.serving.ray_serve:build_app``).

    ``args``: the :class:`VariantOptions` fields (``variant`` required), plus ``replicas``, ``num_cpus`` and
    ``num_gpus``; a config's ``deployments`` section can still override the replicas and actor options.
    """
    args = dict(args)
    shape = {k: args.pop(k) for k in ("replicas", "num_cpus", "num_gpus") if k in args}
    unknown = set(args) - set(VariantOptions.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown args {sorted(unknown)}; known: {sorted(VariantOptions.__dataclass_fields__)}")
    return variant_app(VariantOptions(**args), **shape)


def deploy(
    options: list[VariantOptions],
    replicas: int = 1,
    num_cpus: float = 1.0,
    num_gpus: float = 0.0,
    constructor_retries: int | None = None,
) -> dict[str, str]:
    """Run one application per variant on the connected Ray cluster; {variant: its route}.

    Raises :class:`VariantLoadError` with the replica's own reason (e.g. the model folder that is missing)
    when a variant's replicas fail to start; the variants deployed before it keep running.
    """
    routes = {}
    for option in options:
        app = variant_app(option, replicas, num_cpus, num_gpus, constructor_retries)
        try:
            serve.run(app, name=option.variant, route_prefix=route(option.variant))
        except RuntimeError as exc:
            raise VariantLoadError(failure_reason(option.variant) or f"{option.variant} did not start: {exc}") from exc
        routes[option.variant] = route(option.variant)
    return routes


def failure_reason(app_name: str) -> str | None:
    """Why application ``app_name``'s deployment failed, in one line: the replica's :class:`VariantLoadError`
    message, else the last line of Serve's status message (which holds the whole traceback), else None."""
    status = serve.status().applications.get(app_name)
    deployment = status.deployments.get(DEPLOYMENT) if status else None
    if deployment is None or not deployment.message:
        return None
    lines = [ln.strip() for ln in deployment.message.splitlines() if ln.strip()]
    mark = f"{VariantLoadError.__name__}: "
    ours = [ln[ln.index(mark) + len(mark) :] for ln in lines if mark in ln]
    return (ours or lines)[-1]


def answer_path(name: str) -> str:
    return route(name) + PREFIX + "/answer"


def start(
    address: str | None = None,
    num_cpus: int | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    object_store_mb: int = 100,
) -> None:
    """Connect to the Ray cluster at ``address`` ("auto": the one running here), or start a local one with
    ``num_cpus`` CPUs and a small object store (answers are small; Ray's default takes 30% of memory), then
    start Serve's HTTP proxy on ``host:port``."""
    if address:
        ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
    else:
        ray.init(
            num_cpus=num_cpus,
            object_store_memory=object_store_mb * 2**20,
            include_dashboard=False,
            log_to_driver=False,
        )
    serve.start(http_options={"host": host, "port": port})


def stop() -> None:
    """Shut Serve's applications down and disconnect (a local cluster started here stops with it)."""
    try:
        serve.shutdown()
    finally:
        ray.shutdown()


DEMO_ROUTE = "/demo"


def deploy_demo(builder: Callable[[], Any], replicas: int = 1, num_cpus: float = 0.5) -> str:
    """The Gradio page as a Serve deployment of ``replicas`` replicas at :data:`DEMO_ROUTE`; its route.

    ``builder()`` returns the ASGI app (the page mounted on FastAPI); Serve calls it in each replica
    (``serve.ingress`` with a builder). Ray's own ``gradio_integrations.GradioServer`` is not used: it mounts
    the page without Gradio 6's launch-time theme, and the page's index fails to render."""

    def build_asgi_app() -> Any:  # a plain function: Serve takes any other callable for the ASGI app itself
        return builder()

    deployment = serve.deployment(
        serve.ingress(build_asgi_app)(),
        name="GradioDemo",
        num_replicas=replicas,
        ray_actor_options={"num_cpus": num_cpus},
    )
    serve.run(deployment.bind(), name="demo", route_prefix=DEMO_ROUTE)
    return DEMO_ROUTE
