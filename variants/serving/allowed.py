"""What the public may ask of the page's app: the one list of routes the edge (:mod:`variants.serving.edge`) lets
through, each with its check, derived from the app itself; anything else is refused in one sentence before gradio
sees it.

Gradio serves some 80 operations (its ``/openapi.json`` lists them); the page, ``gradio_client`` and our documented
APIs use a dozen. A generated client found 500s and tracebacks across the rest (issue 80): the numbered calls
(``/gradio_api/call/0``), the proxy, the root's ``page`` and ``deep_link`` queries, unknown sessions and
streams. So the list is of what is used, found by logging every request the page makes in Chromium (Ask, Examples,
Your questions with an upload, the Benchmark tab and its quick run, the visitor's model, the downloads):

- the page, its config, assets and theme; ``/openapi.json`` and ``<api>/info`` (the API's description);
- ``<api>/queue/join`` for the events the page triggers through the queue and the public named endpoints
  (``gradio_client`` calls those by ``fn_index`` too); ``<api>/run/predict`` for the page's events outside the
  queue; each with the right number of values, each of the JSON type its component publishes, an example's index
  within its examples;
- ``<api>/queue/data`` for a session that joined; ``<api>/heartbeat/<session>`` (the page opens it first);
- ``<api>/call/<name>`` (and its stream) for the public named endpoints (``/answer``, ``/evaluate``), checked by
  their handler's hints;
- ``<api>/upload`` and its progress (the edge caps the size), ``<api>/file=`` for the app's own files;
- ``/v1`` (FastAPI validates it).

The function indices, names, arities, kinds, pages and the API prefix come from the app (``blocks.fns``, their
``api_name`` and visibility, ``blocks.pages``, the config the page is served), never from a list of numbers typed
here, so a page that gains an event, and another gradio version's numbering, need no change here.
"""

from __future__ import annotations

import collections
import inspect
import json
import os
import re
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from pydantic import TypeAdapter, ValidationError

from variants.serving.guard import excerpt

Problem = tuple[int, str]  # a refusal: (status, one sentence)
GET = frozenset({"GET", "HEAD", "OPTIONS"})
POST = frozenset({"POST", "OPTIONS"})
SESSION = re.compile(r"[A-Za-z0-9_-]{1,64}")  # the page's 11 characters, gradio_client's uuid4
MAX_SESSIONS = 50_000  # sessions remembered as joined (the oldest forgotten first): a few MB at most
V1 = "/v1/"  # the lean API's routes (variants.serving.http.PREFIX), validated by FastAPI itself


@dataclass(frozen=True)
class Route:
    """One route the public may use: its methods, its path (after the page's root, or the API prefix), and the
    name of the :class:`Allowed` method that judges a request to it ("" for none beyond the path)."""

    methods: frozenset[str]
    path: re.Pattern[str]
    check: str = ""


def route(methods: frozenset[str], path: str, check: str = "") -> Route:
    return Route(methods, re.compile(path), check)


PAGE_ROUTES = [  # at the page's root
    route(GET, r"/", "page"),
    route(GET, r"/config/?", "config"),
    route(GET, r"/(assets|static)/[^\x00]+"),
    route(GET, r"/(theme\.css|favicon\.ico|robots\.txt|openapi\.json)"),
]
API_ROUTES = [  # under the config's api_prefix (/gradio_api)
    route(GET, r"/info/?"),
    route(GET, r"/startup-events"),  # gradio's launch asks it of itself (once; later calls do nothing)
    route(GET, r"/theme\.css"),
    route(GET, r"/heartbeat/(?P<session>[^/]+)", "heartbeat"),
    route(POST, r"/queue/join/?", "join"),
    route(GET, r"/queue/data/?", "data"),
    route(POST, r"/run/predict/?", "run"),
    route(POST, r"/call/(v2/)?(?P<name>[^/]+)/?", "call"),
    route(GET, r"/call/(v2/)?(?P<name>[^/]+)/(?P<event>[^/]+)/?", "stream"),
    route(POST, r"/upload/?"),
    route(GET, r"/upload_progress/?"),
    route(GET, r"/file[=/][^\x00]+"),
]


class Allowed:
    """The routes of one page's app and the checks of each (see the module's docstring); built from ``blocks`` on
    first use (the app is complete by then); with no ``blocks``, an app of ``/v1`` routes only. Thread-safe: it
    remembers the sessions that joined the queue."""

    def __init__(self, blocks: Any) -> None:
        self.blocks = blocks
        self._events: Events | None = None
        self._sessions: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def events(self) -> Events:
        if self._events is None:
            self._events = Events(self.blocks)
        return self._events

    def check(self, method: str, path: str, query: str, body: bytes | None) -> Problem | None:
        """What is wrong with ``method path?query`` (``body``: read already, or None), as (status, sentence); None
        when it may go on."""
        if path.startswith(V1) or path == "/openapi.json":
            return None
        if self.blocks is None:  # an app of /v1 routes only (python -m variants serve, Ray Serve's replicas)
            return 404, f"This app does not serve {shown(path)}: its routes are under {V1}."
        prefix = self.events.api_prefix
        routes, rest = (API_ROUTES, path[len(prefix) :]) if path.startswith(prefix + "/") else (PAGE_ROUTES, path)
        for allowed in routes:
            found = allowed.path.fullmatch(rest)
            if found is None:
                continue
            if method not in allowed.methods:
                methods = " or ".join(sorted(allowed.methods - {"OPTIONS", "HEAD"}))
                return 405, f"{shown(path)} takes {methods}, not {shown(method)}."
            if not allowed.check or method == "OPTIONS":
                return None
            return getattr(self, allowed.check)(found, dict(parse_qsl(query)), body)
        return 404, f"This app does not serve {shown(path)}."

    # --- the checks, one per route that takes more than its path --------------------------------------------

    def page(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        if query.get("page", "") not in self.events.pages:
            return 404, f"This app has no page {excerpt(query['page'])}."
        return self.config(found, query, body)

    def config(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        if query.get("deep_link"):
            return 404, "This app keeps no deep links."
        return None

    def heartbeat(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        # the page opens it before its first event: any well-formed session
        return None if SESSION.fullmatch(found["session"]) else bad_session(found["session"])

    def join(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        problem = self.event_call(body, self.events.queued, "the queue")
        if problem is None:
            self.remember(json.loads(body or b"")["session_hash"])
        return problem

    def run(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        return self.event_call(body, self.events.direct, "/run/predict")

    def data(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        session = query.get("session_hash", "")
        if not SESSION.fullmatch(session):
            return bad_session(session)
        with self._lock:
            known = session in self._sessions
        if not known:
            return 404, f"Session {excerpt(session)} has no event in the queue: join the queue first."
        return None

    def call(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        name, route_ = found["name"], "call/v2" if found[1] else "call"
        endpoint = self.events.named.get(name)
        if endpoint is None:
            return unknown_name(name, self.events.named)
        payload = call_body(body)
        if isinstance(payload, tuple):
            return payload
        if "session_hash" in payload:
            return 422, (
                f"/gradio_api/{route_}/{shown(name)} takes only data (its event id is its session); to keep a "
                "session across calls, send session_hash to /gradio_api/queue/join."
            )
        return endpoint.check(payload["data"])

    def stream(self, found: re.Match, query: dict[str, str], body: bytes | None) -> Problem | None:
        if found["name"] not in self.events.named:
            return unknown_name(found["name"], self.events.named)
        return None  # an unknown event: gradio's stream says so in one event (the edge ends it quietly)

    # --- helpers ----------------------------------------------------------------------------------------------

    def event_call(self, body: bytes | None, allowed: dict[int, Endpoint], where: str) -> Problem | None:
        """A call of one of the page's events by its fn_index (the page's and gradio_client's way)."""
        payload = call_body(body)
        if isinstance(payload, tuple):
            return payload
        index = payload.get("fn_index")
        endpoint = allowed.get(index) if isinstance(index, int) and not isinstance(index, bool) else None
        if endpoint is None:
            return 422, f"fn_index should be the number of one of this page's events in {where}, not {excerpt(index)}."
        session = payload.get("session_hash")
        if not isinstance(session, str) or not SESSION.fullmatch(session):
            return bad_session(session)
        trigger = payload.get("trigger_id")
        if trigger is not None and (not isinstance(trigger, int) or isinstance(trigger, bool)):
            return 422, f"trigger_id should be a component's number or null, not {excerpt(trigger)}."
        return endpoint.check(payload["data"], self.session_component(session))

    def session_component(self, session: str) -> Callable[[Any], Any]:
        """The component ``session`` sees in place of one of the page's: gradio's copy for that session where an
        event updated it (a list of records that grew), else the page's own. Gradio publishes no accessor for a
        session's components: this reads its ``state_holder`` as its own preprocessing does, and falls back to the
        page's component where that is not there."""
        holder = getattr(self.blocks, "state_holder", None)

        def component(original: Any) -> Any:
            try:
                if holder is None or session not in holder:
                    return original
                state = holder[session]
                return state[original._id] if original._id in state else original
            except Exception:  # another gradio's layout: the page's own component still judges
                return original

        return component

    def remember(self, session: str) -> None:
        with self._lock:
            self._sessions[session] = None
            self._sessions.move_to_end(session)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)


class Events:
    """The page's events as the public may call them, derived from ``blocks``: by fn_index those the page triggers
    (a server function and a trigger), split by the route gradio's page uses for them (the queue, or /run/predict
    for the unqueued), plus the public named endpoints (gradio_client joins the queue with theirs); by name the
    public named endpoints."""

    def __init__(self, blocks: Any) -> None:
        config = getattr(blocks, "config", None) or {}
        self.api_prefix = str(config.get("api_prefix") or "/gradio_api").rstrip("/")
        self.pages = {str(page[0]) for page in getattr(blocks, "pages", [("",)])} | {""}
        info = blocks.get_api_info().get("named_endpoints", {})
        self.queued: dict[int, Endpoint] = {}
        self.direct: dict[int, Endpoint] = {}
        self.named: dict[str, Endpoint] = {}
        for index, fn in blocks.fns.items():
            if fn.fn is None:
                continue  # the page runs its JavaScript itself
            public = bool(fn.api_name) and visibility(fn) == "public"
            endpoint = Endpoint(fn.api_name or f"fn_index {index}", fn.inputs, fn.fn, info.get(f"/{fn.api_name}", {}))
            if fn.targets or public:
                (self.queued if fn.queue else self.direct)[index] = endpoint
            if public:
                self.named[fn.api_name] = endpoint


def visibility(fn: Any) -> str:
    """An event's API visibility: "public", "undocumented" or "private" (gradio 6's ``api_visibility``; gradio
    5's ``show_api`` said public or not)."""
    seen = getattr(fn, "api_visibility", None)
    if isinstance(seen, str):
        return seen
    return "public" if getattr(fn, "show_api", False) else "private"


def call_body(body: bytes | None) -> dict | Problem:
    """The JSON object a call carries, with its ``data`` list; or what is wrong with it."""
    try:
        payload = json.loads(body or b"")
    except ValueError:  # a UnicodeDecodeError is one
        return 422, f"The body should be a JSON object, not {excerpt((body or b'')[:200].decode('utf-8', 'replace'))}."
    except RecursionError:  # arrays or objects nested thousands deep: no call of this app's is shaped so
        return 422, "The body is nested too deep: a call's data is a flat list of values."
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        got = payload.get("data") if isinstance(payload, dict) else payload
        return 422, f'The body should be a JSON object with "data", a list of values, not {excerpt(got)}.'
    return payload


def shown(text: str) -> str:
    return text if len(text) < 60 and text.isprintable() else excerpt(text)


def bad_session(session: Any) -> Problem:
    return 422, f"session_hash should be 1 to 64 letters, digits, - or _, not {excerpt(session)}."


def unknown_name(name: str, named: dict) -> Problem:
    names = ", ".join(f"/{n}" for n in sorted(named)) or "none"
    return 404, f"This app has no API endpoint {shown('/' + name)}; its endpoints: {names}."


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
    text box, and an example's index by the examples there are."""

    def __init__(self, name: str, inputs: list, fn: Callable | None, info: dict) -> None:
        self.name, self.inputs = name, len(inputs)
        self.parameters = [p.get("parameter_name") or p.get("label", "") for p in info.get("parameters", [])]
        self.api = bool(info.get("parameters")) and all(p.get("component") == "Api" for p in info["parameters"])
        self.types: dict[str, TypeAdapter] = {}
        if self.api and fn is not None:
            hints = typing.get_type_hints(inspect.unwrap(fn))
            self.types = {p: TypeAdapter(hints[p]) for p in self.parameters if p in hints}
        self.kinds = [] if self.api else [component_schema(c) for c in inputs]
        # an example's index: gradio's Dataset reads its samples[index] (an IndexError and a traceback past them)
        self.indices = {i: len(c.samples) for i, c in enumerate(inputs) if is_examples(c)}
        # choices and ranges: the component's own preprocess judges them (pure for these kinds); gradio would print
        # its refusal as a traceback. Files: one the visitor uploaded, as gradio checks it, shape first.
        self.judged = {i: c for i, c in enumerate(inputs) if type(c).__name__ in JUDGED} if not self.api else {}
        self.files = {i: c for i, c in enumerate(inputs) if is_file(self.kinds[i])} if not self.api else {}

    def check(self, data: list, component: Callable[[Any], Any] = lambda c: c) -> Problem | None:
        """What is wrong with ``data``; ``component``: the component a session sees for one of the inputs (gradio
        keeps a session's own copy of a component an event updated, its choices for one)."""
        problem = self.check_kinds(data)
        if problem is not None:
            return problem
        for index, original in self.judged.items():
            if data[index] is None and type(original).__name__ in NEVER_NULL:
                return 422, f"/{self.name}'s input {index + 1} should be a value, not null: the page always sends one."
            if data[index] is None:
                continue
            try:
                component(original).preprocess(data[index])
            except Exception as exc:  # gradio's Error: "Value: 'x' ... is not in the list of choices: [...]"
                return 422, f"/{self.name}'s input {index + 1}: {said(exc)}"
        for index, original in self.files.items():
            problem = self.check_files(index, data[index], str(getattr(original, "GRADIO_CACHE", "")))
            if problem is not None:
                return problem
        return None

    def check_files(self, index: int, value: Any, uploads: str) -> Problem | None:
        """A file input: null, or a file (a list of them) the visitor uploaded, by gradio's upload route."""
        for file in value if isinstance(value, list) else [value]:
            if file is None:
                continue
            path = file.get("path") if isinstance(file, dict) else None
            if not isinstance(path, str) or not uploads or not within(path, uploads):
                got = excerpt(file)
                return 422, f"/{self.name}'s input {index + 1} should be a file uploaded to this app, not {got}."
        return None

    def check_kinds(self, data: list) -> Problem | None:
        named = f" ({', '.join(self.parameters)})" if self.parameters else ""
        if len(data) != self.inputs:
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
        for index, count in self.indices.items():
            value = data[index]
            if type(value) is not int or not 0 <= value < count:  # null too: gradio's examples unpack it
                return 422, f"/{self.name}'s input {index + 1} is an example's number, 0 to {count - 1}, not {value}."
        return None


JUDGED = {"Radio", "CheckboxGroup", "Dropdown", "Slider", "Number", "Checkbox"}  # gradio kinds with a pure preprocess
NEVER_NULL = {"CheckboxGroup", "Slider", "Checkbox"}  # their value on the page is never null


def said(exc: Exception, n: int = 160) -> str:
    """A component's refusal as one sentence of at most ``n`` characters (gradio quotes its Error's message)."""
    text = " ".join(str(exc).split()).strip("\"'")
    text = text if text.isprintable() else excerpt(text, n)
    text = text if len(text) <= n else text[: n - 1] + "…"
    return text if text.endswith(".") else text + "."


def is_file(schema: dict) -> bool:
    """Whether a component's JSON schema is gradio's file (a ``FileData``, or a list of them)."""
    return "path" in schema.get("properties", {}) or "FileData" in schema.get("$defs", {})


def within(path: str, folder: str) -> bool:
    """Whether ``path`` is inside ``folder`` once both are resolved (no ``..`` or link out of it)."""
    try:
        return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)
    except (ValueError, OSError):  # a NUL byte in the path
        return False


def is_examples(component: Any) -> bool:
    """Whether ``component`` is a set of examples picked by index (gradio's ``Dataset``)."""
    return type(component).__name__ == "Dataset" and isinstance(getattr(component, "samples", None), list)


def component_schema(component: Any) -> dict:
    """The JSON schema a component publishes for its value ({} when it publishes none)."""
    try:
        schema = component.api_info()
    except Exception:  # a component without one (gradio's layout blocks): nothing to check
        return {}
    return schema if isinstance(schema, dict) else {}
