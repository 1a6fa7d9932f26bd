"""Duplicated work on an evaluation (docs/security/evaluations.md): processes that claim one
evaluation at the same moment, each with a live lease of its own, on SQLite and PostgreSQL —
exactly one holds it; the others are refused and told who does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine

from dagwright.services.runs.replicas import ReplicaLease
from dagwright.store.db import session
from dagwright.store.evaluation_holds import EvaluationHolds
from dagwright.store.evaluation_models import EvalDataset, Evaluation
from support.database import migrated_engine

RACERS = 8
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)  # the cutoff: every racer's lease is live


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


def test_racing_claims_leave_one_holder(engine: Engine) -> None:
    leases = [ReplicaLease(engine, f"racer-{n}") for n in range(RACERS)]
    for lease in leases:
        lease.acquire()
    with session(engine) as db:
        dataset = EvalDataset(name="race", kind="generic", metric="numeric", mapping={})
        db.add(dataset)
        db.flush()
        evaluation = Evaluation(dataset_id=dataset.id, split="dev", metric="numeric", settings={})
        db.add(evaluation)
        db.commit()
        evaluation_id = evaluation.id
    start = threading.Barrier(RACERS)
    won: list[str] = []
    failures: list[BaseException] = []

    def claim(lease: ReplicaLease) -> None:
        try:
            start.wait(10)
            with session(engine) as db:
                if EvaluationHolds(db).claim(evaluation_id, lease.id, LONG_AGO, False):
                    won.append(lease.id)
                db.commit()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    threads = [threading.Thread(target=claim, args=(lease,)) for lease in leases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    # SQLite may refuse a writer with "database is locked" under the race: a refusal too.
    assert all("locked" in str(f) for f in failures), failures
    assert len(won) == 1, won
    with session(engine) as db:
        holds = EvaluationHolds(db)
        holder = holds.holder(evaluation_id, LONG_AGO)
        assert holder is not None
        assert holder.lease == won[0]
        loser = next(lease for lease in leases if lease.id != won[0])
        assert not holds.claim(evaluation_id, loser.id, LONG_AGO, False)
    for lease in leases:
        lease.release()
