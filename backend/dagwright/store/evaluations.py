"""Evaluation datasets (with their examples), evaluations (with their results), evaluation
gates (with their waivers) and feedback on runs: one repository per aggregate, in the
store's repository style (see store/apps.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import String, bindparam, cast, delete, func, insert, or_, update
from sqlalchemy import select as sa_select
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.evaluation_models import (
    EvalDataset,
    EvalExample,
    EvalGate,
    EvalResult,
    Evaluation,
    EvalWaiver,
    RunFeedback,
)
from dagwright.store.models import Run
from dagwright.store.paging import Page, Window, fetch_page


class DatasetRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def by_name(self, name: str) -> EvalDataset | None:
        return self._db.exec(select(EvalDataset).where(EvalDataset.name == name)).first()

    def find(self, name: str) -> EvalDataset:
        """The dataset by name (NotFoundError `dataset_not_found`)."""
        dataset = self.by_name(name)
        if dataset is None:
            raise NotFoundError(f"no dataset {name!r}", "dataset_not_found")
        return dataset

    def get(self, dataset_id: str) -> EvalDataset | None:
        return self._db.get(EvalDataset, dataset_id)

    def all(self) -> list[EvalDataset]:
        """By name."""
        return list(self._db.exec(select(EvalDataset).order_by(col(EvalDataset.name))).all())

    def split_sizes(self, dataset_id: str) -> dict[str, int]:
        """Each split of the dataset and how many examples it holds."""
        counts = self._db.exec(
            select(EvalExample.split, func.count())
            .where(EvalExample.dataset_id == dataset_id)
            .group_by(col(EvalExample.split))
        )
        return {split: count for split, count in counts.all()}

    def replace_split(
        self, dataset: EvalDataset, split: str, examples: Sequence[EvalExample]
    ) -> None:
        """Adds the dataset (or keeps it) with `examples` as the whole of `split`."""
        self._db.add(dataset)
        self._db.exec(
            delete(EvalExample).where(
                col(EvalExample.dataset_id) == dataset.id, col(EvalExample.split) == split
            )
        )
        self._db.add_all(examples)

    def examples(self, dataset_id: str, split: str, limit: int | None = None) -> list[EvalExample]:
        """In the order of the dataset's file; the first `limit` of them when given."""
        query = (
            select(EvalExample)
            .where(EvalExample.dataset_id == dataset_id, EvalExample.split == split)
            .order_by(col(EvalExample.seq))
        )
        if limit is not None:
            query = query.limit(limit)
        return list(self._db.exec(query).all())

    def example_page(self, dataset_id: str, split: str, at: Window) -> Page[EvalExample]:
        """One page of the split's examples, in the order of the dataset's file."""
        query = (
            select(EvalExample)
            .where(EvalExample.dataset_id == dataset_id, EvalExample.split == split)
            .order_by(col(EvalExample.seq))
        )
        return fetch_page(self._db, query, at)

    def examples_by_id(self, dataset_id: str, split: str, ids: Sequence[str]) -> list[EvalExample]:
        """Those of `ids` that the split holds, in the order of the dataset's file."""
        query = (
            select(EvalExample)
            .where(
                EvalExample.dataset_id == dataset_id,
                EvalExample.split == split,
                col(EvalExample.example_id).in_(list(ids)),
            )
            .order_by(col(EvalExample.seq))
        )
        return list(self._db.exec(query).all())


class EvaluationRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, evaluation: Evaluation) -> None:
        self._db.add(evaluation)

    def find(self, evaluation_id: str) -> Evaluation:
        row = self._db.get(Evaluation, evaluation_id)
        if row is None:
            raise NotFoundError(f"no evaluation {evaluation_id!r}", "evaluation_not_found")
        return row

    def recent(self, app_id: str | None, at: Window) -> Page[Evaluation]:
        """Newest first; of one app when `app_id` is given."""
        query = select(Evaluation).order_by(col(Evaluation.created_at).desc(), col(Evaluation.id))
        if app_id is not None:
            query = query.where(Evaluation.app_id == app_id)
        return fetch_page(self._db, query, at)

    def unfinished(self, version_id: str, dataset_id: str, split: str) -> list[Evaluation]:
        """Evaluations of the version on the split that are not complete, newest first."""
        return list(
            self._db.exec(
                select(Evaluation)
                .where(
                    Evaluation.version_id == version_id,
                    Evaluation.dataset_id == dataset_id,
                    Evaluation.split == split,
                    Evaluation.status != "completed",
                )
                .order_by(col(Evaluation.created_at).desc())
            ).all()
        )

    def completed(
        self, version_id: str, dataset_id: str, split: str, metric: str
    ) -> list[Evaluation]:
        """Complete evaluations of the version on the split with the metric, newest first."""
        return list(
            self._db.exec(
                select(Evaluation)
                .where(
                    Evaluation.version_id == version_id,
                    Evaluation.dataset_id == dataset_id,
                    Evaluation.split == split,
                    Evaluation.metric == metric,
                    Evaluation.status == "completed",
                )
                .order_by(col(Evaluation.created_at).desc())
            ).all()
        )

    def set_status(self, evaluation_id: str, status: str) -> None:
        """The evaluation's status, and no error (a failed one that runs again has none)."""
        self._db.exec(
            update(Evaluation)
            .where(col(Evaluation.id) == evaluation_id)
            .values(status=status, error=None)
        )

    def fail(self, evaluation_id: str, error: dict[str, Any]) -> bool:
        """An evaluation not complete becomes "failed" with `error`; False when complete."""
        failed = self._db.exec(
            update(Evaluation)
            .where(col(Evaluation.id) == evaluation_id, col(Evaluation.status) != "completed")
            .values(status="failed", error=error)
        )
        return bool(failed.rowcount)

    def stop(self, evaluation_id: str) -> bool:
        """A running evaluation becomes "interrupted"; False when it was not running."""
        stopped = self._db.exec(
            update(Evaluation)
            .where(col(Evaluation.id) == evaluation_id, col(Evaluation.status) == "running")
            .values(status="interrupted")
        )
        return bool(stopped.rowcount)

    def finish(
        self, evaluation_id: str, aggregate: dict[str, Any], finished_at: datetime | None
    ) -> None:
        """The evaluation's scores: complete when `finished_at` is given, else interrupted."""
        self._db.exec(
            update(Evaluation)
            .where(col(Evaluation.id) == evaluation_id)
            .values(
                aggregate=aggregate,
                status="completed" if finished_at is not None else "interrupted",
                finished_at=finished_at,
            )
        )

    # -- results ---------------------------------------------------------------------------

    def add_results(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Results as column values, in one statement; an example that has a result keeps it
        (an example run again by a retried job of a queued evaluation gives no second one)."""
        if not rows:
            return
        table = EvalResult.__table__  # type: ignore[attr-defined]
        dialect = self._db.get_bind().dialect.name
        if dialect == "postgresql":
            self._db.execute(postgresql.insert(table).on_conflict_do_nothing(), list(rows))
        elif dialect == "sqlite":
            self._db.execute(sqlite.insert(table).on_conflict_do_nothing(), list(rows))
        else:  # no ON CONFLICT: leave out the examples that have one (MySQL's IGNORE hides more)
            done = self.done_ids(str(rows[0]["evaluation_id"]))
            fresh = [row for row in rows if row["example_id"] not in done]
            if fresh:
                self._db.execute(insert(EvalResult), fresh)

    def results(self, evaluation_id: str) -> dict[str, EvalResult]:
        """The evaluation's results by example id."""
        rows = self._db.exec(select(EvalResult).where(EvalResult.evaluation_id == evaluation_id))
        return {r.example_id: r for r in rows}

    def result_page(
        self, row: Evaluation, at: Window, failed: bool = False
    ) -> Page[tuple[EvalResult, EvalExample]]:
        """One page of the evaluation's results with their examples, in the dataset's order;
        `failed`: only the wrong and the failed ones."""
        query = (
            select(EvalResult)
            .join(
                EvalExample,
                (col(EvalExample.example_id) == col(EvalResult.example_id))
                & (col(EvalExample.dataset_id) == row.dataset_id)
                & (col(EvalExample.split) == row.split),
            )
            .where(EvalResult.evaluation_id == row.id)
            .order_by(col(EvalExample.seq))
        )
        if failed:
            # A failed example's error is an object; the others hold JSON null.
            query = query.where(
                or_(
                    col(EvalResult.correct).is_(False),
                    cast(col(EvalResult.error), String).like("{%"),
                )
            )
        page = fetch_page(self._db, query, at)
        ids = [r.example_id for r in page.items]
        examples = {
            e.example_id: e
            for e in DatasetRepository(self._db).examples_by_id(row.dataset_id, row.split, ids)
        }
        return Page(
            [(r, examples[r.example_id]) for r in page.items], page.total, page.offset, page.limit
        )

    def tally(self, evaluation_id: str, since: datetime) -> tuple[int, int, int, float, int]:
        """Of the evaluation's results: how many, how many failed, their tokens and cost, and
        how many came from runs that finished at `since` or later."""
        recent = col(Run.finished_at) >= since
        query = (
            sa_select(
                func.count(),
                # A failed example's error is an object; the others hold JSON null.
                func.count().filter(cast(col(EvalResult.error), String).like("{%")),
                func.coalesce(func.sum(col(EvalResult.tokens)), 0),
                func.coalesce(func.sum(col(EvalResult.cost)), 0.0),
                func.count(col(Run.id)).filter(recent),
            )
            .select_from(EvalResult)
            .outerjoin(Run, col(Run.id) == col(EvalResult.run_id))
            .where(col(EvalResult.evaluation_id) == evaluation_id)
        )
        done, failed, tokens, cost, lately = self._db.connection().execute(query).one()
        return int(done), int(failed), int(tokens), float(cost), int(lately)

    def done_ids(self, evaluation_id: str) -> set[str]:
        """The examples that have a result."""
        query = select(EvalResult.example_id).where(EvalResult.evaluation_id == evaluation_id)
        return set(self._db.exec(query).all())

    def score_results(self, evaluation_id: str, scores: Sequence[Mapping[str, Any]]) -> None:
        """Each result's score: `scores` holds {example, score, correct, detail} per example;
        one statement, executed for every example (executemany)."""
        if not scores:
            return
        table = EvalResult.__table__  # type: ignore[attr-defined]
        scored = (
            update(table)
            .where(
                table.c.evaluation_id == bindparam("evaluation"),
                table.c.example_id == bindparam("example"),
            )
            .values(score=bindparam("s"), correct=bindparam("c"), detail=bindparam("d"))
        )
        self._db.connection().execute(
            scored,
            [
                {
                    "evaluation": evaluation_id,
                    "example": s["example"],
                    "s": s["score"],
                    "c": s["correct"],
                    "d": s["detail"],
                }
                for s in scores
            ],
        )


class GateRepository:
    """An app's evaluation gate and the waivers recorded against it."""

    def __init__(self, db: Session) -> None:
        self._db = db

    def of_app(self, app_id: str) -> EvalGate | None:
        return self._db.get(EvalGate, app_id)

    def put(self, gate: EvalGate) -> None:
        self._db.add(gate)

    def delete(self, gate: EvalGate) -> None:
        self._db.delete(gate)

    def add_waiver(self, waiver: EvalWaiver) -> None:
        self._db.add(waiver)

    def latest_waiver(self, app_id: str, version_id: str) -> EvalWaiver | None:
        return self._db.exec(
            select(EvalWaiver)
            .where(EvalWaiver.app_id == app_id, EvalWaiver.version_id == version_id)
            .order_by(col(EvalWaiver.created_at).desc())
        ).first()


class FeedbackRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, feedback: RunFeedback) -> None:
        self._db.add(feedback)

    def of_run(self, run_id: str) -> list[RunFeedback]:
        """Oldest first."""
        query = (
            select(RunFeedback)
            .where(RunFeedback.run_id == run_id)
            .order_by(col(RunFeedback.created_at))
        )
        return list(self._db.exec(query).all())
