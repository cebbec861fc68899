"""What the page draws, at one moment: each variant (what it is, where its build stands, what it runs on, its
result to the question asked) and the build's progress, read from the engine once (:meth:`Engine.snapshot
<variants.serving.engine.Engine.snapshot>`). Plain frozen data: the UI's renderers are functions of it, drawn
without an engine or a model, and a test hands them one made by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from variants.core import spec as specs

from .build_status import BuildSnapshot, VariantStatus
from .outcome import VariantResult

NO_BUILD = BuildSnapshot(variants=(), stage="", seconds=0.0, started=True, version=0)  # a build that is over


@dataclass(frozen=True)
class VariantView:
    """One variant as the page shows it. ``loaded``: its build is over (it answers, or ``error`` says why not);
    before that, ``build`` says where it stands (None for a variant the start-up build does not know). ``info``:
    what it runs on, as its model describes itself (device, provider, dtype, execution, size_mb, parameters,
    notes), empty unless it answers. ``result``: its answer to the question asked, if any."""

    name: str
    label: str
    description: str = ""
    headline: bool = False
    latency_only: bool = False
    backend: str = "torch"
    source: str = ""
    build: VariantStatus | None = None
    loaded: bool = False
    ok: bool = False
    error: str | None = None
    info: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    result: VariantResult | None = None

    @classmethod
    def of(cls, spec: specs.VariantSpec, loaded: Any = None, build: VariantStatus | None = None) -> VariantView:
        """From a spec, its :class:`~variants.serving.engine.LoadedVariant` once loaded, and its build state."""
        ok = loaded is not None and loaded.ok
        return cls(
            name=spec.name,
            label=spec.label,
            description=spec.description,
            headline=spec.headline,
            latency_only=spec.latency_only,
            backend=spec.backend,
            source=spec.source,
            build=build,
            loaded=loaded is not None,
            ok=ok,
            error=loaded.error if loaded is not None else None,
            info=MappingProxyType(loaded.model.describe()) if ok else MappingProxyType({}),
        )


@dataclass(frozen=True)
class Snapshot:
    """Every variant in chain order, built or not (:class:`VariantView`), the build's progress, and what the
    engine runs here (``preset``, ``device``, ``notice``: e.g. the fallback to the embedded preset, and the
    preset it fell back from)."""

    variants: tuple[VariantView, ...]
    build: BuildSnapshot = NO_BUILD
    preset: str = ""
    device: str = "cpu"
    notice: str = ""
    fallback_from: str = ""  # the preset asked for, when the build fell back from it

    def view(self, name: str) -> VariantView | None:
        return next((v for v in self.variants if v.name == name), None)

    @property
    def loaded(self) -> tuple[VariantView, ...]:
        """Those whose build is over (ready, or failed with the reason), in chain order."""
        return tuple(v for v in self.variants if v.loaded)

    @property
    def results(self) -> dict[str, VariantResult]:
        return {v.name: v.result for v in self.variants if v.result is not None}

    def with_results(self, results: Mapping[str, VariantResult]) -> Snapshot:
        """The same moment with each variant's result to a question (those not in ``results``: none)."""
        return replace(self, variants=tuple(replace(v, result=results.get(v.name)) for v in self.variants))


def take(
    chain: Iterable[specs.VariantSpec],
    loaded: Mapping[str, Any],
    build: BuildSnapshot,
    preset: str = "",
    device: str = "cpu",
    notice: str = "",
    results: Mapping[str, VariantResult] | None = None,
    fallback_from: str = "",
) -> Snapshot:
    """A snapshot of ``chain`` (specs in order) with the loaded variants by name (any loaded one not in the
    chain follows it) and the build's snapshot."""
    chain = list(chain)
    named = {s.name for s in chain}
    chain += [v.spec for name, v in loaded.items() if name not in named]
    views = tuple(VariantView.of(s, loaded.get(s.name), build.state(s.name)) for s in chain)
    snap = Snapshot(views, build, preset, device, notice, fallback_from)
    return snap.with_results(results) if results else snap
