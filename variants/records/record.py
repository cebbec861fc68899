"""A benchmark record as typed objects: the one place its shape is written down.

A record (one JSON file written by ``python -m variants bench``, or a quick run in the app) is a
:class:`Record`: where, when and how it was measured, one :class:`VariantEntry` per variant and one
for the transformers pipeline (the peer). As optimum-benchmark's ``BenchmarkReport``, these load,
save and tabulate themselves; the CSV, the summary, the app's table and charts read their fields.

Accuracy comes in three views (:data:`VIEWS`), each an :class:`AccuracyView` with its threshold:

- ``pipeline``: decisions at null threshold 0, transformers' pipeline rule: what the app does;
- ``best``: the official SQuAD v2 best-F1, at the threshold that maximizes it on these questions
  (what published SQuAD v2 numbers quote), with HasAns/NoAns at that threshold;
- ``calibrated``: at the model's own threshold from its config.json (None where a model has none
  and for the pipeline peer, whose null threshold cannot be set).

Schema 1 records (one flat accuracy dict at the model's calibrated threshold) still load: their
numbers land in the view they were measured at, and a view they lack is None.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from variants.core.hardware import device_kind, hardware_label, hardware_slug
from variants.core.spec import short_label

log = logging.getLogger("variants.records.record")

SCHEMA_VERSION = 2
VIEWS = ("pipeline", "best", "calibrated")
VIEW_TITLES = {
    "pipeline": "at threshold 0 (the app's rule, as transformers' pipeline)",
    "best": "official SQuAD v2 best F1 (threshold chosen on these questions)",
    "calibrated": "at each model's calibrated threshold",
}
# A view shown (the Benchmark tab's default, `variants plot`'s) rather than recorded: F1 on the answerable questions
# of the threshold-0 view, since people ask questions their passage answers.
ANSWERABLE = "answerable"
SHOWN_VIEWS = (ANSWERABLE, *VIEWS)


def record_view(view: str) -> str:
    """The recorded view a shown ``view`` reads (the answerable view reads threshold 0)."""
    return "pipeline" if view == ANSWERABLE else view


def accuracy_column(view: str) -> str:
    """The frame column a chart of ``view`` plots: F1 on the answerable questions, or on them all."""
    return "has_ans_f1" if view == ANSWERABLE else "f1"


PEER = "peer"
PEER_LABEL = "transformers pipeline"
OPTIMUM_INT8 = "optimum-int8"  # the other peer: optimum's ONNX Runtime dynamic INT8 of the baseline
SELF = "self"  # a record's kind when the app measured its own chain on its own machine (variants.records.own)
QUICK_NOISY_BELOW = 200  # questions: fewer make F1 differences of a few points noise (about ±7 points at 50)


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass
class AccuracyView:
    """SQuAD v2 scores (percent) of one set of decisions, at one null threshold."""

    f1: float | None
    exact: float | None
    threshold: float | None  # the null threshold the decisions were made at
    n: int = 0
    has_ans_f1: float | None = None
    no_ans_f1: float | None = None
    has_ans_exact: float | None = None
    no_ans_exact: float | None = None
    has_ans_n: int = 0
    no_ans_n: int = 0
    has_ans_answered: float | None = None  # % of the answerable questions given an answer (not "no answer")

    @classmethod
    def from_scores(cls, scores: dict[str, Any], threshold: float | None) -> AccuracyView:
        """From :meth:`variants.core.squad.SquadScores.as_dict` (its plain, not best-threshold, numbers)."""

        def r(value: float | None) -> float | None:
            return None if value is None else round(float(value), 3)

        return cls(
            f1=r(scores.get("f1")),
            exact=r(scores.get("exact")),
            threshold=None if threshold is None else round(float(threshold), 6),
            n=int(scores.get("total") or 0),
            has_ans_f1=r(scores.get("has_ans_f1")),
            no_ans_f1=r(scores.get("no_ans_f1")),
            has_ans_exact=r(scores.get("has_ans_exact")),
            no_ans_exact=r(scores.get("no_ans_exact")),
            has_ans_n=int(scores.get("has_ans_total") or 0),
            no_ans_n=int(scores.get("no_ans_total") or 0),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> AccuracyView | None:
        return None if not data else cls(**_known(cls, data))


@dataclass
class LatencyStats:
    """Batch-1 latency over ``n`` timed questions, in ms (numpy's linear-interpolated percentiles)."""

    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> LatencyStats | None:
        return None if not data else cls(**_known(cls, data))


@dataclass
class VariantEntry:
    """One variant's (or the peer's) numbers in a record; ``error`` when it could not be measured.

    ``latency_only``: the weights are not the real model's (e.g. a random-weight replica of a model
    that cannot be downloaded), so only its speed means anything and no accuracy is shown.
    """

    variant: str
    label: str
    headline: bool = False
    backend: str | None = None
    device: str | None = None
    provider: str | None = None
    dtype: str | None = None
    size_mb: float | None = None
    parameters: int | None = None
    pass_tokens: int | None = None  # the most tokens one forward pass held (QAModel.pass_tokens); None: no cap
    calibrated_threshold: float | None = None  # the model's own, from its config.json
    load_seconds: float | None = None
    accuracy: dict[str, AccuracyView | None] = field(default_factory=lambda: dict.fromkeys(VIEWS))
    latency_ms: LatencyStats | None = None
    # the timing rule's busy-machine measure over the timed runs: the median run's wall time over its computing
    # time (variants.answering.timing.stretch); None where not measured (records from before it was kept)
    stretch: float | None = None
    throughput_qps: float | None = None
    peak_throughput_qps: float | None = None
    speedup_vs_baseline: float | None = None
    speedup_vs_peer: float | None = None
    # Where the latency pass ran several times: each pass's median, and each speedup's lowest and
    # highest per-pass ratio (the speedups themselves are then the medians of those ratios).
    latency_pass_p50_ms: list[float] = field(default_factory=list)
    speedup_vs_baseline_range: list[float] | None = None
    speedup_vs_peer_range: list[float] | None = None
    # against each other peer of the record (Record.peers), by its name: [median ratio, lowest, highest]
    speedup_vs_peers: dict[str, list[float]] = field(default_factory=dict)
    agreement_with_baseline: float | None = None  # at the pipeline view's decisions
    seq_len_sweep: list[dict[str, Any]] = field(default_factory=list)
    batch_sweep: list[dict[str, Any]] = field(default_factory=list)
    memory: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] = field(default_factory=dict)  # variants.benchmarking.profile.profile_stages
    notes: list[str] = field(default_factory=list)
    build: dict[str, Any] = field(default_factory=dict)  # how its graph was built (the INT8 step's choices)
    error: str | None = None
    latency_only: bool = False
    source: str | None = None
    # what it computed with: variants.building.sources.weights_identity (a content digest for local folders);
    # None in records from before it was kept
    weights: str | None = None
    # the environment it ran in where not the bench's own (whose versions are the record's ``versions``): the peers'
    # (variants.benchmarking.peer), {"name": "peers", "python", "executable", and its libraries' versions}; {} for
    # the variants, and in records from before the peers had an environment of their own
    environment: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # fields this version does not know, kept as read

    @property
    def is_peer(self) -> bool:
        return self.variant == PEER

    @property
    def short_label(self) -> str:
        """A plain, short name for charts and card titles, e.g. "Pruned + ONNX + INT8"."""
        return PEER_LABEL if self.is_peer else short_label(self.variant, self.label)

    def view(self, name: str) -> AccuracyView | None:
        """The accuracy view ``name`` (one of :data:`VIEWS`); None where not measured or latency-only."""
        if name not in VIEWS:
            raise ValueError(f"unknown accuracy view {name!r}; choose one of {VIEWS}")
        return None if self.latency_only else self.accuracy.get(name)

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        out["accuracy"] = {k: (v.to_dict() if v else None) for k, v in self.accuracy.items()}
        out["latency_ms"] = self.latency_ms.to_dict() if self.latency_ms else None
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: dict[str, Any], schema: int = SCHEMA_VERSION) -> VariantEntry:
        data = dict(data)
        if schema < 2:
            data = _entry_from_v1(data)
        accuracy = data.pop("accuracy", None) or {}
        latency = data.pop("latency_ms", None)
        known = _known(cls, data)
        entry = cls(**{**known, "extra": {k: v for k, v in data.items() if k not in known and k != "extra"}})
        entry.accuracy = {v: AccuracyView.from_dict(accuracy.get(v)) for v in VIEWS}
        entry.latency_ms = LatencyStats.from_dict(latency)
        return entry


def _entry_from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 entry in schema-2 terms: its one accuracy dict was measured at its ``null_threshold``
    (the model's calibrated one; 0 for the peer, the pipeline's rule), and its best-F1 numbers are the
    best view (EM at that threshold was not recorded; its HasAns/NoAns split neither)."""
    acc = data.get("accuracy") or {}
    threshold = data.pop("null_threshold", None)
    peer = data.get("variant") == PEER
    views: dict[str, Any] = dict.fromkeys(VIEWS)
    if acc:
        measured = AccuracyView.from_scores(acc, 0.0 if peer else threshold or 0.0).to_dict()
        views["pipeline" if peer or not threshold else "calibrated"] = measured
        if acc.get("best_f1") is not None:
            views["best"] = AccuracyView(
                f1=acc["best_f1"], exact=None, threshold=acc.get("best_f1_thresh"), n=int(acc.get("total") or 0)
            ).to_dict()
    data["accuracy"] = views
    data["calibrated_threshold"] = None if peer or not threshold else threshold
    return data


@dataclass
class Record:
    """One benchmark run: its context (hardware, versions, data, settings, method) and its entries."""

    created: str  # UTC, ISO 8601 with a Z
    device: str
    preset: str = ""
    # what its chain was made of when it was not the preset's own (variants.core.spec.chain_of): name, baseline,
    # pruned (None: the baseline alone, its no-training chain); {}: the preset's own chain
    chain: dict[str, Any] = field(default_factory=dict)
    variants: list[VariantEntry] = field(default_factory=list)
    peer: VariantEntry | None = None  # the reference peer: transformers' pipeline
    peers: list[VariantEntry] = field(default_factory=list)  # other peers, measured in the same passes
    kind: str = "full"  # or "quick": a small run from the app, beside the stored ones; or SELF: the app's own
    hardware: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)
    notice: str | None = None
    memory_after_load: dict[str, Any] | None = None
    # bench --long-inputs: each question about its paragraph and its whole article, under every window
    # rule (variants.benchmarking.long_inputs); None where not measured
    long_inputs: dict[str, Any] | None = None
    schema_version: int = SCHEMA_VERSION  # the version it was read from; written as SCHEMA_VERSION
    file: str | None = None  # the file it was read from or saved to, not stored in it
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def entries(self) -> list[VariantEntry]:
        """The variants, then the peer if measured."""
        return [*self.variants, *([self.peer] if self.peer else []), *self.peers]

    @property
    def n_questions(self) -> int | None:
        return self.data.get("n_questions")

    @property
    def is_quick(self) -> bool:
        return self.kind == "quick"

    @property
    def is_own(self) -> bool:
        """Whether the app measured it of its own chain, on the machine it serves from (:mod:`.own`)."""
        return self.kind == SELF

    @property
    def window_rule(self) -> str:
        """The rule its long contexts' windows were combined by (``settings.windows``: a name in older records,
        the settings of ``DecodeSettings.window_rule`` since); "pipeline" where it says none."""
        windows = self.settings.get("windows")
        return (windows.get("rule") if isinstance(windows, dict) else windows) or "pipeline"

    @property
    def noisy(self) -> bool:
        """Whether its accuracy rests on too few questions to tell variants a few F1 points apart."""
        return (self.n_questions or 0) < QUICK_NOISY_BELOW

    def entry(self, variant: str) -> VariantEntry | None:
        return next((e for e in self.entries if e.variant == variant), None)

    @property
    def lineup(self) -> str:
        """What was measured, as a chooser or header names it: the preset, or the chain made of other models
        ("minilm-squad2 alone")."""
        return str(self.chain.get("name") or self.preset)

    def title(self) -> str:
        """One line naming the record for a chooser, e.g. "embedded · cpu · AMD EPYC ... · 2026-11-23 · 501 q"."""

        what = f"quick run, {self.n_questions} questions" if self.is_quick else f"{self.n_questions} questions"
        what = f"measured by the app itself, {self.n_questions} questions" if self.is_own else what
        when = self.created.replace("T", " ").rstrip("Z")[:16]
        return f"{self.lineup} · {self.device} · {hardware_label(self.hardware, self.device)} · {when} UTC · {what}"

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema_version": SCHEMA_VERSION,
            "kind": self.kind,
            "preset": self.preset,
            "chain": self.chain,
            "created": self.created,
            "device": self.device,
            "hardware": self.hardware,
            "versions": self.versions,
            "data": self.data,
            "settings": self.settings,
            "method": self.method,
            "notice": self.notice,
            "memory_after_load": self.memory_after_load,
            "long_inputs": self.long_inputs,
            "variants": [e.to_dict() for e in self.variants],
            "peer": self.peer.to_dict() if self.peer else None,
            "peers": [e.to_dict() for e in self.peers],
        }
        return {**self.extra, **out}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Record:
        """A record from its JSON form, of any schema version so far (1 or 2)."""
        data = dict(data)
        schema = int(data.pop("schema_version", 1))
        if schema > SCHEMA_VERSION:
            raise ValueError(f"record schema {schema} is newer than this code reads ({SCHEMA_VERSION})")
        entries = [VariantEntry.from_dict(e, schema) for e in data.pop("variants", [])]
        peer = data.pop("peer", None)
        peers = [VariantEntry.from_dict(e, schema) for e in data.pop("peers", None) or []]
        file = data.pop("_file", None) or data.pop("file", None)
        known = _known(cls, data)
        _check_fields(known)
        return cls(
            **known,
            variants=entries,
            peer=VariantEntry.from_dict(peer, schema) if peer else None,
            peers=peers,
            schema_version=schema,
            file=file,
            extra={k: v for k, v in data.items() if k not in known and k != "extra"},
        )

    # --- files --------------------------------------------------------------------------------

    def name(self) -> str:
        """``<preset>-<device>-<hardware>-<UTC timestamp>``, e.g. ``embedded-cpu-intel-xeon-20260101T120000Z``; a
        chain of other models is named for them (``minilm-squad2-alone-cpu-...``)."""

        stamp = self.created.replace("-", "").replace(":", "")
        what = re.sub(r"[^a-z0-9.]+", "-", self.lineup.lower()).strip("-") or "preset"
        return f"{what}-{device_kind(self.device)}-{hardware_slug(self.hardware, self.device)}-{stamp}"

    def save(self, folder: str | Path) -> Path:
        """Write ``<name>.json`` into ``folder`` (:func:`variants.records.results.save_record` adds its table)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        json_path = folder / f"{self.name()}.json"
        json_path.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        self.file = json_path.name
        return json_path

    @classmethod
    def load(cls, path: str | Path) -> Record:
        path = Path(path)
        record = cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        record.file = path.name
        return record


TEXT_FIELDS = ("created", "device", "preset", "kind")  # what the record chooser and its sorting read
DICT_FIELDS = ("hardware", "versions", "data", "settings", "method", "chain")


def _check_fields(fields: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming a top-level field of the wrong type (a record edited by hand or cut short):
    the app lists and sorts records by these before it shows any one of them."""
    if not isinstance(fields.get("created"), str) or not fields["created"]:
        raise ValueError("record field 'created' is not a time stamp")
    for name in TEXT_FIELDS:
        if name in fields and not isinstance(fields[name], str):
            raise ValueError(f"record field {name!r} is not text")
    for name in DICT_FIELDS:
        if name in fields and not isinstance(fields[name], dict):
            raise ValueError(f"record field {name!r} is not an object")


def load_records(folder: str | Path) -> list[Record]:
    """Every readable record in ``folder``, newest first (files that are not records are skipped, logged)."""
    records = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict) or "variants" not in raw or "created" not in raw:
                raise ValueError("not a benchmark record")
            record = Record.from_dict(raw)
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("skipping %s: %s", path, exc)
            continue
        record.file = path.name
        records.append(record)
    return sorted(records, key=lambda r: r.created, reverse=True)


def as_record(record: Record | dict[str, Any]) -> Record:
    """``record`` as a :class:`Record` (a JSON dict of any schema is read with :meth:`Record.from_dict`)."""
    return record if isinstance(record, Record) else Record.from_dict(record)
