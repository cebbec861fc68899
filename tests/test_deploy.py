"""The deploy to a Space, offline: what a Space receives, the Hub's rule for binary files (each one stored with Xet
or LFS, so covered by .gitattributes), the dry run's listing, and the calls the upload makes (a fake HfApi)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import huggingface_hub
import pytest

from variants import deploy

ROOT = Path(__file__).resolve().parent.parent


def git(folder: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def test_every_binary_file_a_space_receives_is_covered_by_gitattributes() -> None:
    files = deploy.space_files(ROOT)
    binaries = {f.path for f in files if f.binary}
    # the shipped models and the README's images are binary: the rule has something to check
    assert {"assets/models/minilm-squad2/model.safetensors", "assets/screenshot-ask.png"} <= binaries
    assert deploy.uncovered(files) == [], "add a line for each to .gitattributes"


def test_the_space_gets_what_it_runs_and_shows_and_nothing_else() -> None:
    paths = set(deploy.space_paths(ROOT))
    assert {"app.py", "requirements.txt", "README.md", ".gitattributes", "ui/share.py", "variants/cli.py"} <= paths
    assert "assets/models/minilm-squad2-pruned/model.safetensors" in paths and "docs/usage.md" in paths
    every_module = {p.relative_to(ROOT).as_posix() for d in ("ui", "variants") for p in (ROOT / d).rglob("*.py")}
    assert {m for m in every_module if not m.startswith("variants/training/")} <= paths  # all the app can import
    left_out = ("tests/", "experiments/", "scripts/", "deploy/", ".ci/", "variants/training/", "assets/results/gpu/m")
    assert not [p for p in paths if p.startswith(left_out) or p in ("conftest.py", "pyproject.toml")]
    assert not [p for p in paths if "__pycache__" in p or p.endswith((".pyc", ".csv", ".log"))]


def test_the_hubs_rule_for_binary_files(tmp_path: Path) -> None:
    samples = {
        "text.json": '{"question": "Où est la tour Eiffel ?"}'.encode(),  # UTF-8, not ASCII: text
        "nul.txt": b"abc\0def",
        "latin1.txt": "caf\xe9".encode("latin-1"),  # not UTF-8
        "big.txt": b"a" * (deploy.MAX_TEXT_BYTES + 1),  # text, but over 10 MB
    }
    for name, data in samples.items():
        (tmp_path / name).write_bytes(data)
    assert {name: deploy.needs_xet(tmp_path / name) for name in samples} == {
        "text.json": False,
        "nul.txt": True,
        "latin1.txt": True,
        "big.txt": True,
    }


def test_a_binary_without_its_gitattributes_line_is_refused(tmp_path: Path, capsys, monkeypatch) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "app.py").write_text("print('hi')\n")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "weights.dat").write_bytes(b"\0\1\2")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_it.py").write_text("")
    files = deploy.space_files(tmp_path)
    assert [f.path for f in files] == ["app.py", "assets/weights.dat"]  # new files count; tests never travel
    assert [f.path for f in deploy.uncovered(files)] == ["assets/weights.dat"]
    monkeypatch.setattr(deploy, "ROOT", tmp_path)
    assert deploy.main(["--space", "someone/demo", "--dry-run"]) == 1
    assert "the Hub would refuse assets/weights.dat" in capsys.readouterr().err

    (tmp_path / ".gitattributes").write_text("*.dat filter=lfs diff=lfs merge=lfs -text\n")
    assert deploy.uncovered(deploy.space_files(tmp_path)) == []
    assert deploy.main(["--space", "someone/demo", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "assets/weights.dat  binary, Xet" in out and out.strip().endswith("1 binary, stored with Xet")
    assert "3 files" in out  # app.py, the weights, .gitattributes


def test_the_dry_run_lists_the_files_with_their_sizes_and_the_total(capsys) -> None:
    assert deploy.main(["--space", "someone/qa-variants", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    files = deploy.space_files(ROOT)
    assert out[0] == "Files for the Space someone/qa-variants:"
    assert len(out) == len(files) + 2
    assert any(line.endswith("45.1 MB  assets/models/minilm-squad2/model.safetensors  binary, Xet") for line in out)
    total = sum(f.size for f in files) / 1e6
    assert out[-1].startswith(f"{len(files)} files, {total:,.1f} MB in all")


def test_a_bad_space_name_or_variable_is_one_sentence(capsys) -> None:
    assert deploy.main(["--space", "no-owner", "--dry-run"]) == 2
    assert "OWNER/NAME" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        deploy.main(["--space", "a/b", "--variable", "NOVALUE"])
    assert "NAME=VALUE" in capsys.readouterr().err


def test_the_upload_makes_the_space_and_sends_exactly_the_listed_files(monkeypatch) -> None:
    calls: list[tuple[str, tuple, dict]] = []

    class FakeApi:
        def __getattr__(self, name: str):
            def call(*args, **kwargs):
                calls.append((name, args, kwargs))
                return "https://huggingface.co/spaces/someone/qa-variants"

            return call

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    argv = ["--space", "someone/qa-variants", "--storage", "small", "--variable", "VARIANTS_PRESET=bert-large"]
    assert deploy.main(argv) == 0
    names = [name for name, _, _ in calls]
    assert names == ["create_repo", "upload_folder", "request_space_storage", "add_space_variable"]
    assert calls[0][2] | {"repo_id": calls[0][1][0]} == {
        "repo_id": "someone/qa-variants",
        "repo_type": "space",
        "space_sdk": "gradio",
        "private": None,
        "exist_ok": True,
    }
    upload = calls[1][2]
    assert upload["repo_type"] == "space" and upload["folder_path"] == ROOT
    assert upload["allow_patterns"] == [f.path for f in deploy.space_files(ROOT)]
    assert upload["delete_patterns"] == ["*"]
    assert calls[3][1] == ("someone/qa-variants", "VARIANTS_PRESET", "bert-large")
