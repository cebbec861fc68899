"""Whether a context looks like text at all: a string that is mostly control characters or bytes that could
not be decoded gets a clear message instead of a span of it as an "answer".

The judgement is Unicode's own categories from the standard library (:mod:`unicodedata`); the libraries that
guess whether *bytes* are text (charset-normalizer, chardet) need the bytes, and here the text has already
been decoded, so what is left of undecodable bytes are U+FFFD replacement characters (``errors="replace"``)
or lone surrogates (``errors="surrogateescape"``).
"""

import unicodedata

# Unicode categories no written text is made of: controls (Cc), lone surrogates (Cs: undecodable bytes kept
# by surrogateescape), private use (Co) and unassigned code points (Cn).
NOT_TEXT_CATEGORIES = frozenset({"Cc", "Cs", "Co", "Cn"})
LAYOUT_CONTROLS = frozenset("\t\n\r\f\v")  # controls that real text carries (tabs, line and page breaks)
REPLACEMENT = "\ufffd"  # what a decoder puts in place of bytes it cannot read
# Share of such characters above which a string is not taken for text. 2,000 random bytes decoded as UTF-8
# with replacement are about 55% of them, as Latin-1 about 24% (64 of the 256 byte values are controls), as
# cp1252 with replacement about 14%; the SQuAD sample, and text in Chinese, Russian or Arabic or with emoji, 0%.
MAX_NOT_TEXT_SHARE = 0.1


def not_text_share(text: str) -> float:
    """The share of ``text``'s characters that no written text is made of (0 for an empty string)."""
    if not text:
        return 0.0
    bad = sum(
        1
        for c in text
        if c == REPLACEMENT or (c not in LAYOUT_CONTROLS and unicodedata.category(c) in NOT_TEXT_CATEGORIES)
    )
    return bad / len(text)


def visible(c: str) -> bool:
    """Whether ``c`` is something a reader sees: a letter, mark, number, punctuation or symbol (not white space,
    nor an invisible format character such as a zero-width space)."""
    return unicodedata.category(c)[0] in "LMNPS"


def looks_like_text(text: str) -> bool:
    """False when more than a tenth of ``text`` is control characters, undecodable bytes (U+FFFD, lone
    surrogates), private-use or unassigned code points: random or binary bytes, or text in the wrong encoding;
    and when nothing in it is visible (white space and zero-width characters only).
    An empty string is not judged here (True): saying it is empty is the caller's message."""
    if not text:
        return True
    return not_text_share(text) <= MAX_NOT_TEXT_SHARE and any(visible(c) for c in text)


def invalid_text(text: object) -> str | None:
    """Why ``text`` is not valid text, in words, or None: not a string at all, or a string no encoding can
    hold (a lone surrogate, U+D800 to U+DFFF, as a JSON escape like ``"\\ud800"`` makes one). Such a string
    reaches no tokenizer and no log: the first is checked, where all text comes in, before any other check."""
    if not isinstance(text, str):
        return f"it is {type(text).__name__}, not a string"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"character {exc.start + 1:,} is a lone surrogate (U+{ord(text[exc.start]):04X}), half of a pair "
            "that no text encoding can hold"
        )
    return None
