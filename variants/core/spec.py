"""Variant specs and presets.

A variant is a source model (Hub id or local folder), build steps, a backend and a device. A preset
is the chain of variants made from one baseline and one pruned checkpoint:

    baseline                 the fine-tuned model, PyTorch FP32
    pruned-dense             the pruned checkpoint as stored (dense, zeros in place)
    pruned                   the same with the zeros cut out (compaction)
    pruned-onnx              -> ONNX (torch.onnx export)
    pruned-onnx-opt          -> ONNX Runtime graph optimization (fusions)
    pruned-onnx-opt-fp16     -> FP16 (CUDA)    | pruned-onnx-opt-int8 -> INT8 dynamic quantization (CPU)

A distilled partner (a smaller model trained to copy the baseline, ``Family.partner = "distilled"``: fewer layers,
no zeros) has nothing to cut, so its chain has no stored-dense or compaction step. Its variants keep the pruned
chain's names (``pruned``, ``pruned-onnx``, ``pruned-onnx-opt``, ``pruned-onnx-opt-int8``: the API's names, the
records' and the fallback's, which swaps in the embedded chain under the same names on a page already drawn); every
label, description, card, chart and report says "Distilled" (:func:`short_label`):

    pruned                   "Distilled, 6 of 12 layers": the distilled checkpoint as published, PyTorch FP32
    pruned-onnx              "Distilled + ONNX", then "..., optimized", "... + FP16" (CUDA) | "... + INT8" (CPU)

The headline three are baseline, pruned and the last one; the rest show what each step buys. A baseline
without a pruned partner (named alone, or with ``pruned = "none"``) gets, by the same rule
(:func:`graph_chain`), every step that needs no training:

    baseline                 the fine-tuned model, PyTorch FP32
    baseline-onnx            -> ONNX
    baseline-onnx-opt        -> ONNX Runtime graph optimization
    baseline-onnx-opt-fp16   -> FP16 (CUDA)    | baseline-onnx-opt-int8 -> INT8 (CPU)
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from variants.core import config

ASSETS = Path(__file__).resolve().parents[2] / "assets"
EMBEDDED_MODELS = ASSETS / "models"

STEPS = ("compact", "onnx", "optimize", "fp16", "int8")
REPLICA_SCHEME = "replica:"  # a random-weight model of a published shape (variants.building.replica)


@dataclass(frozen=True)
class VariantSpec:
    """One variant: where its weights come from and how it is built and run."""

    name: str
    label: str
    source: str
    steps: tuple[str, ...] = ()
    headline: bool = False
    description: str = ""
    revision: str | None = None
    latency_only: bool = False  # random weights of a real shape: show latency, never accuracy

    def __post_init__(self) -> None:
        unknown = [s for s in self.steps if s not in STEPS]
        if unknown:
            raise ValueError(f"unknown build step(s) {unknown} in variant {self.name!r}; known: {STEPS}")

    @property
    def backend(self) -> str:
        return "onnxruntime" if "onnx" in self.steps else "torch"

    @property
    def onnx_steps(self) -> tuple[str, ...]:
        return tuple(s for s in self.steps if s in ("optimize", "fp16", "int8"))


@dataclass(frozen=True)
class Family:
    """The checkpoints a preset is built from: a baseline and, optionally, its pruned partner."""

    name: str
    baseline: str
    pruned: str | None  # None: the baseline alone, with the steps that need no training
    description: str
    latency_only: bool = False  # random weights (variants.building.replica): its answers and accuracy mean nothing
    partner: str = "pruned"  # how the partner was made: "pruned" (zeros to cut) or "distilled" (see chain)
    partner_label: str = ""  # the distilled partner's card title, saying what it is ("Distilled, 6 of 12 layers")
    partner_note: str = ""  # the distilled partner's description (its card's tooltip, the About tab)

    def __post_init__(self) -> None:
        if self.partner not in PARTNERS:
            raise ValueError(f"a partner is one of {PARTNERS}, not {self.partner!r}")


PARTNERS = ("pruned", "distilled")
# deepset's published pair, from its model cards (CC BY 4.0): the distilled partner has 6 of the baseline's 12
# layers (TinyBERT's recipe), the same hidden size, heads, FFN and tokenizer; SQuAD v2 dev F1 about 83 and 82.04.
ROBERTA_PARTNER = {
    "partner": "distilled",
    "partner_label": "Distilled, 6 of 12 layers",
    "partner_note": "The distilled partner as published: trained to copy the baseline (TinyBERT's recipe) with 6 of "
    "its 12 layers, the same width and tokenizer. Not pruned: it has no zeros to cut, so no compaction step.",
}


FAMILIES = {
    "bert-large": Family(
        "bert-large",
        baseline="madlag/bert-large-uncased-whole-word-masking-finetuned-squadv2",
        pruned="madlag/bert-large-uncased-wwm-squadv2-x2.63-f82.6-d16-hybrid-v1",
        description="BERT-large (whole-word masking) on SQuAD v2 and its block-pruned hybrid version "
        "(nn_pruning, stored dense with zeros), as in the published chain. Needs the Hub or local copies.",
    ),
    "embedded": Family(
        "embedded",
        baseline=str(EMBEDDED_MODELS / "minilm-squad2"),
        pruned=str(EMBEDDED_MODELS / "minilm-squad2-pruned"),
        description="MiniLM-L6-H384 fine-tuned on SQuAD v2 by this project, and its head- and "
        "FFN-pruned, distilled version; shipped in assets/models so everything works offline.",
    ),
    "bert-large-replica": Family(
        "bert-large-replica",
        baseline="replica:bert-large",
        pruned="replica:bert-large-x2.63",
        description="BERT-large and the published x2.63 pruned structure (190 of 384 heads removed, 11,328 "
        "of 98,304 FFN neurons kept) with random weights from a fixed seed, built locally: "
        "random weights: latency only.",
        latency_only=True,
    ),
    "roberta-base": Family(
        "roberta-base",
        baseline="deepset/roberta-base-squad2",
        pruned="deepset/tinyroberta-squad2",
        description="deepset's RoBERTa-base fine-tuned on SQuAD v2 and its distilled partner tinyroberta (6 of 12 "
        "layers, same tokenizer), as published (CC BY 4.0; the cards' SQuAD v2 dev F1 about 83 and 82.04, not "
        "measured here). Needs the Hub or local copies.",
        **ROBERTA_PARTNER,
    ),
    "roberta-base-replica": Family(
        "roberta-base-replica",
        baseline="replica:roberta-base",
        pruned="replica:roberta-base-l6",
        description="RoBERTa-base and its distilled 6-layer partner at deepset's published shapes, with random "
        "weights from a fixed seed and a byte-level BPE tokenizer of the same vocabulary, built locally: "
        "random weights: latency only.",
        latency_only=True,
        **ROBERTA_PARTNER,
    ),
}
GPU_PRESET = "bert-large"  # the default with a CUDA GPU: the published models, the FP16 chain
CPU_PRESET = "roberta-base"  # the default on a CPU when the Hub answers: the published pair people deploy on CPUs
OFFLINE_PRESET = "embedded"  # the default on a CPU with HF_HUB_OFFLINE=1: shipped with the app
DEFAULT_PRESET = GPU_PRESET  # the preset named when no device is known (help texts; see default_preset)
FALLBACK_PRESET = "embedded"


def default_preset(device: str, offline: bool | None = None) -> str:
    """The preset used when none is named: the published BERT-large on a CUDA device; on a CPU deepset's published
    RoBERTa-base and its distilled partner (BERT-large takes 4 s for a short passage and 12 s for a long one on 2
    cores, docs/usage.md#start-up-on-a-space), or, with ``HF_HUB_OFFLINE=1`` (``offline``; read now when None), the
    embedded MiniLM shipped with the app. Where the Hub does not answer, the build falls back to ``embedded`` and
    says so. ``VARIANTS_PRESET`` (or ``--preset``) names another."""
    if device.startswith("cuda"):
        return GPU_PRESET
    return OFFLINE_PRESET if (config.hub_offline() if offline is None else offline) else CPU_PRESET


NO_PARTNER = "none"  # ``--pruned none`` / ``VARIANTS_PRUNED=none`` / ``pruned = "none"``: the baseline alone

# The steps every chain takes from its last PyTorch model, needing no training: (step, name suffix, description).
GRAPH_STEPS = (
    ("onnx", "-onnx", "{what} exported to ONNX (torch.onnx) and run by ONNX Runtime."),
    ("optimize", "-opt", "ONNX Runtime's transformer graph optimizations: fused attention, LayerNorm and GELU."),
    ("fp16", "-fp16", "Half-precision weights and arithmetic on the GPU (inputs and outputs stay FP32)."),
    ("int8", "-int8", "INT8 dynamic quantization of the weights for the CPU, where ONNX Runtime has few FP16 kernels."),
)
ROOTS = {
    "baseline": ("Baseline", "The fine-tuned baseline"),
    "pruned": ("Pruned", "The compacted model"),
    "distilled": ("Distilled", "The distilled partner"),
}


def graph_label(root: str, steps: tuple[str, ...]) -> str:
    """A graph step's short name: "Baseline + ONNX", "Pruned + ONNX, optimized", "Baseline + ONNX + INT8"."""
    label = ROOTS[root][0] + (" + ONNX" if "onnx" in steps else "")
    last = [s.upper() for s in steps if s in ("fp16", "int8")]
    return label + (f" + {last[0]}" if last else ", optimized" if "optimize" in steps else "")


def graph_chain(
    root: str, source: str, before: tuple[str, ...], last: str, words: str | None = None
) -> list[VariantSpec]:
    """The no-training steps from the PyTorch model ``root`` ("baseline" or "pruned"): ONNX, graph optimization,
    then ``last`` (INT8 on a CPU, FP16 on CUDA), the only headline of them. ``before``: the steps that made
    ``root`` from ``source`` (the pruned model's compaction). ``words``: the root its labels and descriptions
    name, where not ``root`` ("distilled": a distilled partner's chain under the pruned chain's names)."""
    out, name, steps, words = [], root, before, words or root
    for step, suffix, description in GRAPH_STEPS:
        if step in ("fp16", "int8") and step != last:
            continue
        name, steps = name + suffix, (*steps, step)
        text = description.format(what=ROOTS[words][1])
        out.append(VariantSpec(name, graph_label(words, steps), source, steps, step == last, text))
    return out


def chain(family: Family, device: str) -> list[VariantSpec]:
    """The chain for ``family``: its baseline in PyTorch, then, with a pruned partner, the pruned checkpoint
    stored dense, compacted, and its graph steps; with a distilled partner, that model as published and its graph
    steps (nothing to cut); without one, the baseline's own graph steps (everything that needs no training). The
    last step is FP16 on CUDA and INT8 on the CPU."""
    last = "fp16" if device.startswith("cuda") else "int8"
    b, p = family.baseline, family.pruned
    variants = [
        VariantSpec("baseline", SHORT_LABELS["baseline"], b, (), True, "The fine-tuned model as published, in PyTorch.")
    ]
    if p and family.partner == "distilled":
        label = family.partner_label or ROOTS["distilled"][0]
        variants += [
            VariantSpec("pruned", label, p, (), True, family.partner_note or "The distilled partner as published."),
            *graph_chain("pruned", p, (), last, words="distilled"),
        ]
    elif p:
        variants += [
            VariantSpec(
                "pruned-dense",
                SHORT_LABELS["pruned-dense"],
                p,
                (),
                False,
                "The pruned checkpoint as stored: removed heads and FFN neurons are zeros, so it "
                "does as much arithmetic as an unpruned model.",
            ),
            VariantSpec(
                "pruned",
                SHORT_LABELS["pruned"],
                p,
                ("compact",),
                True,
                "Zeroed heads and FFN neurons physically cut out of the pruned checkpoint.",
            ),
            *graph_chain("pruned", p, ("compact",), last),
        ]
    else:
        variants += graph_chain("baseline", b, (), last)
    if family.latency_only:
        variants = [replace(v, latency_only=True) for v in variants]
    return variants


def preset(name: str, device: str = "cpu", overrides: dict[str, str] | None = None) -> list[VariantSpec]:
    """The variants of preset ``name`` for ``device``, with ``overrides`` ({"baseline"|"pruned": source}).

    A baseline named without a pruned partner stands alone (its no-training chain): the preset's pruned model
    belongs to the preset's baseline, and timing one model's pruned partner against another would compare two
    unrelated models. ``pruned`` = ``none`` drops the partner of the preset's own baseline.
    """
    return chain(family_for(name, overrides), device)


def family_for(name: str, overrides: dict[str, str] | None = None) -> Family:
    """Preset ``name``'s family with ``overrides`` applied (see :func:`preset`)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(FAMILIES)}")
    family = FAMILIES[name]
    overrides = {k: v for k, v in (overrides or {}).items() if v}
    unknown = set(overrides) - {"baseline", "pruned"}
    if unknown:
        raise ValueError(f"overrides take 'baseline' and 'pruned', not {sorted(unknown)}")
    baseline = overrides.get("baseline") or family.baseline
    pruned = overrides.get("pruned") or (None if "baseline" in overrides else family.pruned)
    if pruned is not None and pruned.strip().lower() == NO_PARTNER:
        pruned = None
    latency_only = family.latency_only
    if "baseline" in overrides and "pruned" not in overrides:  # the baseline alone: random only if a replica
        latency_only = baseline.startswith(REPLICA_SCHEME)
    if pruned != family.pruned:  # a host's partner: pruned, as --pruned says (the presets' own are vouched for)
        family = replace(family, partner="pruned", partner_label="", partner_note="")
    return replace(family, baseline=baseline, pruned=pruned, latency_only=latency_only)


def chain_of(name: str, overrides: dict[str, str] | None = None) -> dict[str, str | None]:
    """What a chain is made of when it is not preset ``name``'s own ({} when it is): ``name`` ("minilm-squad2
    alone", "my-model with my-model-pruned"), ``baseline`` and ``pruned`` (None: the baseline alone). Engines and
    records carry it, so a record of one chain is never shown as another's."""
    family, own = family_for(name, overrides), FAMILIES[name]
    if (family.baseline, family.pruned) == (own.baseline, own.pruned):
        return {}
    base = source_name(family.baseline)
    title = f"{base} alone" if family.pruned is None else f"{base} with {source_name(family.pruned)}"
    return {"name": title, "baseline": family.baseline, "pruned": family.pruned}


def source_name(source: str) -> str:
    """A source as people name it: a Hub id or replica as written, a folder by its own name."""
    folder = Path(source).expanduser()
    hub_id = not source.startswith((".", "/", "~")) and source.count("/") <= 1
    if source.startswith(REPLICA_SCHEME) or (hub_id and not folder.is_dir()):
        return source
    return folder.resolve().name or source


def load_config(path: str | Path) -> dict:
    """A small config file (TOML or JSON): ``preset``, ``baseline``, ``pruned`` and optional ``variants``.

    ``variants`` is a list of full specs ({name, label, source, steps, headline}) that replaces the
    preset's chain, for users who want their own line-up.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # a folder, no such file, not TOML or JSON
        raise ValueError(f"{path}: cannot be read as a config file ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a config file holds keys and values, not a {type(data).__name__}")
    allowed = {"preset", "baseline", "pruned", "variants", "device"}
    unknown = set(data) - allowed
    if unknown:
        raise ValueError(f"{path}: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
    for key in sorted(allowed - {"variants"}):
        if key in data and not isinstance(data[key], str):
            raise ValueError(f"{path}: {key!r} is a text value, not {data[key]!r}")
    if "variants" in data:
        if not isinstance(data["variants"], list):
            raise ValueError(f"{path}: 'variants' is a list of tables ([[variants]] in TOML)")
        for i, entry in enumerate(data["variants"], 1):
            _check_variant_entry(entry, f"{path}: variant {i}")
    return data


VARIANT_KEYS = {"name": str, "label": str, "source": str, "steps": list, "headline": bool, "description": str,
                "revision": str}  # fmt: skip


def _check_variant_entry(entry: object, where: str) -> None:
    """One ``[[variants]]`` table of a config file: known keys of the right types, ``name`` and ``source`` given,
    ``steps`` a list of step names (a typo in a key must not quietly give another variant)."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is not a table of keys")
    unknown = set(entry) - set(VARIANT_KEYS)
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(VARIANT_KEYS)}")
    missing = [k for k in ("name", "source") if k not in entry]
    if missing:
        raise ValueError(f"{where}: {' and '.join(missing)} must be given")
    for key, kind in VARIANT_KEYS.items():
        if key in entry and not isinstance(entry[key], kind):
            raise ValueError(f"{where}: {key!r} must be a {kind.__name__}, not {entry[key]!r}")
    if not all(isinstance(step, str) for step in entry.get("steps", [])):
        raise ValueError(f"{where}: 'steps' is a list of step names")


def specs_from_config(data: dict, device: str) -> list[VariantSpec]:
    """Variant specs from a loaded config (see :func:`load_config`)."""
    if data.get("variants"):
        return [
            VariantSpec(
                name=v["name"],
                label=v.get("label", v["name"]),
                source=v["source"],
                steps=tuple(v.get("steps", ())),
                headline=bool(v.get("headline", False)),
                description=v.get("description", ""),
                revision=v.get("revision"),
            )
            for v in data["variants"]
        ]
    overrides = {k: data[k] for k in ("baseline", "pruned") if data.get(k)}
    return preset(data.get("preset") or default_preset(device), device, overrides)


# Each variant's one name, on every tab, chart, card and API (its ``label``); records made before there was one
# name show these too (records.record.Record.short_label). Short enough for one line of a phone's card.
SHORT_LABELS = {
    "baseline": "Baseline",
    "pruned-dense": "Pruned, stored dense",
    "pruned": "Pruned",
    **{v.name: v.label for root in ("baseline", "pruned") for last in ("int8", "fp16")
       for v in graph_chain(root, "", (), last)},
}  # fmt: skip
# The labels the chains themselves give, the distilled partner's included: shown as they are (a distilled chain
# runs under the pruned chain's names, and its labels say what it is).
CHAIN_LABELS = frozenset(
    {*SHORT_LABELS.values(), ROOTS["distilled"][0]}
    | {f.partner_label for f in FAMILIES.values() if f.partner_label}
    | {v.label for last in ("int8", "fp16") for v in graph_chain("pruned", "", (), last, words="distilled")}
)


def short_label(name: str, label: str = "") -> str:
    """A variant's short plain name: its label where a chain gave it (:data:`CHAIN_LABELS`), else the chain's
    name for it (records from before there was one name carry long labels), else its label, else its name."""
    return label if label in CHAIN_LABELS else SHORT_LABELS.get(name) or label or name


def distilled(label: str) -> bool:
    """Whether a variant's label names a distilled partner's chain (charts and sentences then say so)."""
    return label.startswith(ROOTS["distilled"][0])


def named(chosen: list[VariantSpec], names: list[str]) -> list[VariantSpec]:
    """The variants of ``chosen`` named in ``names``, in the chain's order; an unknown name is a ``ValueError``
    that lists the known ones (a typo must not silently leave a variant out)."""
    known = [s.name for s in chosen]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown variant(s) {', '.join(map(repr, unknown))}; this preset has {', '.join(known)}")
    return [s for s in chosen if s.name in names]
