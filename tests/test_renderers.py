"""The Ask tab's renderers draw a snapshot made by hand: no engine, no model (variants/serving/snapshot.py)."""

import html

from ui.cards import cards_html, summary_html
from ui.charts import latency_figure
from ui.startup import coming_html, header_html
from variants.serving.build_status import BUILDING, FAILED, READY, BuildSnapshot, VariantStatus
from variants.serving.outcome import VariantResult
from variants.serving.snapshot import Snapshot, VariantView

CONTEXT = "Ulan Bator is the capital of Mongolia."
INFO = {"device": "cpu", "provider": "CPUExecutionProvider", "dtype": "int8", "size_mb": 25.0, "parameters": 22_000}
NAMES = ["baseline", "pruned", "pruned-onnx-opt-int8", "pruned-onnx"]


def result(name: str, ms: float, answer: str = "Ulan Bator", speedup: float = 1.0) -> VariantResult:
    return VariantResult(name, name, answer=answer, latency_ms=ms, size_mb=100.0, speedup=speedup, end=10)


def snapshot(building: bool = True) -> Snapshot:
    """Baseline and INT8 ready, the pruned step failed, the ONNX step building its export (or, with ``building``
    false, a build that is over)."""
    export = VariantStatus("pruned-onnx", "Pruned + ONNX", BUILDING, step="export", steps=("load", "export", "warmup"))
    states = (
        VariantStatus("baseline", "Baseline", READY, seconds=2.0),
        VariantStatus("pruned", "Pruned", FAILED, error="no such folder"),
        VariantStatus("pruned-onnx-opt-int8", "Pruned + ONNX + INT8", READY, seconds=9.0),
        *([export] if building else []),
    )
    build = BuildSnapshot(states, stage="", seconds=12.0, started=True, version=4)
    ready = {"loaded": True, "ok": True, "info": INFO}
    views = (
        VariantView("baseline", "Baseline", headline=True, source="minilm", **ready),
        VariantView("pruned", "Pruned", source="minilm-pruned", loaded=True, error="no such folder"),
        VariantView("pruned-onnx-opt-int8", "Pruned + ONNX + INT8", headline=True, source="minilm-pruned", **ready),
        VariantView("pruned-onnx", "Pruned + ONNX", source="minilm-pruned", build=export if building else None),
    )
    return Snapshot(views, build, preset="embedded", device="cpu", notice="")


def test_cards_draw_each_variant_in_the_state_the_snapshot_says() -> None:
    snap = snapshot().with_results({"baseline": result("baseline", 10.0)})
    cards = cards_html(snap, NAMES, CONTEXT)
    assert 'data-variant="baseline" data-state="done"' in cards and "<mark>Ulan Bator</mark>" in cards
    assert 'data-variant="pruned" data-state="error"' in cards and "no such folder" in cards
    assert 'data-variant="pruned-onnx-opt-int8" data-state="stale"' in cards  # not run for this question
    assert 'data-variant="pruned-onnx" data-state="building"' in cards and "building: export to ONNX" in cards
    assert cards.index('"baseline"') < cards.index('"pruned"') < cards.index('"pruned-onnx"')  # chain order
    idle = cards_html(snapshot(), ["pruned-onnx-opt-int8"], "")
    assert 'data-state="idle"' in idle and "ONNX Runtime · 8-bit integers" in idle and "25.0 MB" in idle


def test_the_summary_and_the_chart_read_the_snapshots_results() -> None:
    results = {
        "baseline": result("baseline", 10.0),
        "pruned-onnx-opt-int8": result("pruned-onnx-opt-int8", 4.0, speedup=2.5),
    }
    snap = snapshot().with_results(results)
    text = html.unescape(summary_html(snap, NAMES[:3], running=False))
    assert "2.50× faster" in text and "2 of 2 variants answered; 1 of the 1 other answers match" in text
    bars = latency_figure(snap, NAMES).data[0]
    assert list(bars.x) == [10.0, 4.0]  # the two with a result, in chain order
    assert "Ask a question" in summary_html(snapshot(), NAMES, running=False)
    assert not latency_figure(snapshot(), NAMES).data  # no results: no bars


def test_the_build_lines_read_the_snapshots_build() -> None:
    coming = html.unescape(coming_html(snapshot(), NAMES))
    assert "Still building: Pruned + ONNX (export to ONNX)" in coming
    assert coming_html(snapshot(), NAMES[:3]) == ""  # none of those is still building
    header = header_html(snapshot())
    assert "preset</b> <code>embedded</code>" in header and "Building the variants: 2 of 4 ready" in header
    over = header_html(snapshot(building=False))
    assert "1 of 3 variants failed to build (Pruned: no such folder); the others serve." in html.unescape(over)
