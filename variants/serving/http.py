"""A lean HTTP route for one variant's answer, beside the Gradio app and without its queue.

Gradio serves its API through an event queue (server-sent events, a worker per event), which is
right for the UI but adds milliseconds to every call. Serving latency as the published chain
measured it (FastAPI straight to the model) needs a plain route: ``POST /v1/answer`` answers with
one variant through the engine (the one decoding path) and returns its answer and where it ran.
It times by the engine's one rule (:class:`~variants.answering.timing.TimingRule`) with one run and no
warm-up by default (:data:`~variants.answering.timing.SERVED`: each request as it is served, which is what
served-latency and load measurements time from the client); ``runs``, ``budget_s`` and ``warmup`` ask
for the Ask tab's timing instead, within the caps every caller has (:func:`variants.serving.guard.request_rule`).
One request at a time runs on the models, as the Gradio app's default
concurrency does (parallel runs on a few cores would distort each other's latency); the others wait in a
bounded line of their own (:class:`~variants.serving.guard.ModelLine`), not in the server's shared thread pool,
and one more than it holds is refused at once with 429 and ``Retry-After``, so that the page's own routes stay
fast under any load. A body over :data:`~variants.serving.guard.MAX_BODY_BYTES` is refused with 413 before it
is read whole, and no refusal quotes more than a short excerpt of the input (:class:`GuardedRoute`).

    app = create_app(engine)                                   # standalone (uvicorn variants.serving.http:...)
    demo.launch(..., app_kwargs={"routes": router(engine).routes})  # beside the Gradio app
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field, create_model

from variants.answering.qa import InputError, NullThreshold, parse_null_threshold
from variants.answering.timing import SERVED, TimingRule
from variants.core import config
from variants.records.own import OFF, OwnStatus
from variants.serving.edge import app_kwargs, log_refused, validation_detail
from variants.serving.engine import MAX_QUESTION_CHARS
from variants.serving.guard import (
    MAX_BODY_BYTES,
    MAX_BUDGET_S,
    MAX_RUNS,
    MAX_WAITING,
    ModelLine,
    Refused,
    excerpt,
    request_rule,
    visitor,
)

if TYPE_CHECKING:
    from variants.serving.engine import Engine
    from variants.serving.outcome import VariantResult

PREFIX = "/v1"


class AnswerRequest(BaseModel):
    # the limits are stated here and refused by the engine's one input check (Engine.check_input), whose sentences
    # also name what pydantic's string check would not (a lone surrogate, a blank question)
    question: str = Field(
        json_schema_extra={"maxLength": MAX_QUESTION_CHARS}, description=f"at most {MAX_QUESTION_CHARS:,} characters"
    )
    context: str = Field(
        json_schema_extra={"maxLength": config.MAX_CONTEXT_CHARS},
        description=f"the passage, at most {config.MAX_CONTEXT_CHARS:,} characters (the server's setting)",
    )
    variant: str = Field("", description="a loaded variant's name; empty: the preset's last headline variant")
    runs: int = Field(
        SERVED.runs, ge=1, description=f"timed runs at most (default 1: the request as served; capped at {MAX_RUNS})"
    )
    budget_s: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description=f"seconds of timed runs; more only if they fit (0 or none: the {MAX_BUDGET_S:g} s cap)",
    )
    warmup: bool = Field(SERVED.warmup, description="one untimed run first (default off: the request as served)")
    null_threshold: float | str | None = Field(
        None, description="when to say 'no answer': a number or 'calibrated'; left out: the server's setting"
    )


class PendingVariant(BaseModel):
    variant: str
    label: str
    state: str = Field(description="its build: queued or building")
    step: str = Field("", description="while building: the build step it is at, e.g. 'export to ONNX'")


class AnswerResponse(BaseModel):
    variant: str
    answer: str
    score: float
    start: int
    end: int
    latency_ms: float | None = Field(None, description="the engine's time: tokenize, run, decode (median of k runs)")
    latency_min_ms: float | None = Field(None, description="the fastest of the k timed runs")
    latency_max_ms: float | None = Field(None, description="the slowest of the k timed runs")
    timed_runs: int = Field(1, description="k: how many timed runs the median is of")
    timing: str = Field("", description="what was timed, in words")
    device: str
    provider: str
    dtype: str
    execution: str = Field("", description="how it ran where there is a choice, e.g. CUDA graphs or IOBinding")
    latency_only: bool = Field(False, description="random weights: the answer means nothing")
    stretch: float | None = Field(
        None, description="the median timed run's (CPU + wait for a CPU) / CPU time: 1.0 on an idle machine"
    )
    busy: bool = Field(False, description="the machine was busy while timing: latency_ms is unreliable")
    notice: str = Field("", description="one line about the input, e.g. that it is not English")
    pending: list[PendingVariant] = Field(
        default_factory=list,
        description="the preset's variants not built yet (while the app builds), so that a variant not listed "
        "anywhere is not in this preset",
    )


class VariantInfo(BaseModel):
    name: str
    label: str
    ok: bool = Field(description="built and answering")
    error: str | None = Field(description="why it failed to build, when it did")
    calibrated_threshold: float | None = Field(description="its 'no answer' threshold tuned on SQuAD v2, if any")
    state: str = Field("ready", description="its build: ready, failed, or (not ok yet) queued or building")
    step: str = Field("", description="while building: the build step it is at, e.g. 'export to ONNX'")


class BenchmarkStatus(BaseModel):
    """The app's own measurement of its chain on this machine (``VARIANTS_SELF_BENCH``), and its record once taken."""

    state: str = Field(description="off, waiting (for the build), measuring, done or failed")
    done: int = Field(0, description="questions every variant has answered so far")
    total: int = Field(0, description="questions the measurement asks")
    message: str = Field("", description="where it stands, in one sentence")
    resumed_at: int = Field(0, description="the question a restart went on from (0: none)")
    error: str | None = Field(None, description="why it could not be measured, when it failed")
    file: str | None = Field(None, description="the record's file, beside the built artifacts")
    record: dict[str, Any] | None = Field(
        None, description="the benchmark record, as its JSON file has it (the schema of python -m variants bench)"
    )


OFF_WORDS = "This app does not measure its chain itself (VARIANTS_SELF_BENCH=0)."


class Refusal(BaseModel):
    """Every refusal of /v1 (and of the app's other routes): one sentence, quoting an excerpt of the input at most."""

    detail: str = Field(description="what was refused and why, in one sentence")


RETRY_AFTER = {"Retry-After": {"description": "seconds to wait before trying again", "schema": {"type": "integer"}}}
REFUSALS: dict[int | str, dict] = {  # what the routes really answer besides 200, stated in the OpenAPI document
    405: {"model": Refusal, "description": "Not a method of this route (its Allow header names them)"},
    413: {"model": Refusal, "description": "The body is over the limit (1 MB)"},
    408: {"model": Refusal, "description": "The body did not arrive in time"},
}
ANSWER_REFUSALS: dict[int | str, dict] = REFUSALS | {
    400: {"model": Refusal, "description": "The body could not be read (not UTF-8)"},
    404: {"model": Refusal, "description": "No such variant in this preset"},
    422: {
        "model": Refusal,
        "description": "Not a valid request, or a passage too long for the variant within the 30 s a request may "
        "take: what is wrong, in one sentence",
    },
    429: {"model": Refusal, "description": "The line for the models is full: try again later", "headers": RETRY_AFTER},
    500: {"model": Refusal, "description": "The variant failed to answer"},
    503: {"model": Refusal, "description": "No variant is ready yet, or the one asked for is still building"},
}


def request_model(max_context_chars: int) -> type[AnswerRequest]:
    """:class:`AnswerRequest` with the server's context limit (``--max-context-chars``), so the document says it."""
    if max_context_chars == config.MAX_CONTEXT_CHARS:
        return AnswerRequest
    limit = {"maxLength": max_context_chars}
    context = (str, Field(json_schema_extra=limit, description=f"at most {max_context_chars:,} characters"))
    return create_model("AnswerRequest", __base__=AnswerRequest, context=context)


RESPONSE_FIELDS = (
    *("variant", "answer", "score", "start", "end", "latency_ms", "latency_min_ms", "latency_max_ms"),
    *("timed_runs", "timing", "device", "provider", "dtype", "execution", "latency_only"),
    *("stretch", "busy", "notice"),
)


def answer_response(result: VariantResult) -> AnswerResponse:
    """The response to ``POST /v1/answer`` for one variant's result: the one place its fields are chosen, for
    this route and the Ray Serve deployments' (variants.serving.ray_serve)."""
    return AnswerResponse(**{k: getattr(result, k) for k in RESPONSE_FIELDS})


def default_variant(engine: Engine) -> str:
    """The fastest headline variant of the chain (its last headline one), else the first loaded."""
    headline = [v.spec.name for v in engine.loaded if v.ok and v.spec.headline]
    loaded = [v.spec.name for v in engine.loaded if v.ok]
    if not loaded:
        coming = engine.not_ready()
        detail = f"No variant is ready yet{building_words(coming)}." if coming else "No variant is loaded."
        raise HTTPException(503, detail)
    return (headline or loaded)[-1]


def building_words(pending: list[VariantResult]) -> str:
    """': 3 are still building (baseline: export to ONNX; ...); ask again in a moment', or ''."""
    if not pending:
        return ""
    said = "; ".join(f"{r.variant}: {r.step or r.state}" for r in pending)
    return f": {len(pending)} still building ({said}); ask again in a moment"


def pending_variants(engine: Engine) -> list[PendingVariant]:
    return [PendingVariant(variant=r.variant, label=r.label, state=r.state, step=r.step) for r in engine.not_ready()]


def request_threshold(request: AnswerRequest) -> NullThreshold | None:
    """The request's null threshold mode (None: the server's), or :class:`InputError` saying what is wrong."""
    if request.null_threshold in (None, ""):
        return None
    try:
        return parse_null_threshold(request.null_threshold)
    except ValueError as exc:
        raise InputError(f"null_threshold: {exc}", "null_threshold") from None


class CappedRequest(Request):
    """A request whose body is read up to :data:`MAX_BODY_BYTES` and no further (starlette reads it whole)."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            chunks, size = [], 0
            async for chunk in self.stream():
                size += len(chunk)
                if size > MAX_BODY_BYTES:  # an HTTPException passes FastAPI's body reading as it is
                    raise HTTPException(413, too_large_words())
                chunks.append(chunk)
            self._body = b"".join(chunks)
        return self._body


def too_large_words() -> str:
    return f"The request body is over {MAX_BODY_BYTES / 1e6:g} MB, this route's limit."


class GuardedRoute(APIRoute):
    """The /v1 routes' guard (FastAPI's custom route class): a POST that finds the models' line full gets 429 at
    once, before its body is read; a body over :data:`MAX_BODY_BYTES` gets 413 before it is read whole (by its
    Content-Length, else while it streams in); and a 422 says what is wrong with a short excerpt of the input,
    never the input itself. ``line``: set by :func:`router` on its own subclass."""

    line: ModelLine | None = None

    def get_route_handler(self) -> Callable:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            if request.method == "POST" and self.line is not None and self.line.full():
                busy = self.line.busy()
                return JSONResponse(
                    {"detail": str(busy)}, status_code=busy.status, headers={"Retry-After": str(busy.retry_after)}
                )
            length = request.headers.get("content-length", "")
            if length.isdigit() and int(length) > MAX_BODY_BYTES:
                return refused(request, 413, too_large_words())
            try:
                return await handler(CappedRequest(request.scope, request.receive))
            except RequestValidationError as exc:
                return refused(request, 422, validation_detail(exc))
            except HTTPException as exc:
                if 400 <= exc.status_code < 500 and exc.status_code != 429:
                    log_refused(request, exc.status_code, str(exc.detail))
                raise

        return guarded


def refused(request: Request, status: int, detail: str) -> JSONResponse:
    log_refused(request, status, detail)
    return JSONResponse({"detail": detail}, status_code=status)


def router(engine: Engine, line: ModelLine | None = None, own: Callable[[], OwnStatus] | None = None) -> APIRouter:
    """``GET /v1/variants``, ``POST /v1/answer`` and ``GET /v1/benchmark`` over ``engine``; the requests wait in
    ``line`` (default: a line of its own, one at a time, :data:`MAX_WAITING` waiting). ``own``: where the app's
    measurement of its own chain stands (``SelfBench.status``; None: the app does not measure itself)."""
    line = line or ModelLine(slots=1, max_waiting=MAX_WAITING, name="request")
    route_class = type("LineGuardedRoute", (GuardedRoute,), {"line": line})
    api = APIRouter(prefix=PREFIX, tags=["variants"], route_class=route_class)

    model = request_model(engine.max_context_chars)

    @api.get("/variants", responses=REFUSALS)
    def variants() -> list[VariantInfo]:
        """The variants loaded (``state`` ready, or failed with ``error``), then those still building (not ok)."""
        loaded = [
            VariantInfo(
                name=v.spec.name,
                label=v.spec.label,
                ok=v.ok,
                error=v.error,
                calibrated_threshold=v.calibrated_threshold,
                state="ready" if v.ok else "failed",
            )
            for v in engine.loaded
        ]
        building = [
            VariantInfo(
                name=r.variant,
                label=r.label,
                ok=False,
                error=r.error,
                calibrated_threshold=None,
                state=r.state,
                step=r.step,
            )
            for r in engine.not_ready()
        ]
        return loaded + building

    async def answer(request: AnswerRequest, http: Request) -> AnswerResponse:
        name = request.variant or default_variant(engine)
        if name not in engine.variants:
            coming = engine.not_ready([name])
            if coming and coming[0].pending:  # in the preset, not built yet: say so, not "no such variant"
                step = coming[0].step or coming[0].state
                raise HTTPException(503, f"{name} is not built yet ({step}); ask again in a moment.")
            raise HTTPException(404, f"No variant {excerpt(name)}; loaded: {', '.join(sorted(engine.variants))}.")
        try:
            threshold = request_threshold(request)
            rule = request_rule(request.runs, request.budget_s, request.warmup)  # capped (guard.request_rule)
        except (InputError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None
        try:
            result = await line.run(answer_with, name, request, rule, threshold, visitor=visitor(http))
        except InputError as exc:  # found before any model ran, or while tokenizing (a question too long)
            raise HTTPException(422, str(exc)) from None
        except Refused as exc:  # the line is full
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
            raise HTTPException(exc.status, str(exc), headers=headers) from None
        if result.skipped:  # its answer would have ended past the request's cap: the passage is too long for it
            raise HTTPException(422, result.error)
        if result.error:
            raise HTTPException(500, result.error)
        return answer_response(result).model_copy(update={"pending": pending_variants(engine)})

    def answer_with(
        name: str, request: AnswerRequest, rule: TimingRule, threshold: NullThreshold | None
    ) -> VariantResult:
        engine.check_input(request.question, request.context)  # tokenizes a long question: in the turn's thread
        return engine.answer_one(name, request.question, request.context, rule=rule, null_threshold=threshold)

    @api.get("/benchmark", responses=REFUSALS)
    def benchmark() -> BenchmarkStatus:
        """The record of this chain measured on this machine by the app itself, or where its measurement stands."""
        status = own() if own is not None else None
        if status is None or status.state == OFF:
            return BenchmarkStatus(state=OFF, message=OFF_WORDS)
        return BenchmarkStatus(**status.as_dict())

    answer.__annotations__["request"] = model  # the server's context limit, in the document too
    api.post("/answer", response_model=AnswerResponse, responses=ANSWER_REFUSALS)(answer)

    return api


def create_app(engine: Engine, own: Callable[[], OwnStatus] | None = None) -> FastAPI:
    """A FastAPI app with only :func:`router` (no Gradio): for served-latency measurements."""
    app = FastAPI(title="QA variants", docs_url=None, redoc_url=None, **app_kwargs())
    app.include_router(router(engine, own=own))
    return app
