"""Load a set of variants once and answer questions with all of them, each failure isolated.

This is the engine's front door for the CLI, the benchmark and the app: ``load_engine`` picks the
specs (falling back to the offline ``embedded`` preset when the Hub models cannot load), has
:mod:`variants.building.build` build or reuse them, and ``Engine.ask_iter`` yields one :class:`VariantResult`
per variant as each finishes. Building lives in :mod:`variants.building.build`; this module answers.
The app builds in the background instead (``prepare_engine``, then ``Engine.build_in_background``) and serves
meanwhile with the variants built so far; ``Engine.status`` (:mod:`variants.serving.build_status`) says where
each variant's build stands.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import ClassVar

from variants.answering.language import identifier
from variants.answering.qa import (
    Answer,
    DecodeSettings,
    NullThreshold,
    answer_pairs,
    check_pair,
    parse_null_threshold,
    resolve_null_threshold,
    window_stride,
)
from variants.answering.runtime import (
    QAModel,
    limit_native_memory,
    release_free_memory,
    resolve_device,
    usable_device,
)
from variants.answering.timing import SERVED, TimingRule
from variants.building import pair
from variants.building.build import BuiltVariant, Progress, VariantBuilder
from variants.building.sources import ResolvedSource, SourceUnavailable, weights_identity
from variants.core import config
from variants.core import spec as specs
from variants.serving.asking import TimedAsking
from variants.serving.batching import Batcher, BatcherClosed, BatchingConfig
from variants.serving.build_status import FAILED, BuildStatus, fetch_words
from variants.serving.outcome import (
    VariantResult,
    describe_error,
)
from variants.serving.snapshot import Snapshot, take

log = logging.getLogger("variants.serving.engine")

MAX_CONTEXT_CHARS = config.MAX_CONTEXT_CHARS  # default; VARIANTS_MAX_CONTEXT_CHARS or --max-context-chars change it
MAX_CONTEXT_ENV = config.MAX_CONTEXT_ENV
MAX_QUESTION_CHARS = 1_000


def default_max_context_chars() -> int:
    """``$VARIANTS_MAX_CONTEXT_CHARS`` if set, else :data:`MAX_CONTEXT_CHARS`."""
    return config.max_context_chars()


@dataclass
class LoadedVariant:
    """A spec with its loaded model and tokenizer, or the error that stopped it loading."""

    spec: specs.VariantSpec
    model: QAModel | None = None
    tokenizer: object = None
    load_seconds: float = 0.0
    error: str | None = None
    artifact: Path | None = None
    settings: DecodeSettings | None = None  # the engine's, with windows capped to what the model takes
    calibrated_threshold: float | None = None  # the model's own (config.json qa_null_threshold), None without
    batcher: Batcher | None = field(default=None, repr=False)  # with dynamic batching on

    @property
    def ok(self) -> bool:
        return self.model is not None


@dataclass
class Engine(TimedAsking):
    """Loaded variants of one preset, shared by all requests (thread-safe).

    With ``batching`` set, concurrent requests to one variant meet in its :class:`Batcher` and run as
    one batch; call :meth:`close` (or use the engine as a context manager) to stop the batchers' threads.
    """

    specs: list[specs.VariantSpec]
    device: str = "auto"
    settings: DecodeSettings = field(default_factory=DecodeSettings)
    cache_dir: Path | None = None
    preset: str = ""
    # what the chain is made of when it is not the preset's own (spec.chain_of: name, baseline, pruned); {}: it is
    chain: dict[str, str | None] = field(default_factory=dict)
    notice: str = ""  # e.g. the fallback to the embedded preset
    fallback_from: str = ""  # the preset asked for, once the build fell back from it to the embedded preset
    max_context_chars: int = MAX_CONTEXT_CHARS
    batching: BatchingConfig | None = None
    variants: dict[str, LoadedVariant] = field(default_factory=dict)
    # When to say "no answer" (see variants.answering.qa.NullThreshold): 0, transformers' pipeline rule, by default;
    # "calibrated" uses each model's threshold from its config.json. ask_iter can override it per call.
    null_threshold: NullThreshold = 0.0
    # False: each variant is built, loaded and warmed up, then let go (the build command: what it makes is the
    # artifacts, and a large chain's variants held together would be most of the build's memory)
    hold: bool = True
    # what to build instead when a source cannot be had (the embedded preset), None: no fallback
    fallback_specs: list[specs.VariantSpec] | None = field(default=None, repr=False)
    # the variants run in this process, so its CPU time and its threads' waits say how busy the machine was
    measures_cpu: ClassVar[bool] = True

    def __post_init__(self) -> None:
        self.device = resolve_device(self.device)
        self.null_threshold = parse_null_threshold(self.null_threshold)
        if self.max_context_chars < 1:
            raise ValueError(f"max_context_chars must be at least 1, not {self.max_context_chars}")
        self._builder = VariantBuilder(self.device, self.cache_dir)
        self._lock = threading.Lock()  # one load (start-up or an added variant) at a time
        self._paces: dict = {}  # each variant's pace on its latest question (asking.Pace: run_order, the cap)
        self.status = BuildStatus(self.specs, self.preset)  # each variant's build: queued, building, ready, failed

    # --- loading ------------------------------------------------------------------------------

    def build(self, progress: Progress | None = None) -> Engine:
        """Fetch the sources (falling back to :attr:`fallback_specs` when one cannot be had), then build and
        load every variant (:meth:`load`); :attr:`status` follows each step."""
        self.status.begin()
        try:
            self._fetch_sources()
            return self.load(progress)
        except BaseException as exc:  # a variant's own failure stays on it; this is the build itself stopping
            self.status.fail_pending(describe_error(exc))
            raise

    def build_in_background(self, progress: Progress | None = None) -> threading.Thread:
        """:meth:`build` in a daemon thread, started now; requests meanwhile see the variants built so far
        (:attr:`loaded`) and :attr:`status` says what is still coming."""

        def run() -> None:
            try:
                self.build(progress)
            except Exception:  # already on every pending variant's status, with its reason
                log.exception("the build stopped")

        thread = threading.Thread(target=run, name="variants-build", daemon=True)
        thread.start()
        return thread

    def _fetch_sources(self) -> None:
        """Resolve each source once before any variant builds (a Hub download, a replica made here), with its
        progress on :attr:`status`; the first that cannot be had switches to the fallback specs, if any."""
        for spec in {s.source: s for s in self.specs}.values():
            self.status.stage(fetch_words(spec.source, cached=self._source_kept(spec)))
            try:
                self._builder.source(spec, progress=partial(self._fetch_progress, spec.source))
            except Exception as exc:
                if not isinstance(exc, SourceUnavailable) or self.fallback_specs is None:
                    continue  # each variant of this source fails with the reason when it builds
                self._use_fallback(str(exc))
                break
        self.status.stage("")

    def _source_kept(self, spec: specs.VariantSpec) -> bool:
        """Whether ``spec``'s source is already here (a Hub id in the Hub cache, a replica's weights in the artifact
        cache), so that fetching it reads what an earlier start kept."""
        try:
            known = self._builder.known_source(spec)
        except Exception:  # only the log's wording depends on it
            return False
        return known is not None and not Path(spec.source).expanduser().is_dir() and known.path.is_dir()

    def _fetch_progress(self, source: str, done: int, total: int | None) -> None:
        self.status.stage(f"{fetch_words(source)}: {done} of {total or '?'} files")

    def _use_fallback(self, problem: str) -> None:
        """Switch to the fallback specs (the embedded preset) and say why in :attr:`notice`."""
        log.warning("falling back to the embedded preset: %s", problem)
        asked, fallback = self.preset, self.fallback_specs or []
        self.fallback_specs = None
        self.status.reset(fallback, specs.FALLBACK_PRESET)
        self.specs, self.preset, self.fallback_from = list(fallback), specs.FALLBACK_PRESET, asked
        self.chain = {}
        said = (
            f"The {asked} models could not be loaded, so the offline {specs.FALLBACK_PRESET} "
            f"models are shown instead. {problem}"
        )
        self.notice = " ".join(filter(None, [self.notice, said]))

    def load(self, progress: Progress | None = None) -> Engine:
        """Build (or reuse from cache) and load every variant; a failure stays on its variant."""
        progress = progress or (lambda _f, _m: None)
        share = 1 / max(1, len(self.specs))
        with self._lock:
            for i, spec in enumerate(self.specs):
                progress(i * share, f"Loading {spec.label}")

                def step_progress(fraction: float, message: str, base: float = i * share) -> None:
                    progress(base + fraction * share, message)

                loaded = self._load_variant(spec, step_progress)
                ok = loaded.ok
                if not self.hold:  # built and checked (it answered its warm-up): its memory goes back, and the
                    loaded.model = None  # torch copy kept for the exports (a large model's export reads its folder)
                    self._builder.release()
                self._start_batcher(loaded)
                self.variants = {**self.variants, spec.name: loaded}
                if ok:
                    self.status.ready(spec.name)
                else:
                    self.status.failed(spec.name, loaded.error or "not loaded")
            self._builder.release()  # torch copies kept only for exports
        identifier()  # the language check's model, loaded now rather than on the first question
        progress(1.0, "Ready")
        return self

    def _load_variant(self, spec: specs.VariantSpec, progress: Progress) -> LoadedVariant:
        """One variant loaded and warmed up, or carrying the one-line error that stopped it."""
        started = time.perf_counter()
        loaded = LoadedVariant(spec)

        def step_progress(fraction: float, message: str) -> None:  # "label: step" from the ONNX chain
            step = message.rsplit(": ", 1)[-1]
            self.status.step(spec.name, "export" if step == "onnx" else step)
            progress(fraction, message)

        try:
            self.status.step(spec.name, "load")
            if "compact" in spec.steps and spec.backend == "torch":  # loaded and compacted in one go
                self.status.step(spec.name, "compact")
            built = self._builder.build(spec, step_progress, step_over=partial(self.status.step_over, spec.name))
            loaded.model, loaded.tokenizer, loaded.artifact = built.model, built.tokenizer, built.artifact
            loaded.calibrated_threshold = built.calibrated_threshold
            loaded.settings = self._settings_for(built)
            self.status.step(spec.name, "warmup")
            loaded.model.warmup()
        except Exception as exc:
            loaded.model = None
            loaded.error = describe_error(exc)
            log.warning("variant %s failed to load: %s", spec.name, loaded.error)
            log.debug("traceback", exc_info=True)
        loaded.load_seconds = time.perf_counter() - started
        return loaded

    def add_variant(
        self, spec: specs.VariantSpec, source: ResolvedSource | None = None, progress: Progress | None = None
    ) -> LoadedVariant:
        """Load one more variant next to the others (replacing one of the same name); its error, if any,
        stays on it. ``source`` is the already-resolved source (e.g. a checked Hub snapshot)."""
        with self._lock:
            if source is not None:
                self._builder.remember(spec.source, source)
            loaded = self._load_variant(spec, progress or (lambda _f, _m: None))
            self._builder.release()
            self._start_batcher(loaded)
            old = self.variants.get(spec.name)
            self.specs = [*(s for s in self.specs if s.name != spec.name), spec]
            self.variants = {**self.variants, spec.name: loaded}  # one assignment: readers see old or new
            if old is not None and old.batcher is not None:
                old.batcher.close()
        return loaded

    def use_source(self, source: str, resolved: ResolvedSource) -> None:
        """Build the variants of ``source`` from ``resolved`` (a snapshot already checked and fetched)."""
        self._builder.remember(source, resolved)

    def remove_variant(self, name: str) -> None:
        """Unload a variant (requests already running on it finish)."""
        with self._lock:
            self._drop(name)

    def _drop(self, name: str) -> None:
        old = self.variants.get(name)
        self.specs = [s for s in self.specs if s.name != name]
        self.variants = {k: v for k, v in self.variants.items() if k != name}
        if old is not None and old.batcher is not None:
            old.batcher.close()

    def settings_for(self, loaded: LoadedVariant) -> DecodeSettings:
        """The decoding settings ``loaded`` answers with: its own (windows capped to its model), else the engine's."""
        return loaded.settings or self.settings

    def _start_batcher(self, loaded: LoadedVariant) -> None:
        """With batching on, a batcher per loaded variant (one at a time for batch-sensitive models)."""
        if self.batching is None or not loaded.ok:
            return
        model, tokenizer = loaded.model, loaded.tokenizer
        settings = self.settings_for(loaded)
        config = self.batching
        if not model.batch_invariant:  # its answers depend on what shares the batch: never mix requests
            config = BatchingConfig(max_wait_ms=0, max_batch_size=1)

        def run(pairs: list[tuple[str, str]]) -> list[Answer]:
            return answer_pairs(model, tokenizer, pairs, settings)

        def same_windows(pair: tuple[str, str]) -> int:
            return window_stride(tokenizer, [pair[0]], settings)

        # Batches of many shapes leave the heap fragmented; give its free pages back whenever the worker idles.
        loaded.batcher = Batcher(run, config, same_windows, loaded.spec.name, on_idle=release_free_memory)

    def close(self) -> None:
        """Stop the batchers' threads (requests already queued are answered first)."""
        for loaded in self.loaded:
            if loaded.batcher is not None:
                loaded.batcher.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def batch_stats(self) -> dict[str, dict]:
        """Per batched variant: requests, batches and the mean and largest batch so far."""
        return {
            v.spec.name: {
                "requests": v.batcher.stats.requests,
                "batches": v.batcher.stats.batches,
                "mean_batch": round(v.batcher.stats.mean_batch, 2),
                "largest": v.batcher.stats.largest,
                "max_batch_size": v.batcher.config.max_batch_size,
            }
            for v in self.loaded
            if v.batcher is not None
        }

    def source(self, spec: specs.VariantSpec) -> ResolvedSource:
        """The spec's source resolved to a local folder (see :class:`variants.building.build.VariantBuilder`)."""
        return self._builder.source(spec)

    def weights(self) -> dict[str, str]:
        """Each variant's weights as records name them (:func:`~variants.building.sources.weights_identity`),
        for the variants whose source resolves without a download or a build (the page asks before the build
        has run); benchmark records carry the same per entry, so a record of other weights can say so."""
        out = {}
        for spec in {s.name: s for s in [*self.specs, *(v.spec for v in self.loaded)]}.values():
            try:
                source = self._builder.known_source(spec)
                if source is not None:
                    out[spec.name] = weights_identity(source)
            except Exception as exc:  # a source that does not resolve has no identity to compare
                log.debug("no weights identity for %s: %s", spec.name, exc)
        return out

    def _settings_for(self, built: BuiltVariant) -> DecodeSettings:
        """The engine's settings for one variant: the window no longer than the model's positions allow,
        and the null threshold the engine's mode means for this model."""
        threshold = resolve_null_threshold(self.null_threshold, built.calibrated_threshold)
        settings = replace(self.settings, null_threshold=threshold)
        limit = built.max_positions
        if settings.max_length <= limit:
            return settings
        return replace(settings, max_length=limit, stride=min(settings.stride, limit // 4))

    def reference_model(self, name: str):
        """The torch model whose arithmetic variant ``name`` runs (compacted for a compacted chain): for
        counting its operations (:mod:`variants.benchmarking.profile`), whatever backend runs it."""
        spec = next(s for s in self.specs if s.name == name)
        return self._builder.torch_model(spec, "compact" in spec.steps)

    # --- answering ----------------------------------------------------------------------------

    @property
    def loaded(self) -> list[LoadedVariant]:
        return list(self.variants.values())

    def snapshot(self, results: dict[str, VariantResult] | None = None) -> Snapshot:
        """What the page draws, now: each variant in chain order with its build state and, given ``results``,
        its result (:mod:`variants.serving.snapshot`), for renderers that read data, not the engine."""
        build, chain, loaded = self.status.snapshot(), self.specs, self.variants  # each read once
        return take(
            chain, loaded, build, self.preset, self.device, self.notice, results, self.fallback_from, self.chain
        )

    def check_input(self, question: str, context: str) -> None:
        """Raise :class:`InputError` with a clear message for input no variant should run on
        (:func:`~variants.answering.qa.check_pair` with this engine's length limits), a question too long in
        tokens for a loaded variant's window included, so that it is refused before any variant runs."""
        check_pair(question, context, MAX_QUESTION_CHARS, self.max_context_chars)
        checked = set()  # the variants of one source share its tokenizer and window: one count for all of them
        for loaded in self.loaded:
            settings = self.settings_for(loaded)
            source = getattr(loaded.tokenizer, "name_or_path", id(loaded.tokenizer))
            key = (source, settings.max_length, settings.stride)
            if loaded.ok and loaded.tokenizer is not None and key not in checked:
                checked.add(key)
                window_stride(loaded.tokenizer, [question], settings)  # tokenizes only a long or non-ASCII question

    def threshold_for(self, name: str, null_threshold: NullThreshold | None = None) -> float:
        """The null threshold variant ``name`` decides at under ``null_threshold`` (None: the engine's mode)."""
        mode = self.null_threshold if null_threshold is None else parse_null_threshold(null_threshold)
        loaded = self.variants.get(name)
        return resolve_null_threshold(mode, loaded.calibrated_threshold if loaded else None)

    def calibrated_thresholds(self) -> dict[str, float | None]:
        """Each loaded variant's calibrated null threshold (None for a model without one)."""
        return {v.spec.name: v.calibrated_threshold for v in self.loaded}

    def answer_one(
        self,
        name: str,
        question: str,
        context: str,
        *,
        repeats: int = 1,
        null_threshold: NullThreshold | None = None,
        rule: TimingRule | None = None,
    ) -> VariantResult:
        """One variant's answer with its latency (tokenize, run every window, decode), by the timing rule.

        ``rule`` defaults to one run as it is served (:data:`~variants.answering.timing.SERVED`, no
        warm-up) for ``repeats`` 1, else the shared rule with ``repeats`` timed runs at most.
        """
        if rule is None:
            rule = SERVED if repeats == 1 else TimingRule(runs=repeats)
        *_, last = self.ask_stream(question, context, [name], rule=rule, null_threshold=null_threshold, check=False)
        return last.results[name]

    def _prepare(self, name: str, null_threshold: NullThreshold | None) -> tuple[VariantResult, Callable | None]:
        """A variant's result to fill and the call that answers the question with it (None if not loaded)."""
        loaded = self.variants.get(name)
        if loaded is None:  # e.g. a user's model replaced meanwhile
            return VariantResult(name, name, error="This variant is no longer loaded."), None
        spec = loaded.spec
        result = VariantResult(
            spec.name,
            spec.label,
            null_threshold=self.threshold_for(name, null_threshold),
            latency_only=spec.latency_only,
        )
        if not loaded.ok:
            result.error, result.state = loaded.error or "not loaded", FAILED
            return result, None
        model = loaded.model
        result.device, result.provider, result.dtype = model.device, model.provider, model.dtype
        result.execution = model.execution
        result.size_mb, result.parameters = round(model.size_bytes / 1e6, 1), model.num_parameters
        batcher, tokenizer, settings = loaded.batcher, loaded.tokenizer, self.settings_for(loaded)

        def run(question: str, context: str) -> Answer:
            if batcher is not None:  # with batching, the wait for a batch counts too
                try:
                    return batcher.answer(question, context)
                except BatcherClosed:  # the variant was replaced or removed meanwhile: this request finishes alone
                    pass
            return answer_pairs(model, tokenizer, [(question, context)], settings)[0]

        return result, run

    def ask_iter(
        self,
        question: str,
        context: str,
        names: list[str] | None = None,
        *,
        repeats: int = 1,
        budget_s: float | None = None,
        null_threshold: NullThreshold | None = None,
        rule: TimingRule | None = None,
    ) -> Iterator[VariantResult]:
        """Each variant's final result (baseline first), timed by ``rule``. Without one, as before the rule
        had a name: ``repeats`` 1 is one run as served (:data:`~variants.answering.timing.SERVED`), more
        is the shared rule with ``repeats`` timed runs at most under ``budget_s`` (None: no budget). The
        interfaces (Ask tab, CLI, ``/answer``) pass :class:`~variants.answering.timing.TimingRule`'s defaults.
        """
        if rule is None:
            rule = SERVED if repeats == 1 else TimingRule(runs=repeats, budget_s=budget_s)
        *_, last = self.ask_stream(question, context, names, rule=rule, null_threshold=null_threshold)
        yield from last.results.values()

    def ask(
        self,
        question: str,
        context: str,
        names: list[str] | None = None,
        *,
        repeats: int = 1,
        budget_s: float | None = None,
        null_threshold: NullThreshold | None = None,
        rule: TimingRule | None = None,
    ) -> list[VariantResult]:
        return list(
            self.ask_iter(
                question, context, names, repeats=repeats, budget_s=budget_s, null_threshold=null_threshold, rule=rule
            )
        )

    def answer_pairs(self, name: str, pairs: list[tuple[str, str]]) -> list[Answer]:
        """Batch answers from one variant (for the benchmark)."""
        loaded = self.variants[name]
        if not loaded.ok:
            raise RuntimeError(f"{name} is not loaded: {loaded.error}")
        return answer_pairs(loaded.model, loaded.tokenizer, pairs, self.settings_for(loaded))


def load_engine(*args, progress: Progress | None = None, **options) -> Engine:
    """Resolve, build and load a preset, falling back to ``embedded`` if its sources cannot load: the engine of
    :func:`prepare_engine` (the same arguments), built (:meth:`Engine.build`, reporting to ``progress``)."""
    return prepare_engine(*args, **options).build(progress)


def prepare_engine(
    preset: str | None = None,
    device: str = "auto",
    overrides: dict[str, str] | None = None,
    variant_specs: list[specs.VariantSpec] | None = None,
    fallback: bool = True,
    cache_dir: Path | None = None,
    settings: DecodeSettings | None = None,
    names: list[str] | None = None,
    max_context_chars: int | None = None,
    batching: BatchingConfig | None = None,
    null_threshold: NullThreshold = 0.0,
) -> Engine:
    """The engine of a preset, its specs chosen but nothing fetched or built yet: call :meth:`Engine.build` or
    :meth:`Engine.build_in_background` (the fallback to ``embedded`` is decided while it fetches).

    ``preset`` defaults to the device's (:func:`~variants.core.spec.default_preset`); ``max_context_chars``
    defaults to ``$VARIANTS_MAX_CONTEXT_CHARS`` or 25,000; ``batching`` turns on dynamic batching of concurrent
    requests (see :mod:`variants.serving.batching`); ``null_threshold`` is when to say "no answer" (0, the
    pipeline rule; a number; or "calibrated").
    """
    device, no_gpu = usable_device(resolve_device(device))
    limit_native_memory()  # process-wide; before the models allocate (see runtime.limit_native_memory)
    preset = preset or specs.default_preset(device)
    chosen = variant_specs or specs.preset(preset, device, overrides)
    chain = {} if variant_specs else specs.chain_of(preset, overrides)
    if chain:  # a host's pair (the presets' own are vouched for): seconds, config and vocabulary only, nothing built
        pair.check_pair(chain["baseline"], chain["pruned"])
    if names:
        chosen = specs.named(chosen, names)
    options = {
        "device": device,
        "settings": settings or DecodeSettings(),
        "cache_dir": cache_dir,
        "max_context_chars": max_context_chars or default_max_context_chars(),
        "batching": batching,
        "null_threshold": null_threshold,
    }
    engine = Engine(chosen, preset=preset, chain=chain, **options)
    if fallback and preset != specs.FALLBACK_PRESET and not variant_specs:
        fallback_specs = specs.preset(specs.FALLBACK_PRESET, device)
        if names:  # the names were checked against the preset asked for; the fallback keeps those it has
            fallback_specs = [s for s in fallback_specs if s.name in names]
        engine.fallback_specs = fallback_specs
    engine.notice = no_gpu
    return engine
