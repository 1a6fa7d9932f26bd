"""RunService on SQLite and PostgreSQL: the run row before the first node, node results in
group commits, the final state before wait() returns, listing, cancelling (here and from
another replica), recovery of interrupted runs by replica lease, and a crash mid-run. (More
on leases: test_replicas.py.)"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any, Final

import pytest
from sqlalchemy import Engine, create_engine, event, select, text
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlmodel import Session, SQLModel

import dagwright.blocks.input as io_blocks
from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.registry import BlockServices, NodeContext, Registry, Service, block
from dagwright.runtime import CompiledFlow, Executor, ExecutorOptions
from dagwright.services.runs.records import MAX_VALUE_BYTES, PREVIEW_BYTES, json_value
from dagwright.services.runs.service import RunService
from dagwright.services.runs.writer import RUN_NODES, RunWriter, WriterStoppedError
from dagwright.store.models import App, Replica, Run, Version, utcnow
from support import blocks as test_blocks
from support.blocks import GREETER, Greeter
from support.flows import compiled, edge, node

PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


DATABASE: Final[Service[Engine]] = Service("database", "the test's database")


@block(
    "t_probe_run_row",
    category="data_process",
    description="Reads its own run's row.",
    needs=(DATABASE,),
)
def t_probe_run_row(ctx: NodeContext, x: Any = None) -> str:
    """Returns the status the database holds for the running run, from a fresh session."""
    engine = ctx.service(DATABASE)
    with Session(engine) as session:
        run = session.get(Run, ctx.run_id)
        return "missing" if run is None else run.status


def registry() -> Registry:
    return Registry.from_modules([io_blocks, test_blocks, sys.modules[__name__]])


# -- databases ---------------------------------------------------------------------------


def sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # As the server configures SQLite: foreign keys checked (so a node result written before
    # its run would fail here too), WAL so readers do not wait for the writer.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("runs") / "runs.db"
        lite = create_engine(f"sqlite:///{path}")
        event.listen(lite, "connect", sqlite_pragmas)
        SQLModel.metadata.create_all(lite)
        yield lite
        lite.dispose()
        return
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    except OperationalError as exc:
        admin.dispose()
        pytest.skip(f"PostgreSQL is not reachable: {exc}")
    pg = create_engine(PG_URL, connect_args={"options": f"-csearch_path={schema}"})
    SQLModel.metadata.create_all(pg)
    yield pg
    pg.dispose()
    with admin.begin() as conn:
        conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture
def db(engine: Engine) -> Engine:
    """The module's database, emptied for this test."""
    with engine.begin() as conn:
        for table in ("run_nodes", "runs", "versions", "apps", "replicas"):
            conn.execute(text(f"DELETE FROM {table}"))
    return engine


def new_service(db: Engine, replica: str = "r1", **options: Any) -> RunService:
    services = BlockServices({GREETER: Greeter("hi"), DATABASE: db})
    executor = Executor(ExecutorOptions(services=services))
    service = RunService(db, executor, replica, **options)
    service.start_writer()
    return service


@pytest.fixture
async def service(db: Engine) -> AsyncIterator[RunService]:
    svc = new_service(db)
    yield svc
    await svc.close()


def run_row(db: Engine, run_id: str) -> Run:
    with Session(db) as session:
        row = session.get(Run, run_id)
        assert row is not None
        return row


def node_rows(db: Engine, run_id: str) -> dict[str, dict[str, Any]]:
    with db.connect() as conn:
        rows = conn.execute(select(RUN_NODES).where(RUN_NODES.c.run_id == run_id)).mappings()
        return {row["node"]: dict(row) for row in rows}


def make_app(db: Engine, slug: str) -> tuple[str, str]:
    """An app with one version (PostgreSQL checks runs' foreign keys)."""
    with Session(db) as session:
        app = App(slug=slug, name=slug)
        session.add(app)
        session.flush()
        version = Version(app_id=app.id, number=1, graph={}, layout={})
        session.add(version)
        session.commit()
        return app.id, version.id


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


def failing() -> CompiledFlow:
    return compiled(
        [
            node("c", "t_const", value=1),
            node("f", "t_fail", message="no luck"),
            node("o", "output", name="r"),
        ],
        [edge("c", "f.x"), edge("f", "o")],
    )


def chain() -> CompiledFlow:
    """in -> add(+2) -> add(+2) -> out: four node results."""
    return compiled(
        [
            node("n", "json_input", name="n"),
            node("c", "t_const", value=2),
            node("a1", "t_add"),
            node("a2", "t_add"),
            node("out", "output", name="result"),
        ],
        [
            edge("n", "a1.a"),
            edge("c", "a1.b"),
            edge("a1", "a2.a"),
            edge("c", "a2.b"),
            edge("a2", "out"),
        ],
    )


# -- the record of one run -----------------------------------------------------------------


async def test_row_is_running_before_the_first_node_and_complete_after_wait(
    service: RunService, db: Engine
) -> None:
    plan = compiled(
        [
            node("n", "json_input", name="n"),
            node("probe", "t_probe_run_row"),
            node("s", "t_sleep", seconds=0.3),
            node("out", "output", name="seen"),
        ],
        [edge("n", "probe.x"), edge("probe", "s.x"), edge("s", "out")],
        registry(),
    )
    live = await service.start(plan, {"n": {"q": [1, 2]}}, app_id=None, version_id=None)

    await asyncio.sleep(0.15)  # the probe ran; the sleep node is running
    row = run_row(db, live.run_id)
    assert (row.status, row.inputs, row.replica, row.mode) == (
        "running",
        {"n": {"q": [1, 2]}},
        service.lease_id,  # the process's lease, not its replica name
        "debug",
    )
    assert row.started_at is not None
    assert row.finished_at is None

    record = await live.wait()
    assert record.status == "succeeded"
    assert record.outputs == {"seen": "running"}  # what the first real node read
    assert [n.node for n in record.nodes] == ["n", "probe", "s", "out"]
    by_node = {n.node: n for n in record.nodes}
    assert by_node["s"].status == "succeeded"
    assert by_node["s"].block == "t_sleep"
    assert by_node["s"].inputs == {"x": "running"}
    assert by_node["s"].duration is not None
    assert by_node["s"].duration >= 0.29
    assert record.duration is not None
    assert record.duration >= 0.29
    assert record.usage == {"prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0, "calls": 0}

    stored = service.get(live.run_id)  # what wait() returned is what was committed
    assert stored.to_dict() == record.to_dict()
    assert stored.finished_at is not None
    assert stored.started_at is not None
    assert stored.finished_at >= stored.started_at


async def test_skipped_nodes_of_a_condition_are_recorded(service: RunService) -> None:
    plan = compiled(
        [
            node("c", "t_const", value=-3),
            node("cond", "t_is_positive"),
            node("pos", "t_add"),
            node("neg", "t_add"),
            node("out", "output", name="result"),
        ],
        [
            edge("c", "cond.x"),
            edge("cond", "pos.a", branch="true"),
            edge("cond", "neg.a", branch="false"),
            edge("pos", "out"),
            edge("neg", "out"),
        ],
    )
    live = await service.start(plan, {}, app_id=None, version_id=None)
    await live.wait()
    record = service.get(live.run_id)
    assert record.status == "succeeded"
    assert record.outputs == {"result": -3}
    nodes = {n.node: n for n in record.nodes}
    assert {name: n.status for name, n in nodes.items()} == {
        "c": "succeeded",
        "cond": "succeeded",
        "pos": "skipped",
        "neg": "succeeded",
        "out": "succeeded",
    }
    assert nodes["cond"].branch == "false"
    assert nodes["cond"].output == -3
    assert nodes["pos"].block == "t_add"
    assert nodes["pos"].started is None
    assert nodes["pos"].error == "input 'a' is on a branch not taken"
    assert record.nodes[-1].node == "pos"  # never started: after the nodes that did


async def test_failed_node_error_is_recorded(service: RunService) -> None:
    live = await service.start(failing(), {}, app_id=None, version_id=None)
    record = await live.wait()
    assert record.status == "failed"
    assert record.error == {
        "code": "node_failed",
        "message": "node 'f' (t_fail) failed: ValueError: no luck",
        "node": "f",
    }
    assert record.outputs == {}
    stored = service.get(live.run_id)
    assert stored.error == record.error
    failed = {n.node: n for n in stored.nodes}["f"]
    assert (failed.status, failed.error) == ("failed", "ValueError: no luck")
    assert failed.duration is not None
    assert failed.duration >= 0


async def test_usage_is_summed_per_node_and_per_run(service: RunService) -> None:
    plan = compiled(
        [
            node("m1", "t_metered"),
            node("m2", "t_metered"),
            node("join", "output", name="greeting"),
        ],
        [edge("m1", "m2.x"), edge("m2", "join")],
    )
    live = await service.start(plan, {}, app_id=None, version_id=None)
    await live.wait()
    record = service.get(live.run_id)
    assert record.outputs == {"greeting": "hi"}
    # The node's record also names the model and whether it was dagwright's scripted one.
    one_call = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost": 0.5,
        "calls": 1,
        "model": "m",
        "scripted": False,
    }
    nodes = {n.node: n for n in record.nodes}
    assert nodes["m1"].usage == one_call
    assert nodes["m2"].usage == one_call
    assert nodes["join"].usage is None
    assert record.usage == {"prompt_tokens": 20, "completion_tokens": 10, "cost": 1.0, "calls": 2}


async def test_the_usage_of_the_runs_a_run_invoked(service: RunService) -> None:
    metered = compiled(
        [node("m1", "t_metered"), node("out", "output", name="greeting")], [edge("m1", "out")]
    )
    parent = await service.start(metered, {}, app_id=None, version_id=None)
    await parent.wait()
    child = await service.start(
        metered,
        {},
        app_id=None,
        version_id=None,
        parent_run_id=parent.run_id,
        parent_node="m1",
    )
    await child.wait()
    spent = service.children_usage(parent.run_id)
    assert [usage.to_dict() for usage in spent] == [
        {"prompt_tokens": 10, "completion_tokens": 5, "cost": 0.5, "calls": 1}
    ]
    assert service.children_usage(child.run_id) == []


async def test_large_and_odd_values_are_stored_json_safe(service: RunService) -> None:
    big = "x" * (MAX_VALUE_BYTES + 10)
    plan = compiled(
        [node("n", "text_input", name="n"), node("o", "output", name="r")],
        [edge("n", "o")],
    )
    live = await service.start(plan, {"n": big}, app_id=None, version_id=None)
    await live.wait()
    record = service.get(live.run_id)
    truncated = {"truncated": True, "size": len(big) + 2, "preview": '"' + big[: PREVIEW_BYTES - 1]}
    assert record.inputs == {"n": truncated}
    assert record.outputs == {"r": truncated}
    assert {n.node: n.output for n in record.nodes}["o"] == truncated
    # values JSON cannot hold directly
    assert json_value(float("nan")) == "NaN"
    assert json_value({1: b"ab", "s": {3}}) == {"1": "ab", "s": [3]}
    assert json_value(object).startswith("<class ")


async def test_bad_inputs_start_nothing(service: RunService) -> None:
    with pytest.raises(InputError):
        await service.start(chain(), {"nope": 1}, app_id=None, version_id=None)
    assert service.list().total == 0


# -- many runs ---------------------------------------------------------------------------


async def test_concurrent_runs_are_recorded_in_few_transactions(
    service: RunService, db: Engine
) -> None:
    commits = 0

    def count(_conn: object) -> None:
        nonlocal commits
        commits += 1

    event.listen(db, "commit", count)
    try:
        plan = chain()
        lives = await asyncio.gather(
            *(service.start(plan, {"n": i}, app_id=None, version_id=None) for i in range(200))
        )
        records = await asyncio.gather(*(live.wait() for live in lives))
    finally:
        event.remove(db, "commit", count)
    assert [r.outputs for r in records] == [{"result": i + 4} for i in range(200)]
    assert all(len(r.nodes) == 5 for r in records)
    node_results = 200 * 5
    assert commits < node_results / 20, commits  # group commits, not one per result
    with db.connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM run_nodes")).scalar_one()
        done = conn.execute(text("SELECT count(*) FROM runs WHERE status = 'succeeded'"))
        assert (stored, done.scalar_one()) == (node_results, 200)
    sample = service.get(lives[57].run_id)
    assert sample.outputs == {"result": 61}
    assert {n.node: n.output for n in sample.nodes} == {
        "n": 57,
        "c": 2,
        "a1": 59,
        "a2": 61,
        "out": 61,
    }


async def test_list_filters_and_pages(service: RunService, db: Engine) -> None:
    app_a, version_a = make_app(db, "a")
    app_b, _ = make_app(db, "b")
    plan = chain()
    ids = []
    for i in range(5):
        live = await service.start(plan, {"n": i}, app_id=app_a, version_id=version_a)
        await live.wait()
        ids.append(live.run_id)
    live = await service.start(failing(), {}, app_id=app_b, version_id=None, mode="published")
    await live.wait()

    everything = service.list()
    assert everything.total == 6
    assert [r.id for r in everything.items] == [live.run_id, *reversed(ids)]  # newest first
    assert everything.items[0].nodes == []

    page = service.list(app_id=app_a, offset=1, limit=2)
    assert (page.total, page.offset, page.limit) == (5, 1, 2)
    assert [r.id for r in page.items] == [ids[3], ids[2]]
    assert [r.inputs for r in page.items] == [{"n": 3}, {"n": 2}]

    assert [r.id for r in service.list(status="failed").items] == [live.run_id]
    assert [r.id for r in service.list(mode="published").items] == [live.run_id]
    assert service.list(version_id=version_a).total == 5
    assert service.list(app_id=app_b, status="succeeded").total == 0
    assert service.list(limit=1000).limit == 200
    assert service.list(offset=10).items == []


async def test_get_unknown_run(service: RunService) -> None:
    with pytest.raises(NotFoundError) as caught:
        service.get("f" * 32)
    assert caught.value.code == "run_not_found"


# -- cancelling --------------------------------------------------------------------------


async def test_cancel_a_local_run(service: RunService) -> None:
    live = await service.start(sleeper(5), {"n": 1}, app_id=None, version_id=None)
    await asyncio.sleep(0.05)
    t0 = time.perf_counter()
    record = await service.cancel(live.run_id)
    assert time.perf_counter() - t0 < 0.5
    assert record.status == "cancelled"
    assert record.error == {"code": "cancelled", "message": "cancelled by request", "node": None}
    assert record.cancel_requested_at is not None
    stored = service.get(live.run_id)
    assert stored.status == "cancelled"
    nodes = {n.node: n for n in stored.nodes}
    assert (nodes["s"].status, nodes["s"].error) == ("cancelled", "cancelled by request")
    assert nodes["s"].duration is not None
    assert nodes["s"].duration < 1
    assert nodes["c"].status == "succeeded"
    assert "out" not in nodes  # never reached

    with pytest.raises(ConflictError) as caught:
        await service.cancel(live.run_id)
    assert caught.value.code == "run_finished"
    with pytest.raises(NotFoundError):
        await service.cancel("0" * 32)


async def test_cancel_a_run_of_another_replica(db: Engine) -> None:
    a, b = new_service(db, "replica-a"), new_service(db, "replica-b")
    try:
        live = await a.start(sleeper(10), {"n": 1}, app_id=None, version_id=None)
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        requested = await b.cancel(live.run_id)
        assert requested.status == "running"  # only asked: replica A does the cancelling
        assert requested.cancel_requested_at is not None
        record = await asyncio.wait_for(live.wait(), timeout=1.5)
        assert time.perf_counter() - t0 < 1.5
        assert record.status == "cancelled"
        stored = b.get(live.run_id)
        assert stored.status == "cancelled"
        assert stored.cancel_requested_at is not None
        assert {n.node: n.status for n in stored.nodes}["s"] == "cancelled"
        with pytest.raises(ConflictError):
            await b.cancel(live.run_id)
    finally:
        await a.close()
        await b.close()


async def test_a_start_cancelled_before_the_insert_commits_is_closed(service: RunService) -> None:
    starting = asyncio.create_task(service.start(chain(), {"n": 1}, app_id=None, version_id=None))
    await asyncio.sleep(0)  # the insert is queued, inside the writer's window
    starting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starting
    await asyncio.sleep(0.1)
    [record] = service.list().items
    assert record.status == "cancelled"  # not left "running" until the next start-up
    assert record.error == {
        "code": "cancelled",
        "message": "cancelled before it started",
        "node": None,
    }
    assert service.get(record.id).nodes == []


# -- writer failures ---------------------------------------------------------------------


def run_insert(run_id: str) -> dict[str, Any]:
    now = utcnow()
    return {
        "id": run_id,
        "app_id": None,
        "version_id": None,
        "parent_run_id": None,
        "parent_node": None,
        "mode": "debug",
        "status": "running",
        "inputs": {},
        "outputs": None,
        "error": None,
        "usage": None,
        "replica": "r1",
        "cancel_requested_at": None,
        "created_at": now,
        "started_at": now,
        "finished_at": None,
        "duration": None,
    }


async def test_a_bad_operation_fails_alone_and_the_batch_is_kept(db: Engine) -> None:
    writer = RunWriter(db, flush_interval=0.05)
    writer.start()
    try:
        await asyncio.wrap_future(writer.insert_run(run_insert("a" * 32)))
        # One batch: a duplicate key between two good inserts.
        futures = [writer.insert_run(run_insert(c * 32)) for c in "bac"]
        results = await asyncio.gather(
            *(asyncio.wrap_future(f) for f in futures), return_exceptions=True
        )
    finally:
        writer.stop()
    assert results[0] is None
    assert results[2] is None
    assert isinstance(results[1], IntegrityError)
    with db.connect() as conn:
        ids = conn.execute(text("SELECT id FROM runs ORDER BY id")).scalars().all()
    assert ids == ["a" * 32, "b" * 32, "c" * 32]
    with pytest.raises(WriterStoppedError):
        writer.insert_run(run_insert("d" * 32)).result()


# -- recovery ----------------------------------------------------------------------------


def lease(lease_id: str, age: float, name: str = "r1") -> Replica:
    """A lease of another process (pid 0: never looked up), last refreshed `age` seconds ago."""
    beat = utcnow() - timedelta(seconds=age)
    return Replica(
        id=lease_id, name=name, pid=0, host="elsewhere", started_at=beat, heartbeat_at=beat
    )


async def test_recover_interrupted_marks_the_runs_of_dead_leases_only(db: Engine) -> None:
    with Session(db) as session:
        session.add(lease("live", age=1))
        session.add(lease("stale", age=60))
        for run_id, replica, status in [
            ("1" * 32, "stale", "running"),
            ("2" * 32, "live", "running"),
            ("3" * 32, "stale", "succeeded"),
            ("4" * 32, "gone", "queued"),  # no lease at all (e.g. a run of an older version)
            ("5" * 32, "live", "queued"),
        ]:
            session.add(Run(id=run_id, replica=replica, status=status, inputs={}))
        session.commit()
    service = RunService(db, Executor(), "r1")  # the same name as the others: no matter
    assert service.recover_interrupted() == 2
    statuses = {r.id: r.status for r in service.list().items}
    assert statuses == {
        "1" * 32: "interrupted",
        "2" * 32: "running",
        "3" * 32: "succeeded",
        "4" * 32: "interrupted",
        "5" * 32: "queued",
    }
    record = service.get("1" * 32)
    assert record.error == {
        "code": "interrupted",
        "message": "the server stopped while the run was in progress",
        "node": None,
    }
    assert record.finished_at is not None
    with Session(db) as session:  # the stale lease is gone, the live one kept
        assert session.get(Replica, "stale") is None
        assert session.get(Replica, "live") is not None
    assert service.recover_interrupted() == 0


async def test_a_crash_mid_run_keeps_the_finished_nodes(db: Engine) -> None:
    crashed = new_service(db, "r1", heartbeat=0.1, stale_after=0.5)
    live = await crashed.start(sleeper(30), {"n": 7}, app_id=None, version_id=None)
    deadline = time.monotonic() + 3
    while "c" not in node_rows(db, live.run_id):  # the first node's result is committed
        assert time.monotonic() < deadline, "the first node's result was never written"
        await asyncio.sleep(0.01)
    # The process dies: nothing queued from now on reaches the database, and its lease (whose
    # heartbeats go through the writer) is left as it was.
    crashed.writer.halt()
    live.run.cancel("the loop is gone")  # (only so that this test's loop ends cleanly)
    with pytest.raises(WriterStoppedError):
        await live.wait()
    assert run_row(db, live.run_id).status == "running"  # as a dead process leaves it

    restarted = RunService(db, Executor(), "r1", heartbeat=0.1, stale_after=0.5)
    assert restarted.recover_interrupted() == 0  # the lease is still fresh: it may be alive
    await asyncio.sleep(0.6)
    assert restarted.recover_interrupted() == 1
    record = restarted.get(live.run_id)
    assert record.status == "interrupted"
    assert record.error is not None
    assert record.error["code"] == "interrupted"
    assert record.inputs == {"n": 7}
    nodes = {n.node: n for n in record.nodes}
    assert nodes["c"].status == "succeeded"
    assert nodes["c"].output == 7
    assert "s" not in nodes  # it was running: no result
    await crashed.close()
