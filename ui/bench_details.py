"""The Benchmark tab's details under its table: where each variant's time per question goes (the record's profile,
beside the machine's measured peak) and what a long passage costs (``bench --long-inputs``)."""

from variants.records.record import Record

from .text import count

PROFILE_COLUMNS = [  # short words (a phone shows three at a time); the note above the table says what each is
    "Variant",
    "tokenize ms",
    "model ms",
    "decode ms",
    "GFLOP per question",
    "GFLOP/s",
    "% of peak",
]
PROFILE_NOTE = (
    "Per question: **tokenize**, reading the text into tokens; **model**, the network's forward pass over "
    "every window; **decode**, picking the answer span; the work (GFLOP) and rate (GFLOP/s) of the model's "
    "matrix products; **% of peak**, that rate against the fastest this machine was measured to run."
)


def profile_frame(record: Record | None):
    """Where each variant's time per question goes (the record's profile), beside the machine's measured peak."""
    import pandas as pd  # noqa: PLC0415

    peak = (record.hardware.get("measured_peak") or {}) if record is not None else {}
    rows = []
    for entry in record.variants if record is not None else []:
        prof = entry.profile or {}
        if "forward_ms" not in prof:
            continue
        top = peak.get("int8_gops" if entry.dtype == "int8" else "fp32_gflops")
        rate = prof.get("gflops_achieved")
        share = round(100 * rate / top, 1) if rate and top else None
        rows.append([entry.short_label, *(round(prof[k], 2) for k in ("tokenize_ms", "forward_ms", "decode_ms")),
                     prof.get("gflop"), round(rate) if rate else None, share])  # fmt: skip
    return pd.DataFrame(rows, columns=PROFILE_COLUMNS)


def profile_note(record: Record | None) -> str:
    """What the profile table measured, in a line (empty when the record has no profile)."""
    peak = (record.hardware.get("measured_peak") or {}) if record is not None else {}
    profiled = [e.profile.get("n") for e in record.variants if e.profile.get("n")] if record is not None else []
    if not profiled:
        if record is not None and record.settings.get("skip_sweeps") and not (record.is_quick or record.is_own):
            return "This run skipped the profile (`python -m variants bench` without `--skip-sweeps` measures it)."
        return (
            "This record has no profile (quick runs, the app's own measurement, and records from before it was "
            "added, have none)."
        )
    text = f"{PROFILE_NOTE} Medians over {count(max(profiled))} questions at batch 1."
    if peak:
        text += (
            f" Peak: the fastest large matrix product this machine ran on {peak.get('threads')} threads, "
            f"{peak.get('fp32_gflops')} GFLOP/s in FP32 and {peak.get('int8_gops')} GOP/s in INT8 "
            "(INT8 variants are compared with the INT8 peak)."
        )
    return text


LONG_COLUMNS = [  # short: a phone shows the table one narrow column at a time; the note above says the rest
    "Variant",
    "F1, own paragraph",
    "F1, whole article",
    "points lost",
    "% answered, whole article",
]


def long_inputs_frame(record: Record | None):
    """A record's long-input view (``bench --long-inputs``) under its own window rule: per variant, F1 on the
    answerable questions asked about their own paragraph and about their whole article. Empty without one."""
    import pandas as pd  # noqa: PLC0415

    view = (record.long_inputs or {}) if record is not None else {}
    rule, rows = record.window_rule if record is not None else "", []
    for name, measured in (view.get("variants") or {}).items():
        paragraph = (measured.get("paragraph") or {}).get(rule) or {}
        article = (measured.get("article") or {}).get(rule) or {}
        if paragraph.get("has_ans_f1") is None or article.get("has_ans_f1") is None:
            continue
        entry, para, art = record.entry(name), paragraph["has_ans_f1"], article["has_ans_f1"]
        label = entry.short_label if entry else name
        rows.append([label, para, art, round(para - art, 2), article.get("answered_share")])
    return pd.DataFrame(rows, columns=LONG_COLUMNS)


def long_inputs_note(record: Record | None) -> str:
    """What the long-input table measured, in a line (or why there is none)."""
    view = (record.long_inputs or {}) if record is not None else {}
    if not view.get("variants"):
        return (
            "This record has no long-passage view: `python -m variants bench --long-inputs` asks every question "
            "about its whole article as well as about its own paragraph."
        )
    chars = view.get("article_chars") or []
    size = f" ({min(chars):,} to {max(chars):,} characters, tens of windows each)" if chars else ""
    return (
        f"Each of the {count(view.get('n_answerable'))} answerable questions asked twice: about its own paragraph, "
        f"and about its whole article{size}, all of it pasted in as one passage; F1 on those questions. The "
        f"app's rule for combining a long passage's windows (`{record.window_rule}`) decides, at the app's default "
        "threshold (0)."
    )
