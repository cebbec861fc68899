"""A client for the ``/v1`` JSON routes, wherever they run: the in-process app (:mod:`variants.serving.http`)
or a variant's Ray Serve application (:mod:`variants.serving.ray_serve`, mounted at ``/NAME``).

Retries: answering is idempotent (the same question and context give the same answer), so a request that
fails on the way (the connection drops, or the server answers 500/502/503/504, as Serve's proxy does for a
request whose replica died under it) is sent again, up to ``retries`` times with a growing pause. That is
what makes a replica's death invisible to callers: Serve replaces the replica and routes the retry to a
live one. urllib3's ``Retry`` does this (retries on status for POST, backoff, a connection pool shared by
threads), so there is no hand-written loop; 4xx answers (bad input, unknown variant) are not retried and
come back as :class:`RemoteError` with the server's message.

    client = AnswerClient("http://127.0.0.1:8000/pruned-onnx-opt-int8")   # a Ray Serve route
    client = AnswerClient("http://127.0.0.1:7860")                         # the app's own /v1 routes
    client.answer("What is the capital of France?", "Paris is the capital of France.")
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from urllib3.util import Retry

from variants.serving.http import PREFIX

RETRY_STATUSES = (500, 502, 503, 504)


def variant_route(name: str) -> str:
    """Where variant ``name``'s Ray Serve application is mounted: its answer is ``/NAME/v1/answer``."""
    return f"/{name}"


class RemoteError(RuntimeError):
    """The server refused or failed a request; ``status`` is its HTTP status (0: no answer at all)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AnswerClient:
    """``POST {base_url}/v1/answer`` and ``GET {base_url}/v1/variants``, thread-safe, with retries."""

    def __init__(self, base_url: str, retries: int = 6, backoff_s: float = 0.25, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        retry = Retry(
            total=retries,
            status_forcelist=RETRY_STATUSES,
            allowed_methods=None,  # every method: answering is idempotent, so POST may be sent again
            backoff_factor=backoff_s,
            raise_on_status=False,  # the last failed answer comes back with the server's message
        )
        self.pool = urllib3.PoolManager(maxsize=64, retries=retry, timeout=urllib3.Timeout(total=timeout_s))

    def _request(self, method: str, path: str, body: dict | None = None) -> tuple[Any, int]:
        """The decoded JSON answer and how many times it was retried."""
        url = self.base_url + PREFIX + path
        try:
            response = self.pool.request(method, url, json=body)
        except urllib3.exceptions.HTTPError as exc:
            raise RemoteError(0, f"no answer from {url}: {exc}") from None
        retried = len(response.retries.history) if response.retries else 0
        try:
            data = json.loads(response.data or b"null")
        except json.JSONDecodeError:
            data = response.data.decode("utf-8", "replace")
        if response.status >= 400:
            detail = data.get("detail", data) if isinstance(data, dict) else data
            raise RemoteError(response.status, f"{response.status} from {url}: {detail}")
        return data, retried

    def answer(self, question: str, context: str, variant: str = "", null_threshold: float | str | None = None) -> dict:
        """The answer as the route returns it (:class:`~variants.serving.http.AnswerResponse`'s fields), with
        ``retried``: how many times it was sent again before it was answered. ``null_threshold``: a number or
        "calibrated" for this request (None: the server's setting)."""
        body = {"question": question, "context": context, "variant": variant}
        if null_threshold is not None:
            body["null_threshold"] = null_threshold
        data, retried = self._request("POST", "/answer", body)
        return {**data, "retried": retried}

    def variants(self) -> list[dict]:
        return self._request("GET", "/variants")[0]

    def close(self) -> None:
        self.pool.clear()

    def __enter__(self) -> AnswerClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
