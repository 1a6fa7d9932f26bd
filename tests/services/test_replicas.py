"""Replica leases on SQLite and PostgreSQL: processes sharing a replica name leave each other's
runs alone, a process whose heartbeat stopped has its runs interrupted by the periodic
recovery of another (its finished nodes kept), a clean close releases the lease, a lease of a
process gone from this host is dead at once, and recoveries running together agree."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select, text
from sqlmodel import Session

from dagwright.runtime import CompiledFlow, Executor
from dagwright.services.runs.replicas import REPLICAS, ReplicaLease, pid_alive
from dagwright.services.runs.service import RunService
from dagwright.services.runs.writer import RUN_NODES, WriterStoppedError
from dagwright.store.models import Replica, Run, utcnow
from support.database import clear
from support.flows import compiled, edge, node

FAST: dict[str, Any] = {"heartbeat": 0.1, "stale_after": 0.5}


@pytest.fixture
def db(engine: Engine) -> Engine:
    clear(engine)
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM replicas"))
    return engine


def new_service(db: Engine, name: str = "same", **options: Any) -> RunService:
    service = RunService(db, Executor(), name, **{**FAST, **options})
    service.start_writer()
    return service


def sleeper(seconds: float) -> CompiledFlow:
    """in -> c (quick) -> s (sleeps) -> out."""
    return compiled(
        [
            node("n", "json_input", name="n"),
            node("c", "t_add"),
            node("s", "t_sleep", seconds=seconds),
            node("out", "output", name="result"),
        ],
        [edge("n", "c.a"), edge("c", "s.x"), edge("s", "out")],
    )


def status(db: Engine, run_id: str) -> str:
    with Session(db) as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run.status


def lease_row(db: Engine, lease_id: str) -> Replica | None:
    with Session(db) as session:
        return session.get(Replica, lease_id)


def finished_nodes(db: Engine, run_id: str) -> dict[str, Any]:
    with db.connect() as conn:
        rows = conn.execute(select(RUN_NODES).where(RUN_NODES.c.run_id == run_id)).mappings()
        return {row["node"]: row["output"] for row in rows}


async def eventually(check: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, "not within the time allowed"
        await asyncio.sleep(0.02)


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=utcnow().tzinfo)


# -- processes that share a name ----------------------------------------------------------------


async def test_services_of_the_same_name_leave_each_others_runs_alone(db: Engine) -> None:
    a = new_service(db)
    b: RunService | None = None
    try:
        live = await a.start(sleeper(30), {"n": 1}, app_id=None, version_id=None)
        await eventually(lambda: "c" in finished_nodes(db, live.run_id))
        # A second process of the same replica name starts (as `serve --workers 2` does, or a
        # restarted worker while its sibling runs): its start-up recovery spares A's run.
        b = RunService(db, Executor(), "same", **FAST)
        assert b.lease_id != a.lease_id
        assert b.recover_interrupted() == 0
        b.start_writer()
        # Several rounds of periodic recovery by both (every 0.5 s): still running.
        await asyncio.sleep(1.3)
        assert status(db, live.run_id) == "running"
        assert not live.recorded
        assert a.recover_interrupted() == 0  # its own run, whatever its lease looks like
        assert b.recover_interrupted() == 0
        # The cancel of another process finds the run by A's lease, not by the name.
        requested = await b.cancel(live.run_id)
        assert requested.status == "running"
        record = await asyncio.wait_for(live.wait(), timeout=2)
        assert record.status == "cancelled"
        assert record.replica == a.lease_id
    finally:
        await a.close()
        if b is not None:
            await b.close()


# -- a process that died --------------------------------------------------------------------


@pytest.mark.parametrize("death", ["writer halted", "heartbeat stopped"])
async def test_runs_of_a_process_whose_heartbeat_stopped_are_interrupted_by_another(
    db: Engine, death: str
) -> None:
    dead = new_service(db, "dead")
    survivor = new_service(db, "survivor")
    try:
        live = await dead.start(sleeper(30), {"n": 7}, app_id=None, version_id=None)
        await eventually(lambda: "c" in finished_nodes(db, live.run_id))
        if death == "writer halted":
            dead.writer.halt()  # a crash: the lease is left, its heartbeats go nowhere
        else:
            dead.lease.stop_heartbeat()  # hung: the lease is left as it was
        assert lease_row(db, dead.lease_id) is not None
        # The survivor's periodic recovery (every stale_after = 0.5 s) notices, on its own.
        await eventually(lambda: status(db, live.run_id) == "interrupted")
        with Session(db) as session:
            run = session.get(Run, live.run_id)
            assert run is not None
            assert run.error is not None
            assert run.error["code"] == "interrupted"
            assert run.finished_at is not None
        assert finished_nodes(db, live.run_id) == {"n": 7, "c": 7}  # kept; "s" never finished
        assert lease_row(db, dead.lease_id) is None  # the stale lease is deleted
        assert lease_row(db, survivor.lease_id) is not None
        live.run.cancel("the test is over")
        if death == "writer halted":
            with pytest.raises(WriterStoppedError):
                await live.wait()
        else:
            # A process that only hung records how its run really ended once it goes on.
            assert (await asyncio.wait_for(live.wait(), timeout=5)).status == "cancelled"
    finally:
        await dead.close()
        await survivor.close()


async def test_a_lease_taken_for_dead_is_taken_again_by_its_live_process(db: Engine) -> None:
    service = new_service(db)
    try:
        with db.begin() as conn:  # as another process's recovery would, had it been too slow
            conn.execute(REPLICAS.delete().where(REPLICAS.c.id == service.lease_id))
        await eventually(lambda: lease_row(db, service.lease_id) is not None, within=2)
    finally:
        await service.close()


# -- the lease's life ---------------------------------------------------------------------------


@pytest.mark.parametrize("shut_down", ["close", "stop_writer"])
async def test_a_clean_shut_down_releases_the_lease(db: Engine, shut_down: str) -> None:
    service = new_service(db, "named")
    live = await service.start(sleeper(0.05), {"n": 1}, app_id=None, version_id=None)
    await live.wait()
    lease = lease_row(db, service.lease_id)
    assert lease is not None
    assert (lease.name, lease.pid) == ("named", os.getpid())
    assert lease.host == service.lease.host
    first_beat = as_utc(lease.heartbeat_at)
    await asyncio.sleep(0.35)  # a few heartbeats
    refreshed = lease_row(db, service.lease_id)
    assert refreshed is not None
    assert as_utc(refreshed.heartbeat_at) > first_beat
    if shut_down == "close":
        await service.close()
    else:
        await asyncio.to_thread(service.stop_writer)
    assert lease_row(db, service.lease_id) is None
    assert status(db, live.run_id) == "succeeded"
    assert not service.lease.beating


async def test_the_periodic_recovery_of_a_live_service_spares_its_own_runs(db: Engine) -> None:
    service = new_service(db)
    try:
        live = await service.start(sleeper(30), {"n": 1}, app_id=None, version_id=None)
        await asyncio.sleep(0.1)
        # Even with its own lease made to look stale (a long pause of the process), a process
        # never marks its own runs.
        with db.begin() as conn:
            old = utcnow() - timedelta(hours=1)
            conn.execute(
                REPLICAS.update().where(REPLICAS.c.id == service.lease_id).values(heartbeat_at=old)
            )
        assert service.recover_interrupted() == 0
        await asyncio.sleep(1.1)  # two rounds of its own periodic recovery
        assert status(db, live.run_id) == "running"
        assert not live.recorded
    finally:
        await service.close()


# -- a process gone from this host ------------------------------------------------------------


def dead_pid() -> int:
    """The pid of a process of this host that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not pid_alive(child.pid)
    return child.pid


def add_lease(db: Engine, lease_id: str, name: str, pid: int, **fields: Any) -> None:
    recovering = ReplicaLease(db, "unused")
    now = utcnow()
    row = {
        "id": lease_id,
        "name": name,
        "pid": pid,
        "host": recovering.host,
        "pid_namespace": recovering.pid_namespace,
        "started_at": now,
        "heartbeat_at": now,  # fresh: only the pid can tell
        **fields,
    }
    with Session(db) as session:
        session.add(Replica(**row))
        session.add(Run(id=f"run-{lease_id}", replica=lease_id, status="running", inputs={}))
        session.commit()


async def test_a_fresh_lease_of_a_process_gone_from_this_host_is_dead_at_once(db: Engine) -> None:
    pid = dead_pid()
    add_lease(db, "gone", "same", pid)
    add_lease(db, "other-name", "another", pid)  # another replica name: waits to go stale
    add_lease(db, "elsewhere", "same", pid, host="another-host")
    add_lease(db, "other-container", "same", pid, pid_namespace="boot/pid:[1]")
    add_lease(db, "this-process", "same", os.getpid())
    service = RunService(db, Executor(), "same", **FAST)
    assert service.recover_interrupted() == 1
    assert status(db, "run-gone") == "interrupted"
    assert lease_row(db, "gone") is None
    for kept in ("other-name", "elsewhere", "other-container", "this-process"):
        assert status(db, f"run-{kept}") == "running"
        assert lease_row(db, kept) is not None
    # Once stale, they are dead whatever they say.
    await asyncio.sleep(0.6)
    assert service.recover_interrupted() == 4


async def test_recoveries_running_at_once_agree(db: Engine) -> None:
    with Session(db) as session:
        old = utcnow() - timedelta(minutes=5)
        session.add(
            Replica(id="stale", name="x", pid=0, host="h", started_at=old, heartbeat_at=old)
        )
        for i in range(40):
            replica = "stale" if i % 2 else "missing"
            session.add(Run(id=f"run-{i:02d}", replica=replica, status="running", inputs={}))
        session.commit()
    services = [RunService(db, Executor(), "same", **FAST) for _ in range(4)]
    barrier = threading.Barrier(len(services))
    counts: list[int] = []
    errors: list[BaseException] = []

    def recover(service: RunService) -> None:
        try:
            barrier.wait()
            counts.append(service.recover_interrupted())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=recover, args=(s,)) for s in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(counts) == 40  # each run marked exactly once
    with db.connect() as conn:
        statuses = conn.execute(text("SELECT DISTINCT status FROM runs")).scalars().all()
        assert statuses == ["interrupted"]
        assert conn.execute(text("SELECT count(*) FROM replicas")).scalar_one() == 0
