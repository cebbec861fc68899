"""Deploy the working tree to a Hugging Face Space: ``python -m variants deploy --space OWNER/NAME [--dry-run]``.

What a Space receives is what it runs and shows: the app (``app.py``, ``ui/``, ``variants/``), what it installs
(``requirements.txt``), its card (``README.md``, whose front matter sets the Space up) with the docs it links to,
the shipped models, data and records (``assets/``), and ``.gitattributes``; never the tests, the experiments and
their records, the scripts, the training code or the Ray deployment files (:data:`SPACE_FILES`,
:data:`LEFT_OUT`). The files are the working tree as git sees it (tracked, or new and not ignored), so a build
folder or a virtual environment never travels.

The upload is ``huggingface_hub``'s ``HfApi.upload_folder`` (the Space made first with ``create_repo(...,
repo_type="space", space_sdk="gradio")`` when it does not exist): one commit, binaries stored with Xet, and files
the Space holds but this tree no longer sends deleted, so the Space is exactly the list the dry run prints. The
Hub refuses a file it takes for binary (a NUL byte, or not UTF-8 text; and any file over 10 MB) unless
``.gitattributes`` stores it with Xet or Git LFS: every such file must be covered (:func:`uncovered`), and the
deploy stops before uploading anything when one is not. ``--dry-run`` lists the files, their sizes and the total,
checks that rule, and touches no network.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# What a Space receives (huggingface_hub's patterns: fnmatch, a folder's files with "/**").
SPACE_FILES = (
    "README.md",
    "app.py",
    "requirements.txt",
    ".gitattributes",
    "ui/**",
    "variants/**",
    "assets/**",
    "docs/**",
)
# ... less what it never runs or shows: the training code, and the records' CSV twins and logs (the Benchmark
# tab reads the JSON records only).
LEFT_OUT = ("**/__pycache__/**", "*.pyc", "variants/training/**", "assets/results/*.csv", "assets/results/*.log")
MAX_TEXT_BYTES = 10_000_000  # the Hub stores any larger file with Xet or LFS, text or not
GLOB_CHARACTERS = set("*?[]")


@dataclass(frozen=True)
class SpaceFile:
    path: str  # relative to the tree, with "/"
    size: int
    binary: bool  # what the Hub must store with Xet or LFS (:func:`needs_xet`)
    covered: bool  # .gitattributes gives it the LFS filter


def working_tree(root: Path = ROOT) -> list[str]:
    """The tree's files as git sees them: tracked and still there, or new and not ignored."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    names = sorted({name.decode() for name in out.split(b"\0") if name})
    return [name for name in names if (root / name).is_file() and not (root / name).is_symlink()]


def space_paths(root: Path = ROOT) -> list[str]:
    """The files a Space receives (:data:`SPACE_FILES`, less :data:`LEFT_OUT`), relative to ``root``."""
    from huggingface_hub.utils import filter_repo_objects  # noqa: PLC0415 - the upload's own pattern rules

    return list(filter_repo_objects(working_tree(root), allow_patterns=list(SPACE_FILES), ignore_patterns=LEFT_OUT))


def needs_xet(path: Path) -> bool:
    """Whether the Hub takes ``path`` for a binary it stores only with Xet or LFS: larger than 10 MB, or holding a
    NUL byte, or not valid UTF-8 text."""
    if path.stat().st_size > MAX_TEXT_BYTES:
        return True
    data = path.read_bytes()
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def lfs_filtered(paths: list[str], root: Path = ROOT) -> set[str]:
    """The ``paths`` to which the tree's ``.gitattributes`` gives ``filter=lfs`` (git's own reading of it)."""
    if not paths:
        return set()
    out = subprocess.run(
        ["git", "check-attr", "-z", "--stdin", "filter"],
        cwd=root,
        input=b"\0".join(p.encode() for p in paths) + b"\0",
        capture_output=True,
        check=True,
    ).stdout
    fields = out.split(b"\0")  # path, attribute, value, path, attribute, value, ...
    return {fields[i].decode() for i in range(0, len(fields) - 2, 3) if fields[i + 2] == b"lfs"}


def space_files(root: Path = ROOT) -> list[SpaceFile]:
    """Every file a Space receives, with its size, whether the Hub needs it in Xet, and whether it is covered."""
    paths = space_paths(root)
    covered = lfs_filtered(paths, root)
    return [SpaceFile(p, (root / p).stat().st_size, needs_xet(root / p), p in covered) for p in paths]


def uncovered(files: list[SpaceFile]) -> list[SpaceFile]:
    """The files the Hub would refuse: binary (:func:`needs_xet`) and not given the LFS filter."""
    return [f for f in files if f.binary and not f.covered]


def mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB" if size >= 100_000 else f"{size / 1e3:,.1f} kB"


def listing(files: list[SpaceFile], space: str) -> str:
    """The dry run's lines: each file with its size (binaries marked), then the count and the total."""
    lines = [f"Files for the Space {space}:"]
    for f in files:
        mark = "  binary, Xet" if f.binary and f.covered else ("  binary, NOT COVERED" if f.binary else "")
        lines.append(f"  {mb(f.size):>10}  {f.path}{mark}")
    binaries = sum(f.binary for f in files)
    total = sum(f.size for f in files)
    lines.append(f"{len(files)} files, {mb(total)} in all; {binaries} binary, stored with Xet")
    return "\n".join(lines)


def deploy(args: argparse.Namespace, files: list[SpaceFile], root: Path = ROOT) -> str:
    """Create the Space if it is new, upload the files in one commit (deleting what it holds beyond them), and
    apply the hardware, storage and variables asked for; returns the Space's page."""
    from huggingface_hub import HfApi  # noqa: PLC0415

    api = HfApi()
    repo = api.create_repo(
        args.space, repo_type="space", space_sdk="gradio", private=args.private or None, exist_ok=True
    )
    api.upload_folder(
        repo_id=args.space,
        repo_type="space",
        folder_path=root,
        allow_patterns=[f.path for f in files],  # exact paths: the dry run's list (none holds a glob character)
        delete_patterns=["*"],  # what the Space holds beyond them (.gitattributes is never deleted)
        commit_message=args.message,
    )
    if args.hardware:
        api.request_space_hardware(args.space, args.hardware)
    if args.storage:
        api.request_space_storage(args.space, args.storage)
    for name, value in args.variable:
        api.add_space_variable(args.space, name, value)
    return str(repo)


def variable(text: str) -> tuple[str, str]:
    """An argparse type: ``NAME=VALUE``."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"a variable is NAME=VALUE, not {text!r}")
    return name.strip(), value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m variants deploy", description=__doc__.split("\n\n")[0].split(": ", 1)[0]
    )
    parser.add_argument("--space", required=True, metavar="OWNER/NAME", help="the Space (made if it does not exist)")
    parser.add_argument("--dry-run", action="store_true", help="list the files and their sizes; no network")
    parser.add_argument("--private", action="store_true", help="make a new Space private")
    parser.add_argument("--hardware", default=None, help="request this hardware, e.g. cpu-upgrade, t4-small")
    parser.add_argument("--storage", default=None, help="request persistent storage: small, medium or large")
    parser.add_argument(
        "--variable", type=variable, action="append", default=[], metavar="NAME=VALUE", help="set a Space variable"
    )
    parser.add_argument("--message", default="Deploy the working tree", help="the commit's message")
    args = parser.parse_args(argv)
    if args.space.count("/") != 1 or not all(args.space.split("/")):
        print(f"error: --space is OWNER/NAME, not {args.space!r}", file=sys.stderr)
        return 2
    try:
        files = space_files(ROOT)
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"error: the deploy reads the tree through git, which failed here ({exc})", file=sys.stderr)
        return 2
    print(listing(files, args.space))
    refused = uncovered(files)
    if refused:
        names = ", ".join(f.path for f in refused)
        print(f"error: the Hub would refuse {names}: binary, not stored with Xet by .gitattributes", file=sys.stderr)
        return 1
    odd = [f.path for f in files if GLOB_CHARACTERS & set(f.path)]
    if odd:
        print(f"error: {', '.join(odd)}: a name with a glob character cannot be sent by name", file=sys.stderr)
        return 1
    if args.dry_run:
        return 0
    page = deploy(args, files, ROOT)
    print(f"Deployed: {page}")
    return 0
