"""Training data as model inputs: SQuAD examples (less the held-out articles, with oversampled and
rule-made unanswerable questions, short- and long-context copies) cut into labelled windows, and batches."""

from __future__ import annotations

import random

import torch

from variants.core.squad import QAExample, data_files, load_squad
from variants.training.augment import long_context_copies, short_context_copies, synthetic_unanswerable
from variants.training.settings import TrainConfig

UNLABELLED = -100  # the start and end position of a feature that only the teacher labels


def build_train_features(
    tokenizer, examples: list[QAExample], max_length: int, stride: int, labelled: bool = True
) -> list[dict]:
    """Tokenize into windows and label each with its answer's token span ([CLS] if outside);
    ``labelled=False``: no gold span (:data:`UNLABELLED`), for pairs the teacher alone labels."""
    enc = tokenizer(
        [ex.question.lstrip() for ex in examples],
        [ex.context for ex in examples],
        truncation="only_second",
        max_length=max_length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    features = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        ex = examples[enc["overflow_to_sample_mapping"][i]]
        seq_ids = enc.sequence_ids(i)
        start = end = 0 if labelled else UNLABELLED
        if labelled and not ex.is_impossible:
            start_char = ex.answer_starts[0]
            end_char = start_char + len(ex.answers[0])
            ctx = [j for j, s in enumerate(seq_ids) if s == 1]
            if offsets[ctx[0]][0] <= start_char and offsets[ctx[-1]][1] >= end_char:
                start = next(j for j in ctx if offsets[j][1] > start_char)
                end = next(j for j in reversed(ctx) if offsets[j][0] < end_char)
        feature = {k: enc[k][i] for k in ("input_ids", "attention_mask", "token_type_ids") if k in enc}
        feature.update(start_positions=start, end_positions=end)
        features.append(feature)
    return features


def length_grouped_batches(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Shuffled batches of similar length (less padding), as Trainer's group_by_length does."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    mega = batch_size * 50
    batches = []
    for i in range(0, len(order), mega):
        chunk = sorted(order[i : i + mega], key=lambda j: -lengths[j])
        batches += [chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches


# Batches are padded up to a multiple of this many tokens (transformers' ``pad_to_multiple_of``): a few shapes
# rather than one per length. With BF16 autocast on the CPU every new input shape keeps memory (the baseline
# at batch 2: about 3 MB per new length, none when a length comes again), one part of what grew a
# distillation run over 48k features sorted by length to 24 GB and the OOM killer (2026-11-27; the larger
# part was glibc's heap: variants.training.loop.TEACHER_PASS_MMAP_THRESHOLD). Padding is masked: the logits
# are the same.
PAD_MULTIPLE = 64


def collate(features: list[dict], idx: list[int]) -> dict[str, torch.Tensor]:
    """Pad a batch to its longest feature, rounded up to a multiple of :data:`PAD_MULTIPLE` tokens."""
    width = -(-max(len(features[i]["input_ids"]) for i in idx) // PAD_MULTIPLE) * PAD_MULTIPLE
    batch: dict[str, torch.Tensor] = {}
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        if key in features[idx[0]]:
            batch[key] = torch.tensor([features[i][key] + [0] * (width - len(features[i][key])) for i in idx])
    for key in ("start_positions", "end_positions"):
        batch[key] = torch.tensor([features[i][key] for i in idx])
    return batch


def holdout_titles(examples: list[QAExample], count: int, seed: int) -> list[str]:
    """``count`` article titles, drawn with ``seed`` among articles that have unanswerable questions.

    Their questions are kept out of training so that the no-answer threshold can be calibrated on
    questions the model never saw, from the same kind of article as the evaluation set.
    """
    candidates = sorted({e.title for e in examples if e.is_impossible})
    if count > len(candidates):
        raise ValueError(f"--holdout-articles {count}: only {len(candidates)} articles have unanswerable questions")
    return sorted(random.Random(seed).sample(candidates, count))


def load_examples(cfg: TrainConfig, held_out: list[str] | None = None) -> tuple[list[QAExample], list[str]]:
    """The training questions and the held-out article titles.

    ``held_out`` (else ``cfg.holdout_articles`` titles drawn with the seed) are removed; ``limit``
    takes a seeded sample; unanswerable questions are repeated ``impossible_repeat`` times, and a
    ``synthetic_unanswerable`` share of the answerable ones comes back unanswerable (variants.training.augment).
    Oversampling them moves the model's prior towards "no answer" when the evaluation set has more
    of them than the training set (train.json 23%, dev.json 53%).
    """
    examples = load_squad(cfg.data, split="train")
    if held_out is None and cfg.holdout_titles:
        held_out = cfg.holdout_titles.split(",")
        if missing := sorted(set(held_out) - {e.title for e in examples}):
            raise ValueError(f"--holdout-titles: no article {missing} in {cfg.data}")
    if held_out is None:
        held_out = holdout_titles(examples, cfg.holdout_articles, cfg.seed) if cfg.holdout_articles else []
    examples = [e for e in examples if e.title not in held_out]
    if cfg.limit:
        examples = random.Random(cfg.seed).sample(examples, min(cfg.limit, len(examples)))
    if cfg.impossible_repeat > 1:
        examples = examples + [e for e in examples if e.is_impossible] * (cfg.impossible_repeat - 1)
    if cfg.synthetic_unanswerable:
        examples = examples + synthetic_unanswerable(examples, cfg.synthetic_unanswerable, cfg.seed)
    return examples, held_out


def short_context_features(tokenizer, examples: list[QAExample], cfg: TrainConfig) -> list[dict]:
    """Training features of ``cfg.short_contexts`` x the answerable ``examples`` with only their answer's
    sentence as context (:func:`variants.training.augment.short_context_copies`). They are marked so that pruning
    scores importance without them, and cuts what the same run without them would cut."""
    if not cfg.short_contexts:
        return []
    copies = short_context_copies(examples, cfg.short_contexts, cfg.seed)
    return [f | {"calibrate": False} for f in build_train_features(tokenizer, copies, cfg.max_length, cfg.stride)]


def long_context_features(tokenizer, examples: list[QAExample], cfg: TrainConfig) -> list[dict]:
    """Training features of ``cfg.long_contexts`` x the ``examples`` with their paragraph among its
    neighbours (:func:`variants.training.augment.long_context_copies`): several windows each, those without the
    answer labelled "no answer". Marked like the short-context copies: pruning scores importance without them."""
    if not cfg.long_contexts:
        return []
    copies = long_context_copies(examples, cfg.long_contexts, cfg.seed, cfg.long_context_paragraphs)
    return [f | {"calibrate": False} for f in build_train_features(tokenizer, copies, cfg.max_length, cfg.stride)]


def data_name(data: str) -> str:
    """Local data files by their names only (the record must not point into this machine), a Hub name as is."""
    files = data_files(data)
    return ",".join(p.name for p in files) if files else data


def _sha256(data: str) -> str:
    """The sha256 of each local data file, joined by commas in the order given."""
    import hashlib  # noqa: PLC0415

    return ",".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in data_files(data) or [])


def calibration_pool(features: list[dict]) -> list[int]:
    """Indices of the features pruning may score importance on: the labelled ones, less the short- and
    long-context copies (:func:`short_context_features`, :func:`long_context_features`)."""
    return [i for i, f in enumerate(features) if f["start_positions"] != UNLABELLED and f.get("calibrate", True)]
