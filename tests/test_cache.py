"""The artifact cache: keys, fingerprints, hits, rebuilds of broken entries, failed builds, races."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import huggingface_hub.constants
import pytest

from variants.building import cache as cache_mod
from variants.building.cache import ArtifactCache, cache_key, default_cache_dir, source_fingerprint
from variants.core.versions import artifact_versions


class Builder:
    """A build function that writes two files and counts its calls."""

    def __init__(self, payload: str = "weights") -> None:
        self.payload = payload
        self.calls = 0

    def __call__(self, folder: Path) -> None:
        self.calls += 1
        assert folder.is_dir() and not any(folder.iterdir()), "build gets an empty folder"
        (folder / "model.onnx").write_text(self.payload * 100)
        (folder / "sub").mkdir()
        (folder / "sub" / "config.json").write_text('{"a": 1}')


def leftovers(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def test_cache_key_is_stable_and_sensitive() -> None:
    parts = {"source": "hub:x@abc", "steps": ["onnx", "optimize"], "gpu": True, "versions": {"onnx": "1.0"}}
    key = cache_key(parts)
    assert key == cache_key(dict(reversed(parts.items())))
    assert len(key) == 16 and int(key, 16) >= 0
    assert key != cache_key({**parts, "steps": ["onnx"]})
    assert key != cache_key({**parts, "gpu": False})
    assert key != cache_key({**parts, "versions": {"onnx": "1.1"}})
    assert cache_key({"path": Path("/a")}) == cache_key({"path": "/a"})


def test_artifact_versions() -> None:
    versions = artifact_versions()
    assert {"torch", "transformers", "optimum", "onnx", "onnxruntime"} <= set(versions)
    assert versions["onnxruntime"] and versions["torch"]


def test_default_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("VARIANTS_CACHE_DIR", str(tmp_path / "explicit"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path / "hf"))  # read from $HF_HOME at import
    assert default_cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("VARIANTS_CACHE_DIR")
    assert default_cache_dir() == tmp_path / "hf" / "qa-variants"
    assert ArtifactCache().root == default_cache_dir()


def test_the_default_follows_hf_home(tmp_path: Path) -> None:
    """In a fresh interpreter, as a Space sets it: HF_HOME decides, VARIANTS_CACHE_DIR unset."""
    env = {k: v for k, v in os.environ.items() if k not in ("VARIANTS_CACHE_DIR", "HF_HUB_CACHE")}
    code = "from variants.building.cache import default_cache_dir; print(default_cache_dir())"
    hf_home, root = str(tmp_path / "hf"), Path(__file__).parent.parent
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "HF_HOME": hf_home},
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(out.stdout.strip()) == tmp_path / "hf" / "qa-variants"


def test_source_fingerprint(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "vocab.txt").write_text("a\nb\n")
    first = source_fingerprint(tmp_path)
    assert first == source_fingerprint(tmp_path)
    stat = (tmp_path / "sub" / "vocab.txt").stat()
    os.utime(tmp_path / "sub" / "vocab.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    touched = source_fingerprint(tmp_path)
    assert touched != first
    (tmp_path / "extra.json").write_text("{}")
    assert source_fingerprint(tmp_path) != touched


def test_hit_reuses_the_entry(tmp_path: Path) -> None:
    cache, build = ArtifactCache(tmp_path), Builder()
    entry = cache.get_or_build("k1", build)
    assert entry == tmp_path / "k1"
    assert (entry / "model.onnx").read_text() == "weights" * 100
    manifest = json.loads((entry / "manifest.json").read_text())
    assert manifest["key"] == "k1" and manifest["created"] > 0
    assert manifest["files"]["model.onnx"]["size"] == 700
    assert set(manifest["files"]) == {"model.onnx", "sub/config.json"}
    assert len(manifest["files"]["sub/config.json"]["sha256"]) == 64
    assert manifest["files"]["model.onnx"]["mtime_ns"] == (entry / "model.onnx").stat().st_mtime_ns
    assert cache.get_or_build("k1", build) == entry
    assert ArtifactCache(tmp_path).get_or_build("k1", build) == entry  # a later start
    assert build.calls == 1
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "damage",
    [
        lambda e: (e / "model.onnx").write_text("short"),  # truncated
        lambda e: (e / "manifest.json").unlink(),
        lambda e: (e / "manifest.json").write_text("{not json"),
        lambda e: (e / "sub" / "config.json").unlink(),
        lambda e: rewrite(e / "model.onnx", "W" * 700),  # same size, other content, later mtime: sha256
        lambda e: (e / "model.onnx").write_bytes(b""),  # half written: size
    ],
    ids=["truncated", "no-manifest", "bad-manifest", "missing-file", "same-size-change", "emptied"],
)
def test_broken_entry_is_rebuilt(tmp_path: Path, damage, caplog: pytest.LogCaptureFixture) -> None:
    cache, build = ArtifactCache(tmp_path), Builder()
    entry = cache.get_or_build("k1", build)
    damage(entry)
    with caplog.at_level(logging.WARNING, logger="variants.building.cache"):
        assert cache.get_or_build("k1", build) == entry
    assert build.calls == 2
    assert "rebuilding" in caplog.text
    assert (entry / "model.onnx").read_text() == "weights" * 100
    assert leftovers(tmp_path) == []


def rewrite(path: Path, text: str, mtime_ns: int | None = None) -> None:
    """Write ``text`` to ``path``, then set its mtime (default: one second later than before)."""
    before = path.stat().st_mtime_ns
    path.write_text(text)
    mtime_ns = before + 1_000_000_000 if mtime_ns is None else mtime_ns
    os.utime(path, ns=(mtime_ns, mtime_ns))


def test_a_hit_hashes_only_files_whose_mtime_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build = Builder()
    entry = ArtifactCache(tmp_path).get_or_build("k1", build)
    hashed: list[str] = []
    real_sha256 = cache_mod.file_sha256
    monkeypatch.setattr(cache_mod, "file_sha256", lambda path: hashed.append(path.name) or real_sha256(path))
    ArtifactCache(tmp_path).get_or_build("k1", build)
    assert hashed == []  # sizes and mtimes as built: nothing read
    rewrite(entry / "model.onnx", "weights" * 100)  # the same bytes, a later mtime (a copy without -p)
    ArtifactCache(tmp_path).get_or_build("k1", build)
    assert hashed == ["model.onnx"] and build.calls == 1  # hashed, found intact, kept
    hashed.clear()
    ArtifactCache(tmp_path, verify_hashes=True).get_or_build("k1", build)
    assert sorted(hashed) == ["config.json", "model.onnx"] and build.calls == 1  # full check on request


def test_a_same_size_same_mtime_change_is_seen_only_by_the_full_check(tmp_path: Path) -> None:
    """The price of not re-hashing: bit rot that keeps size and mtime needs ``verify_hashes``."""
    build = Builder()
    entry = ArtifactCache(tmp_path).get_or_build("k1", build)
    rewrite(entry / "model.onnx", "W" * 700, mtime_ns=(entry / "model.onnx").stat().st_mtime_ns)
    ArtifactCache(tmp_path).get_or_build("k1", build)
    assert build.calls == 1
    ArtifactCache(tmp_path, verify_hashes=True).get_or_build("k1", build)
    assert build.calls == 2


def test_failing_validation_rebuilds(tmp_path: Path) -> None:
    cache, build = ArtifactCache(tmp_path), Builder()
    cache.get_or_build("k1", build)
    seen = []

    def validate(folder: Path) -> None:
        seen.append(folder)
        if len(seen) == 1:
            raise RuntimeError("cannot open a session")

    cache.get_or_build("k1", build, validate)
    assert build.calls == 2
    assert len(seen) == 2  # the broken entry once, then the rebuilt one


def test_fresh_build_that_fails_validation_is_not_kept(tmp_path: Path) -> None:
    def validate(folder: Path) -> None:
        raise RuntimeError("broken artifact")

    with pytest.raises(RuntimeError, match="broken artifact"):
        ArtifactCache(tmp_path).get_or_build("k1", Builder(), validate)
    assert not (tmp_path / "k1").exists()
    assert leftovers(tmp_path) == []


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    def build(folder: Path) -> None:
        (folder / "model.onnx").write_text("half written")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        ArtifactCache(tmp_path).get_or_build("k1", build)
    assert not (tmp_path / "k1").exists()
    assert leftovers(tmp_path) == []
    # The next start builds it properly.
    good = Builder()
    assert ArtifactCache(tmp_path).get_or_build("k1", good).is_dir()
    assert good.calls == 1


def test_key_change_rebuilds(tmp_path: Path) -> None:
    cache, build = ArtifactCache(tmp_path), Builder()
    a = cache.get_or_build(cache_key({"steps": ["onnx"]}), build)
    b = cache.get_or_build(cache_key({"steps": ["onnx", "optimize"]}), build)
    assert a != b and a.is_dir() and b.is_dir()
    assert build.calls == 2


def test_manifest_of_another_key_is_not_trusted(tmp_path: Path) -> None:
    cache, build = ArtifactCache(tmp_path), Builder()
    cache.get_or_build("k1", build)
    os.rename(tmp_path / "k1", tmp_path / "k2")
    cache.get_or_build("k2", build)
    assert build.calls == 2


@pytest.mark.parametrize(
    "files", [["model.onnx"], {"model.onnx": 3}, {"model.onnx": {"sha256": "x"}}, {"model.onnx": {"size": "7"}}]
)
def test_a_manifest_of_the_wrong_shape_is_rebuilt_not_a_crash(files, tmp_path: Path) -> None:
    cache, build = ArtifactCache(tmp_path), Builder()
    cache.get_or_build("k1", build)
    manifest = tmp_path / "k1" / cache_mod.MANIFEST
    manifest.write_text(json.dumps({**json.loads(manifest.read_text()), "files": files}))
    assert "manifest" in cache_mod.check_manifest(tmp_path / "k1", "k1")
    assert cache.get_or_build("k1", build).is_dir() and build.calls == 2
    assert cache_mod.check_manifest(tmp_path / "k1", "k1") is None


def test_leftovers_of_killed_builds_are_removed(tmp_path: Path) -> None:
    (tmp_path / ".tmp-k1-abc_123").mkdir()  # from a killed build of k1
    (tmp_path / ".tmp-k1-more-abc_123").mkdir()  # a build of key "k1-more", maybe running
    ArtifactCache(tmp_path).get_or_build("k1", Builder())
    assert leftovers(tmp_path) == [".tmp-k1-more-abc_123"]


def test_entry_that_appears_during_the_build_wins(tmp_path: Path) -> None:
    """A builder that ignored the lock (or another machine on a shared disk) finished first."""

    def build(folder: Path) -> None:
        theirs = tmp_path / "k1"
        theirs.mkdir()
        Builder("theirs")(theirs)
        cache_mod.write_manifest(theirs, "k1")
        Builder("mine")(folder)

    entry = ArtifactCache(tmp_path).get_or_build("k1", build)
    assert (entry / "model.onnx").read_text() == "theirs" * 100
    assert leftovers(tmp_path) == []


def test_clear_and_invalid_keys(tmp_path: Path) -> None:
    cache = ArtifactCache(tmp_path / "c")
    cache.clear()  # nothing yet
    cache.get_or_build("k1", Builder())
    cache.get_or_build("k2", Builder())
    cache.clear()
    assert not any(p.is_dir() for p in (tmp_path / "c").iterdir())
    for bad in ("", "../up", "a/b", ".hidden", "x" * 200):
        with pytest.raises(ValueError):
            cache.get_or_build(bad, Builder())


def _build_slowly(root: str, log_file: str) -> None:
    def build(folder: Path) -> None:
        with open(log_file, "a") as f:
            f.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        (folder / "model.onnx").write_text("x")

    ArtifactCache(Path(root)).get_or_build("shared", build)


def test_concurrent_builders_build_once(tmp_path: Path) -> None:
    log_file = tmp_path / "builds.log"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_build_slowly, args=(str(tmp_path / "c"), str(log_file))) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=30)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(log_file.read_text().split()) == 1
    assert (tmp_path / "c" / "shared" / "model.onnx").read_text() == "x"
    assert leftovers(tmp_path / "c") == []
