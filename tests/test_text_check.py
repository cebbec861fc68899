"""looks_like_text: random or binary bytes, however they were decoded, are not text; text in any script is."""

from __future__ import annotations

import random

import pytest

from variants.core.text_check import MAX_NOT_TEXT_SHARE, looks_like_text, not_text_share

RANDOM = random.Random(0).randbytes(2000)  # the 2,000 random bytes


@pytest.mark.parametrize(
    ("encoding", "errors"),
    [("utf-8", "replace"), ("utf-8", "surrogateescape"), ("latin-1", "strict"), ("cp1252", "replace")],
)
def test_random_bytes_are_not_text_however_decoded(encoding: str, errors: str) -> None:
    assert not looks_like_text(RANDOM.decode(encoding, errors))


@pytest.mark.parametrize(
    "text",
    [
        "Ulan Bator was founded in 1639 as a nomadic Buddhist monastic centre.",
        "東京は日本の首都です。人口は約1400万人です。",
        "Москва — столица России.",
        "القاهرة هي عاصمة مصر.",
        "Scores 😀👍🏽 and symbols ∑ ≤ € — fine.",
        "Columns\tfrom\ta\tspreadsheet\r\nand a page break\f, pasted from a PDF.\n" * 20,
        "",  # empty: the caller's own message says so
    ],
)
def test_text_in_any_script_is_text(text: str) -> None:
    assert looks_like_text(text) and not_text_share(text) == 0.0


def test_the_line_is_a_share_of_the_characters() -> None:
    words = "plain words " * 10  # 120 characters
    just_under = words + "\x00" * int(len(words) * MAX_NOT_TEXT_SHARE / (1 - MAX_NOT_TEXT_SHARE))
    assert looks_like_text(just_under)
    assert not looks_like_text(just_under + "\x00\x00")
    assert not looks_like_text("\x00\x01\x02" + "\ufffd" * 5 + "ab")  # mostly controls and replacement characters
    assert not_text_share("a\ud800") == 0.5  # a lone surrogate: an undecodable byte kept by surrogateescape
    assert not_text_share("a\ue000") == 0.5  # private use


def test_nothing_visible_is_not_text() -> None:
    assert not looks_like_text("\u200b" * 50)  # zero-width spaces: past an empty-input check, shows nothing
    assert not looks_like_text("\u200b \u2028\u00a0\ufeff")
    assert looks_like_text("\u200bParis\u200b") and looks_like_text("42") and looks_like_text("…")
