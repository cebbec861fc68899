"""What every request meets before any route: the limits, the short refusals and the one log line that ``/v1``
had, in front of every route of the app, gradio's own included (``/gradio_api/call/*``, ``/gradio_api/run/*``,
``/gradio_api/queue/join``, ``/gradio_api/upload``...): one ASGI middleware, :class:`Edge`, given to the app as
gradio takes it (``launch(app_kwargs=...)`` or the FastAPI app ``mount_gradio_app`` mounts on,
:func:`app_kwargs`), not one check per route.

- **Bodies.** A body over its route's limit is refused with 413 at once: by its ``Content-Length`` before a byte
  of it is read, else as it streams in, never read further (:data:`~variants.serving.guard.MAX_BODY_BYTES`; the
  routes that carry a file of questions, gradio's upload and its API calls where ``/evaluate``'s data travels,
  :data:`~variants.serving.guard.MAX_FILE_BODY_BYTES`). A body must have arrived
  :data:`~variants.serving.guard.BODY_TIMEOUT_S` after its headers (408), so a stalled upload holds nothing
  for long. Headers are the server's: h11 refuses more than 16 KB of them (uvicorn's
  ``h11_max_incomplete_event_size``); uvicorn puts no time limit on them, a Space's proxy does.
- **Gradio's API calls** are checked against the endpoint as gradio publishes it (``Blocks.get_api_info``): a
  JSON object whose ``data`` is a list of one value per parameter, each of the type its handler declares for the
  app's own ``gr.api`` endpoints (``/answer``, ``/evaluate``; pydantic reads the hints). Gradio would print a
  40-line traceback for a list too short, and a ``session_hash`` sent to ``/call`` makes its result's event
  stream fail after it began; here each is one sentence and one log line.
- **Refusals quote an excerpt**: FastAPI's validation errors (which echo the whole input) become one sentence
  (:func:`validation_refused`); an HTTP error a route raises after its response began (gradio's event stream for
  an unknown event) ends that response with one log line instead of uvicorn's traceback.
- **No remote files.** ``/gradio_api/file=<url>`` and ``/gradio_api/file/<url>`` are refused (403, one sentence)
  whatever the Gradio version: gradio up to 6.17 answers them with a redirect to the address, an open redirect
  and client-side SSRF (gradio issue 13608); the app serves only files of its own (:data:`REMOTE_FILE`).
- **Who the visitor is**: :func:`trust_proxies` has uvicorn read ``X-Forwarded-For`` from the proxies the host
  names and from no other peer (its default trusts any local one), so that ``request.client.host`` is the
  visitor (:func:`variants.serving.guard.visitor`).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import re
import typing
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

from variants.serving.guard import BODY_TIMEOUT_S, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_FILE_BODY_BYTES, excerpt

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

API_CALL = re.compile(r"/gradio_api/(call/v2|call|run|api)/([^/]+)/?$")  # a named endpoint's call
JOIN = re.compile(r"/gradio_api/queue/join/?$")  # an event by its fn_index (the page's, and gradio_client's)
FILE_ROUTES = re.compile(r"/gradio_api/(upload|queue/join|call/v2/[^/]+|call/[^/]+|run/[^/]+|api/[^/]+)/?$")
BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}
# a file route naming an address, not a file of the app's: a scheme (https:, javascript:...) or a network path
# (//host, \\host), after any slashes or spaces gradio or a browser would strip
REMOTE_FILE = re.compile(r"/file[=/](?:[\s/\\]*[a-z][a-z0-9+.-]*:|\s*[/\\]{2})", re.IGNORECASE)
REMOTE_FILE_WORDS = "This app serves only its own files: it never fetches or redirects to another address."
log = logging.getLogger("variants.serving.http")  # the one logger of refusals at the edge and on /v1


class TooLarge(Exception):
    pass


class Gone(Exception):
    """The client went away before its body arrived."""


def body_limit(path: str) -> int:
    """The most a body sent to ``path`` may be."""
    return MAX_FILE_BODY_BYTES if FILE_ROUTES.search(path) else MAX_BODY_BYTES


def too_large_words(limit: int) -> str:
    return f"The request body is over {limit / 1e6:g} MB, this route's limit."


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole body, refused past ``limit`` bytes (:class:`TooLarge`) or :data:`BODY_TIMEOUT_S` (TimeoutError)."""
    chunks, size = [], 0
    with anyio.fail_after(BODY_TIMEOUT_S):
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise Gone
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, then the client's own messages (its disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class Edge:
    """The middleware (see the module's docstring); ``blocks``: the gradio page whose API calls it checks (none for
    an app of ``/v1`` routes only)."""

    def __init__(self, app: Callable, blocks: Any = None) -> None:
        self.app, self.blocks = app, blocks
        self._endpoints: dict[str, Endpoint] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        path, limit = scope["path"], body_limit(scope["path"])
        if REMOTE_FILE.search(path):
            return await refuse(request, send, 403, REMOTE_FILE_WORDS)
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            return await refuse(request, send, 413, too_large_words(limit), close=True)
        if length not in ("", "0") or "transfer-encoding" in request.headers or scope["method"] in BODY_METHODS:
            try:
                body = await read_body(receive, limit)
            except TooLarge:
                return await refuse(request, send, 413, too_large_words(limit), close=True)
            except TimeoutError:
                words = f"The request body did not arrive within {BODY_TIMEOUT_S:g} s of its headers."
                return await refuse(request, send, 408, words, close=True)
            except Gone:
                return None
            receive = replay(body, receive)
            problem = self.check_call(path, body) if self.blocks is not None else None
            if problem is not None:
                return await refuse(request, send, *problem)
        await self.pass_on(request, scope, receive, send)

    async def pass_on(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:  # an HTTP error raised once the response began: gradio's event streams
            http = exc if isinstance(exc, HTTPException) else exc.__cause__
            if not started or not isinstance(http, HTTPException):
                raise
            log_refused(request, http.status_code, f"ended: {http.detail}")
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    # --- gradio's API calls ---------------------------------------------------------------------------------

    def endpoints(self) -> dict[str, Endpoint]:
        """Each event handler of the page by its api name and by its fn_index, as gradio publishes it."""
        if self._endpoints is None:
            named = self.blocks.get_api_info().get("named_endpoints", {})
            found: dict[str, Endpoint] = {}
            for index, fn in self.blocks.fns.items():
                info = named.get(f"/{fn.api_name}", {}) if fn.api_name else {}
                endpoint = Endpoint(fn.api_name or f"fn_index {index}", fn.inputs, fn.fn, info)
                found[f"fn:{index}"] = endpoint
                if fn.api_name:
                    found[fn.api_name] = endpoint
            self._endpoints = found
        return self._endpoints

    def check_call(self, path: str, body: bytes) -> tuple[int, str] | None:
        """What is wrong with a call to one of gradio's API routes, as (status, sentence); None when nothing is
        (or the route is not one)."""
        call, join = API_CALL.search(path), JOIN.search(path)
        if not call and not join:
            return None
        try:
            payload = json.loads(body)
        except ValueError:  # a UnicodeDecodeError is one
            return 422, f"The body should be a JSON object, not {excerpt(body[:200].decode('utf-8', 'replace'))}."
        except RecursionError:  # arrays or objects nested thousands deep: no call of this app's is shaped so
            return 422, "The body is nested too deep: a call's data is a flat list of values."
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            got = payload.get("data") if isinstance(payload, dict) else payload
            return 422, f'The body should be a JSON object with "data", a list of values, not {excerpt(got)}.'
        if call:
            route, name = call.groups()
            if route in ("call", "call/v2") and "session_hash" in payload:
                shown = name if len(name) < 60 else excerpt(name)
                return 422, (
                    f"/gradio_api/{route}/{shown} takes only data (its event id is its session); to keep a session "
                    "across calls, send session_hash to /gradio_api/queue/join."
                )
            endpoint = self.endpoints().get(name)
        else:
            index = payload.get("fn_index")
            endpoint = self.endpoints().get(f"fn:{index}") if isinstance(index, int) else None
            if endpoint is None:
                return 422, f"fn_index should be the number of one of this page's events, not {excerpt(index)}."
        if endpoint is None:
            return None  # gradio's own 404 names the endpoints there are
        return endpoint.check(payload["data"])


JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def json_kind(value: Any, schema: Any) -> bool:
    """Whether ``value`` is of the JSON type ``schema`` names at its top (``type``, or any of ``anyOf``/``oneOf``);
    a schema that names none, and a null (an empty box sends one), pass. Only the kind: a component's own
    preprocessing judges the rest."""
    if value is None or not isinstance(schema, dict):
        return True
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        return any(json_kind(value, b) for b in branches)
    kinds = JSON_TYPES.get(schema["type"]) if isinstance(schema.get("type"), str) else None
    if kinds is None:
        return True
    if isinstance(value, bool) and bool not in kinds:
        return False  # JSON's true is no number
    return isinstance(value, kinds) or (schema["type"] == "integer" and isinstance(value, float) and value.is_integer())


class Endpoint:
    """One event handler of the page: its name and inputs. The app's own ``gr.api`` endpoints are checked by their
    handler's hints (pydantic, lax: "5" for an int passes, as the handler reads it); the page's events by the JSON
    type each input component publishes (its ``api_info``), so gradio's preprocessing is not handed a dict for a
    text box."""

    def __init__(self, name: str, inputs: list, fn: Callable | None, info: dict) -> None:
        self.name, self.inputs = name, len(inputs)
        self.parameters = [p.get("parameter_name") or p.get("label", "") for p in info.get("parameters", [])]
        self.api = bool(info.get("parameters")) and all(p.get("component") == "Api" for p in info["parameters"])
        self.types: dict[str, TypeAdapter] = {}
        if self.api and fn is not None:
            hints = typing.get_type_hints(inspect.unwrap(fn))
            self.types = {p: TypeAdapter(hints[p]) for p in self.parameters if p in hints}
        self.kinds = [] if self.api else [component_schema(c) for c in inputs]

    def check(self, data: list) -> tuple[int, str] | None:
        named = f" ({', '.join(self.parameters)})" if self.parameters else ""
        if len(data) < self.inputs or (self.api and len(data) > self.inputs):
            return 422, f"/{self.name} takes {self.inputs} values in data{named}, not {len(data)}."
        for name, value in zip(self.parameters, data, strict=False):
            adapter = self.types.get(name)
            if adapter is None:
                continue
            try:
                adapter.validate_python(value)
            except ValidationError as exc:
                why = exc.errors()[0].get("msg", "invalid") if exc.errors() else "invalid"
                return 422, f"/{self.name}'s {name}: {why} (got {excerpt(value)})."
        for index, (schema, value) in enumerate(zip(self.kinds, data, strict=False)):
            if not json_kind(value, schema):
                kind = schema.get("type") if isinstance(schema.get("type"), str) else "another kind"
                return 422, f"/{self.name}'s input {index + 1} should be a JSON {kind}, not {excerpt(value)}."
        return None


def component_schema(component: Any) -> dict:
    """The JSON schema a component publishes for its value ({} when it publishes none)."""
    try:
        schema = component.api_info()
    except Exception:  # a component without one (gradio's layout blocks): nothing to check
        return {}
    return schema if isinstance(schema, dict) else {}


def log_refused(request: Request, status: int, detail: str) -> None:
    """One line for a refused call on any route (no traceback, the detail already excerpted)."""
    log.warning("%s %s refused (%d): %s", request.method, request.url.path, status, detail)


def validation_detail(exc: RequestValidationError) -> str:
    """FastAPI's validation errors in one short sentence: where and what, with an excerpt of the input at most
    (its default handler echoes every input whole: a 30 MB body came back as 30 MB)."""
    parts = []
    for error in exc.errors()[:3]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        got = f" (got {excerpt(error['input'])})" if "input" in error and error.get("type") != "missing" else ""
        parts.append(f"{where}: {error.get('msg', 'invalid')}{got}")
    return "; ".join(parts) + "."


async def refuse(request: Request, send: Send, status: int, detail: str, close: bool = False) -> None:
    """Answer ``request`` with ``{"detail": detail}`` and one log line; ``close``: end the connection after it (a
    body left unread)."""
    log_refused(request, status, detail)
    headers = {"Connection": "close"} if close else None
    await JSONResponse({"detail": detail}, status_code=status, headers=headers)(request.scope, _no_body, send)


async def _no_body() -> Message:
    return {"type": "http.disconnect"}


async def validation_refused(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's validation errors on any route as one sentence with an excerpt of the input (its default handler
    echoes the whole input back), and one log line."""
    detail = validation_detail(exc) if isinstance(exc, RequestValidationError) else "The request is not valid."
    log_refused(request, 422, detail)
    return JSONResponse({"detail": detail}, status_code=422)


def app_kwargs(blocks: Any = None, routes: list | None = None) -> dict[str, Any]:
    """What the app is made with, as gradio's ``launch(app_kwargs=...)`` and FastAPI take it: :class:`Edge` in
    front of every route, the validation errors' handler, and ``routes`` (the lean /v1 routes) beside the page."""
    kwargs: dict[str, Any] = {
        "middleware": [Middleware(Edge, blocks=blocks)],
        "exception_handlers": {RequestValidationError: validation_refused},
    }
    if routes is not None:
        kwargs["routes"] = routes
    return kwargs


def server_options(trusted: str) -> dict[str, Any]:
    """uvicorn's settings for a server of the app's own (the Space's path, ``app.serve_mounted``): the forwarded
    address read from ``trusted`` only; at most :data:`~variants.serving.guard.MAX_CONNECTIONS` connections (or
    requests in flight) at once, one more answered 503 at once by uvicorn; an idle keep-alive connection closed
    after 5 s. (Gradio's ``launch`` takes none of these: there, only the proxies, by :func:`trust_proxies`.)"""
    return {
        "proxy_headers": True,
        "forwarded_allow_ips": trusted,
        "limit_concurrency": MAX_CONNECTIONS,
        "timeout_keep_alive": 5,
    }


def trust_proxies(hosts: str) -> None:
    """Have the server read ``X-Forwarded-For`` from ``hosts`` only (uvicorn's ``forwarded-allow-ips``, which
    gradio's launch leaves to the ``FORWARDED_ALLOW_IPS`` variable: its default trusts any local peer, so a local
    client could name itself anyone); "" trusts no peer. Called before the server starts
    (:func:`variants.core.config.trusted_proxies` says which)."""
    os.environ["FORWARDED_ALLOW_IPS"] = hosts
