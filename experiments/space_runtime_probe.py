"""Start the app as a Space's runtime does, as a non-root user, and restart it: what the log says, what is kept.

A Space runs ``python app.py`` as uid 1000 with ``SYSTEM=spaces``, ``SPACE_ID`` (and ``SPACE_AUTHOR_NAME``,
``SPACE_REPO_NAME``, ``SPACE_HOST``), ``HF_HOME`` in the home folder, and its persistent storage on ``/data``. This
probe (run as root) does the same through ``runuser``: a home, a private temporary folder and a stand-in for
``/data`` (``VARIANTS_SPACE_STORAGE``) made for the user, the shipped MiniLM baseline placed in the stand-in's Hub
cache as a first start's download leaves it (the Hub is out of reach here: ``HF_HUB_OFFLINE=1``), and the app started
``--starts`` times, each until its build is over and its page answers. The record: each start's log (and whether it
holds a traceback), what came from the caches, and who owns what was written.

    python -m experiments.space_runtime_probe --port 7872
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import site
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "experiments" / "records" / "space"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
# The shipped baseline as a Hub model; the pruned one stays a folder (it keeps its embeddings by reference to
# ../minilm-squad2, a path a Hub snapshot does not have).
MODELS = {"someone/minilm-squad2": "minilm-squad2"}
SPACE = "someone/qa-variants"


def stand_in_hub(hub: Path) -> None:
    """The shipped pair as Hub models in ``hub``'s layout (a snapshot folder and ``refs/main``)."""
    for repo_id, folder in MODELS.items():
        place = hub / f"models--{repo_id.replace('/', '--')}"
        shutil.copytree(ROOT / "assets" / "models" / folder, place / "snapshots" / COMMIT)
        (place / "refs").mkdir()
        (place / "refs" / "main").write_text(COMMIT)


def space_environment(work: Path, user: pwd.struct_passwd, port: int) -> dict[str, str]:
    home = work / "home"
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "USER": user.pw_name,
        "TMPDIR": str(work / "tmp"),  # a container's /tmp is its own
        "PYTHONDONTWRITEBYTECODE": "1",
        "SYSTEM": "spaces",
        "SPACE_ID": SPACE,
        "SPACE_AUTHOR_NAME": SPACE.split("/", maxsplit=1)[0],
        "SPACE_REPO_NAME": SPACE.split("/")[1],
        "SPACE_HOST": SPACE.replace("/", "-") + ".hf.space",
        "HF_HOME": str(home / ".cache" / "huggingface"),  # as the Space's image sets it
        "HF_HUB_OFFLINE": "1",
        "VARIANTS_SPACE_STORAGE": str(work / "data"),  # the stand-in for /data
        "GRADIO_SERVER_NAME": "127.0.0.1",  # a Space serves on 0.0.0.0:7860; here one port on loopback
        "GRADIO_SERVER_PORT": str(port),
        "VARIANTS_PRESET": "embedded",
        "VARIANTS_BASELINE": "someone/minilm-squad2",
    }


def start(env: dict[str, str], user: str, python: str, log: Path, port: int, max_s: float) -> dict:
    """One start, as ``user``: until the build is over and the page answers (or ``max_s``), then stopped."""
    command = ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()), python, "app.py"]
    started = time.monotonic()
    facts: dict = {}
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            while time.monotonic() - started < max_s and proc.poll() is None:
                if "page_s" not in facts:
                    try:
                        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as reply:
                            if reply.status == 200:
                                facts["page_s"] = round(time.monotonic() - started, 1)
                    except OSError:
                        pass
                if "build over" in log.read_text(errors="replace") and "page_s" in facts:
                    facts["built_s"] = round(time.monotonic() - started, 1)
                    break
                time.sleep(0.5)
            facts["exit_code_before_stop"] = proc.poll()
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    text = log.read_text(errors="replace")
    facts["traceback"] = "Traceback" in text
    facts["log"] = text.splitlines()
    return facts


def owners(folder: Path) -> dict[str, int]:
    """How many files under ``folder`` each user owns."""
    counts: dict[str, int] = {}
    for path in folder.rglob("*"):
        name = pwd.getpwuid(path.lstat().st_uid).pw_name
        counts[name] = counts.get(name, 0) + 1
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--uid", type=int, default=1000, help="the user the app runs as (a Space's: 1000)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/space-runtime-probe"))
    parser.add_argument("--port", type=int, default=7872)
    parser.add_argument("--starts", type=int, default=2)
    parser.add_argument("--max-start-s", type=float, default=900)
    parser.add_argument(
        "--python",
        default="/usr/bin/python3.11",
        help="the interpreter the user runs, with this environment's packages on PYTHONPATH (a virtual environment "
        "under /root is out of the user's reach)",
    )
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        print("error: run as root (it starts the app as another user through runuser)", file=sys.stderr)
        return 2
    user = pwd.getpwuid(args.uid)
    shutil.rmtree(args.work, ignore_errors=True)
    for name in ("home", "tmp", "data"):
        (args.work / name).mkdir(parents=True)
    stand_in_hub(args.work / "data" / ".huggingface" / "hub")
    subprocess.run(["chown", "-R", f"{user.pw_uid}:{user.pw_gid}", str(args.work)], check=True)
    args.work.chmod(0o755)
    env = space_environment(args.work, user, args.port) | {"PYTHONPATH": os.pathsep.join(site.getsitepackages())}
    OUT.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    record: dict = {
        "what": "the app started as a Space's runtime does (uid, variables, HF_HOME in the home, /data stand-in), "
        "then restarted",
        "created": stamp,
        "user": {"name": user.pw_name, "uid": user.pw_uid},
        "environment": env,
        "loadavg_before": os.getloadavg(),
        "starts": [],
    }
    for i in range(args.starts):
        log = OUT / f"runtime-uid{user.pw_uid}-start{i + 1}-{stamp}.log"
        record["starts"].append(start(env, user.pw_name, args.python, log, args.port, args.max_start_s))
    data, home = args.work / "data", args.work / "home"
    built = data / "qa-variants"
    record["data"] = {
        "artifacts": sorted(p.name for p in built.iterdir()) if built.is_dir() else [],
        "hub_models": sorted(p.name for p in (data / ".huggingface" / "hub").iterdir()),
        "owners": owners(data),
    }
    record["home"] = {"files": sorted(str(p.relative_to(home)) for p in home.rglob("*")), "owners": owners(home)}
    record["loadavg_after"] = os.getloadavg()
    path = OUT / f"runtime-uid{user.pw_uid}-{stamp}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    for i, facts in enumerate(record["starts"], 1):
        kept = [line for line in facts["log"] if "cache" in line or ": built (" in line or "variants to build" in line]
        print(f"start {i}: page {facts.get('page_s')} s, built {facts.get('built_s')} s, traceback: "
              f"{facts['traceback']}")  # fmt: skip
        print("\n".join(f"  {line}" for line in kept))
    print(json.dumps({k: record[k] for k in ("data", "home")}, indent=2))
    print(f"record: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
