"""The one QA decoding path every variant answers through.

Long contexts are split into windows with a stride; each window's start/end logits become
probabilities over its context tokens plus [CLS]; the best span (at most ``max_answer_length``
tokens) is compared with the SQuAD v2 null answer ([CLS] start x end). How the windows of one context
are combined is a rule (:data:`WINDOW_RULES`, ``DecodeSettings.windows``): ``"pipeline"`` is exactly
what transformers' ``pipeline("question-answering", handle_impossible_answer=True)`` returns (scores
of equal answer texts added up across windows, against the lowest null over windows), without its
per-window Python overhead: windows of several questions run as one batch. The span is widened to
whole words and mapped to character offsets in the original context.

The null threshold is on the log-odds of "no answer" against the best span,
``ln(null score / span score)``: within one window that is BERT's ``null_score_diff_threshold``
(CLS start + end logits minus the span's), the knob SQuAD v2 systems calibrate.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

import numpy as np

from variants.answering.overlap import (
    log_prior,
    paragraph_prior,
    query_terms,
    sentence_starts,
    span_overlap,
    token_sentences,
    window_overlap,
)
from variants.core.text_check import invalid_text, looks_like_text

# The model config.json key holding the null threshold calibrated for that model (variants.training.train calibrate).
CALIBRATED_THRESHOLD = "qa_null_threshold"
CALIBRATED = "calibrated"
# How the windows of one long context are combined (docs/results.md, "Long passages", compares them):
# "pipeline": transformers' rule: a text's scores are added up over the windows it appears in, against the
#   lowest null score over windows (so a name repeated in many windows can beat the one window that
#   holds the answer, and a summed score can pass 1);
# "max": a text's best single-window score, against the lowest null over windows;
# "window": the best single-window span against the null of that same window: one window's probabilities;
# "logits": BERT's own SQuAD v2 rule (Google's run_squad.py, transformers' examples/run_qa postprocessing), per
#   answer text as the other rules count it (the token spans that widen to one text added up in a window):
#   texts ranked by raw start + end logits across windows, against the lowest null logits of any window,
#   so that a window with nothing good in it cannot make a weak span look certain by normalizing alone;
# "odds": the text's odds against "no answer" in the window where they are highest (its probability over
#   that window's null probability), decided against that same window's null: a window that puts its weight
#   on [CLS] (what training with whole-article windows teaches for windows without the answer) cannot win
#   with a span it rates below "no answer", however its probabilities compare with other windows'.
# "focus": "odds", with each window's odds weighed by how much of the question it holds (ln P(window), a
#   softmax of DecodeSettings.focus x its BM25 against the question over the context's windows:
#   variants.answering.overlap), decided against the chosen window's own null: a window that shares none of
#   the question's rarer words needs far better odds to win than the one that reads like the question.
# "near": "focus", plus DecodeSettings.near x the BM25 of the span's own surroundings (the sentence it starts in,
#   or DecodeSettings.near_radius tokens either side; the span left out) against the question: within a window,
#   the span whose neighbours are the question's words ranks higher. Decided against the chosen window's own
#   null, as "focus".
WINDOW_RULES = ("pipeline", "max", "window", "logits", "odds", "focus", "near")
# When to say "no answer": a log-odds threshold (0 is transformers' pipeline rule, the default everywhere),
# or "calibrated": each model's own threshold from its config.json (0 for a model without one).
NullThreshold = float | Literal["calibrated"]


def calibrated_threshold(config: object) -> float:
    """The null threshold stored in a model's config (a transformers ``PretrainedConfig``), 0 without one."""
    return float(getattr(config, CALIBRATED_THRESHOLD, 0.0))


def parse_null_threshold(text: str | float) -> NullThreshold:
    """``"calibrated"`` or a number (``"0"``, ``"-4.5"``): the one reader of a threshold mode (CLI, bench, app)."""
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):  # a client's JSON object, list or true
        raise ValueError(f"null threshold must be a number or {CALIBRATED!r}, not {type(text).__name__}")
    if isinstance(text, (int, float)):
        value = float(text)
    elif (cleaned := text.strip().lower()) == CALIBRATED:
        return CALIBRATED
    else:
        try:
            value = float(cleaned)
        except ValueError:
            raise ValueError(f"null threshold must be a number or {CALIBRATED!r}, not {text!r}") from None
    if math.isnan(value):  # NaN would make every comparison false
        raise ValueError("null threshold must be a number, not NaN")
    if math.isinf(value):  # always or never "no answer", and a reply's bare Infinity is not JSON
        raise ValueError(f"null threshold must be a finite number, not {value}")
    return value


def resolve_null_threshold(mode: NullThreshold, calibrated: float | None) -> float:
    """The threshold ``mode`` means for one model whose calibrated threshold is ``calibrated`` (None: it has none)."""
    if mode == CALIBRATED:
        return float(calibrated or 0.0)
    return float(mode)


class LogitsModel(Protocol):
    """Anything that maps tokenized inputs to start/end logits (see variants.answering.runtime)."""

    input_names: tuple[str, ...]
    # Optional: ``pass_tokens``, the most tokens one forward pass should hold (None or absent: no cap).

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]: ...


@dataclass(frozen=True)
class DecodeSettings:
    """Windowing and decoding options (defaults follow SQuAD practice)."""

    max_length: int = 384
    stride: int = 128
    max_answer_length: int = 30
    # "no answer" when ln(null score / best span score) > threshold; 0 is transformers' pipeline.
    # (Engine sets it per model from its threshold mode, e.g. "calibrated".)
    null_threshold: float = 0.0
    # How the windows of a long context are combined: one of WINDOW_RULES. "near" (first at weight 0.5, radius
    # 32, now each span's sentence at weight 1.0, below; "focus"'s 0.25 under it), chosen on 300 questions of the
    # two held-out training articles asked about their whole article (the highest answerable F1 there averaged
    # over the baseline trained with whole-article windows and the shipped INT8 build, ahead of "focus" by 3.4
    # points, by a rule written down first: experiments/window_rule_probe.py), then reported on the bench's
    # sample (docs/results.md, "Long passages"); on one window every rule agrees; "focus", "odds" and
    # "pipeline" stay available by name.
    windows: str = "near"
    # The "focus" rule's weight on each window's BM25 (ln P(window) = focus x BM25 - logsumexp over windows):
    # 0 is "odds"; large keeps only the window most like the question. Chosen from 0.1 to 4 the same way.
    focus: float = 0.25
    # The "near" rule's weight on the BM25 of a span's surroundings (0 is "focus"), and how many tokens either
    # side count where they are not its sentence (near_sentence False). 0.5 and 32 were chosen from weights 0.1
    # to 2 and radii 8 to 64 as above; 1.0 with the sentence from 0.25, 0.5 and 1 (below).
    near: float = 1.0
    near_radius: int = 32
    # The "near" rule's weight on each answer's paragraph (a context's blank lines split it): ln P(paragraph), a
    # softmax over the context's paragraphs of this weight x their BM25 against the question. 0: off (weights 0.25
    # to 2 were tried on the same 300 questions and none was ahead of 0: docs/results.md, "Long passages").
    paragraph: float = 0.0
    # The "near" rule's surroundings of a span: the sentence it starts in (within its window) instead of
    # near_radius tokens either side. Chosen on the same 300 questions by a rule written first: at weight 1.0,
    # 59.54 answerable F1 on whole articles averaged over the shipped baseline and INT8 build against 58.31 for
    # 32 tokens at 0.5 (docs/results.md, "Long passages"); False with near 0.5 is the rule shipped before.
    near_sentence: bool = True
    handle_impossible: bool = True
    align_to_words: bool = True
    batch_size: int = 32  # windows per forward pass

    def window_rule(self) -> dict:
        """How a long context's windows are combined, with every setting the rule reads (for records)."""
        return {
            "rule": self.windows,
            **{k: getattr(self, k) for k in ("focus", "near", "near_radius", "near_sentence", "paragraph")},
        }


@dataclass(frozen=True)
class Answer:
    """A decoded answer: text, character offsets into the context, and its probability.

    ``score`` is what a person is shown: the span's probability where there is an answer, the null
    probability where "no answer" wins; both come from one window's softmax, so they never pass 1.
    ``span_score`` is the best span's probability in its best window. The decision compares
    ``null_score`` with ``ranked_score``: the span's score under the window rule, which is
    ``span_score`` except under the pipeline's rule, where it is the sum over windows (it can pass 1);
    under the "logits" rule it compares logits instead (``logit_margin``).
    When "no answer" wins, ``guess`` (with its offsets) is the best span it beat, for a UI to show.
    """

    text: str
    start: int
    end: int
    score: float
    span_score: float
    null_score: float
    guess: str = ""
    guess_start: int = 0
    guess_end: int = 0
    ranked_score: float | None = None  # None: span_score
    logit_margin: float | None = None  # the "logits" rule's decision: lowest null logits - the span's logits

    @property
    def is_null(self) -> bool:
        return self.text == ""

    @property
    def null_margin(self) -> float:
        """ln(null score / the span's ranked score): how strongly "no answer" beats the best span (SQuAD's
        na_prob ranks by it; the answer is null where it is above the null threshold). Under the "logits"
        rule, the logits' own margin (across windows no probability ratio gives it)."""
        if self.logit_margin is not None:
            return self.logit_margin
        ranked = self.span_score if self.ranked_score is None else self.ranked_score
        return null_margin(self.null_score, ranked)


def null_margin(null_score: float, span_score: float) -> float:
    """ln(null / span), finite even where a probability underflowed to 0."""
    tiny = 1e-45
    return float(np.log(max(null_score, tiny)) - np.log(max(span_score, tiny)))


@dataclass
class Windows:
    """Tokenized windows for a list of (question, context) pairs."""

    encoding: object  # transformers.BatchEncoding with offsets and overflow mapping
    owner: np.ndarray  # window -> pair index
    context_mask: np.ndarray  # [windows, width] True on context tokens
    question_mask: np.ndarray  # [windows, width] True on question tokens
    cls_index: np.ndarray  # [windows]

    def inputs(self, names: tuple[str, ...], rows: np.ndarray | slice = slice(None)) -> dict[str, np.ndarray]:
        enc = self.encoding
        out = {n: np.asarray(enc[n], dtype=np.int64)[rows] for n in names if n in enc}
        if "attention_mask" in names and "attention_mask" in out:
            width = int(out["attention_mask"].sum(axis=1).max())  # trim padding of this slice
            out = {k: v[:, :width] for k, v in out.items()}
        return out


class InputError(ValueError):
    """A question or context that cannot be answered as given; the message says why.

    ``field`` names the input at fault ("question" or "context"), so a UI can point at it.
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


_TOKENIZER_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def tokenizer_lock(tokenizer) -> threading.Lock:
    """The one lock for calls into ``tokenizer``. A fast (Rust) tokenizer cannot be called from two threads at
    once: a call sets its truncation and padding and the other fails with "Already borrowed". Tokenizing is a
    small part of an answer, so requests that share a variant (the Ask tab, ``/v1/answer``, a quick benchmark,
    a batcher's thread) take turns only for it."""
    with _LOCKS_LOCK:
        lock = _TOKENIZER_LOCKS.get(tokenizer)
        if lock is None:
            lock = _TOKENIZER_LOCKS[tokenizer] = threading.Lock()
        return lock


def window_stride(tokenizer, questions: list[str], settings: DecodeSettings) -> int:
    """The stride the windows of ``questions`` get: the settings' stride, less when the longest question
    leaves little room for context; :class:`InputError` when it leaves almost none.

    Pairs whose questions give the same stride are windowed exactly alike whether they are tokenized
    alone or together (the dynamic batcher groups requests by it).

    Most questions are too short to matter, and those are known without tokenizing them, so that a
    request makes one tokenizer call, not two: an ASCII question of n characters has at most 2n + 1
    tokens (every WordPiece, BPE or byte token covers one character or more, and a word-start marker
    such as SentencePiece's adds at most one token per piece, even after a split at every punctuation
    mark, as DeBERTa's tokenizer does). A normalizer that lengthened ASCII text would break the bound;
    the tokenizer families in tests/test_qa_properties.py are checked against it. Only a longer or
    non-ASCII question is tokenized here.
    """
    specials = tokenizer.num_special_tokens_to_add(pair=True)
    full_stride_up_to = settings.max_length - specials - max(2 * settings.stride, 8)  # question tokens
    if questions and all(q.isascii() and 2 * len(q) + 1 <= full_stride_up_to for q in questions):
        return settings.stride
    with tokenizer_lock(tokenizer):
        tokens = tokenizer(questions, add_special_tokens=False, verbose=False)["input_ids"]  # counted: may pass max
    longest_question = max(len(ids) for ids in tokens)
    room = settings.max_length - longest_question - specials
    if room < 8:
        raise InputError(
            f"The question is too long ({longest_question} tokens): it must leave room for the context "
            f"in a window of {settings.max_length} tokens.",
            "question",
        )
    return min(settings.stride, room // 2)


def tokenize(tokenizer, pairs: list[tuple[str, str]], settings: DecodeSettings) -> Windows:
    """Split each (question, context) into windows of ``max_length`` tokens overlapping by ``stride``."""
    questions = [q for q, _ in pairs]
    contexts = [c for _, c in pairs]
    stride = window_stride(tokenizer, questions, settings)
    with tokenizer_lock(tokenizer):
        enc = tokenizer(
            questions,
            contexts,
            truncation="only_second",
            max_length=settings.max_length,
            stride=stride,
            padding="longest",
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
    n = len(enc["input_ids"])
    width = len(enc["input_ids"][0])
    context_mask = np.zeros((n, width), dtype=bool)
    question_mask = np.zeros((n, width), dtype=bool)
    for i in range(n):
        seq = enc.sequence_ids(i)
        context_mask[i] = [s == 1 for s in seq]
        question_mask[i] = [s == 0 for s in seq]
    ids = np.asarray(enc["input_ids"])
    cls_id = tokenizer.cls_token_id
    cls_index = np.argmax(ids == cls_id, axis=1) if cls_id is not None else np.zeros(n, dtype=int)
    owner = np.asarray(enc["overflow_to_sample_mapping"])
    return Windows(encoding=enc, owner=owner, context_mask=context_mask, question_mask=question_mask,
                   cls_index=cls_index)  # fmt: skip


def window_passes(lengths: np.ndarray, batch_size: int, cap: int | None = None) -> list[slice]:
    """Consecutive windows per forward pass, given each window's length in tokens: up to ``batch_size`` in a
    pass and, under a ``cap``, as many as keep (windows x the longest one's length: a pass is padded to its
    longest window) within ``cap`` tokens; a window longer than the cap has a pass of its own."""
    passes, lo, longest = [], 0, 0
    for i, length in enumerate(int(n) for n in lengths):
        if i > lo and (i - lo + 1 > batch_size or (cap and (i - lo + 1) * max(longest, length) > cap)):
            passes.append(slice(lo, i))
            lo, longest = i, 0
        longest = max(longest, length)
    if len(lengths):
        passes.append(slice(lo, len(lengths)))
    return passes


def model_passes(model: LogitsModel, windows: Windows, batch_size: int) -> list[tuple[slice, int]]:
    """The forward passes :func:`run_windows` makes: each pass's windows and its width in tokens (a pass is
    trimmed to its longest window), up to ``batch_size`` windows a pass, fewer where the model caps the
    tokens of a pass (its ``pass_tokens``: :func:`window_passes`)."""
    n, width = windows.context_mask.shape
    enc = windows.encoding
    trimmed = "attention_mask" in model.input_names and "attention_mask" in enc  # as Windows.inputs trims
    lengths = np.asarray(enc["attention_mask"]).sum(axis=1) if trimmed else np.full(n, width)
    passes = window_passes(lengths, batch_size, getattr(model, "pass_tokens", None))
    return [(rows, int(lengths[rows].max())) for rows in passes]


def run_windows(model: LogitsModel, windows: Windows, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Start/end logits for every window, in the passes of :func:`model_passes`."""
    n, width = windows.context_mask.shape
    starts = np.full((n, width), -1e4, dtype=np.float32)
    ends = np.full((n, width), -1e4, dtype=np.float32)
    for rows, _ in model_passes(model, windows, batch_size):
        start, end = model.run(windows.inputs(model.input_names, rows))
        starts[rows, : start.shape[1]] = start
        ends[rows, : end.shape[1]] = end
    return starts, ends


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum()


def _logsumexp(x: np.ndarray) -> float:
    top = float(x.max())
    return top + math.log(float(np.exp(x - top).sum()))


def _top_spans(p_start: np.ndarray, p_end: np.ndarray, allowed: np.ndarray, max_len: int, k: int) -> list:
    """The ``k`` best (start, end, score) with start <= end < start + max_len, on allowed tokens.

    Only the band of spans up to ``max_len`` long is scored (width x max_len products, not the width x
    width outer product), in the same start-major order, so ties break as before.
    """
    n = len(p_start)
    ends = np.arange(n)[:, None] + np.arange(max_len)[None, :]  # band[s, d]: the span (s, s + d)
    band = p_start[:, None] * np.where(ends < n, p_end[np.minimum(ends, n - 1)], 0.0)
    flat = band.ravel()
    if k == 1:
        order = np.array([int(np.argmax(flat))])
    else:
        k = min(k, len(flat) - 1)
        order = np.argpartition(-flat, k)[:k]
        order = order[np.argsort(-flat[order], kind="stable")]
    starts, widths = np.divmod(order, max_len)
    return [
        (int(s), int(s + d), float(band[s, d]))
        for s, d in zip(starts, widths, strict=True)
        if s + d < n and allowed[s] and allowed[s + d]
    ]


def _char_span(windows: Windows, row: int, s: int, e: int, align_to_words: bool) -> tuple[int, int]:
    enc = windows.encoding
    if align_to_words:
        word_s, word_e = enc.token_to_word(row, s), enc.token_to_word(row, e)
        if word_s is not None and word_e is not None:
            return enc.word_to_chars(row, word_s, 1)[0], enc.word_to_chars(row, word_e, 1)[1]
    offsets = enc["offset_mapping"][row]
    return offsets[s][0], offsets[e][1]


@dataclass
class _Candidate:
    """One answer text of one context, over the windows it appears in. Within a window its probability is
    the sum over the token spans that widen to it (as the pipeline counts it); across windows the rule
    combines those per-window probabilities."""

    start: int
    end: int
    by_row: dict[int, float]  # window -> the text's probability in it
    near: dict[int, float] = field(default_factory=dict)  # window -> its surroundings' weighed BM25 ("near")

    @property
    def total(self) -> float:
        """Its probabilities added up over windows (the pipeline's ranking; can pass 1)."""
        return sum(self.by_row.values())

    @property
    def best(self) -> float:
        """Its probability in the window where it is most likely."""
        return max(self.by_row.values())

    @property
    def row(self) -> int:
        """That window."""
        return max(self.by_row, key=self.by_row.__getitem__)

    def logit_row(self, log_norm: np.ndarray) -> tuple[float, int]:
        """Its best raw score (start + end logits) over windows and that window: a window's probability times
        its softmax normalizers, in logs."""
        return max((math.log(max(p, 1e-45)) + float(log_norm[r]), r) for r, p in self.by_row.items())

    def odds_row(self, row_null: np.ndarray, prior: np.ndarray | None = None) -> tuple[float, int]:
        """Its highest log-odds against "no answer" within one window, ln(its probability / the window's null
        probability), plus that window's ``prior`` (ln P(window)) where given and its ``near`` term, and
        that window."""
        return max((-null_margin(float(row_null[r]), p) + (0.0 if prior is None else float(prior[r]))
                    + self.near.get(r, 0.0), r) for r, p in self.by_row.items())  # fmt: skip


def decode(
    windows: Windows, starts: np.ndarray, ends: np.ndarray, contexts: list[str], settings: DecodeSettings
) -> list[Answer]:
    """One answer per pair from its windows' logits.

    Per window, as transformers' pipeline does: probabilities over context tokens and [CLS], and the
    best spans (12 when aligning to words, since several token spans can widen to the same words).
    Then the windows are combined by ``settings.windows`` (:data:`WINDOW_RULES`).
    """
    if settings.windows not in WINDOW_RULES:
        raise ValueError(f"windows rule must be one of {', '.join(WINDOW_RULES)}, not {settings.windows!r}")
    k = 12 if settings.align_to_words else 1
    texts: list[dict[str, _Candidate]] = [{} for _ in contexts]
    row_null = np.ones(len(windows.owner))
    log_norm = np.zeros(len(windows.owner))  # per window: ln of its start and end softmax normalizers
    lowest_null = [1.0] * len(contexts)
    lowest_null_logit = [math.inf] * len(contexts)
    several = len(np.unique(windows.owner)) < len(windows.owner)  # some pair has more than one window
    weighed = settings.windows in ("focus", "near") and several  # windows (and spans) weighed by the question
    ids = np.asarray(windows.encoding["input_ids"]) if weighed else None
    terms = {}  # pair -> its question's token ids and their IDF over its windows ("near", several windows)
    paragraphs = {}  # pair -> its paragraphs' first characters and log priors ("near" with a paragraph weight)
    sentences = {}  # window -> each token's sentence number ("near" with near_sentence, several windows)
    if settings.windows == "near" and weighed:
        needs_offsets = settings.paragraph or settings.near_sentence
        offsets = np.asarray(windows.encoding["offset_mapping"]) if needs_offsets else None
        for pair in np.unique(windows.owner):
            rows = np.flatnonzero(windows.owner == pair)
            if len(rows) > 1:
                terms[pair] = query_terms(ids, windows.question_mask, windows.context_mask, rows)[:2]
                if settings.paragraph:
                    paragraphs[pair] = paragraph_prior(contexts[pair], ids, offsets, windows.context_mask, rows,
                                                       terms[pair][0], settings.paragraph)  # fmt: skip
                if settings.near_sentence:
                    firsts = sentence_starts(contexts[pair])
                    sentences.update({row: token_sentences(firsts, offsets[row]) for row in rows})
    for row, pair in enumerate(windows.owner):
        ctx = windows.context_mask[row]
        cls = windows.cls_index[row]
        allowed = ctx.copy()
        allowed[cls] = True
        x_start, x_end = np.where(allowed, starts[row], -1e4), np.where(allowed, ends[row], -1e4)
        p_start, p_end = _softmax(x_start), _softmax(x_end)
        row_null[row] = float(p_start[cls] * p_end[cls])
        lowest_null[pair] = min(lowest_null[pair], row_null[row])
        if settings.windows == "logits":
            log_norm[row] = _logsumexp(x_start) + _logsumexp(x_end)
            lowest_null_logit[pair] = min(lowest_null_logit[pair], float(x_start[cls] + x_end[cls]))
        p_start[cls] = p_end[cls] = 0.0
        for s, e, score in _top_spans(p_start, p_end, allowed, settings.max_answer_length, k):
            c0, c1 = _char_span(windows, row, s, e, settings.align_to_words)
            text = contexts[pair][c0:c1]
            seen = texts[pair].setdefault(text, _Candidate(c0, c1, {}))
            seen.by_row[row] = seen.by_row.get(row, 0.0) + score
            if pair in terms and row not in seen.near:
                query, idf = terms[pair]
                around = span_overlap(ids[row], ctx, s, e, settings.near_radius, query, idf, sentences.get(row))
                seen.near[row] = settings.near * around
                if pair in paragraphs:  # the text's paragraph: the same for every window that holds it
                    firsts, prior_of = paragraphs[pair]
                    seen.near[row] += float(prior_of[np.searchsorted(firsts, seen.start, side="right") - 1])
    answers = []
    threshold = float(settings.null_threshold)
    prior = None  # ln P(window) under "focus"; None also where every pair has one window (it would be all 0)
    if weighed:
        overlap = window_overlap(ids, windows.question_mask, windows.context_mask, windows.owner)
        prior = log_prior(overlap, windows.owner, settings.focus)
    rank = {
        "pipeline": lambda c: c.total,
        "logits": lambda c: c.logit_row(log_norm)[0],
        "odds": lambda c: c.odds_row(row_null)[0],
        "focus": lambda c: c.odds_row(row_null, prior)[0],
        "near": lambda c: c.odds_row(row_null, prior)[0],
    }.get(settings.windows, lambda c: c.best)
    for pair, context in enumerate(contexts):
        best = max(texts[pair].values(), key=rank, default=None)
        if best is None:
            span = Answer("", 0, 0, lowest_null[pair], 0.0, lowest_null[pair])
        elif settings.windows == "logits":
            logit, row = best.logit_row(log_norm)
            shown = best.by_row[row]
            span = Answer(context[best.start : best.end], best.start, best.end, shown, shown, lowest_null[pair],
                          logit_margin=lowest_null_logit[pair] - logit)  # fmt: skip
        elif settings.windows in ("odds", "focus", "near"):
            row = best.odds_row(row_null, prior)[1]
            shown = best.by_row[row]
            span = Answer(context[best.start : best.end], best.start, best.end, shown, shown, float(row_null[row]))
        else:
            null = float(row_null[best.row]) if settings.windows == "window" else lowest_null[pair]
            span = Answer(context[best.start : best.end], best.start, best.end, best.best, best.best, null,
                          ranked_score=rank(best))  # fmt: skip
        answers.append(with_null_decision(span, threshold) if settings.handle_impossible or best is None else span)
    return answers


def says_answer(null_margin: float, threshold: float) -> bool:
    """SQuAD v2's rule: the best span stands where ln(null score / span score) is at most ``threshold``."""
    return null_margin <= threshold


def with_null_decision(span: Answer, threshold: float = 0.0) -> Answer:
    """``span``, or "no answer" where ln(null score / span score) is above ``threshold`` (SQuAD v2).

    Decoding with ``handle_impossible=False`` and deciding here gives the same answers as decoding at
    ``threshold``; calibration and the benchmark's accuracy views use it to try many thresholds on one
    set of spans. ``span`` may already be decided: a "no answer" is decided again from its guess.
    """
    if not span.text and span.guess:
        span = replace(span, text=span.guess, start=span.guess_start, end=span.guess_end, score=span.span_score,
                       guess="", guess_start=0, guess_end=0)  # fmt: skip
    if span.text and says_answer(span.null_margin, threshold):
        return span
    return replace(span, text="", start=0, end=0, score=span.null_score, guess=span.text, guess_start=span.start,
                   guess_end=span.end)  # fmt: skip


def check_pair(
    question: str, context: str, max_question_chars: int | None = None, max_context_chars: int | None = None
) -> None:
    """Raise :class:`InputError` with a clear message for a question and context no variant should run on:
    the one input check of every interface (the engine adds its length limits; the decoding path checks
    without them, so that a library call gets the same messages)."""
    for name, text in (("question", question), ("context", context)):
        if text is not None and (problem := invalid_text(text)) is not None:
            raise InputError(f"The {name} is not valid text: {problem}. Paste it as plain text.", name)
    if not question or not question.strip():
        raise InputError("Please type a question.", "question")
    if not context or not context.strip():
        raise InputError("Please paste a context: the passage the answer is taken from.", "context")
    if max_question_chars is not None and len(question) > max_question_chars:
        raise InputError(
            f"The question is too long ({len(question):,} characters; at most {max_question_chars:,}).", "question"
        )
    if max_context_chars is not None and len(context) > max_context_chars:
        raise InputError(
            f"The context is too long ({len(context):,} characters; at most {max_context_chars:,}).", "context"
        )
    if not looks_like_text(context):
        raise InputError(
            "The context does not look like text: much of it is control characters or bytes that could not "
            "be read as text, or nothing in it is visible. Paste the passage as plain text.",
            "context",
        )
    if not looks_like_text(question):
        raise InputError("The question does not look like text: paste it as plain text.", "question")


def answer_pairs(
    model: LogitsModel, tokenizer, pairs: list[tuple[str, str]], settings: DecodeSettings = DecodeSettings()
) -> list[Answer]:
    """Answer (question, context) pairs with ``model``: tokenize, run, decode. Each pair is checked first
    (:func:`check_pair`, without length limits: those are the caller's)."""
    for question, context in pairs:
        check_pair(question, context)
    windows = tokenize(tokenizer, pairs, settings)
    starts, ends = run_windows(model, windows, settings.batch_size)
    return decode(windows, starts, ends, [c for _, c in pairs], settings)


def answer(
    model: LogitsModel, tokenizer, question: str, context: str, settings: DecodeSettings = DecodeSettings()
) -> Answer:
    """Answer one question about one context."""
    return answer_pairs(model, tokenizer, [(question, context)], settings)[0]
