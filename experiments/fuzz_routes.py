"""Requests drawn from the app's whole ``/openapi.json`` for ten minutes and more (issue 80): no 5xx, no traceback.

    python -m experiments.fuzz_routes --port 8122 --seconds 600 [--preset embedded] [--out PATH]

Starts ``python app.py --preset PRESET --allow-custom-models`` on loopback (its log kept beside the record), runs
schemathesis's ``st run`` over every operation of the app's own document (the heartbeat aside: a stream that
stays open by design) in its coverage and fuzzing phases for ``--seconds`` (fuzzing repeats until the time is
spent), failing a request on any 5xx, then reads the app's log. The record keeps the operations, the requests
and their statuses per operation, each 5xx, and the log's tracebacks and refusal lines; ``ok`` when there are no
5xx and no traceback. The same run in CI is tests/test_routes.py's bounded one.
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from experiments.common import RECORDS, save_probe_record
from variants.benchmarking.app_client import ROOT, launched


def fixed_document(url: str, into: Path) -> Path:
    """The app's document with the path parameters gradio's own leaves undeclared (schemathesis refuses those)."""
    with urllib.request.urlopen(url + "/openapi.json", timeout=30) as reply:
        document = json.load(reply)
    for path, item in document["paths"].items():
        for operation in item.values():
            declared = {p["name"] for p in operation.get("parameters", []) if p.get("in") == "path"}
            for name in sorted(set(re.findall(r"{(\w+)}", path)) - declared):
                param = {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                operation.setdefault("parameters", []).append(param)
    into.write_text(json.dumps(document))
    return into


def read_events(ndjson: Path) -> dict[str, Any]:
    """Per operation, the requests sent and their statuses; every 5xx with its request."""
    statuses: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    server_errors, phases = [], collections.Counter()
    for line in ndjson.read_text().splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished["recorder"]
        for interaction in recorder.get("interactions", {}).values():
            response = interaction.get("response") or {}
            status = response.get("status_code", 0)
            statuses[recorder["label"]][status] += 1
            phases[finished.get("phase", "")] += 1
            if status >= 500:
                content = response.get("content", {}).get("$base64", "")
                body = base64.b64decode(content)[:300].decode("utf-8", "replace") if content else ""
                request = interaction["request"]
                server_errors.append({"method": request["method"], "uri": request["uri"][:300], "body": body})
    return {
        "operations": len(statuses),
        "requests": sum(sum(c.values()) for c in statuses.values()),
        "requests_per_phase": dict(phases),
        "statuses": {label: dict(sorted(c.items())) for label, c in sorted(statuses.items())},
        "server_errors": server_errors[:50],
        "server_error_count": len(server_errors),
    }


def read_log(log: Path) -> dict[str, Any]:
    """The app's log: its tracebacks (each's last line, counted) and its one-line refusals."""
    lines = log.read_text(errors="replace").splitlines()
    classes: collections.Counter[str] = collections.Counter()
    for at, line in enumerate(lines):
        if line.startswith("Traceback"):
            tail = next((x for x in lines[at + 1 :] if x and not x.startswith((" ", "Traceback"))), "?")
            classes[tail[:160]] += 1
    refused = [line for line in lines if " refused (" in line]
    return {
        "tracebacks": sum(classes.values()),
        "traceback_classes": dict(classes.most_common(30)),
        "asgi_exceptions": sum("Exception in ASGI application" in line for line in lines),
        "refusal_lines": len(refused),
        "refusals_by_status": dict(collections.Counter(re.sub(r".*refused \((\d+)\).*", r"\1", x) for x in refused)),
        "log_lines": len(lines),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8122)
    parser.add_argument("--seconds", type=int, default=600)
    parser.add_argument("--preset", default="embedded")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default=None, help="the record (default: experiments/records/fuzz-routes-...)")
    parser.add_argument("--work", default=None, help="where the app's log and schemathesis's events go (a tmp dir)")
    args = parser.parse_args(argv)
    started = time.time()
    stamp = time.strftime("%Y%m%dT%H%MZ", time.gmtime())
    out = Path(args.out) if args.out else RECORDS / f"fuzz-routes-{args.preset}-{stamp}.json"
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="fuzz-routes-"))  # the log, the events
    work.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{args.port}"
    log = work / "app.log"
    command = [
        sys.executable,
        str(ROOT / "app.py"),
        "--preset",
        args.preset,
        "--port",
        str(args.port),
        "--allow-custom-models",
    ]
    with launched(command, url + "/", 600, log):  # stopped when the run is over
        document = fixed_document(url, work / "openapi.json")
        st_cli = Path(sys.executable).with_name("st")
        st_command = [
            str(st_cli), "run", str(document), "--url", url, "--phases", "coverage,fuzzing",
            "--max-time", str(args.seconds), "--checks", "not_a_server_error", "--request-timeout", "10",
            "--exclude-path-regex", "heartbeat", "--continue-on-failure", "-w", str(args.workers),
            "--generation-database", "none", "--report", "ndjson", "--report-ndjson-path", str(work / "events.ndjson"),
            "--no-color",
        ]  # fmt: skip
        run_started = time.monotonic()
        done = subprocess.run(st_command, check=False, capture_output=True, text=True, cwd=work)
        run_seconds = time.monotonic() - run_started
        (work / "st.txt").write_text(done.stdout + done.stderr)
        time.sleep(2)  # the app logs what it was answering
    events = read_events(work / "events.ndjson")
    seen = read_log(log)
    summary = (done.stdout + done.stderr).split("SUMMARY")[-1]
    record = {
        "kind": "fuzz_routes",
        "preset": args.preset,
        "command": " ".join(st_command[1:]),
        "st_returncode": done.returncode,
        "st_summary": summary.strip()[-2500:],
        "run_seconds": round(run_seconds, 1),
        **events,
        **seen,
        "ok": events["server_error_count"] == 0 and seen["tracebacks"] == 0 and seen["asgi_exceptions"] == 0,
        "files": {"app_log": str(log), "events": str(work / "events.ndjson")},
    }
    save_probe_record(record, started, out)
    print(json.dumps({k: record[k] for k in ("ok", "operations", "requests", "server_error_count", "tracebacks")}))
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
