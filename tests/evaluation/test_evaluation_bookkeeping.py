"""Honest bookkeeping of an evaluation (issue 30, item 5): an example the app gave no answer
for is an error of the system (counted, with its code, and scored wrong), not an answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagwright.evaluation.report import ResultRow, build_report
from dagwright.services.evaluations import EvaluationService


def _dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "three.csv").write_text("a\n1\n2\n3\n")
    (folder / "two.csv").write_text("a\n1\n2\n")
    records = [
        {"id": "q1", "question": "How many rows?", "table": "three.csv", "answer": "3"},
        {"id": "q2", "question": "How many rows?", "table": "two.csv", "answer": "2"},
        {"id": "q3", "question": "How many rows?", "table": "two.csv", "answer": "2"},
    ]
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _knows_one_table_app(evaluations: EvaluationService, slug: str) -> None:
    """Answers 3 for the three-row table and nothing (an empty text) for any other: the
    run succeeds either way."""
    template = "{% if 'tthree' in table %}3{% endif %}"
    flow: dict[str, Any] = {
        "format": "dagwright.flow",
        "version": 1,
        "name": slug,
        "nodes": [
            {"id": "table", "block": "text_input", "config": {"name": "table"}},
            {"id": "guess", "block": "template", "config": {"template": template}},
            {"id": "answer", "block": "output", "config": {"name": "answer"}},
        ],
        "edges": [
            {"source": {"node": a, "port": ap}, "target": {"node": b, "port": bp}}
            for a, ap, b, bp in [
                ("table", "output", "guess", "table"),
                ("guess", "output", "answer", "value"),
            ]
        ],
    }
    apps = evaluations.apps
    apps.create_app(slug, slug)
    apps.publish(slug, apps.create_version(slug, flow).id)


async def test_no_answer_is_an_error_scored_wrong(
    evaluations: EvaluationService, tmp_path: Path
) -> None:
    evaluations.datasets.import_file("blanks", "generic", _dataset(tmp_path / "files"))
    _knows_one_table_app(evaluations, "onetable")
    row = evaluations.create("onetable", None, "blanks")
    progress: list[dict[str, Any]] = []
    done = await evaluations.run(row.id, on_progress=lambda p: progress.append(p.to_dict()))
    assert done.status == "completed"
    assert progress[-1]["errors"] == 2  # the live progress counts them as they come

    report = evaluations.report(row.id)
    assert report["value"] == pytest.approx(1 / 3)  # the official metric: wrong
    assert report["errors"] == 2  # was 0: both counted as answered
    assert report["errors_by_code"] == {"no_answer": 2}
    outcome = {g["value"]: g["count"] for g in report["breakdowns"]["outcome"]}
    assert outcome == {"answered": 1, "error": 2}
    failed = {f["id"]: f for f in report["failures"]}
    assert sorted(failed) == ["q2", "q3"]
    assert failed["q2"]["error"]["code"] == "no_answer"
    assert failed["q2"]["run_id"]
    assert failed["q2"]["run_id"] in failed["q2"]["error"]["message"]
    stored = {r["id"]: r for r in evaluations.results(row.id).items}
    assert stored["q3"]["error"]["code"] == "no_answer"
    assert stored["q3"]["correct"] is False
    assert evaluations.stored_progress(row.id)["errors"] == 2


@pytest.mark.parametrize("blank", [None, "", "  ", [], {}])
def test_a_stored_blank_prediction_reads_as_an_error(blank: Any) -> None:
    """Results stored before a blank answer was recorded as an error read as one too."""
    rows = [
        ResultRow("a", 1.0, True, prediction="3"),
        ResultRow("b", 0.0, False, prediction=blank),
        ResultRow("c", 0.0, False, prediction="x", error={"code": "agent_timeout"}),
    ]
    report = build_report("numeric", "accuracy", {"accuracy": 1 / 3}, rows)
    assert report["errors"] == 2
    assert report["errors_by_code"] == {"no_answer": 1, "agent_timeout": 1}
    outcome = {g["value"]: g["count"] for g in report["breakdowns"]["outcome"]}
    assert outcome == {"answered": 1, "error": 2}


def test_zero_and_false_are_answers() -> None:
    rows = [ResultRow("a", 1.0, True, prediction=0), ResultRow("b", 1.0, True, prediction=False)]
    assert build_report("numeric", "accuracy", {"accuracy": 1.0}, rows)["errors"] == 0
