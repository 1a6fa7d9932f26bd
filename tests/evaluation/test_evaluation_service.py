"""Datasets imported with their tables registered as data sources, apps run over them as
recorded runs, scored, resumed, reported and compared — through the real services."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, delete, update
from sqlmodel import col

from dagwright.errors import ConflictError, NotFoundError
from dagwright.evaluation.datasets import unique_header
from dagwright.evaluation.sql_databases import FolderDatabases
from dagwright.services.evaluations import EvaluationService
from dagwright.store.db import session
from dagwright.store.evaluation_models import EvalResult, Evaluation
from dagwright.store.evaluations import EvaluationRepository

from .conftest import FIXTURES


def _flow(nodes: list[dict[str, Any]], edges: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "eval-test",
        "nodes": nodes,
        "edges": [
            {"source": {"node": a, "port": ap}, "target": {"node": b, "port": bp}}
            for a, ap, b, bp in edges
        ],
    }


def _count_rows_app(evaluations: EvaluationService, slug: str) -> None:
    """question, table -> the table's row count, by SQL on the registered source."""
    flow = _flow(
        [
            {"id": "question", "block": "text_input", "config": {"name": "question"}},
            {"id": "table", "block": "text_input", "config": {"name": "table"}},
            {
                "id": "sql",
                "block": "template",
                "config": {"template": "SELECT COUNT(*) AS n FROM {{ table }}"},
            },
            {"id": "query", "block": "sql_query", "config": {}},
            {"id": "pick", "block": "json_path", "config": {"path": "$[0].n", "first": True}},
            {"id": "answer", "block": "output", "config": {"name": "answer"}},
        ],
        [
            ("table", "output", "sql", "table"),
            ("sql", "output", "query", "sql"),
            ("query", "rows", "pick", "data"),
            ("pick", "output", "answer", "value"),
        ],
    )
    apps = evaluations.apps
    apps.create_app(slug, slug)
    version = apps.create_version(slug, flow)
    apps.publish(slug, version.id)


def _generic_dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "three.csv").write_text("a,b\n1,x\n2,y\n3,z\n")
    (folder / "two.csv").write_text("a\n1\n2\n")
    records = [
        {"id": "q1", "question": "How many rows?", "table": "three.csv", "answer": "3"},
        {"id": "q2", "question": "How many rows?", "table": "two.csv", "answer": "2"},
        {"id": "q3", "question": "How many rows?", "table": "two.csv", "answer": "5"},
    ]
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


async def test_generic_dataset_run_resume_report(
    evaluations: EvaluationService, engine: Engine, tmp_path: Path
) -> None:
    path = _generic_dataset(tmp_path / "files")
    summary = evaluations.datasets.import_file("rowcounts", "generic", path)
    assert summary.splits == {"dev": 3}
    assert summary.source == "eval_rowcounts"
    example = evaluations.datasets.examples("rowcounts", "dev")[0]
    assert example.tables == ["eval_rowcounts.tthree"]
    _count_rows_app(evaluations, "rowcount")

    row = evaluations.create("rowcount", None, "rowcounts")
    assert row.settings["inputs"] == {"question": "question", "table": "table"}
    seen: list[int] = []
    done = await evaluations.run(row.id, concurrency=2, on_progress=lambda p: seen.append(p.done))
    assert done.status == "completed"
    assert seen[-1] == 3
    assert done.aggregate is not None
    assert done.aggregate["accuracy"] == pytest.approx(2 / 3)
    first_runs = {r.example_id: r.run_id for r in evaluations.rows(row.id)}
    assert all(first_runs.values())

    # An interruption loses the results not yet written: only those run again.
    with engine.begin() as connection:
        connection.execute(delete(EvalResult).where(col(EvalResult.example_id) == "q2"))
        connection.execute(
            update(Evaluation).where(col(Evaluation.id) == row.id).values(status="interrupted")
        )
    again = evaluations.create("rowcount", None, "rowcounts")
    assert again.id == row.id  # resumed, not a new evaluation
    await evaluations.run(row.id, concurrency=2)
    second_runs = {r.example_id: r.run_id for r in evaluations.rows(row.id)}
    assert second_runs["q1"] == first_runs["q1"]
    assert second_runs["q3"] == first_runs["q3"]
    assert second_runs["q2"] != first_runs["q2"]

    report = evaluations.report(row.id)
    assert report["value"] == pytest.approx(2 / 3)
    assert report["ci"]["low"] <= 2 / 3 <= report["ci"]["high"]
    assert [f["id"] for f in report["failures"]] == ["q3"]
    assert report["failures"][0]["prediction"] == 2
    assert report["failures"][0]["trace"] == f"/api/v1/runs/{second_runs['q3']}"
    assert report["latency"]["mean"] > 0


async def test_examples_run_in_chunks_keep_one_result_each(
    evaluations: EvaluationService, engine: Engine, tmp_path: Path
) -> None:
    """Queue mode's pieces (services/queue runs them as jobs on several workers): the plan,
    chunks of examples run in any order and again, one result per example, one scoring."""
    path = _generic_dataset(tmp_path / "files")
    evaluations.datasets.import_file("chunked", "generic", path)
    _count_rows_app(evaluations, "chunks")
    row = evaluations.create("chunks", None, "chunked")
    ids, done = evaluations.plan(row.id)
    assert (ids, done) == (["q1", "q2", "q3"], set())
    assert evaluations.get(row.id).status == "running"

    # Cancelled (queue mode: through any replica), its chunks run nothing more.
    assert evaluations.cancel_queued(row.id).status == "interrupted"
    with pytest.raises(ConflictError):
        evaluations.cancel_queued(row.id)
    assert await evaluations.run_examples(row.id, ["q2", "q3"]) is False
    assert evaluations.rows(row.id) == []
    assert evaluations.plan(row.id)[1] == set()  # planned again: running

    assert await evaluations.run_examples(row.id, ["q2", "q3"]) is False
    progress = evaluations.stored_progress(row.id)
    assert (progress["total"], progress["done"], progress["errors"]) == (3, 2, 0)
    assert progress["rate"] > 0  # both runs finished within the last minute
    assert progress["eta"] is not None
    first = {r.example_id: r.run_id for r in evaluations.rows(row.id)}
    assert set(first) == {"q2", "q3"}
    # A chunk taken up again (its worker stopped) runs only what has no result.
    assert await evaluations.run_examples(row.id, ["q3", "q1"]) is True
    results = {r.example_id: r.run_id for r in evaluations.rows(row.id)}
    assert set(results) == {"q1", "q2", "q3"}
    assert results["q3"] == first["q3"]
    # A result written twice (two workers finishing one example) keeps the first.
    with session(engine) as db:
        EvaluationRepository(db).add_results(
            [{"evaluation_id": row.id, "example_id": "q1", "run_id": None, "prediction": 0}]
        )
        db.commit()
    assert {r.example_id: r.run_id for r in evaluations.rows(row.id)} == results

    scored = evaluations.finish(row.id)
    assert scored.status == "completed"
    assert scored.aggregate is not None
    assert scored.aggregate["accuracy"] == pytest.approx(2 / 3)
    assert evaluations.finish(row.id).finished_at == scored.finished_at  # scored once
    assert await evaluations.run_examples(row.id, ["q1"]) is True  # complete: nothing runs
    with pytest.raises(ConflictError):
        evaluations.plan(row.id)


async def test_wikitq_pack_tables_are_queryable_and_scored(
    evaluations: EvaluationService,
) -> None:
    summary = evaluations.datasets.import_file(
        "wq", "wikitq", FIXTURES / "wikitq" / "seen_tagged.tsv", limit=5
    )
    assert summary.splits == {"dev": 5}
    examples = evaluations.datasets.examples("wq", "dev")
    assert examples[0].gold["targetCanon"]  # the tagged file's canon values are kept
    assert examples[0].meta["answer_type"]
    _count_rows_app(evaluations, "wqcount")
    row = evaluations.create("wqcount", None, "wq")
    done = await evaluations.run(row.id, concurrency=3)
    assert done.status == "completed"
    results = evaluations.rows(row.id)
    assert len(results) == 5
    assert all(r.error is None for r in results)  # every table was found and counted
    assert all(isinstance(r.prediction, int) and r.prediction > 0 for r in results)
    assert (
        "answer_type" in evaluations.report(row.id)["breakdowns"]
        or len({e.meta["answer_type"] for e in examples}) == 1
    )


async def test_spider_pack_execution_accuracy_and_comparison(
    evaluations: EvaluationService,
) -> None:
    evaluations.datasets.import_file(
        "sp", "spider", FIXTURES / "spider" / "train_queries.csv", limit=6
    )
    examples = evaluations.datasets.examples("sp", "dev")
    assert examples[0].tables == ["sp_activity_1"]
    assert examples[0].meta["hardness"] == "easy"

    def constant_sql(slug: str, sql: str) -> None:
        flow = _flow(
            [
                {"id": "question", "block": "text_input", "config": {"name": "question"}},
                # The question goes into a comment: an output must depend on an input.
                {
                    "id": "sql",
                    "block": "template",
                    "config": {"template": sql + " -- {{ question }}"},
                },
                {"id": "answer", "block": "output", "config": {"name": "answer"}},
            ],
            [("question", "output", "sql", "question"), ("sql", "output", "answer", "value")],
        )
        evaluations.apps.create_app(slug, slug)
        version = evaluations.apps.create_version(slug, flow)
        evaluations.apps.publish(slug, version.id)

    # The pack's first two questions ask for the number of faculty members.
    constant_sql("countfaculty", "SELECT COUNT(*) FROM sp_activity_1.Faculty")
    constant_sql("countstudents", "SELECT COUNT(*) FROM Student")
    a = evaluations.create("countstudents", None, "sp")
    b = evaluations.create("countfaculty", None, "sp")
    await evaluations.run(a.id)
    await evaluations.run(b.id)
    scored = {r.example_id: r.correct for r in evaluations.rows(b.id)}
    assert scored["0"]
    assert scored["1"]
    assert not scored["2"]
    result = evaluations.compare(a.id, b.id)
    assert result["examples"] == 6
    assert set(result["gained"]) == {"0", "1"}
    assert result["lost"] == []
    assert result["test"]["name"] == "mcnemar_exact"
    assert result["test"]["p_value"] == pytest.approx(0.5)  # 2 discordant pairs: 2 * 1/4


def test_unknown_dataset(evaluations: EvaluationService) -> None:
    with pytest.raises(NotFoundError):
        evaluations.datasets.get("nothing")


def test_unique_header() -> None:
    assert unique_header(["No.", "Points", "Points", "", "x", "X", "Points"]) == [
        "No.",
        "Points",
        "Points_2",
        "column_4",
        "x",
        "X_2",
        "Points_3",
    ]


PACKS = Path(__file__).resolve().parents[3] / "shared" / "datasets"


@pytest.mark.skipif(not PACKS.is_dir(), reason=f"no shared packs at {PACKS}")
def test_every_table_of_the_wikitq_and_tabfact_packs_is_readable(
    evaluations: EvaluationService, tmp_path: Path
) -> None:
    """Repeated headers, empty headers and ragged rows (cells the page spanned) included:
    every table file is read by Arrow's CSV dataset (what the files source reads), and a
    sample of them through the query engine."""
    import pyarrow.dataset as ds

    engine = evaluations.datasets.sources.engine()
    for name, kind, path in (
        ("wqdev", "wikitq", PACKS / "wikitq" / "dev.tsv"),
        ("tfdev", "tabfact", PACKS / "tabfact" / "dev.jsonl"),
    ):
        evaluations.datasets.import_file(name, kind, path)
        tables = sorted({t for e in evaluations.datasets.examples(name, "dev") for t in e.tables})
        assert len(tables) > 100
        folder = tmp_path / "sources" / "eval" / name / "tables"
        for table in tables:
            assert (
                ds.dataset(folder / f"{table.split('.')[1]}.csv", format="csv").to_table().num_rows
            )
        for table in tables[:: len(tables) // 5]:
            assert engine.query(f"SELECT COUNT(*) AS n FROM {table}").records()[0]["n"] > 0


@pytest.mark.parametrize("server", ["postgres", "mysql"])
def test_spider_databases_served_from_a_database_server(
    evaluations: EvaluationService, server: str
) -> None:
    """The pack's databases loaded into PostgreSQL or MariaDB (a schema each), queried
    through the engine like any source; the metric still runs queries on the SQLite builds."""
    from support.data_sources import (
        MYSQL_URL,
        POSTGRES_URL,
        mysql_connect,
        mysql_problem,
        postgres_problem,
        unique_name,
    )

    problem = postgres_problem() if server == "postgres" else mysql_problem()
    if problem:
        pytest.skip(problem)
    name = unique_name("sp")
    url = POSTGRES_URL if server == "postgres" else MYSQL_URL
    evaluations.datasets.import_file(
        name, "spider", FIXTURES / "spider" / "train_queries.csv", server_url=url
    )
    source = f"{name}_activity_1"
    try:
        assert evaluations.datasets.sources.get(source).kind == server
        engine = evaluations.datasets.sources.engine()
        faculty = engine.query(f"SELECT COUNT(*) AS n FROM {source}.Faculty").records()
        folder = Path(evaluations.datasets.row(name).folder)
        in_sqlite = FolderDatabases(folder, "mysql")("activity_1").execute(
            "SELECT COUNT(*) FROM `Faculty`"
        )
        assert faculty == [{"n": in_sqlite[0][0]}]
        assert faculty[0]["n"] > 0
        assert evaluations.datasets.examples(name, "dev")[0].tables == [source]
    finally:
        if server == "postgres":
            import psycopg

            with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
                connection.execute(f'DROP SCHEMA IF EXISTS "{source}" CASCADE')
        else:
            with mysql_connect() as connection, connection.cursor() as cursor:
                cursor.execute(f"DROP DATABASE IF EXISTS `{source}`")


async def test_a_run_cancelled_while_it_prepares_is_left_interrupted(
    evaluations: EvaluationService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The preparation marks the evaluation running in a thread a cancellation cannot stop:
    the run waits for it and marks the evaluation interrupted, so it can be resumed, rather
    than leaving it `running` with nothing running it."""
    path = _generic_dataset(tmp_path / "files")
    evaluations.datasets.import_file("heldcounts", "generic", path)
    _count_rows_app(evaluations, "heldcount")
    row = evaluations.create("heldcount", None, "heldcounts")
    entered, release = threading.Event(), threading.Event()
    prepare = evaluations._prepare_run

    def held_prepare(evaluation_id: str, resumable: bool | None) -> Any:
        entered.set()
        assert release.wait(10)
        return prepare(evaluation_id, resumable)

    monkeypatch.setattr(evaluations, "_prepare_run", held_prepare)
    running = asyncio.create_task(evaluations.run(row.id))
    assert await asyncio.to_thread(entered.wait, 10)
    running.cancel()
    await asyncio.sleep(0.05)
    assert not running.done()  # it waits for the preparation's thread
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert evaluations.get(row.id).status == "interrupted"
    assert evaluations.rows(row.id) == []
    monkeypatch.undo()
    resumed = await evaluations.run(row.id)
    assert resumed.status == "completed"
    assert len(evaluations.rows(row.id)) == 3


async def test_an_in_process_evaluation_is_bounded_and_scores_on_its_pool(
    evaluations: EvaluationService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever concurrency a caller asks for, at most the process's bound of examples run at
    once; the scoring runs on the evaluation pool (composition.py gives both), not on the
    loop's default executor, which answers the API."""
    import dagwright.services.evaluations as module
    from dagwright.workpools import PoolSize, WorkPool

    evaluations.datasets.import_file("boundedrows", "generic", _generic_dataset(tmp_path / "f"))
    _count_rows_app(evaluations, "rowcountbounded")
    pool = WorkPool("evaluation", PoolSize(workers=1, queue_max=0))
    evaluations.work, evaluations.max_concurrency = pool, 2
    asked: list[int] = []
    real_batch = module.run_batch

    async def batch(*args: Any, concurrency: int, **kwargs: Any) -> None:
        asked.append(concurrency)
        await real_batch(*args, concurrency=concurrency, **kwargs)

    monkeypatch.setattr(module, "run_batch", batch)
    scored_on: list[str] = []
    real_score = evaluations.score

    def score(evaluation_id: str) -> Evaluation:
        scored_on.append(threading.current_thread().name)
        return real_score(evaluation_id)

    monkeypatch.setattr(evaluations, "score", score)
    row = evaluations.create("rowcountbounded", None, "boundedrows")
    try:
        done = await evaluations.run(row.id, concurrency=8)
    finally:
        pool.close()
    assert done.status == "completed"
    assert asked == [2]
    assert scored_on == ["dagwright-evaluation-0"]
