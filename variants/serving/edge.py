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
- **Only what the app uses**: every request is judged by the allowlist (:mod:`variants.serving.allowed`, derived
  from the page's events) before any route sees it: a route the page, gradio_client and /v1 do not use, an event
  the page never calls, a value of the wrong kind or count, an unknown session: 4xx, one sentence, one log line
  (gradio answered many of these with a 500 and a traceback).
- **Errors of the app's own**: logged once with their traceback and a request id, answered 500 in one sentence
  naming that id; a ``gr.Error`` an unqueued event of the page raises (a refusal, already logged in one line) is
  a 422, not gradio's 500.
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
import json
import logging
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware

from variants.serving.allowed import Allowed
from variants.serving.guard import BODY_TIMEOUT_S, MAX_BODY_BYTES, MAX_CONNECTIONS, MAX_FILE_BODY_BYTES, excerpt

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

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


def route_path(scope: Scope) -> str:
    """The path within the app: without the prefix it is served under (Ray Serve's route prefix, a mount's path),
    which ASGI puts in both ``root_path`` and ``path``."""
    path, root = scope["path"], scope.get("root_path", "").rstrip("/")
    return path[len(root) :] or "/" if root and path.startswith(root + "/") else path


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
        self.app = app
        self.allowed = Allowed(blocks)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request = Request(scope)
        path = route_path(scope)
        limit = body_limit(path)
        if REMOTE_FILE.search(path):
            return await refuse(request, send, 403, REMOTE_FILE_WORDS)
        length = request.headers.get("content-length", "")
        if length.isdigit() and int(length) > limit:
            return await refuse(request, send, 413, too_large_words(limit), close=True)
        body = None
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
        query = scope.get("query_string", b"").decode("latin-1")
        problem = self.allowed.check(scope["method"], path, query, body)
        if problem is not None:
            return await refuse(request, send, *problem)
        await self.pass_on(request, scope, receive, send)

    async def pass_on(self, request: Request, scope: Scope, receive: Receive, send: Send) -> None:
        """The request on to the app. An HTTP error raised once the response began (gradio's event streams) ends it
        with one log line; any other error of the app's is logged once with its traceback and a request id, and
        answered 500 in one sentence naming that id (uvicorn would print the traceback a second time). A refusal
        the page's unqueued events raise (a ``gr.Error``), which gradio answers 500, is answered 422 (the page reads
        the same body, its message)."""
        started = False
        held: Message | None = None  # a 500's start, held until its body says whether it is a refusal

        async def watched(message: Message) -> None:
            nonlocal started, held
            if message["type"] == "http.response.start" and message["status"] == 500:
                held = message
                return
            if held is not None and message["type"] == "http.response.body":
                held, start = None, held
                if is_refusal(message.get("body", b"")):  # its handler logged it (ui.errors.refused)
                    start = {**start, "status": 422}
                started = True
                await send(start)
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            http = exc if isinstance(exc, HTTPException) else exc.__cause__
            if started and isinstance(http, HTTPException):
                log_refused(request, http.status_code, f"ended: {http.detail}")
            else:
                request_id = uuid.uuid4().hex[:12]
                log.error("%s %s failed (request %s)", request.method, request.url.path, request_id, exc_info=exc)
                if not started:
                    words = f"Something went wrong on the server's side (request {request_id}); it is logged."
                    with contextlib.suppress(Exception):
                        await JSONResponse({"detail": words}, status_code=500)(scope, _no_body, send)
                    return
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})


def is_refusal(body: bytes) -> bool:
    """Whether a 500's body is gradio's answer to a ``gr.Error`` a handler raised (a title beside the message), not
    to an error of the app's."""
    with contextlib.suppress(ValueError, RecursionError):
        payload = json.loads(body)
        return isinstance(payload, dict) and isinstance(payload.get("error"), str) and "title" in payload
    return False


def log_refused(request: Request, status: int, detail: str) -> None:
    """One line for a refused call on any route (no traceback, the detail already excerpted; a path of control
    characters or a newline, as a client may send, is quoted escaped)."""
    path = request.url.path
    shown = path if len(path) < 200 and path.isprintable() else excerpt(path)
    log.warning("%s %s refused (%d): %s", request.method, shown, status, detail)


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
