"""Whether a question or a passage is in English: the models are trained on English only, and on other
languages they answer with confidence and wrongly (a German question got a span of the wrong clause at 63%).
Every interface shows the same one-line notice (:func:`language_notice`); the answers are still given.

Identification is py3langid's (a maintained fork of langid.py: a naive Bayes model over byte n-grams of 97
languages, shipped inside the package, numpy only, nothing downloaded). A short text carries little evidence,
so a text is called another language only when the model is fairly sure of it and gives English almost no
chance: "Paris", "Who?" or "What is CERN?" are never flagged.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

SAMPLE_CHARS = 2_000  # a passage's language shows in its opening; longer texts cost time and add nothing
MIN_LETTERS = 8  # fewer letters than this say nothing about a language
SURE_ABOVE = 0.4  # the model's probability of the other language must be above this...
ENGLISH_BELOW = 0.05  # ...and its probability of English below this

NAMES = {  # the languages people are most likely to paste; others are named by their ISO 639 code
    **{"de": "German", "fr": "French", "es": "Spanish", "it": "Italian", "pt": "Portuguese", "nl": "Dutch"},
    **{"sv": "Swedish", "da": "Danish", "no": "Norwegian", "nb": "Norwegian", "fi": "Finnish", "pl": "Polish"},
    **{"cs": "Czech", "sk": "Slovak", "hu": "Hungarian", "ro": "Romanian", "ru": "Russian", "uk": "Ukrainian"},
    **{"el": "Greek", "tr": "Turkish", "ar": "Arabic", "he": "Hebrew", "fa": "Persian", "hi": "Hindi"},
    **{"zh": "Chinese", "ja": "Japanese", "ko": "Korean", "vi": "Vietnamese", "id": "Indonesian", "ms": "Malay"},
    **{"ca": "Catalan", "la": "Latin", "eo": "Esperanto", "bg": "Bulgarian", "sr": "Serbian", "hr": "Croatian"},
}

_lock = threading.Lock()  # one load, whichever request comes first


@functools.cache
def _identifier() -> Any:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier  # noqa: PLC0415 - about 1 s to load, once

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identifier() -> Any:
    """py3langid's identifier with probabilities that sum to 1, loaded once (the engine loads it at start-up)."""
    with _lock:
        return _identifier()


def other_language(text: str) -> str | None:
    """The ISO 639 code of the language ``text`` is in when it is confidently not English, else None (English,
    too short to tell, or unsure)."""
    sample = text[:SAMPLE_CHARS]
    if sum(c.isalpha() for c in sample) < MIN_LETTERS:
        return None
    ranked = dict(identifier().rank(sample))
    code, probability = max(ranked.items(), key=lambda item: item[1])
    if code == "en" or probability <= SURE_ABOVE or ranked.get("en", 0.0) >= ENGLISH_BELOW:
        return None
    return code


def language_name(code: str) -> str:
    return NAMES.get(code, f"language “{code}”")


def language_notice(question: str, context: str) -> str:
    """One line when the question or the passage is not English (naming the language), else ""."""
    asked, read = other_language(question), other_language(context)
    if asked is None and read is None:
        return ""
    if asked is not None and asked == read:
        what = f"The question and the passage look {language_name(asked)}"
    elif asked is not None and read is not None:
        what = f"The question looks {language_name(asked)} and the passage {language_name(read)}"
    elif asked is not None:
        what = f"The question looks {language_name(asked)}"
    else:
        what = f"The passage looks {language_name(read)}"
    return f"{what}, not English: these models were trained on English only, so their answers may well be wrong."
