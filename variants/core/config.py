"""Every setting of the engine in one place: the environment (``VARIANTS_*``) and the built-in defaults.

The app, the command line and the engine read their settings here and nowhere else; flags
(:mod:`variants.cli`) win over the variables, which win over the defaults. :data:`ENVIRONMENT` lists
every variable. Nothing here imports model code."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

PRESET_ENV = "VARIANTS_PRESET"
BASELINE_ENV = "VARIANTS_BASELINE"
PRUNED_ENV = "VARIANTS_PRUNED"
DEVICE_ENV = "VARIANTS_DEVICE"
NAMES_ENV = "VARIANTS_NAMES"
BATCHING_ENV = "VARIANTS_BATCHING"
BATCH_WAIT_ENV = "VARIANTS_BATCH_WAIT_MS"
MAX_BATCH_ENV = "VARIANTS_MAX_BATCH"
MAX_CONTEXT_ENV = "VARIANTS_MAX_CONTEXT_CHARS"
CACHE_DIR_ENV = "VARIANTS_CACHE_DIR"
THREADS_ENV = "VARIANTS_THREADS"
ORT_SPIN_ENV = "VARIANTS_ORT_SPIN"
PASS_TOKENS_ENV = "VARIANTS_PASS_TOKENS"
CONCURRENCY_ENV = "VARIANTS_CONCURRENCY"
MAX_QUEUE_ENV = "VARIANTS_MAX_QUEUE"
RESULTS_ENV = "VARIANTS_RESULTS"
ALLOW_CUSTOM_ENV = "VARIANTS_ALLOW_CUSTOM_MODELS"
MAX_CUSTOM_MB_ENV = "VARIANTS_MAX_CUSTOM_MB"
VISITOR_BUILD_S_ENV = "VARIANTS_VISITOR_BUILD_S"
VISITOR_IDLE_S_ENV = "VARIANTS_VISITOR_IDLE_S"
SELF_BENCH_ENV = "VARIANTS_SELF_BENCH"
WINDOWS_ENV = "VARIANTS_WINDOWS"
CUDA_GRAPHS_ENV = "VARIANTS_CUDA_GRAPHS"
PERSIST_ENV = "VARIANTS_PERSIST_DIR"
SPACE_STORAGE_ENV = "VARIANTS_SPACE_STORAGE"
TRUSTED_PROXIES_ENV = "VARIANTS_TRUSTED_PROXIES"
# gradio's own: where it keeps visitors' uploads and the files it serves (default /tmp/gradio, one folder shared by
# every user's app on the machine; the app gives gradio one of its own unless the host names one here)
GRADIO_TEMP_ENV = "GRADIO_TEMP_DIR"
PEERS_VENV_ENV = "VARIANTS_PEERS_VENV"
# a Space's own proxy reaches the app from the Space's private network; walking X-Forwarded-For from the right past
# these, the first address is the one the proxy saw, so entries a client wrote itself (on the left) are never read
SPACE_PROXIES = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,127.0.0.0/8,::1,fc00::/7"


ENVIRONMENT: dict[str, str] = {
    PRESET_ENV: "preset to load (--preset)",
    BASELINE_ENV: "Hub id or folder of the baseline model (--baseline)",
    PRUNED_ENV: "Hub id or folder of the baseline's pruned partner, or none: the baseline alone (--pruned)",
    DEVICE_ENV: "auto, cpu or cuda[:N] (--device)",
    NAMES_ENV: "comma-separated variants to load (--variants)",
    BATCHING_ENV: "1: dynamic batching (--batching)",
    BATCH_WAIT_ENV: "how long a request waits for others, ms (--batch-wait-ms)",
    MAX_BATCH_ENV: "most requests in one batch (--max-batch)",
    MAX_CONTEXT_ENV: "longest context accepted, characters (--max-context-chars)",
    CACHE_DIR_ENV: "where built artifacts are cached (--cache-dir)",
    PERSIST_ENV: "a folder kept across restarts for the Hub download and the built artifacts (default: on a Space, "
    "its persistent storage /data when it is writable; elsewhere none; 0: none)",
    SPACE_STORAGE_ENV: "where a Space mounts its persistent storage (default /data; tests and probes point it at a "
    "folder of their own)",
    THREADS_ENV: "threads per CPU inference session (default: all cores)",
    ORT_SPIN_ENV: "ONNX Runtime threads: unset, spin within a run only; 0 never spin; 1 spin after runs too",
    PASS_TOKENS_ENV: "most tokens in one forward pass on the CPU (default 768; 0: no cap)",
    CONCURRENCY_ENV: "app: model requests run at once (--concurrency)",
    MAX_QUEUE_ENV: "app: requests that may wait in the queue (--max-queue)",
    RESULTS_ENV: "app: folder of benchmark records (--results-dir)",
    TRUSTED_PROXIES_ENV: "app: proxies whose X-Forwarded-For names the visitor, as uvicorn's forwarded-allow-ips "
    "(--trusted-proxy; default none, on a Space its own proxy)",
    ALLOW_CUSTOM_ENV: "app: 1 lets users load their own Hub model, 0 forbids it (--allow-custom-models)",
    MAX_CUSTOM_MB_ENV: "app: largest custom model download, MB",
    VISITOR_BUILD_S_ENV: "app: seconds a visitor's model may take to build its chain before it is stopped (600)",
    VISITOR_IDLE_S_ENV: "app: seconds unused after which a visitor's built chain is dropped, files and all (900)",
    SELF_BENCH_ENV: "app: questions of the SQuAD v2 sample the app measures its own chain on, once built, in turns "
    "behind visitors' questions, kept with the built artifacts (default 200; 0: off)",
    WINDOWS_ENV: "how long passages' windows combine (--windows): near, focus, odds, logits, window, max, pipeline",
    CUDA_GRAPHS_ENV: "0: the FP16 ONNX variant on CUDA runs through plain IOBinding, no CUDA graphs",
    PEERS_VENV_ENV: "bench: the peers' own environment, transformers 4 and optimum (scripts/setup.sh peers makes it; "
    "default .venv-peers in the checkout)",
}


MAX_CONTEXT_CHARS = 25_000  # default longest context, in characters
MAX_CUSTOM_MB = 500  # default largest custom model download
VISITOR_BUILD_S = 600  # default build-time cap of a visitor's chain
VISITOR_IDLE_S = 900  # default idle time after which a visitor's chain is dropped
# default questions of the app's own measurement of its chain: 200 is where a record's F1 stops being "noisy"
# (records.record.QUICK_NOISY_BELOW); the embedded chain answers them in about 1 minute of model time on 2 cores
SELF_BENCH = 200


def env_text(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The variable's value, stripped; None when unset or empty."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    return value or None


def env_flag(name: str, environ: Mapping[str, str] | None = None) -> bool | None:
    """True for 1/true/yes/on, False for anything else set, None when unset."""
    value = env_text(name, environ)
    return None if value is None else value.lower() in ("1", "true", "yes", "on")


def env_number(name: str, kind: type[int] | type[float], default, environ: Mapping[str, str] | None = None):
    """The variable as ``kind`` (thousands separators allowed), else ``default``; a bad value names it."""
    raw = env_text(name, environ)
    if raw is None:
        return default
    try:
        value = kind(raw.replace("_", "").replace(",", ""))
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a {'whole ' if kind is int else ''}number") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative, not {value}")
    return value


def env_choice(name: str, choices: Sequence[str], default: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable if it is one of ``choices``, else ``default`` when unset; a value outside them names it."""
    raw = env_text(name, environ)
    if raw is None:
        return default
    if raw not in choices:
        raise ValueError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def on_space(environ: Mapping[str, str] | None = None) -> bool:
    """Running on a Hugging Face Space: it sets ``SPACE_ID`` (and ``SYSTEM=spaces``, which gradio reads)."""
    return env_text("SPACE_ID", environ) is not None or env_text("SYSTEM", environ) == "spaces"


HUB_PAGE = "https://huggingface.co/spaces/"


def space_page(environ: Mapping[str, str] | None = None) -> str | None:
    """The Space's page on the Hub, ``https://huggingface.co/spaces/OWNER/NAME`` (the address visitors see and
    share; the app itself runs in an iframe on ``OWNER-NAME.hf.space``), from the variables every Space has:
    ``SPACE_ID``, else ``SPACE_AUTHOR_NAME`` and ``SPACE_REPO_NAME``. None off a Space."""
    space_id = env_text("SPACE_ID", environ)
    if space_id is None:
        owner, name = env_text("SPACE_AUTHOR_NAME", environ), env_text("SPACE_REPO_NAME", environ)
        space_id = f"{owner}/{name}" if owner and name else None
    if space_id is None or space_id.count("/") != 1 or not all(space_id.split("/")):
        return None
    return HUB_PAGE + space_id


def trusted_proxies(option: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The proxies whose ``X-Forwarded-For`` names the visitor, as uvicorn's ``forwarded-allow-ips`` takes them
    (addresses or networks, comma-separated; "" for none): ``--trusted-proxy``, else ``VARIANTS_TRUSTED_PROXIES``,
    else on a Hugging Face Space (``SYSTEM=spaces`` or ``SPACE_ID`` set) its own proxy's networks
    (:data:`SPACE_PROXIES`), else none: without a named proxy the header changes nothing."""
    named = option if option is not None else env_text(TRUSTED_PROXIES_ENV, environ)
    if named is not None:
        return "" if named.strip().lower() in ("", "none", "0") else named.strip()
    if on_space(environ):
        return SPACE_PROXIES
    return ""


def gradio_temp_dir(environ: Mapping[str, str] | None = None) -> str | None:
    """The folder the host named for gradio's files (``GRADIO_TEMP_DIR``), or None."""
    return env_text(GRADIO_TEMP_ENV, environ)


def hub_offline(environ: Mapping[str, str] | None = None) -> bool:
    """``HF_HUB_OFFLINE`` is on: read at call time, so tests and callers may change it after import."""
    return bool(env_flag("HF_HUB_OFFLINE", environ))


def max_context_chars() -> int:
    """``$VARIANTS_MAX_CONTEXT_CHARS`` if set, else :data:`MAX_CONTEXT_CHARS`."""
    value = env_number(MAX_CONTEXT_ENV, int, MAX_CONTEXT_CHARS)
    if value < 1:
        raise ValueError(f"{MAX_CONTEXT_ENV} must be at least 1, not {value}")
    return value


SPACE_STORAGE = Path("/data")  # where a Hugging Face Space mounts its persistent storage, when it has some


def space_storage(environ: Mapping[str, str] | None = None) -> Path:
    """Where a Space's persistent storage is mounted: ``/data``, or ``$VARIANTS_SPACE_STORAGE`` (a stand-in)."""
    value = env_text(SPACE_STORAGE_ENV, environ)
    return Path(value).expanduser() if value else SPACE_STORAGE


def peers_venv(checkout: Path, environ: Mapping[str, str] | None = None) -> Path:
    """The peers' virtual environment: ``$VARIANTS_PEERS_VENV`` (expanded; relative to ``checkout``), else
    ``.venv-peers`` in ``checkout``, where ``bash scripts/setup.sh peers`` makes it by default."""
    value = Path(env_text(PEERS_VENV_ENV, environ) or ".venv-peers").expanduser()
    return value if value.is_absolute() else checkout / value


def cache_dir() -> Path | None:
    """``$VARIANTS_CACHE_DIR`` (expanded), else ``qa-variants`` in the persistent folder (:func:`persistent_dir`),
    or None for the cache's own default."""
    value = env_text(CACHE_DIR_ENV)
    if value:
        return Path(value).expanduser()
    kept = persistent_dir()
    return kept / "qa-variants" if kept else None


def persistent_dir(environ: Mapping[str, str] | None = None, storage: Path | None = None) -> Path | None:
    """A folder kept across restarts, or None: ``$VARIANTS_PERSIST_DIR`` (0 or off: none), else, on a Space only
    (:func:`on_space`), its persistent storage (``/data``: :func:`space_storage`) when it exists and is writable.
    Elsewhere a ``/data`` is someone else's mount point and is left alone. The Hub download and the built
    artifacts live in this folder, so a restart is a warm start."""
    value = env_text(PERSIST_ENV, environ)
    if value is not None:
        return None if value.lower() in ("0", "off", "false", "no") else Path(value).expanduser()
    if not on_space(environ):
        return None
    storage = space_storage(environ) if storage is None else storage
    return storage if storage.is_dir() and os.access(storage, os.W_OK | os.X_OK) else None


def default_hf_home(environ: Mapping[str, str] | None = None) -> Path:
    """huggingface_hub's own default ``HF_HOME``: ``$XDG_CACHE_HOME/huggingface``, else
    ``~/.cache/huggingface`` (``~`` from ``HOME``)."""
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or Path.home())
    xdg = env_text("XDG_CACHE_HOME", environ)
    return (Path(xdg).expanduser() if xdg else home / ".cache") / "huggingface"


def chosen_hub_cache(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the host chose where Hub downloads go: ``HF_HUB_CACHE`` or ``HF_HOME`` set to a folder other than
    huggingface_hub's default (:func:`default_hf_home`). A Space's image sets ``HF_HOME`` to that default in the
    home folder, which is ephemeral: a variable that names the default says nothing more than no variable, so it
    does not count as a choice."""
    environ = os.environ if environ is None else environ
    default = default_hf_home(environ)
    named = {"HF_HOME": default, "HF_HUB_CACHE": default / "hub"}
    for name, place in named.items():
        value = env_text(name, environ)
        if value and os.path.normpath(Path(value).expanduser()) != os.path.normpath(place):
            return True
    return False


def hub_cache(environ: Mapping[str, str] | None = None) -> Path | None:
    """Where Hub downloads go: ``.huggingface/hub`` in the persistent folder when there is one (the place Hugging
    Face's Spaces guide names, ``HF_HOME=/data/.huggingface``) and the host made no choice of its own
    (:func:`chosen_hub_cache`); None leaves it to huggingface_hub (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``)."""
    environ = os.environ if environ is None else environ
    if chosen_hub_cache(environ):
        return None
    kept = persistent_dir(environ)
    return kept / ".huggingface" / "hub" if kept else None


def cpu_threads() -> int:
    """Threads for CPU inference: ``$VARIANTS_THREADS``, or 0 for all cores."""
    return env_number(THREADS_ENV, int, 0)


OPENMP_SPIN_COUNT = "1000"  # GOMP_SPINCOUNT unless the environment says otherwise (see openmp_spin)


def openmp_spin(environ: dict[str, str] | None = None) -> None:
    """Fix how long PyTorch's OpenMP threads busy-wait for work before they sleep (libgomp's ``GOMP_SPINCOUNT``),
    so that it no longer depends on which thread asks. Called when :mod:`variants` is imported, before torch
    loads libgomp (which reads it once); a ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` already set wins.

    libgomp spins 300,000 times while a process has no more OpenMP threads than cores, 1,000 once it has more.
    The app answers on worker threads, each with its own OpenMP team, so it had the short spin; ``python -m
    variants ask`` answered on its main thread alone and had the long one, and on a shared 2-core VM its PyTorch
    runs took 7x the page's time (and 7x the CPU: a thread spun while its partner waited for a core) for the
    same question in the same minute. One spin count for every entry point makes them time alike.
    """
    environ = os.environ if environ is None else environ
    if "GOMP_SPINCOUNT" not in environ and "OMP_WAIT_POLICY" not in environ:
        environ["GOMP_SPINCOUNT"] = OPENMP_SPIN_COUNT


def ort_spin() -> str:
    """When ONNX Runtime's threads may spin (``VARIANTS_ORT_SPIN``): "run" (default), "never" (0) or "always" (1).

    "run": busy-waiting between the parallel sections of one run (a sleeping thread takes tens of
    microseconds to wake, and one BERT run has about a hundred sections), none after it, so an idle
    session leaves the cores to the next variant and the next request.
    """
    flag = env_flag(ORT_SPIN_ENV)
    return "run" if flag is None and env_text(ORT_SPIN_ENV) is None else ("always" if flag else "never")


def cuda_graphs(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the FP16 ONNX variant on CUDA replays captured CUDA graphs (``VARIANTS_CUDA_GRAPHS``, on
    unless 0): one per length and batch bucket, captured at load; 0 runs it through plain IOBinding."""
    flag = env_flag(CUDA_GRAPHS_ENV, environ)
    return True if flag is None else flag


def cpu_pass_tokens(default: int) -> int | None:
    """The most tokens one forward pass holds on the CPU: ``$VARIANTS_PASS_TOKENS``, else ``default``; None for 0
    (no cap: a pass takes as many windows as the decode settings' ``batch_size``)."""
    value = env_number(PASS_TOKENS_ENV, int, default)
    return value if value > 0 else None


def results_dir() -> str | None:
    """``$VARIANTS_RESULTS``: the app's folder of benchmark records (None: the engine's assets/results)."""
    return env_text(RESULTS_ENV)


def serving_defaults() -> dict[str, int]:
    """The app's queue settings from the environment: model requests at once, and queue length."""
    values = {"concurrency": (CONCURRENCY_ENV, 1), "max_queue": (MAX_QUEUE_ENV, 32)}
    settings = {key: env_number(name, int, default) for key, (name, default) in values.items()}
    for key, (name, _) in values.items():
        if settings[key] < 1:  # 0 would hang every request (concurrency) or turn every one away (queue)
            raise ValueError(f"{name} must be at least 1, not {settings[key]}")
    return settings


def allow_custom_setting(environ: Mapping[str, str] | None = None) -> bool | None:
    """``$VARIANTS_ALLOW_CUSTOM_MODELS`` as on/off, or None when unset."""
    return env_flag(ALLOW_CUSTOM_ENV, environ)


def max_custom_mb(environ: Mapping[str, str] | None = None) -> float:
    """``$VARIANTS_MAX_CUSTOM_MB`` or :data:`MAX_CUSTOM_MB`."""
    return float(env_number(MAX_CUSTOM_MB_ENV, float, MAX_CUSTOM_MB, environ))


def visitor_build_s(environ: Mapping[str, str] | None = None) -> float:
    """``$VARIANTS_VISITOR_BUILD_S`` or :data:`VISITOR_BUILD_S`."""
    return float(env_number(VISITOR_BUILD_S_ENV, float, VISITOR_BUILD_S, environ))


def visitor_idle_s(environ: Mapping[str, str] | None = None) -> float:
    """``$VARIANTS_VISITOR_IDLE_S`` or :data:`VISITOR_IDLE_S`."""
    return float(env_number(VISITOR_IDLE_S_ENV, float, VISITOR_IDLE_S, environ))


def self_bench_questions(environ: Mapping[str, str] | None = None) -> int:
    """``$VARIANTS_SELF_BENCH`` or :data:`SELF_BENCH`: the questions the app measures its own chain on (0: off)."""
    return int(env_number(SELF_BENCH_ENV, int, SELF_BENCH, environ))
