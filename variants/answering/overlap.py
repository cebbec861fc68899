"""How much of a question each window of a long context holds: BM25 over the token ids the windows already
have (the ``focus`` window rule, :mod:`variants.answering.qa`).

A question about a long passage is usually answered where the passage uses its words: the retriever half of
a retriever-reader system (DrQA, Haystack), here inside one context. Scores are Okapi BM25 (k1 1.2, b 0.75)
of each window's context tokens against the question's distinct tokens, with Lucene's IDF,
``ln(1 + (N - n + 0.5) / (n + 0.5))`` over the N windows of the same context: it never goes negative, so a
question word in every window of a two-window passage counts for little rather than against it.

Written with numpy rather than taken from ``rank_bm25``: that library scores lists of strings one query at a
time, and its Okapi IDF goes negative for a word in more than half the windows (it floors it at a share of
the mean), which on passages of two or three windows is most of the question. Here it is one pass over the
ids the tokenizer returned, with no second tokenization and no dependency for every Space to install.
"""

from __future__ import annotations

import re

import numpy as np

K1 = 1.2
B = 0.75
PARAGRAPH_BREAK = re.compile(r"\n[ \t\r]*\n")  # a blank line
# Where a sentence ends: ., ! or ? (and any closing quotes or brackets) before white space, or a paragraph break.
# A rule, not a sentence splitter: "U.S. Army" splits after "U.S."; for weighing a span's surroundings a sentence
# cut short now and then costs little, and it keeps every Space free of a tokenizer model to install.
SENTENCE_END = re.compile(r"(?<=[.!?])[\"'”’)\]]*\s+|(?<=[。！？])[」』”’）]*\s*|\n[ \t\r]*\n")
# Chinese and Japanese end a sentence with 。！？ and no space after. A text with no sentence ends at all (a list,
# an unpunctuated transcript) would make a span's "sentence" its whole window, so a "sentence" longer than this
# many tokens in its window is not taken for one: the span's radius neighbourhood stands in for it. About 0.2%
# of the sentences of the bench's sample run past 128 WordPiece tokens (99th percentile: 88).
LONGEST_SENTENCE = 128


def query_terms(
    input_ids: np.ndarray, question_mask: np.ndarray, context_mask: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the windows ``rows`` of one pair: the question's distinct token ids, their IDF over those windows,
    and each window's count of each of them ([windows, terms])."""
    query = np.unique(input_ids[rows[0]][question_mask[rows[0]]])
    tf = np.array([(input_ids[r][context_mask[r]][:, None] == query).sum(axis=0) for r in rows], dtype=float)
    n = np.count_nonzero(tf, axis=0)
    return query, np.log1p((len(rows) - n + 0.5) / (n + 0.5)), tf.reshape(len(rows), len(query))


def window_overlap(
    input_ids: np.ndarray, question_mask: np.ndarray, context_mask: np.ndarray, owner: np.ndarray
) -> np.ndarray:
    """BM25 of each window (a row of ``input_ids``) against its question, IDF over the windows of the same
    pair (``owner``: window -> pair). ``question_mask``/``context_mask`` mark the question's and the
    context's tokens in each row. Returns one float per window, 0 where the question shares no token."""
    scores = np.zeros(len(owner))
    for pair in np.unique(owner):
        rows = np.flatnonzero(owner == pair)
        query, idf, tf = query_terms(input_ids, question_mask, context_mask, rows)
        if not len(query):
            continue
        lengths = context_mask[rows].sum(axis=1).astype(float)
        norm = K1 * (1 - B + B * lengths / max(lengths.mean(), 1.0))
        scores[rows] = (idf * tf * (K1 + 1) / (tf + norm[:, None])).sum(axis=1)
    return scores


def span_overlap(
    ids: np.ndarray,
    context: np.ndarray,
    start: int,
    end: int,
    radius: int,
    query: np.ndarray,
    idf: np.ndarray,
    sentence: np.ndarray | None = None,
) -> float:
    """BM25 (without length normalization: every radius neighbourhood is as long; a sentence is weighed the same
    way, so a long one holds more chances of the question's words) of the context tokens within
    ``radius`` tokens before ``start`` and after ``end`` in one window (``ids``, ``context``: its token ids
    and context mask), against the question's terms ``query`` weighed by ``idf``. The span's own tokens
    are left out: an answer seldom repeats the question's words, its surroundings usually do. With
    ``sentence`` (each token's sentence number in the window, :func:`token_sentences`) the surroundings are the
    window's tokens of the sentence the span starts in instead, however far it reaches, unless that "sentence"
    holds more than :data:`LONGEST_SENTENCE` context tokens (text without sentence ends): then the radius."""
    if sentence is None:
        around = np.r_[max(0, start - radius) : start, end + 1 : min(len(ids), end + 1 + radius)]
    else:
        inside = sentence == sentence[start]  # a span that runs on into the next sentence gets no credit there
        if np.count_nonzero(inside & context) > LONGEST_SENTENCE:  # no sentence ends here: the radius instead
            return span_overlap(ids, context, start, end, radius, query, idf)
        inside[start : end + 1] = False
        around = np.flatnonzero(inside)
    near = ids[around[context[around]]]
    tf = (near[:, None] == query).sum(axis=0).astype(float)
    return float((idf * tf * (K1 + 1) / (tf + K1)).sum())


def log_prior(scores: np.ndarray, owner: np.ndarray, weight: float) -> np.ndarray:
    """ln P(window | question) for each window: a softmax of ``weight`` x its BM25 over the windows of its
    pair. 0 for a pair of one window (so every rule agrees there), and all windows alike at weight 0."""
    prior = np.zeros(len(owner))
    for pair in np.unique(owner):
        rows = np.flatnonzero(owner == pair)
        x = weight * scores[rows]
        top = x.max()
        prior[rows] = x - top - np.log(np.exp(x - top).sum())
    return prior


def paragraph_prior(
    context: str,
    ids: np.ndarray,
    offsets: np.ndarray,
    context_mask: np.ndarray,
    rows: np.ndarray,
    query: np.ndarray,
    weight: float,
) -> tuple[np.ndarray, np.ndarray]:
    """ln P(paragraph | question) for the paragraphs of one context (split at blank lines): a softmax of
    ``weight`` x each paragraph's BM25 against the question's terms ``query``, IDF over the paragraphs. Its
    tokens are the context tokens of the windows ``rows`` (``ids``, ``offsets``: token ids and character
    offsets of every window), each counted once however many windows hold it. Returns the paragraphs'
    first characters and their log priors: all 0 for a context of one paragraph."""
    starts = starts_after(PARAGRAPH_BREAK, context)
    if len(starts) == 1 or not len(query):
        return starts, np.zeros(len(starts))
    mask = context_mask[rows]
    positions, first = np.unique(offsets[rows][..., 0][mask], return_index=True)
    tokens = ids[rows][mask][first]
    paragraph = np.searchsorted(starts, positions, side="right") - 1
    tf = np.zeros((len(starts), len(query)))
    for j, term in enumerate(query):
        np.add.at(tf[:, j], paragraph[tokens == term], 1.0)
    n = np.count_nonzero(tf, axis=0)
    idf = np.log1p((len(starts) - n + 0.5) / (n + 0.5))
    lengths = np.bincount(paragraph, minlength=len(starts)).astype(float)
    norm = K1 * (1 - B + B * lengths / max(lengths.mean(), 1.0))
    x = weight * (idf * tf * (K1 + 1) / (tf + norm[:, None])).sum(axis=1)
    top = x.max()
    return starts, x - top - np.log(np.exp(x - top).sum())


def starts_after(breaks: re.Pattern, context: str) -> np.ndarray:
    """The first character of each piece of ``context`` that ``breaks`` (a paragraph or sentence end) splits."""
    return np.array([0] + [m.end() for m in breaks.finditer(context)])


def sentence_starts(context: str) -> np.ndarray:
    """The first character of each sentence of ``context`` (:data:`SENTENCE_END` splits it)."""
    return starts_after(SENTENCE_END, context)


def token_sentences(starts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Each token's sentence number from the sentences' first characters (:func:`sentence_starts`) and the
    tokens' character ``offsets`` ([tokens, 2]) in one window; meaningful for its context tokens only. A token
    is placed by its last character: byte-level BPE and SentencePiece tokens carry the white space before a
    word, which belongs to the sentence before."""
    return np.searchsorted(starts, np.maximum(offsets[:, 1] - 1, offsets[:, 0]), side="right") - 1
