"""What the tests of the peers share: transformers' question-answering pipeline's answers on the shipped baseline,
which our decoding is checked against (``tests/data/pipeline_answers.json``, written by ``scripts/peer_fixtures.py``
in the peers' environment: transformers 4 has the pipeline, the product's transformers does not), and the peers'
environment itself for the tests that run a peer for real."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from variants.benchmarking import peer

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "data" / "pipeline_answers.json"


def pipeline_answers() -> dict[str, Any]:
    """The fixture, once its model files are checked to be the shipped ones (answers of other weights would check
    nothing): an ``AssertionError`` names the file that changed and how to make the fixture again."""
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    folder = ROOT / data["model"]["folder"]
    for name, digest in data["model"]["sha256"].items():
        now = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert now == digest, (
            f"{FIXTURE.name} holds the pipeline's answers for another {folder.name}/{name}: "
            "run scripts/peer_fixtures.py in the peers' environment (bash scripts/setup.sh peers)"
        )
    return data


def baseline_folder() -> Path:
    return ROOT / pipeline_answers()["model"]["folder"]


def needs_peers() -> Path:
    """The peers' environment's Python; without one the test skips, saying how to make it, except in CI, which
    makes it (.ci/run) and so fails there rather than skip what it should have run."""
    try:
        return peer.peers_python()
    except peer.PeerError as exc:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"CI sets up the peers' environment, yet {exc}")
        pytest.skip(str(exc))
