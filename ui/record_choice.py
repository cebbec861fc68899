"""Which benchmark records the Benchmark tab offers: the current record of each machine by default, the older
ones one choice away, each saying what differs from its machine's current one (weights, code, how fast the
machine ran), and this session's quick runs."""

from pathlib import Path

from variants.core.hardware import current_hardware, device_kind, hardware_label
from variants.records import results
from variants.records.record import Record
from variants.serving.engine import Engine

from .text import count, esc


def stored_records(results_dir: Path | None) -> list[Record]:
    """Every stored record, newest first."""
    stored = results.load_records(results_dir) if results_dir else results.load_records()
    return sorted(stored, key=lambda r: r.created, reverse=True)


def stored_record(engine: Engine, results_dir: Path | None) -> tuple[Record | None, str]:
    """The stored record for this preset (or chain: a baseline named alone is another line-up than the preset's)
    and the hardware in use, and a note when it does not match. Without a record of the chain itself, a record of
    the preset with the same variants stands in (other weights: :func:`weights_note` says so)."""
    if results_dir is not None and not Path(results_dir).is_dir():  # --results-dir or VARIANTS_RESULTS mistyped
        return None, f"The benchmark records folder {results_dir} does not exist."
    chain = (getattr(engine, "chain", None) or {}).get("name")
    stored = stored_records(results_dir)
    names = {s.name for s in engine.specs}
    same_preset = [r for r in stored if (r.preset, r.chain.get("name")) == (engine.preset, chain)] or [
        r for r in stored if r.preset == engine.preset and r.variants and {e.variant for e in r.variants} <= names
    ]
    if not same_preset:
        return None, f"No benchmark records for the {f'{chain} chain' if chain else f'{engine.preset} preset'} yet."
    hardware = current_hardware()
    record = results.pick_record(same_preset, device=engine.device, hardware=hardware)
    here = hardware_label(hardware, engine.device)
    same_kind = device_kind(record.device) == device_kind(engine.device)
    if same_kind and results.same_hardware(record, hardware):
        return record, ""
    return record, f"No record was measured on this machine ({here}, {engine.device}); showing the closest one."


def weights_note(record: Record | None, weights: dict[str, str]) -> str:
    """A sentence when ``record`` measured other model weights than this app runs (``weights``: the engine's
    {variant: identity}); empty when they match or cannot be compared (records from before they were kept)."""
    differ = results.other_weights(record, weights) if record is not None else []
    if not differ:
        return ""
    names = ", ".join(e.short_label for e in differ)
    return (
        f"This record measured other model weights than this app runs for {names}: its numbers are those "
        "weights', not these. Run python -m variants bench to measure these."
    )


def lineup_html(record: Record) -> str:
    """What a record measured, for its header: its preset, or the chain of other models it ran."""
    if record.chain:
        return f"chain <code>{esc(record.lineup)}</code> (preset <code>{esc(record.preset)}</code>)"
    return f"preset <code>{esc(record.preset)}</code>"


def record_key(record: Record) -> str:
    """A record's value in the chooser: its file for a stored one, its creation time for a quick run."""
    return f"file:{record.file}" if record.file else f"quick:{record.created}"


def record_label(record: Record) -> str:
    """A record's name in the chooser, what tells records apart first (a phone shows about 30 characters):
    when, how many questions, then preset, device and hardware, e.g. "2026-11-26 11:48 UTC · 501 questions ·
    embedded · cpu · AMD EPYC (2 cores)"."""
    when = record.created.replace("T", " ").rstrip("Z")[:16] + " UTC"
    size = f"{count(record.n_questions)} questions"
    size = f"quick run, {size}" if record.is_quick else size
    parts = [when, size, record.lineup, record.device, hardware_label(record.hardware, record.device)]
    return " · ".join(["Measured here by the app", *parts] if record.is_own else parts)  # a phone: its first words


def record_choices(stored: list[Record], quick: list[Record]) -> list[tuple[str, str]]:
    """This session's quick runs first (newest first), then every stored record."""
    runs = [(f"This session: {record_label(r)}", record_key(r)) for r in reversed(quick)]
    return runs + [(record_label(r), record_key(r)) for r in stored]


def find_record(key: str | None, stored: list[Record], quick: list[Record]) -> Record | None:
    return next((r for r in [*quick, *stored] if record_key(r) == key), None)


def machine_key(record: Record) -> tuple:
    """What makes two records the same machine's: preset (and chain), device kind, hardware and its INT8 weight
    format; the app's own measurement is apart from the bench's records (a few hundred questions beside the full
    sample, sweeps and profile: neither stands for the other)."""
    int8 = ((record.hardware or {}).get("int8") or {}).get("format")
    return (
        record.is_own,
        record.preset,
        record.chain.get("name"),
        device_kind(record.device),
        hardware_label(record.hardware, record.device),
        int8,
    )


def current_records(stored: list[Record]) -> dict[tuple, Record]:
    """The newest full record of each machine (``stored`` newest first; quick runs are never current)."""
    current: dict[tuple, Record] = {}
    for record in stored:
        if not record.is_quick:
            current.setdefault(machine_key(record), record)
    return current


def _baseline_ms(record: Record) -> float | None:
    entry = record.entry("baseline")
    return entry.latency_ms.p50 if entry and entry.latency_ms else None


def differences(older: Record, current: Record) -> list[str]:
    """What ``older`` measured differently from ``current``, its machine's current record, in short phrases:
    the model weights (or that it kept no weights hash), the code, and how fast the baseline ran."""
    said = []
    unhashed = [e for e in older.variants if not e.weights]
    if unhashed:
        said.append("no weights hash (recorded before it was kept)")
    else:
        now = {e.variant: e.weights for e in current.variants}
        other = [e.short_label for e in older.variants if now.get(e.variant) not in (None, e.weights)]
        said.append(f"other weights: {', '.join(other)}" if other else "same weights")
    code, code_now = older.versions.get("code"), current.versions.get("code")
    if not code:
        said.append("code version not recorded")
    elif code != code_now:
        said.append(f"code {code}" + (f" (current {code_now})" if code_now else ""))
    base, base_now = _baseline_ms(older), _baseline_ms(current)
    if base and base_now:
        said.append(f"baseline median {base:.1f} ms (current {base_now:.1f})")
    return said


def older_note(record: Record | None, stored: list[Record]) -> str:
    """A sentence when ``record`` is not its machine's current record: which one is, and what differs."""
    if record is None or record.is_quick:
        return ""
    current = current_records(stored).get(machine_key(record))
    if current is None or record_key(current) == record_key(record):  # loaded apart: the same file, not object
        return ""
    when = current.created.replace("T", " ").rstrip("Z")[:16]
    return (
        f"An older record: the current one for this machine is from {when} UTC. This one differs in: "
        + "; ".join(differences(record, current))
        + ". A busier or slower machine moves every latency; compare ratios within one record."
    )


def choices_for(stored: list[Record], quick: list[Record], older: bool = False) -> list[tuple[str, str]]:
    """The chooser's entries: this session's quick runs (newest first), the current record of each machine,
    and with ``older`` every older record after them, its name saying what differs."""
    current = current_records(stored)
    shown = [r for r in stored if current.get(machine_key(r)) is r]
    entries = record_choices(shown, quick)
    if older:
        for record in stored:
            now = current.get(machine_key(record))
            if now is record:
                continue
            said = differences(record, now) if now is not None else []
            entries.append((" · ".join([f"older: {record_label(record)}", *said]), record_key(record)))
    return entries


def older_count(stored: list[Record]) -> int:
    current = current_records(stored)
    return sum(1 for r in stored if current.get(machine_key(r)) is not r)


def older_info(stored: list[Record]) -> str:
    n = older_count(stored)
    return f"{count(n)} older record{'s' if n != 1 else ''}, each saying what differs" if n else "No older records"
