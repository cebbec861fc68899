"""Refusals: bad input gets its message on the page or in the API's answer, and one line in the server's log.

Gradio prints the traceback of every ``gr.Error`` a handler raises unless it is made with
``print_exception=False``; a refused question is no crash, so the log says what was refused, in one line.
"""

import logging

import gradio as gr

log = logging.getLogger("app")


def log_refusal(message: str, where: str) -> None:
    """One line in the log for input ``where`` (e.g. "/answer") refuses: the sentence the visitor reads."""
    log.warning("%s refused: %s", where, " ".join(message.split()))


def refused(message: str, where: str) -> gr.Error:
    """The ``gr.Error`` to raise for input ``where`` refuses, its message logged as one line (no traceback)."""
    log_refusal(message, where)
    return gr.Error(message, print_exception=False)
