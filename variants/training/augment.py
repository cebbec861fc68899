"""Synthetic unanswerable questions made from answerable ones, to train the no-answer decision.

SQuAD v2's unanswerable questions were written against their paragraph to look answerable; the
commonest kinds are entity swaps and antonyms (Rajpurkar et al., 2018, table 3). train.json has few
of them (2,042), so ``--synthetic-unanswerable`` adds rule-made ones, each paired with the paragraph
of the answerable question it came from:

* entity swap: a capitalized name or a number of the question that the paragraph contains is
  replaced by one of the same kind from another paragraph of the article that this paragraph lacks;
* antonym: a word of a short list is replaced by its opposite ("first" -> "last");
* other paragraph: the question unchanged, paired with another paragraph of its article that holds
  none of its answers.

The rules are simple and some of their questions remain answerable (label noise); no NLP library
does this offline (nlpaug and TextAttack fetch WordNet or models from the network).

Its second job, ``--teacher-inputs``: question-paragraph pairs with no gold answer at all
(:func:`teacher_only_pairs`), for a distilled student to learn the teacher's answers on inputs the
teacher never trained on. Its third, ``--short-contexts``: answerable questions again with only the
sentence that holds their answer as context (:func:`short_context_copies`), since people ask about a
sentence or two and SQuAD about paragraphs.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import replace

from variants.core.squad import QAExample

# Word pairs both ways; a question word is swapped only if the pair's other side is a whole word.
_PAIRS = (
    ("first", "last"), ("largest", "smallest"), ("highest", "lowest"), ("most", "least"),
    ("earliest", "latest"), ("before", "after"), ("increase", "decrease"), ("increased", "decreased"),
    ("maximum", "minimum"), ("north", "south"), ("east", "west"), ("northern", "southern"),
    ("eastern", "western"), ("older", "younger"), ("oldest", "youngest"), ("longest", "shortest"),
    ("biggest", "smallest"), ("more", "less"), ("higher", "lower"), ("larger", "smaller"),
    ("best", "worst"), ("major", "minor"), ("win", "lose"), ("won", "lost"), ("start", "end"),
    ("began", "ended"), ("positive", "negative"), ("public", "private"), ("internal", "external"),
    ("success", "failure"), ("successful", "unsuccessful"), ("allowed", "forbidden"), ("early", "late"),
    ("above", "below"), ("inside", "outside"), ("strongest", "weakest"), ("richest", "poorest"),
)  # fmt: skip
ANTONYMS = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}

# A run of capitalized words (a name, its parts maybe joined by "of", "the", "de", "von", "and"), or a number.
ENTITY = re.compile(r"\b(?:[A-Z][\w'-]*(?:\s+(?:of|the|de|von|and)?\s*[A-Z][\w'-]*)*|\d[\d,.]*\d|\d)\b")
WORD = re.compile(r"[A-Za-z]+")
# Capitalized only because they start a sentence or a question: cut from the front of a name.
FUNCTION_WORDS = frozenset(
    "the a an in on at by for from to of and or but however this that these those it its he she they his her "
    "their there after before during when while as with although since many some most other all both each "
    "what which who whom whose where why how is was are were did does do can could has have had".split()
)


def entities(text: str) -> list[str]:
    """Names and numbers in ``text``, in order, without the function words that start a sentence."""
    found = []
    for match in ENTITY.finditer(text):
        words = match.group().split()
        while words and words[0].lower() in FUNCTION_WORDS:
            words.pop(0)
        if words:
            found.append(" ".join(words))
    return found


def kind(entity: str) -> str:
    """The kind of an entity: "name", or "number" and its length (a year swaps with a year)."""
    return f"number{len(entity)}" if entity[0].isdigit() else "name"


def entity_swap(question: str, context: str, pool: list[str], rng: random.Random) -> str | None:
    """``question`` with one of its names or numbers that ``context`` holds replaced by one from ``pool``
    of the same kind that ``context`` lacks; None when there is none to swap."""
    found = [e for e in entities(question) if e in context]
    rng.shuffle(found)
    for old in found:
        choices = [e for e in pool if kind(e) == kind(old) and e not in context and e not in question]
        if choices:
            return question.replace(old, rng.choice(choices), 1)
    return None


def antonym_swap(question: str, rng: random.Random) -> str | None:
    """``question`` with one listed word replaced by its opposite (case kept); None when it has none."""
    words = [m for m in WORD.finditer(question) if m.group().lower() in ANTONYMS]
    if not words:
        return None
    m = rng.choice(words)
    new = ANTONYMS[m.group().lower()]
    new = new.capitalize() if m.group()[0].isupper() else new
    return question[: m.start()] + new + question[m.end() :]


def synthetic_unanswerable(examples: list[QAExample], share: float, seed: int) -> list[QAExample]:
    """Unanswerable questions made from a seeded ``share`` of the answerable ``examples`` (see module doc).

    Each is tried as an entity swap, then an antonym, then another paragraph of its article; ids end in
    ``-syn`` and the kind (``-ent``, ``-ant``, ``-par``).
    """
    rng = random.Random(seed)
    by_title: dict[str, list[str]] = defaultdict(list)
    names: dict[str, set[str]] = defaultdict(set)
    for title, context in dict.fromkeys((e.title, e.context) for e in examples):
        by_title[title].append(context)
        names[title].update(entities(context))
    pools = {title: sorted(found) for title, found in names.items()}
    answerable = [e for e in examples if not e.is_impossible]
    made = []
    for ex in rng.sample(answerable, round(share * len(answerable))):
        question, context, how = ex.question, ex.context, ""
        if (swapped := entity_swap(ex.question, ex.context, pools[ex.title], rng)) is not None:
            question, how = swapped, "ent"
        elif (flipped := antonym_swap(ex.question, rng)) is not None:
            question, how = flipped, "ant"
        elif others := [c for c in by_title[ex.title] if c != ex.context and not any(a in c for a in ex.answers)]:
            context, how = rng.choice(others), "par"
        if how:
            made.append(
                replace(ex, id=f"{ex.id}-syn-{how}", question=question, context=context, answers=(), answer_starts=())
            )
    return made


SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def shuffled_sentences(context: str, rng: random.Random) -> str | None:
    """``context`` with its sentences in another order; None for a one-sentence paragraph."""
    sentences = SENTENCE.split(context)
    if len(sentences) < 2:
        return None
    order = list(range(len(sentences)))
    while order == sorted(order):
        rng.shuffle(order)
    return " ".join(sentences[i] for i in order)


def word_swap(question: str, context: str, rng: random.Random) -> str | None:
    """``question`` with one word replaced by a word of ``context`` (or dropped when the context has none)."""
    words = list(WORD.finditer(question))
    if len(words) < 3:
        return None
    m = rng.choice(words[1:])  # the question word stays
    pool = [w for w in WORD.findall(context) if len(w) > 3 and w.lower() != m.group().lower()]
    new = rng.choice(pool) if pool else ""
    return " ".join((question[: m.start()] + new + question[m.end() :]).split())


def teacher_only_pairs(examples: list[QAExample], share: float, seed: int) -> list[QAExample]:
    """At most ``share`` x the unique ``examples`` question-paragraph pairs with no gold answer, for the teacher.

    Made from a seeded draw, with replacement, of all ``examples``, rule-made unanswerable ones included
    (so ``share`` counts pairs per training example, not per original question), each by one rule drawn at
    random: the paragraph's sentences shuffled (the answer moves), one word of the question after its first
    replaced by a word of the paragraph (or dropped), or the question paired with another paragraph of its
    article; a draw the rule cannot change makes no pair. The student learns the teacher's answers on
    inputs the teacher never trained on, where its soft labels say what it learned rather than what it
    memorized. Ids end in ``-tea-<rule>-<n>`` (rules ``shu``, ``swp``, ``par``; ``n`` the draw). Known
    roughness, kept so that the published runs stay reproducible: words are ASCII letter runs (an accented
    word is split), and a dropped word leaves its neighbours' spacing ("won ?").
    """
    rng = random.Random(seed)
    unique = list({e.id: e for e in examples}.values())
    by_title: dict[str, list[str]] = defaultdict(list)
    for title, context in dict.fromkeys((e.title, e.context) for e in unique):
        by_title[title].append(context)
    made: list[QAExample] = []
    for n in range(round(share * len(unique))):
        ex = unique[rng.randrange(len(unique))]
        question, context, how = ex.question, ex.context, rng.choice(("shu", "swp", "par"))
        if how == "shu":
            context = shuffled_sentences(ex.context, rng)
        elif how == "swp":
            question = word_swap(ex.question, ex.context, rng)
        else:
            others = [c for c in by_title[ex.title] if c != ex.context]
            context = rng.choice(others) if others else None
        if question is not None and context is not None:
            made.append(replace(ex, id=f"{ex.id}-tea-{how}-{n}", question=question, context=context,
                                answers=(), answer_starts=()))  # fmt: skip
    return made


SENTENCE_END = re.compile(r"[.!?]['\"”’)\]]*\s+")


def answer_sentence_span(context: str, start: int, end: int) -> tuple[int, int]:
    """Where the sentence(s) of ``context`` that hold the characters ``start:end`` begin and end: from the
    last sentence end at or before ``start`` to the first at or after ``end``, without surrounding blanks.
    Cut by rule, so an abbreviation ("U.S. ") can cut a sentence short."""
    ends = [m.end() for m in SENTENCE_END.finditer(context)]
    first = max((e for e in ends if e <= start), default=0)
    last = min((e for e in ends if e >= end), default=len(context))
    while first < last and context[first].isspace():
        first += 1
    while last > first and context[last - 1].isspace():
        last -= 1
    return first, last


def answer_sentence(context: str, start: int, end: int) -> str:
    """The sentence(s) of ``context`` that hold the characters ``start:end`` (:func:`answer_sentence_span`)."""
    first, last = answer_sentence_span(context, start, end)
    return context[first:last]


def short_context_copies(examples: list[QAExample], share: float, seed: int) -> list[QAExample]:
    """``share`` x the answerable ``examples`` again (a seeded draw without repeats), each with only the
    sentence(s) holding its first answer as context; the gold answers inside keep their text, at their
    new starts. A paragraph of one sentence gives no copy. Ids end in ``-sen``."""
    answerable = [e for e in {e.id: e for e in examples}.values() if not e.is_impossible]
    made: list[QAExample] = []
    for ex in random.Random(seed).sample(answerable, min(len(answerable), round(share * len(answerable)))):
        first, last = answer_sentence_span(ex.context, ex.answer_starts[0], ex.answer_starts[0] + len(ex.answers[0]))
        if (first, last) == (0, len(ex.context)):
            continue
        inside = [(a, s - first) for a, s in zip(ex.answers, ex.answer_starts, strict=True)
                  if first <= s and s + len(a) <= last]  # fmt: skip
        answers, starts = tuple(a for a, _ in inside), tuple(s for _, s in inside)
        context = ex.context[first:last]
        made.append(replace(ex, id=f"{ex.id}-sen", context=context, answers=answers, answer_starts=starts))
    return made


def long_context_copies(examples: list[QAExample], share: float, seed: int, paragraphs: int = 3) -> list[QAExample]:
    """``share`` x the ``examples`` again (a seeded draw without repeats, answerable and not), each with its
    paragraph among ``paragraphs`` consecutive paragraphs of its article, joined by a blank line, at a
    seeded place; gold answers keep their text at their new starts. Read in windows, such a context
    has windows without the answer, labelled "no answer": what a model that saw only single
    paragraphs never learns, and what a long passage asks of it. An article of one paragraph gives
    no copy. Ids end in ``-art``."""
    articles: dict[str, list[str]] = {}
    for ex in examples:
        contexts = articles.setdefault(ex.title, [])
        if ex.context not in contexts:
            contexts.append(ex.context)
    unique = list({e.id: e for e in examples}.values())
    rng = random.Random(seed)
    made: list[QAExample] = []
    for ex in rng.sample(unique, min(len(unique), round(share * len(unique)))):
        contexts = articles[ex.title]
        count = min(paragraphs, len(contexts))
        if count < 2:
            continue
        own = contexts.index(ex.context)
        first = rng.randint(max(0, own - count + 1), min(own, len(contexts) - count))
        block = contexts[first : first + count]
        offset = sum(len(c) + 2 for c in block[: own - first])
        starts = tuple(s + offset for s in ex.answer_starts)
        made.append(replace(ex, id=f"{ex.id}-art", context="\n\n".join(block), answer_starts=starts))
    return made
