"""Evaluation listings read one page in the database (store/evaluations.py), on SQLite and
PostgreSQL: examples in the file's order, evaluations newest first, results joined to their
examples in the dataset's order, the failed ones filtered in the query, each with its total."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine
from sqlmodel import Session

from dagwright.store.evaluation_models import EvalDataset, EvalExample, EvalResult, Evaluation
from dagwright.store.evaluations import DatasetRepository, EvaluationRepository
from dagwright.store.models import utcnow
from dagwright.store.paging import Window
from support.database import DATABASES, migrated_engine


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


def test_pages_of_examples_evaluations_and_results(engine: Engine) -> None:
    dataset = EvalDataset(name="pages", kind="generic", metric="numeric", mapping={})
    # Stored out of order: the file's order (seq) is the listing's.
    examples = [
        EvalExample(
            dataset_id=dataset.id,
            split="dev",
            example_id=f"x{seq}",
            seq=seq,
            question=f"q{seq}",
            gold={"answer": str(seq)},
            tables=[],
            meta={"n": seq},
        )
        for seq in (3, 0, 4, 1, 2)
    ]
    other_split = EvalExample(
        dataset_id=dataset.id, split="train", example_id="t0", seq=0, question="t",
        gold={}, tables=[], meta={},
    )  # fmt: skip
    now = utcnow()
    older = Evaluation(dataset_id=dataset.id, split="dev", metric="numeric", settings={},
                       app_id="a1", created_at=now - timedelta(minutes=1))  # fmt: skip
    newer = Evaluation(dataset_id=dataset.id, split="dev", metric="numeric", settings={},
                       app_id="a2", created_at=now)  # fmt: skip
    # x0 right, x1 wrong, x2 failed (an error), x3 not scored yet; x4 has no result.
    results = [
        EvalResult(evaluation_id=older.id, example_id="x3", prediction="3"),
        EvalResult(evaluation_id=older.id, example_id="x2", error={"code": "boom"}),
        EvalResult(evaluation_id=older.id, example_id="x1", prediction="0", correct=False),
        EvalResult(evaluation_id=older.id, example_id="x0", prediction="0", correct=True),
        EvalResult(evaluation_id=newer.id, example_id="x1", prediction="1", correct=True),
    ]
    with Session(engine) as db:
        DatasetRepository(db).replace_split(dataset, "dev", examples)
        db.add(other_split)
        db.add_all([older, newer])
        db.commit()
        db.add_all(results)
        db.commit()

        found = DatasetRepository(db).example_page(dataset.id, "dev", Window(1, 2))
        assert (found.total, [e.example_id for e in found.items]) == (5, ["x1", "x2"])
        assert DatasetRepository(db).example_page(dataset.id, "dev", Window(9, 2)).items == []

        store = EvaluationRepository(db)
        assert [e.id for e in store.recent(None, Window(0, 1)).items] == [newer.id]
        assert store.recent(None, Window(0, 1)).total == 2
        assert [e.id for e in store.recent("a1", Window(0, 5)).items] == [older.id]

        page = store.result_page(older, Window(1, 2))
        assert page.total == 4
        assert [(r.example_id, e.question) for r, e in page.items] == [("x1", "q1"), ("x2", "q2")]
        wrong = store.result_page(older, Window(0, 10), failed=True)
        assert (wrong.total, [r.example_id for r, _ in wrong.items]) == (2, ["x1", "x2"])
        assert store.result_page(newer, Window(0, 10)).total == 1
