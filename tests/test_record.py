"""Records as typed objects: the three accuracy views on hand-checkable numbers, round trips, old records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from variants.benchmarking import accuracy
from variants.core.squad import QAExample, squad_v2_scores
from variants.records import results
from variants.records.record import SCHEMA_VERSION, VIEWS, Record, VariantEntry, load_records

OLD_RECORD = Path(__file__).resolve().parent / "data" / "record-schema1.json"  # trimmed copy of a schema-1 record

# Two answerable and two unanswerable questions; each has its best span and ln(null / span) (its margin).
EXAMPLES = [
    QAExample("q1", "capital?", "paris is the capital", ("paris",)),
    QAExample("q2", "founded?", "founded in 1237", ("1237",)),
    QAExample("q3", "river?", "rome is old"),
    QAExample("q4", "king?", "madrid is big"),
]
SPANS = {"q1": "paris", "q2": "founded", "q3": "rome", "q4": "madrid"}
MARGINS = {"q1": -2.0, "q2": 1.0, "q3": 3.0, "q4": -1.0}


def test_three_views_from_one_set_of_spans():
    views = accuracy.accuracy_views(EXAMPLES, SPANS, MARGINS, calibrated=5.0)
    # Threshold 0: q1 (margin -2) and q4 (-1) answer; q2 and q3 say "no answer".
    # Right: q1 (paris) and q3 (no answer); wrong: q2 (no answer to an answerable one), q4 (madrid).
    pipeline = views["pipeline"]
    assert (pipeline.threshold, pipeline.f1, pipeline.exact) == (0.0, 50.0, 50.0)
    assert (pipeline.has_ans_f1, pipeline.no_ans_f1, pipeline.n, pipeline.has_ans_n, pipeline.no_ans_n) == (
        50.0,
        50.0,
        4,
        2,
        2,
    )
    # Best (official search): answering only q1 (threshold -2) gets 3 of 4 right.
    best = views["best"]
    assert (best.threshold, best.f1, best.exact, best.has_ans_f1, best.no_ans_f1) == (-2.0, 75.0, 75.0, 50.0, 100.0)
    # Calibrated at 5: everything answers; only q1 is right.
    calibrated = views["calibrated"]
    assert (calibrated.threshold, calibrated.f1, calibrated.has_ans_f1, calibrated.no_ans_f1) == (5.0, 25.0, 50.0, 0.0)
    # Answers given to the two answerable questions: q1 at 0 and at -2; both at 5.
    assert (pipeline.has_ans_answered, best.has_ans_answered, calibrated.has_ans_answered) == (50.0, 50.0, 100.0)
    # The best view's F1 is the official best_f1.
    assert best.f1 == pytest.approx(squad_v2_scores(EXAMPLES, SPANS, MARGINS).best_f1)


def test_views_without_a_calibrated_threshold_or_without_margins():
    assert accuracy.accuracy_views(EXAMPLES, SPANS, MARGINS, calibrated=None)["calibrated"] is None
    # Decided answers with no null scores (the pipeline peer): the pipeline view only.
    decided = accuracy.decisions(SPANS, MARGINS, 0.0)
    views = accuracy.accuracy_views(EXAMPLES, decided, None, calibrated=None)
    assert views["pipeline"].f1 == 50.0 and views["best"] is None and views["calibrated"] is None


def test_best_view_when_no_answer_everywhere_is_best():
    # The official search then reports threshold 0, where q4 would answer; the view says no to all instead.
    only = [EXAMPLES[3]]
    best = accuracy.accuracy_views(only, {"q4": "madrid"}, {"q4": -1.0}, None)["best"]
    assert best.f1 == 100.0 and best.threshold < -1.0


def test_old_records_load_into_the_views_they_were_measured_at():
    record = Record.load(OLD_RECORD)
    assert record.schema_version == 1 and record.preset == "embedded" and record.n_questions == 501
    base = record.entry("baseline")
    # Schema 1 measured each model at its calibrated threshold; its best-F1 numbers are the best view.
    assert base.calibrated_threshold == -4.9609 and base.view("pipeline") is None
    assert (base.view("calibrated").f1, base.view("calibrated").has_ans_f1) == (54.341, 31.175)
    assert (base.view("calibrated").threshold, base.view("calibrated").n) == (-4.9609, 501)
    assert (base.view("best").f1, base.view("best").threshold, base.view("best").exact) == (55.638, -5.626675, None)
    assert base.latency_ms.p50 == 38.492 and base.short_label == "Baseline"
    # The peer ran transformers' pipeline: threshold 0, no best search, no calibrated threshold.
    peer = record.peer
    assert peer.is_peer and peer.view("pipeline").f1 == 50.604 and peer.view("pipeline").threshold == 0.0
    assert peer.view("best") is None and peer.view("calibrated") is None and peer.calibrated_threshold is None
    # It re-saves as schema 2 and reads back the same.
    again = Record.from_dict(json.loads(json.dumps(record.to_dict())))
    assert again.to_dict() == record.to_dict() and again.to_dict()["schema_version"] == SCHEMA_VERSION


def test_round_trip_save_load_and_frame(tmp_path):
    record = Record.load(OLD_RECORD)
    record.kind = "quick"
    record.variants[1].latency_only = True
    json_path, csv_path = results.save_record(record, tmp_path)
    assert csv_path.read_text().startswith('"variant","label","short_label","view","threshold","f1",')
    (loaded,) = load_records(tmp_path)
    assert loaded.file == json_path.name and loaded.is_quick and loaded.to_dict() == record.to_dict()
    assert "quick run, 501 questions" in loaded.title() and not loaded.noisy
    frame = results.records_to_frame([loaded], view="calibrated")
    assert list(frame["short_label"]) == [
        "Baseline",
        "Pruned, stored dense",
        "Pruned + ONNX + INT8",
        "transformers pipeline",
    ]
    # A latency-only entry shows its speed and no accuracy.
    dense = frame.set_index("variant").loc["pruned-dense"]
    assert dense["latency_only"] and dense["f1"] != dense["f1"] and dense["p50_ms"] > 0
    assert len(results.records_to_frame(loaded, view=None)) == 4 * len(VIEWS)
    with pytest.raises(ValueError, match="view"):
        VariantEntry("x", "x").view("nope")


def test_newer_schemas_are_refused_and_junk_is_skipped(tmp_path):
    with pytest.raises(ValueError, match="newer"):
        Record.from_dict({"schema_version": SCHEMA_VERSION + 1, "created": "2026", "device": "cpu"})
    (tmp_path / "junk.json").write_text("[1, 2]")
    assert load_records(tmp_path) == []


@pytest.mark.parametrize(
    ("field", "value"),
    [("created", None), ("created", ""), ("preset", None), ("device", 3), ("hardware", None), ("settings", [])],
)
def test_a_record_with_a_field_of_the_wrong_type_is_skipped_not_loaded(tmp_path, field, value):
    """The app sorts and names records by these before showing any: a hand-edited one must not stop it."""
    good = {"created": "2026-11-28T12:00:00Z", "device": "cpu", "preset": "embedded", "variants": []}
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "edited.json").write_text(json.dumps(good | {field: value}))
    assert [r.file for r in load_records(tmp_path)] == ["good.json"]
    with pytest.raises(ValueError, match=field):
        Record.from_dict(good | {field: value})
