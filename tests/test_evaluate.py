"""Every variant on a visitor's own questions (variants.benchmarking.evaluate, ui.questions): the same F1 as the
bench on the same file, agreement without answers, a run in chunks that each take one turn of the model queue,
stopping, the downloads, one run per visitor, the /evaluate API and the command line; on the tiny fixture models."""

from __future__ import annotations

import csv
import inspect
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from app_helpers import running, tiny_engine
from gradio_client import Client

import app
from ui import questions as tab
from ui.report import questions_report_file
from variants.benchmarking import evaluate as evaluation
from variants.benchmarking.bench import benchmark, load_data
from variants.benchmarking.options import Options
from variants.core.question_files import read_questions
from variants.records.cost import record_costs, usd
from variants.records.record import Record
from variants.records.results import records_to_frame
from variants.serving.guard import Refused

HEADLINE = ["baseline", "pruned", "pruned-onnx-opt-int8"]


@pytest.fixture(scope="module")
def engine(tiny_qa_dir: Path, tiny_pruned_dir: Path, artifacts_dir: Path):
    return tiny_engine(str(tiny_qa_dir), str(tiny_pruned_dir), str(artifacts_dir))


@pytest.fixture(scope="module")
def csv_file(squad_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny SQuAD file as CSV with an ``answer`` column (empty: no answer)."""
    path = tmp_path_factory.mktemp("csv") / "questions.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "context", "question", "answer"])
        for e in read_questions(squad_file).examples:
            writer.writerow([e.id, e.context, e.question, e.answers[0] if e.answers else ""])
    return path


def unlabelled(path: Path, folder: Path) -> Path:
    out = folder / "no-answers.jsonl"
    rows = [{"context": e.context, "question": e.question} for e in read_questions(path).examples]
    out.write_text("\n".join(map(json.dumps, rows)), encoding="utf-8")
    return out


def test_f1_equals_the_bench_on_the_same_file(engine, squad_file: Path, csv_file: Path) -> None:
    """The tab's numbers and `bench --data` come from one loader, one decoding and one scorer."""
    examples, data = load_data(csv_file)  # the bench reads the CSV with the app's loader
    assert [e.id for e in examples] == [e.id for e in read_questions(squad_file).examples]
    assert data["n_questions"] == 6 and data["no_answer"] == 2
    record = benchmark(engine, examples, Options(latency_samples=3, warmup=1, skip_sweeps=True, profile_questions=0))
    run = evaluation.evaluate(engine, read_questions(squad_file))
    scores = {s.variant: s for s in run.scores()}
    assert set(scores) == {e.variant for e in record.variants}
    for entry in record.variants:
        view, score = entry.view("pipeline"), scores[entry.variant]
        assert score.f1 == pytest.approx(view.f1, abs=0.05), entry.variant
        assert score.exact == pytest.approx(view.exact, abs=0.05), entry.variant
        assert 0 <= score.answered <= 100 and score.p50_ms > 0 and score.p90_ms >= score.p50_ms and score.n == 6
    assert scores["baseline"].agree_exact == scores["baseline"].agree_f1 == 100.0


def test_the_bench_refuses_a_file_without_answers(squad_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gives no answers, so the bench has no F1"):
        load_data(unlabelled(squad_file, tmp_path))


def test_without_answers_agreement_stands_in(engine, squad_file: Path, tmp_path: Path) -> None:
    questions = read_questions(unlabelled(squad_file, tmp_path))
    run = evaluation.evaluate(engine, questions, HEADLINE)
    scores = run.scores()
    assert [s.variant for s in scores] == HEADLINE
    assert all(s.f1 is None and s.exact is None for s in scores)
    assert all(0 <= s.agree_exact <= 100 and 0 <= s.agree_f1 <= 100 for s in scores)
    record = Record.from_dict(json.loads(json.dumps(run.record().to_dict())))
    assert record.is_quick and record.data["labelled"] is False and record.data["no_answer"] is None
    frame = records_to_frame(record)  # the Benchmark tab's table reads it
    assert frame["p50_ms"].notna().all() and frame["f1"].isna().all()
    # The chart plots the overlap with the baseline's answers, and its labels say so, not "F1".
    texts = [a.text for a in tab.chart(run, scores).layout.annotations if a.text]
    assert any("1× · overlap 100.0" in t for t in texts) and not any(" F1" in t for t in texts), texts


def test_the_run_goes_one_variant_turn_per_chunk(engine, squad_file: Path) -> None:
    """Each step is one variant's turn on a block: the app runs one step per turn of the model queue, so other
    requests get theirs between the steps."""
    run = evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE, chunk_s=1e-9)  # one question a block
    answered = []
    while run.step():
        answered.append({name: len(t.preds) for name, t in run.timings.items()})
    assert answered[:3] == [
        {"baseline": 1, "pruned": 0, "pruned-onnx-opt-int8": 0},
        {"baseline": 1, "pruned": 1, "pruned-onnx-opt-int8": 0},
        {"baseline": 1, "pruned": 1, "pruned-onnx-opt-int8": 1},
    ]
    assert run.chunks == 3 * 6 and run.position == 6 and run.fraction == 1.0 and run.stopped is None


def test_stop_keeps_what_is_done(engine, squad_file: Path, tmp_path: Path) -> None:
    run = evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE, chunk_s=1e-9)
    for _ in range(4):  # the first block by all three, and the second by the baseline alone
        run.step()
    run.stop()
    assert run.finished and not run.step() and run.stopped == "stopped"
    assert {name: len(a) for name, a in run.answers().items()} == dict.fromkeys(HEADLINE, 1)  # half a block left out
    assert all(s.n == 1 for s in run.scores())
    with run.write_answers_csv(tmp_path / "a.csv").open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][:3] == ["id", "question", "gold answers"] and rows[0][3:5] == ["Baseline", "Baseline ms"]
    assert len(rows) == 2


def test_the_time_limit_stops_a_run(engine, squad_file: Path) -> None:
    run = evaluation.evaluate(engine, read_questions(squad_file), HEADLINE, max_seconds=1e-9)
    assert run.stopped == "time limit" and 0 < run.position < 6


def test_an_unknown_variant_is_named(engine, squad_file: Path) -> None:
    with pytest.raises(ValueError, match="no loaded variant named 'nope'"):
        evaluation.Evaluation(engine, read_questions(squad_file), ["nope"])


def test_one_run_per_visitor(engine, squad_file: Path) -> None:
    runs = tab.Runs(max_runs=2)
    first = evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE)
    runs.start("visitor", first)
    with pytest.raises(Refused, match="Your run is still going"):
        runs.start("visitor", evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE))
    runs.start("another", evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE))
    with pytest.raises(Refused, match="2 runs are going"):
        runs.start("a third", evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE))
    first.stop()
    runs.start("visitor", evaluation.Evaluation(engine, read_questions(squad_file), HEADLINE))  # its run ended


def test_the_tab_handlers_run_a_file_to_its_downloads(engine, csv_file: Path) -> None:
    handlers = tab.make_handlers(engine, evaluation.Evaluation, tab.Runs(), questions_report_file)
    request = SimpleNamespace(session_hash="s1")
    status, *_, tick = handlers["begin"](str(csv_file), "", HEADLINE, 0, request)
    assert tick == 1 and "0 of 6 questions" in status
    outputs = handlers["step"](tick, request)
    for _ in range(100):
        if "Done" in outputs[0]:  # the last step leaves the counter as it was: the loop ends
            break
        assert outputs[-1] == tick + 1  # the counter's change queues the next chunk
        tick = outputs[-1]
        outputs = handlers["step"](tick, request)
    status, table, figure, _, answers, record, report = outputs[:7]
    assert "Done: 6 of 6 questions" in status
    assert "scored against your answers" in table and "Overlap with baseline" in table
    assert figure.layout.yaxis.title.text == "F1 on your questions (%)" and len(figure.data) >= 3
    with Path(answers.value["path"]).open(encoding="utf-8", newline="") as handle:
        assert next(csv.reader(handle))[:4] == ["id", "question", "gold answers", "Baseline"]
    assert Record.load(record.value["path"]).data["n_questions"] == 6
    assert "$ per million" not in table  # no price set: no cost column
    priced = handlers["reprice"](3.6, request)  # the finished run, priced: this run's throughput, the one function
    costs = {c.variant: c for c in record_costs(Record.load(record.value["path"]), 3.6)}
    assert "$ per million" in priced and usd(costs["baseline"].batch1_usd) in priced
    html = Path(report.value["path"]).read_text(encoding="utf-8")  # the report: the tab's table, every answer
    assert table in html and "Example questions" in html and "Given by" in html


def test_a_bad_file_on_the_tab_says_why_and_starts_nothing(engine) -> None:
    handlers = tab.make_handlers(engine, evaluation.Evaluation, tab.Runs())
    status, *_ = handlers["begin"](None, "context,query\nParis.,Where?", HEADLINE, 0, SimpleNamespace(session_hash="s"))
    assert "lacks &#x27;question&#x27;" in status and 'role="alert"' in status
    status, *_ = handlers["begin"](None, "", HEADLINE, 0, SimpleNamespace(session_hash="s"))
    assert "Upload a file of questions or paste some rows first." in status


def test_each_chunk_is_its_own_event_in_the_model_queue(engine) -> None:
    demo = app.build_demo(engine)
    step = next(f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "step")
    assert step.concurrency_id == app.CONCURRENCY_GROUP  # it waits its turn with the Ask tab's questions
    # each chunk ends its event: the next one queues behind whatever came meanwhile
    assert not inspect.isgeneratorfunction(step.fn)


def test_the_evaluate_api(engine, csv_file: Path) -> None:
    with running(app.build_demo(engine)) as url:
        client = Client(url, verbose=False)
        text = csv_file.read_text(encoding="utf-8")
        out = client.predict(text, api_name="/evaluate")
        while not out["done"]:  # each call one turn of the model queue; the run goes on between them
            assert "answers" not in out and 0 <= out["answered"] < 6
            out = client.predict("", None, out["run"], api_name="/evaluate")
        assert out["questions"] == out["answered"] == 6 and out["labelled"] and out["stopped"] is None
        assert [s["variant"] for s in out["scores"]] == HEADLINE and all(s["n"] == 6 for s in out["scores"])
        assert set(out["answers"]["baseline"]) == {f"q{i}" for i in range(6)}
        assert Record.from_dict(out["record"]).data["n_questions"] == 6
        sliced = client.predict(text, ["pruned"], "", 0, api_name="/evaluate")  # no time: one chunk a call
        assert not sliced["done"] and [s["variant"] for s in sliced["scores"]] == ["pruned"]
        with pytest.raises(Exception, match="Row 2, field 'question': missing or empty"):
            client.predict("context,question\nParis.,\n", api_name="/evaluate")
        with pytest.raises(Exception, match="No run 'nope' is going"):
            client.predict("", None, "nope", api_name="/evaluate")
        with pytest.raises(Exception, match="Your run is still going"):  # one run per session: `sliced` goes on
            client.predict("context,question\nParis is in France.,Where?", None, "", 60, api_name="/evaluate")
        other = Client(url, verbose=False)  # another session: its own run, and none of the first session's
        with pytest.raises(Exception, match=r"No run .* is going in this session"):
            other.predict("", None, sliced["run"], 60, api_name="/evaluate")
        one_row = "context,question\nParis is in France.,Where?"
        with pytest.raises(Exception, match="Your other run is still going, in another tab or another API session"):
            other.predict(one_row, None, "", 60, api_name="/evaluate")  # one run per visitor: the same address
        # (asked while `sliced` has surely not finished: refusals take no step of it, and a step may finish it)
        mine = client.predict("", None, sliced["run"], 0, api_name="/evaluate")  # the owner's run was not touched
        assert mine["run"] == sliced["run"] and mine["answered"] > sliced["answered"]  # and it goes on
        while not mine["done"]:
            mine = client.predict("", None, sliced["run"], 60, api_name="/evaluate")
        done = other.predict(one_row, None, "", 60, api_name="/evaluate")  # the visitor's run ended: theirs starts
        assert done["done"] and done["questions"] == 1 and done["scores"][0]["f1"] is None


def test_the_command_line(engine, squad_file: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(evaluation, "engine_from_args", lambda _args: engine)
    assert evaluation.main(["--data", str(squad_file), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 questions (with answers" in out and "F1" in out.splitlines()[1]
    assert len(list(tmp_path.glob("*-answers.csv"))) == 1 and len(list(tmp_path.glob("*.json"))) == 1


def test_each_run_keeps_its_cpu_time_and_a_busy_machine_is_named(engine, squad_file: Path) -> None:
    run = evaluation.evaluate(engine, read_questions(squad_file), HEADLINE)
    for name in HEADLINE:  # one CPU reading per timed question, beside its wall time
        t = run.timings[name]
        assert len(t.cpu_ms) == len(t.wait_ms) == len(t.times_ms) and all(c >= 0 for c in t.cpu_ms)

    def readings(cpu: float, wait: float) -> None:  # set readings for every variant (no timing is asserted)
        for name in HEADLINE:
            run.timings[name].cpu_ms, run.timings[name].wait_ms = [cpu] * 5, [wait] * 5

    readings(10.0, 10.0)  # runs that waited as long as they computed
    assert all(s.busy == "machine busy: runs took 2.0× their computing time" for s in run.scores())
    table = tab.scores_html(run.scores(), labelled=True)  # short in the cell, the sentence in its tooltip
    assert table.count('<td title="machine busy: runs took 2.0× their computing time">busy: 2.0×</td>') == 3
    readings(10.0, 0.5)
    assert all(s.busy is None for s in run.scores())
