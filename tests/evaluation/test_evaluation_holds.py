"""The lease on an evaluation (issue 30, item 5), on SQLite and PostgreSQL: two processes'
services (a run service each, so a replica lease each) over one database. The holder's
heartbeat keeps it held past the stale limit (the other is refused, told who holds it);
once the holder stops beating it is taken over, and the old holder stops at its next result
and changes nothing. The sweep of a server ends what it should not resume."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC
from pathlib import Path

import pytest
import pytest_asyncio
from cryptography.fernet import Fernet
from sqlalchemy import Engine, select, text
from sqlmodel import col

from dagwright.data.connectors.common import SourcePaths
from dagwright.errors import ConflictError
from dagwright.evaluation.batch import Outcome
from dagwright.registry import SECRETS, TABLES, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions
from dagwright.services.apps import AppService
from dagwright.services.data_sources import DataSourceService
from dagwright.services.datasets import DatasetService
from dagwright.services.evaluation_recovery import MAX_ATTEMPTS, EvaluationRecovery
from dagwright.services.evaluation_runs import RunningEvaluations
from dagwright.services.evaluations import EvaluationService
from dagwright.services.runs.service import RunService
from dagwright.services.secret_store import DatabaseSecrets
from dagwright.store.models import Replica, utcnow
from support.database import clear, migrated_engine

from .test_evaluation_service import _count_rows_app

HEARTBEAT, STALE_AFTER = 0.1, 0.8


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


Process = Callable[[str], EvaluationService]


@pytest_asyncio.fixture
async def process(engine: Engine, tmp_path: Path) -> AsyncIterator[Process]:
    """Makes the services of a process named `replica` (its own lease, beating)."""
    clear(engine)
    secrets = DatabaseSecrets(engine, Fernet.generate_key())
    data = DataSourceService(engine, secrets, paths=lambda: SourcePaths.for_data_dir(tmp_path))
    services = BlockServices({SECRETS: secrets, TABLES: data})
    apps = AppService(engine, Registry.default())
    datasets = DatasetService(engine, data, tmp_path / "sources" / "eval")
    opened: list[RunService] = []

    def make(replica: str) -> EvaluationService:
        runs = RunService(
            engine,
            Executor(ExecutorOptions(services=services)),
            replica,
            heartbeat=HEARTBEAT,
            stale_after=STALE_AFTER,
        )
        runs.start_writer()
        opened.append(runs)
        return EvaluationService(engine, apps, runs, datasets)

    try:
        yield make
    finally:
        for runs in opened:
            await runs.close()
        data.close()


def _dataset(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "two.csv").write_text("a\n1\n2\n")
    path = folder / "rows.jsonl"
    path.write_text(
        json.dumps({"id": "q1", "question": "How many?", "table": "two.csv", "answer": "2"}) + "\n"
    )
    return path


def _until(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.02)


def _heartbeat_age(engine: Engine, lease: str) -> float:
    """Seconds since the lease's last heartbeat (infinite when it is gone)."""
    with engine.connect() as conn:
        beat = conn.execute(
            select(col(Replica.heartbeat_at)).where(col(Replica.id) == lease)
        ).scalar()
    if beat is None:
        return float("inf")
    if beat.tzinfo is None:  # SQLite keeps UTC without its zone
        beat = beat.replace(tzinfo=UTC)
    return (utcnow() - beat).total_seconds()


async def test_held_while_its_holder_beats_taken_over_when_it_stops(
    process: Process, engine: Engine, tmp_path: Path
) -> None:
    a, b = process("holder-a"), process("holder-b")
    a.datasets.import_file("holds", "generic", _dataset(tmp_path / "files"))
    _count_rows_app(a, "holdapp")
    row = a.create("holdapp", None, "holds")
    a.hold(row.id, resumable=True)
    held_at = time.monotonic()

    # Renewed: past the stale limit, the holder's heartbeat keeps it held.
    _until(lambda: time.monotonic() - held_at > 2 * STALE_AFTER, "past the limit")
    assert _heartbeat_age(engine, a.lease) < STALE_AFTER
    with pytest.raises(ConflictError) as refused:
        b.hold(row.id)
    assert refused.value.code == "evaluation_held"
    assert f"evaluation {row.id} is running in another process ('holder-a', pid" in str(
        refused.value
    )
    with pytest.raises(ConflictError, match="running in another process"):
        await b.run(row.id)  # the command line's way in: refused before any example runs
    assert b.done_ids(row.id) == set()

    # The holder stops beating (frozen, or dead): once its lease is stale, taken over.
    a._runs.lease.stop_heartbeat()
    _until(lambda: _heartbeat_age(engine, a.lease) > STALE_AFTER, "stale")
    assert [o.id for o in b.orphaned()] == [row.id]
    b.hold(row.id)
    with engine.connect() as conn:
        replica, attempts, status = conn.execute(
            text("SELECT replica, attempts, status FROM evaluations WHERE id = :id"),
            {"id": row.id},
        ).one()
    assert (replica, attempts, status) == (b.lease, 1, "running")

    # The old holder wakes up: its next result stops it, and letting go changes nothing.
    with pytest.raises(ConflictError) as stopped:
        a._sink(row.id, a.lease)([Outcome("q1", prediction=2)])
    assert stopped.value.code == "evaluation_taken_over"
    a._let_go(row.id, "interrupted")
    assert b.get(row.id).status == "running"

    done = await b.run(row.id)
    assert done.status == "completed"
    with engine.connect() as conn:
        assert (
            conn.execute(
                text("SELECT replica FROM evaluations WHERE id = :id"), {"id": row.id}
            ).scalar()
            is None
        )


async def test_the_sweep_ends_what_it_does_not_resume(
    process: Process, engine: Engine, tmp_path: Path
) -> None:
    """A command line's evaluation whose process died: interrupted (its command resumes it);
    a server's one whose processes died MAX_ATTEMPTS times: failed (`server_lost`)."""
    a, sweeper = process("dead-a"), process("sweeper")
    a.datasets.import_file("swept", "generic", _dataset(tmp_path / "files"))
    _count_rows_app(a, "sweptapp")
    cli = a.create("sweptapp", None, "swept", resume=False)
    server = a.create("sweptapp", None, "swept", resume=False)
    a.hold(cli.id)
    a.hold(server.id, resumable=True)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE evaluations SET attempts = :n WHERE id = :id"),
            {"n": MAX_ATTEMPTS, "id": server.id},
        )
    a._runs.lease.stop_heartbeat()
    _until(lambda: _heartbeat_age(engine, a.lease) > STALE_AFTER, "stale")

    running = RunningEvaluations()
    taken = await EvaluationRecovery(sweeper, running, STALE_AFTER).recover()
    assert taken == []
    assert not running.runs_here(cli.id)
    ended_cli, ended_server = sweeper.get(cli.id), sweeper.get(server.id)
    assert ended_cli.status == "interrupted"
    assert ended_cli.error is not None
    assert ended_cli.error["code"] == "holder_lost"
    assert ended_server.status == "failed"
    assert ended_server.error is not None
    assert ended_server.error["code"] == "server_lost"
    # Started again, it goes on (its attempts anew).
    assert (await sweeper.run(cli.id)).status == "completed"
