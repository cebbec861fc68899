"""A link to what is on the Ask tab: its passage, question, chosen variants and no-answer rule, which opens the
page in the same state and asks again, live.

What travels, and where: the state itself, in the link, after ``#ask=`` (JSON, deflated, base64url). A browser
never sends the part after ``#`` to a server, so making a link stores nothing anywhere: only those who are given
the link can read the passage (and anyone who is given it can). Opening it, the page hands that part to the app,
which fills the boxes and asks, as the Ask button does. Gradio's own ``gr.DeepLinkButton`` was not used: it
writes every component of the visitor's session (the other tabs' too: a file of questions, its answers) to the
server's disk under a hash of it, kept with no end date.

The limit: the part after ``#`` is at most :data:`MAX_STATE_CHARS` (8,000) characters, the length RFC 9110
(section 4.1) asks every sender and recipient of a URI to handle; deflated, that holds about 16,000 characters of
English passage. A longer passage is left out of the link, which then carries the question, the variants and the
passage's length: the page opened from it asks for the passage instead of answering.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from dataclasses import dataclass, field

import gradio as gr

from ui.errors import refused
from variants.serving.engine import MAX_QUESTION_CHARS, Engine

PREFIX = "#ask="
MAX_STATE_CHARS = 8_000
RULES = ("pipeline", "calibrated", "margin")  # the Ask tab's no-answer rules (ui.ask.THRESHOLD_RULES)
MARGIN_RANGE = (-10.0, 10.0)  # the Ask tab's margin slider
PRIVACY = (
    "The passage and question are in the link itself, after the #: the app keeps no copy, so only those you send "
    "it to can read them. Opening it fills this tab and asks every variant again, live, on the machine that serves it."
)
COPY_JS = """(fragment) => {
  if (!fragment) return "";
  const page = PAGE;
  const url = (page || window.location.origin + window.location.pathname + window.location.search) + fragment;
  if (navigator.clipboard) navigator.clipboard.writeText(url).catch(() => {});
  return url;
}"""
# The Hub's protocol for an app in a Space's iframe (huggingface.co/docs/hub/spaces-handle-url-parameters): a
# message with a `hash` key to the parent page at https://huggingface.co sets that page's own address's hash.
FOLLOW_JS = """(fragment) => {
  if (fragment && window.parent !== window) window.parent.postMessage({hash: fragment}, "https://huggingface.co");
  return [];
}"""
READ_JS = "() => [window.location.hash]"
ASK_JS = """(flag) => {
  if (flag === "ask") document.getElementById("ask-submit")?.click();
  return [];
}"""


@dataclass(frozen=True)
class SharedAsk:
    """What a link carries. ``passage_chars``: the length of a passage too long for the link (then left out)."""

    question: str
    passage: str = ""
    extra: list[str] = field(default_factory=list)
    leave_out: list[str] = field(default_factory=list)
    rule: str = "pipeline"
    margin: float = 0.0
    passage_chars: int = 0


def _pack(data: dict) -> str:
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    raw = deflate.compress(json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()) + deflate.flush()
    return PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def encode(state: SharedAsk) -> str:
    """The link's part after the page's address (``#ask=...``); without the passage where it would pass
    :data:`MAX_STATE_CHARS`."""
    data = {"v": 1, "q": state.question, "p": state.passage, "x": state.extra, "o": state.leave_out,
            "r": state.rule, "m": state.margin}  # fmt: skip
    fragment = _pack(data)
    if len(fragment) > MAX_STATE_CHARS and state.passage:
        fragment = _pack({**data, "p": "", "n": len(state.passage)})
    return fragment


def decode(fragment: str, max_passage_chars: int) -> SharedAsk | None:
    """What a link's ``#ask=...`` carries, checked (None where it is not one, or cannot be read: cut short,
    edited, too long). Variant names are checked by the page against its own."""
    if not fragment.startswith(PREFIX) or len(fragment) > MAX_STATE_CHARS + len(PREFIX):
        return None
    payload = fragment[len(PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        inflate = zlib.decompressobj(-15)
        text = inflate.decompress(raw, 4 * (max_passage_chars + MAX_QUESTION_CHARS) + 4_096)
        if inflate.unconsumed_tail or not inflate.eof:  # larger than any state could be, or cut short
            return None
        data = json.loads(text)
    except (binascii.Error, ValueError, zlib.error):
        return None
    if not isinstance(data, dict):
        return None
    question, passage = data.get("q"), data.get("p", "")
    names = [data.get("x", []), data.get("o", [])]
    margin, chars = data.get("m", 0.0), data.get("n", 0)
    if not isinstance(question, str) or not isinstance(passage, str) or len(passage) > max_passage_chars:
        return None
    if len(question) > MAX_QUESTION_CHARS or not all(isinstance(n, list) and all(isinstance(x, str) for x in n)
                                                     for n in names):  # fmt: skip
        return None
    if not isinstance(margin, (int, float)) or not math.isfinite(margin) or not isinstance(chars, int):
        return None
    rule = data.get("r") if data.get("r") in RULES else "pipeline"
    margin = min(max(float(margin), MARGIN_RANGE[0]), MARGIN_RANGE[1])
    return SharedAsk(question, passage, names[0], names[1], rule, margin, max(chars, 0))


def link_words(state: SharedAsk, fragment: str) -> str:
    """What the link holds, in a sentence or two, for the box that shows it."""
    if state.passage_chars:
        return (
            f"The passage ({state.passage_chars:,} characters) is too long for a link, which carries at most "
            f"{MAX_STATE_CHARS:,} characters after the # (about 16,000 of text): this link holds the question and "
            "the variants; whoever opens it pastes the passage. " + PRIVACY
        )
    return f"{len(fragment):,} characters after the #. " + PRIVACY


# --- the Ask tab's controls -------------------------------------------------------------------------------


def copy_js(space_page: str | None) -> str:
    """The script that makes the full link from its ``#ask=...`` part: on a Space, after the Space's page on the
    Hub (``https://huggingface.co/spaces/OWNER/NAME``, what visitors see and share: the app runs in an iframe whose
    own address and query string are the Hub's plumbing), elsewhere after the page's own address."""
    return COPY_JS.replace("PAGE", json.dumps(space_page or ""))


def share_controls(
    engine: Engine, page: gr.Blocks, context, question, extra, leave_out, rule, margin, asked=(), space_page=None
) -> None:
    """The button that makes the link and the box that shows it (under the cards), and the page's load event
    that reads a link it was opened from. The Ask button must have ``elem_id="ask-submit"``. On a Space
    (``space_page``, :func:`variants.core.config.space_page`), the link names the Space's page, and each question
    asked (the ``asked`` triggers) puts its ``#ask=...`` in that page's address too, as the Hub lets an app do:
    the address bar always holds a link to the question on the screen, and the Hub hands it back to the app when
    the page is opened."""
    steps = {v.spec.name for v in engine.loaded if not v.spec.headline}
    headline = {v.spec.name for v in engine.loaded if v.spec.headline}
    make = gr.Button("Copy a link to this question", size="sm", elem_id="share-make")
    link = gr.Textbox(label="Link to this question", visible=False, buttons=["copy"], elem_id="share-link")
    fragment = gr.Textbox(visible=False)  # carries the link's #... between the server and the page's script
    flag = gr.Textbox(visible=False)  # "ask" once a link filled the tab

    def made(context: str, question: str, extra: list[str], leave_out: list[str], rule: str, margin: float) -> tuple:
        if not (question or "").strip():
            raise refused("Type a question first: the link is to a question.", "Copy a link")
        state = SharedAsk(question, context or "", list(extra or []), list(leave_out or []), rule, float(margin))
        text = encode(state)
        shown = decode(text, engine.max_context_chars) or state
        return text, gr.Textbox(visible=True, info=link_words(shown, text))

    make.click(made, [context, question, extra, leave_out, rule, margin], [fragment, link], queue=False,
               api_visibility="private").then(None, [fragment], [link], js=copy_js(space_page), queue=False,
                                              api_visibility="private")  # fmt: skip
    if space_page and asked:
        followed = gr.Textbox(visible=False)  # the question asked, as a link's #ask=... part

        def follow(context: str, question: str, extra: list[str], leave_out: list[str], rule: str, margin: float):
            if not (question or "").strip():
                return ""
            return encode(SharedAsk(question, context or "", list(extra or []), list(leave_out or []), rule,
                                    float(margin)))  # fmt: skip

        gr.on(list(asked), follow, [context, question, extra, leave_out, rule, margin], [followed], queue=False,
              api_visibility="private").then(None, [followed], None, js=FOLLOW_JS, queue=False,
                                             api_visibility="private")  # fmt: skip

    def opened(hash_part: str) -> tuple:
        if not (hash_part or "").startswith(PREFIX):
            return (gr.skip(),) * 7
        state = decode(hash_part, engine.max_context_chars)
        if state is None:
            gr.Warning("This link to a question could not be read (cut short or edited): the page opens as usual.")
            return (gr.skip(),) * 7
        passage = state.passage
        if state.passage_chars and not passage:
            passage = gr.Textbox(
                value="",
                placeholder=f"The shared link holds the question only: its passage ({state.passage_chars:,} "
                "characters) was too long for a link. Paste it here, then press Ask.",
            )
        return (
            passage,
            state.question,
            [n for n in state.extra if n in steps],
            [n for n in state.leave_out if n in headline],
            state.rule,
            state.margin,
            "ask" if state.passage else "",
        )

    outputs = [context, question, extra, leave_out, rule, margin, flag]
    page.load(opened, [fragment], outputs, js=READ_JS, queue=False, api_visibility="private").then(
        None, [flag], None, js=ASK_JS, queue=False, api_visibility="private"
    )
