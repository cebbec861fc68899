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

import numpy as np

K1 = 1.2
B = 0.75


def window_overlap(
    input_ids: np.ndarray, question_mask: np.ndarray, context_mask: np.ndarray, owner: np.ndarray
) -> np.ndarray:
    """BM25 of each window (a row of ``input_ids``) against its question, IDF over the windows of the same
    pair (``owner``: window -> pair). ``question_mask``/``context_mask`` mark the question's and the
    context's tokens in each row. Returns one float per window, 0 where the question shares no token."""
    scores = np.zeros(len(owner))
    for pair in np.unique(owner):
        rows = np.flatnonzero(owner == pair)
        query = np.unique(input_ids[rows[0]][question_mask[rows[0]]])
        if not len(query):
            continue
        docs = [input_ids[r][context_mask[r]] for r in rows]
        lengths = np.array([len(d) for d in docs], dtype=float)
        tf = np.array([(d[:, None] == query).sum(axis=0) for d in docs], dtype=float)  # [windows, terms]
        n = np.count_nonzero(tf, axis=0)
        idf = np.log1p((len(rows) - n + 0.5) / (n + 0.5))
        norm = K1 * (1 - B + B * lengths / max(lengths.mean(), 1.0))
        scores[rows] = (idf * tf * (K1 + 1) / (tf + norm[:, None])).sum(axis=1)
    return scores


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
