"""Load a set of variants once and answer questions with all of them, each failure isolated.

This is the engine's front door for the CLI, the benchmark and the app: ``load_engine`` resolves
sources (falling back to the offline ``embedded`` preset when the Hub models cannot load), builds
or reuses cached artifacts, and ``Engine.ask_iter`` yields one :class:`VariantResult` per variant as
each finishes.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from variants import spec as specs
from variants.qa import Answer, DecodeSettings, InputError, answer_pairs
from variants.runtime import OrtQAModel, QAModel, TorchQAModel, cpu_threads, resolve_device
from variants.sources import ResolvedSource, SourceUnavailable, resolve

log = logging.getLogger("variants.engine")

Progress = Callable[[float, str], None]
MAX_CONTEXT_CHARS = 25_000
MAX_QUESTION_CHARS = 1_000


@dataclass
class VariantResult:
    """One variant's answer to one question, or the error that stopped it."""

    variant: str
    label: str
    answer: str = ""
    score: float = 0.0
    latency_ms: float | None = None
    device: str = ""
    provider: str = ""
    dtype: str = ""
    start: int = 0
    end: int = 0
    null_score: float = 0.0
    size_mb: float | None = None
    parameters: int | None = None
    speedup: float | None = None
    error: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


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

    @property
    def ok(self) -> bool:
        return self.model is not None


@dataclass
class Engine:
    """Loaded variants of one preset, shared by all requests (thread-safe)."""

    specs: list[specs.VariantSpec]
    device: str = "auto"
    settings: DecodeSettings = field(default_factory=DecodeSettings)
    cache_dir: Path | None = None
    preset: str = ""
    notice: str = ""  # e.g. the fallback to the embedded preset
    max_context_chars: int = MAX_CONTEXT_CHARS
    variants: dict[str, LoadedVariant] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.device = resolve_device(self.device)
        self._sources: dict[str, ResolvedSource] = {}
        self._torch: dict[tuple[str, bool], object] = {}
        self._lock = threading.Lock()

    # --- loading ------------------------------------------------------------------------------

    def load(self, progress: Progress | None = None) -> Engine:
        """Build (or reuse from cache) and load every variant; a failure stays on its variant."""
        progress = progress or (lambda _f, _m: None)
        share = 1 / max(1, len(self.specs))
        for i, spec in enumerate(self.specs):
            progress(i * share, f"Loading {spec.label}")
            started = time.perf_counter()
            loaded = LoadedVariant(spec)

            def step_progress(fraction: float, message: str, base: float = i * share) -> None:
                progress(base + fraction * share, message)

            try:
                loaded.model, loaded.tokenizer, loaded.artifact = self._load_one(spec, step_progress)
                loaded.settings = self._settings_for(loaded)
                loaded.model.warmup()
            except Exception as exc:
                loaded.error = _describe(exc)
                log.warning("variant %s failed to load: %s", spec.name, loaded.error)
                log.debug("traceback", exc_info=True)
            loaded.load_seconds = time.perf_counter() - started
            self.variants[spec.name] = loaded
        self._torch.clear()  # torch copies kept only for exports
        progress(1.0, "Ready")
        return self

    def source(self, spec: specs.VariantSpec) -> ResolvedSource:
        if spec.source not in self._sources:
            self._sources[spec.source] = resolve(spec.source, spec.revision)
        return self._sources[spec.source]

    def _torch_model(self, spec: specs.VariantSpec, compacted: bool):
        """The source's torch model (compacted or not), loaded once and shared."""
        key = (spec.source, compacted)
        if key not in self._torch:
            if compacted and (spec.source, False) in self._torch:
                model = copy.deepcopy(self._torch[(spec.source, False)])
            else:
                import torch  # noqa: PLC0415
                from transformers import AutoModelForQuestionAnswering  # noqa: PLC0415

                model = AutoModelForQuestionAnswering.from_pretrained(
                    self.source(spec).path, dtype=torch.float32, trust_remote_code=False
                ).eval()
            if compacted:
                from variants.prune import compact  # noqa: PLC0415

                report = compact(model)
                log.info("%s: %s", spec.source, report.summary())
            self._torch[key] = model
        return self._torch[key]

    def _settings_for(self, loaded: LoadedVariant) -> DecodeSettings:
        """The engine's settings, with the window no longer than the model's positions allow."""
        from dataclasses import replace  # noqa: PLC0415

        from transformers import AutoConfig  # noqa: PLC0415

        config = AutoConfig.from_pretrained(self.source(loaded.spec).path)
        limit = min(getattr(config, "max_position_embeddings", 512), loaded.tokenizer.model_max_length)
        if self.settings.max_length <= limit:
            return self.settings
        return replace(self.settings, max_length=limit, stride=min(self.settings.stride, limit // 4))

    def _tokenizer(self, spec: specs.VariantSpec):
        from transformers import AutoTokenizer  # noqa: PLC0415

        return AutoTokenizer.from_pretrained(self.source(spec).path, use_fast=True, trust_remote_code=False)

    def _load_one(self, spec: specs.VariantSpec, progress: Progress) -> tuple[QAModel, object, Path | None]:
        tokenizer = self._tokenizer(spec)
        if not getattr(tokenizer, "is_fast", False):
            raise RuntimeError(f"{spec.source} has no fast tokenizer; offsets into the context need one.")
        compacted = "compact" in spec.steps
        if spec.backend == "torch":
            return TorchQAModel(self._torch_model(spec, compacted), self.device), tokenizer, None
        path = self._onnx_artifact(spec, tokenizer, progress)
        return OrtQAModel(path, self.device, threads=cpu_threads()), tokenizer, path

    def _onnx_artifact(self, spec: specs.VariantSpec, tokenizer, progress: Progress) -> Path:
        """The cached ONNX file for ``spec``, building each missing step from the one before."""
        from variants import export  # noqa: PLC0415
        from variants.cache import ArtifactCache, cache_key, library_versions  # noqa: PLC0415

        cache = ArtifactCache(self.cache_dir)
        for_gpu = self.device.startswith("cuda")
        compacted = "compact" in spec.steps
        done: list[str] = ["compact"] if compacted else []
        path: Path | None = None
        steps = ("onnx", *spec.onnx_steps)
        for i, step in enumerate(steps):
            done.append(step)
            key = cache_key(
                {"source": self.source(spec).identity, "steps": done, "gpu": for_gpu, "versions": library_versions()}
            )
            progress(i / len(steps), f"{spec.label}: {step}")
            if step == "onnx":

                def build(tmp: Path) -> None:
                    # A CPU copy: the shared torch model may already live on the GPU for another variant.
                    export.export_onnx(copy.deepcopy(self._torch_model(spec, compacted)).cpu(), tokenizer, tmp)
            else:
                src = path
                fn = {
                    "optimize": lambda s, t: export.optimize_onnx(s, t, for_gpu=for_gpu),
                    "fp16": export.to_fp16,
                    "int8": export.quantize_int8,
                }[step]

                def build(tmp: Path, src=src, fn=fn) -> None:
                    fn(src, tmp)

            folder = cache.get_or_build(key, build)
            path = folder / "model.onnx"
        assert path is not None
        return path

    # --- answering ----------------------------------------------------------------------------

    @property
    def loaded(self) -> list[LoadedVariant]:
        return list(self.variants.values())

    def check_input(self, question: str, context: str) -> None:
        """Raise :class:`InputError` with a clear message for input no variant should run on."""
        if not question or not question.strip():
            raise InputError("Please type a question.", "question")
        if not context or not context.strip():
            raise InputError("Please paste a context: the passage the answer is taken from.", "context")
        if len(question) > MAX_QUESTION_CHARS:
            raise InputError(
                f"The question is too long ({len(question):,} characters; at most {MAX_QUESTION_CHARS:,}).",
                "question",
            )
        if len(context) > self.max_context_chars:
            raise InputError(
                f"The context is too long ({len(context):,} characters; at most {self.max_context_chars:,}).",
                "context",
            )

    def answer_one(self, name: str, question: str, context: str) -> VariantResult:
        """One variant's answer with its latency (tokenize, run every window, decode)."""
        loaded = self.variants[name]
        spec = loaded.spec
        result = VariantResult(spec.name, spec.label)
        if not loaded.ok:
            result.error = loaded.error or "not loaded"
            return result
        model = loaded.model
        result.device, result.provider, result.dtype = model.device, model.provider, model.dtype
        result.size_mb, result.parameters = round(model.size_bytes / 1e6, 1), model.num_parameters
        try:
            started = time.perf_counter()
            ans = answer_pairs(model, loaded.tokenizer, [(question, context)], loaded.settings or self.settings)[0]
            result.latency_ms = (time.perf_counter() - started) * 1000
        except InputError:
            raise
        except Exception as exc:
            result.error = _describe(exc)
            log.warning("variant %s failed: %s", name, result.error)
            log.debug("traceback", exc_info=True)
            return result
        _fill(result, ans)
        return result

    def ask_iter(self, question: str, context: str, names: list[str] | None = None) -> Iterator[VariantResult]:
        """Each variant's result as soon as it is ready (baseline first, for the speedups)."""
        self.check_input(question, context)
        names = names or [v.spec.name for v in self.loaded]
        order = sorted(names, key=lambda n: n != "baseline")
        baseline_ms: float | None = None
        for name in order:
            result = self.answer_one(name, question, context)
            if name == "baseline":
                baseline_ms = result.latency_ms
            if baseline_ms and result.latency_ms:
                result.speedup = baseline_ms / result.latency_ms
            yield result

    def ask(self, question: str, context: str, names: list[str] | None = None) -> list[VariantResult]:
        return list(self.ask_iter(question, context, names))

    def answer_pairs(self, name: str, pairs: list[tuple[str, str]]) -> list[Answer]:
        """Batch answers from one variant (for the benchmark)."""
        loaded = self.variants[name]
        if not loaded.ok:
            raise RuntimeError(f"{name} is not loaded: {loaded.error}")
        return answer_pairs(loaded.model, loaded.tokenizer, pairs, loaded.settings or self.settings)


def _fill(result: VariantResult, ans: Answer) -> None:
    result.answer, result.score = ans.text, round(ans.score, 4)
    result.start, result.end, result.null_score = ans.start, ans.end, round(ans.null_score, 4)
    result.latency_ms = round(result.latency_ms or 0.0, 2)


def _describe(exc: BaseException) -> str:
    """A one-line message for a card or a log; tracebacks go to the log only."""
    if isinstance(exc, (SourceUnavailable, InputError)):
        return str(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if "out of memory" in text.lower():
        return f"Out of memory while running this variant ({type(exc).__name__})."
    return f"{type(exc).__name__}: {text}"[:500]


def load_engine(
    preset: str = specs.DEFAULT_PRESET,
    device: str = "auto",
    overrides: dict[str, str] | None = None,
    variant_specs: list[specs.VariantSpec] | None = None,
    fallback: bool = True,
    cache_dir: Path | None = None,
    settings: DecodeSettings | None = None,
    names: list[str] | None = None,
    progress: Progress | None = None,
) -> Engine:
    """Resolve, build and load a preset; fall back to ``embedded`` if its sources cannot load."""
    device = resolve_device(device)
    chosen = variant_specs or specs.preset(preset, device, overrides)
    if names:
        chosen = [s for s in chosen if s.name in names]
    engine = Engine(chosen, device=device, settings=settings or DecodeSettings(), cache_dir=cache_dir, preset=preset)
    if fallback and preset != specs.FALLBACK_PRESET and not variant_specs:
        problem = _first_unavailable(engine)
        if problem:
            log.warning("falling back to the embedded preset: %s", problem)
            fallback_specs = specs.preset(specs.FALLBACK_PRESET, device)
            if names:
                fallback_specs = [s for s in fallback_specs if s.name in names]
            engine = Engine(
                fallback_specs,
                device=device,
                settings=engine.settings,
                cache_dir=cache_dir,
                preset=specs.FALLBACK_PRESET,
            )
            engine.notice = (
                f"The {preset} models could not be loaded, so the offline {specs.FALLBACK_PRESET} "
                f"models are shown instead. {problem}"
            )
    return engine.load(progress)


def _first_unavailable(engine: Engine) -> str | None:
    for spec in engine.specs:
        try:
            engine.source(spec)
        except SourceUnavailable as exc:
            return str(exc)
    return None
