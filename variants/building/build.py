"""Build variants from specs: resolve the source, load it, compact it, run its ONNX chain, cache it.

The engine (:mod:`variants.serving.engine`) answers with what this module builds, as optimum-benchmark keeps a
backend (how a model is made and run) apart from a scenario (what is measured with it). A
:class:`VariantBuilder` keeps what several variants of one preset share while they load: resolved
sources and torch models (dense and compacted), so six variants read a checkpoint once.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from variants.answering.qa import CALIBRATED_THRESHOLD
from variants.answering.runtime import OrtQAModel, QAModel, TorchQAModel, cpu_threads
from variants.building import apart
from variants.building.apart import run_apart
from variants.building.cache import ArtifactCache, cache_key
from variants.building.sources import FilesProgress, ResolvedSource, resolve, resolve_known
from variants.core import spec as specs
from variants.core.memory import fp32_bytes
from variants.core.versions import artifact_versions

log = logging.getLogger("variants.building.build")

Progress = Callable[[float, str], None]
# (step, from the cache?, seconds) once an ONNX step is over: "export", "optimize", "int8" or "fp16"
StepOver = Callable[[str, bool, float], None]


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer.model", "spiece.model", "vocab.json")


@dataclass
class BuiltVariant:
    """What a spec builds into: a runnable model, its tokenizer, and what decoding must know of it."""

    model: QAModel
    tokenizer: object
    artifact: Path | None  # the ONNX file, for ONNX variants
    max_positions: int  # the longest window the model takes (its positions, its tokenizer's limit)
    calibrated_threshold: float | None  # config.json's qa_null_threshold, None without


class VariantBuilder:
    """Builds (or reuses from the artifact cache) and loads the variants of one preset on one device."""

    def __init__(self, device: str, cache_dir: Path | None = None) -> None:
        self.device = device
        self.cache_dir = cache_dir
        self._sources: dict[str, ResolvedSource] = {}
        self._torch: dict[tuple[str, bool], object] = {}

    def remember(self, spec_source: str, source: ResolvedSource) -> None:
        """Use ``source`` (e.g. an already checked Hub snapshot) for specs naming ``spec_source``."""
        self._sources[spec_source] = source

    def source(self, spec: specs.VariantSpec, progress: FilesProgress | None = None) -> ResolvedSource:
        """The spec's source resolved to a local folder (once per source; a replica's in this builder's
        cache folder); ``progress(done, total)`` follows a Hub download's files."""
        if spec.source not in self._sources:
            self._sources[spec.source] = resolve(spec.source, spec.revision, self.cache_dir, progress)
        return self._sources[spec.source]

    def known_source(self, spec: specs.VariantSpec) -> ResolvedSource | None:
        """The spec's source if it is resolved or can be without a download or a build, else None."""
        return self._sources.get(spec.source) or resolve_known(spec.source, spec.revision, self.cache_dir)

    def release(self) -> None:
        """Drop the torch copies kept for exports (the loaded variants keep what they run)."""
        self._torch.clear()

    def build(self, spec: specs.VariantSpec, progress: Progress, step_over: StepOver | None = None) -> BuiltVariant:
        """The spec's model and tokenizer, ready to answer (not yet warmed up); ``step_over`` hears how each ONNX
        step ended (found in the artifact cache or built, and its seconds)."""
        from transformers import AutoConfig  # noqa: PLC0415

        tokenizer = self.tokenizer(spec)
        if not getattr(tokenizer, "is_fast", False):
            raise RuntimeError(f"{spec.source} has no fast tokenizer; offsets into the context need one.")
        compacted = "compact" in spec.steps
        path: Path | None = None
        if spec.backend == "torch":
            model: QAModel = TorchQAModel(self.torch_model(spec, compacted), self.device)
        else:
            path = self.onnx_artifact(spec, tokenizer, progress, step_over)
            model = OrtQAModel(path, self.device, threads=cpu_threads())
        config = AutoConfig.from_pretrained(self.source(spec).path)
        limit = min(getattr(config, "max_position_embeddings", 512), tokenizer.model_max_length)
        calibrated = getattr(config, CALIBRATED_THRESHOLD, None)
        return BuiltVariant(model, tokenizer, path, limit, None if calibrated is None else float(calibrated))

    def tokenizer(self, spec: specs.VariantSpec):
        from transformers import AutoTokenizer  # noqa: PLC0415

        path = self.source(spec).path
        if Path(path).is_dir() and not any((Path(path) / name).is_file() for name in TOKENIZER_FILES):
            # transformers 5 makes an empty tokenizer for such a folder instead of failing
            raise ValueError(f"{path} has no tokenizer (none of {', '.join(TOKENIZER_FILES)})")
        try:
            return AutoTokenizer.from_pretrained(path, use_fast=True, trust_remote_code=False)
        except (OSError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: its tokenizer cannot be loaded ({type(exc).__name__}: {exc})") from None

    def torch_model(self, spec: specs.VariantSpec, compacted: bool):
        """The source's torch model (compacted or not), loaded once and shared; a folder stored compacted
        (:mod:`variants.building.storage`) loads in either form."""
        # storage and prune import torch: loading the app's page must not wait for it
        from variants.building import storage  # noqa: PLC0415
        from variants.building.prune import compact  # noqa: PLC0415

        key = (spec.source, compacted)
        if key not in self._torch:
            path = self.source(spec).path
            dense = self._torch.get((spec.source, False))
            if compacted and dense is not None and not storage.is_compact(path):
                model = copy.deepcopy(dense)
                log.info("%s: %s", spec.source, compact(model).summary())
            else:
                model = storage.load_qa_model(path, compacted=compacted)
            self._torch[key] = model
        return self._torch[key]

    def onnx_artifact(
        self, spec: specs.VariantSpec, tokenizer, progress: Progress, step_over: StepOver | None = None
    ) -> Path:
        """The cached ONNX file for ``spec``: :func:`variants.building.export.run_onnx_chain` with each step kept in
        the artifact cache, keyed by the source, the steps so far, the target and the library versions."""

        from variants.building import export  # noqa: PLC0415 - torch and ONNX, only when a graph is built

        cache = ArtifactCache(self.cache_dir)
        for_gpu = self.device.startswith("cuda")
        compacted = "compact" in spec.steps
        alone = self.builds_apart(spec)  # each step in a child process: its memory goes back when it ends

        def store(done: tuple[str, ...], build: Callable[[Path], None]) -> Path:
            steps = ["compact"] if compacted else []
            steps += ["onnx" if step == "export" else step for step in done]  # "onnx": the keys' name for it
            key = cache_key(
                {
                    "source": self.source(spec).identity,
                    "steps": steps,
                    "gpu": for_gpu,
                    "versions": artifact_versions(),
                    **{k: v for step in done for k, v in export.step_options(step, for_gpu).items()},
                    # a large model's graphs keep their weights in a file beside them (variants.building.outside):
                    # not the one-file graphs an earlier build cached
                    **({"weights": "outside"} if alone else {}),
                }
            )
            built: list[bool] = []

            def build_here(tmp: Path) -> None:
                built.append(True)
                build(tmp)

            started = time.perf_counter()
            entry = cache.get_or_build(key, build_here)
            if step_over is not None:
                step_over(done[-1], not built, time.perf_counter() - started)
            return entry

        def export_step(tmp: Path) -> None:
            if alone:  # the child loads the model from its folder: no copy of it here
                run_apart("export", source=str(self.source(spec).path), compacted=compacted, out=str(tmp))
                return
            # A CPU copy: the shared torch model may already live on the GPU for another variant.
            export.export_onnx(copy.deepcopy(self.torch_model(spec, compacted)).cpu(), tokenizer, tmp)

        def apply(step: str, src: Path, out: Path, for_gpu: bool) -> None:
            if alone:
                run_apart("step", step=step, src=str(src), out=str(out), for_gpu=for_gpu)
            else:
                export.apply_step(step, src, out, for_gpu)

        def step_progress(fraction: float, step: str) -> None:
            progress(fraction, f"{spec.label}: {'onnx' if step == 'export' else step}")

        return export.run_onnx_chain(export_step, spec.onnx_steps, for_gpu, store, step_progress, apply)

    def builds_apart(self, spec: specs.VariantSpec) -> bool:
        """Whether ``spec``'s ONNX steps each run in a child process (:mod:`variants.building.apart`): its model's
        FP32 weights (from its config.json) reach :data:`~variants.building.apart.APART_MIN_BYTES`."""
        try:
            config = json.loads((self.source(spec).path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        weights = fp32_bytes(config) if isinstance(config, dict) else None
        return weights is not None and weights >= apart.APART_MIN_BYTES
