"""The heavy-work pools (dagwright/workpools.py): bounded twice (threads, queue), a call past
the queue refused at once, queued calls dropped and running ones abandoned at close; and where
the work goes: table blocks to the data pool, handlers' `asyncio.to_thread` to the API pool."""

from __future__ import annotations

import ast
import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagwright.composition import Composition
from dagwright.registry import DATA_WORK, TABLES, BlockServices, NodeContext
from dagwright.settings import Settings
from dagwright.workpools import (
    PoolBusyError,
    PoolClosedError,
    PoolSettings,
    PoolSize,
    WorkPool,
    WorkPools,
)

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 30.0  # an upper bound for a condition on a busy machine, never a sleep


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


@pytest.fixture
def pool() -> Iterator[WorkPool]:
    made = WorkPool("data", PoolSize(workers=2, queue_max=1, retry_after=3.0))
    yield made
    made.close()


def test_a_call_past_the_queue_is_refused_at_once_with_retry_after(pool: WorkPool) -> None:
    release = threading.Event()
    held = [pool.submit(release.wait, WAIT_S) for _ in range(3)]  # 2 running, 1 queued
    _until(lambda: pool.pending() == 3, "three calls admitted")
    assert pool.full()
    started = time.perf_counter()
    with pytest.raises(PoolBusyError) as refused:
        pool.submit(time.sleep, 0)
    assert time.perf_counter() - started < 0.5  # refused, not queued behind the held calls
    assert refused.value.code == "pool_busy"
    assert refused.value.retry_after == 3.0
    assert "data pool is full" in refused.value.message
    with pytest.raises(PoolBusyError):
        pool.admit()
    release.set()
    assert [f.result(WAIT_S) for f in held] == [True, True, True]
    _until(lambda: pool.pending() == 0, "the calls to finish")
    assert not pool.full()
    assert pool.submit(lambda: 7).result(WAIT_S) == 7  # room again


def test_runs_at_most_its_workers_at_once(pool: WorkPool) -> None:
    lock = threading.Lock()
    running, most = [0], [0]

    def work() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    for _ in range(4):
        futures = [pool.submit(work) for _ in range(3)]
        for future in futures:
            future.result(WAIT_S)
    assert most[0] == 2


def test_close_drops_the_queued_and_abandons_the_running(pool: WorkPool) -> None:
    release = threading.Event()
    running = [pool.submit(release.wait, WAIT_S) for _ in range(2)]
    _until(lambda: pool._running == 2, "both threads busy")
    queued = pool.submit(lambda: "never")
    started = time.perf_counter()
    pool.close()
    assert time.perf_counter() - started < 0.5  # not waiting for the running calls
    with pytest.raises(PoolClosedError):
        queued.result(WAIT_S)
    with pytest.raises(PoolClosedError):
        pool.submit(lambda: 1)
    # The threads are daemons: the interpreter does not wait for them at exit.
    assert all(t.daemon for t in pool._threads)
    release.set()
    assert [f.result(WAIT_S) for f in running] == [True, True]


def test_an_exception_reaches_the_caller_and_frees_the_slot(pool: WorkPool) -> None:
    def fail() -> None:
        raise ValueError("bad")

    async def main() -> None:
        with pytest.raises(ValueError, match="bad"):
            await pool.run(fail)

    asyncio.run(main())
    _until(lambda: pool.pending() == 0, "the slot to be freed")


def test_a_cancelled_caller_drops_its_queued_call(pool: WorkPool) -> None:
    release = threading.Event()
    ran: list[str] = []
    held = [pool.submit(release.wait, WAIT_S) for _ in range(2)]

    async def main() -> None:
        task = asyncio.ensure_future(pool.run(ran.append, "queued"))
        await asyncio.sleep(0)  # submitted
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    release.set()
    for future in held:
        future.result(WAIT_S)
    _until(lambda: pool.pending() == 0, "the queue to empty")
    assert ran == []


def test_work_under_way_waits_for_room_instead_of_failing(pool: WorkPool) -> None:
    """A running flow's next table call (`run_queued`) waits its turn; a request's is refused."""
    release = threading.Event()
    held = [pool.submit(release.wait, WAIT_S) for _ in range(3)]

    async def main() -> str:
        waiting = asyncio.ensure_future(pool.run_queued(lambda: "ran"))
        await asyncio.sleep(0.05)  # it had the chance to run: it waits instead
        assert not waiting.done()
        with pytest.raises(PoolBusyError):
            await pool.run(lambda: "refused")
        release.set()
        return await asyncio.wait_for(waiting, WAIT_S)

    assert asyncio.run(main()) == "ran"
    for future in held:
        future.result(WAIT_S)


def test_closing_wakes_the_waiting_with_the_pool_closed(pool: WorkPool) -> None:
    release = threading.Event()
    held = [pool.submit(release.wait, WAIT_S) for _ in range(3)]

    async def main() -> None:
        waiting = asyncio.ensure_future(pool.run_queued(lambda: "never"))
        deadline = time.monotonic() + WAIT_S
        while not pool._waiters:  # the call, on this loop, to wait for room
            assert time.monotonic() < deadline
            await asyncio.sleep(0.005)
        pool.close()
        with pytest.raises(PoolClosedError):
            await asyncio.wait_for(waiting, WAIT_S)

    asyncio.run(main())
    release.set()
    for future in held[:2]:
        future.result(WAIT_S)


# -- where the work goes -------------------------------------------------------------------


def _to_thread_calls(folder: Path) -> list[str]:
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for item in ast.walk(tree):
            if (
                isinstance(item, ast.Attribute)
                and item.attr in ("to_thread", "run_in_executor")
                and isinstance(item.value, ast.Name)
                and item.value.id in ("asyncio", "loop")
            ):
                found.append(f"{path.relative_to(ROOT)}:{item.lineno}")
    return found


def test_no_block_puts_its_work_on_the_default_executor() -> None:
    """The default executor answers the API: table work goes to the data pool
    (`ctx.table_work`). The human block's one store write is the exception (a short write)."""
    calls = _to_thread_calls(ROOT / "blocks")
    assert [c for c in calls if not c.startswith("blocks/human.py:")] == []


def test_table_work_goes_to_the_runs_data_pool() -> None:
    pool = WorkPool("data", PoolSize(workers=1, queue_max=0))
    names: list[str] = []
    services = BlockServices({DATA_WORK: pool, TABLES: object()})  # type: ignore[dict-item]
    ctx = NodeContext("run", "node", lambda *_: None, lambda *_: None, services)

    async def main() -> None:
        await ctx.table_work(lambda: names.append(threading.current_thread().name))

    try:
        asyncio.run(main())
    finally:
        pool.close()
    assert names == ["dagwright-data-0"]


def test_the_composition_gives_runs_its_data_pool(tmp_path: Path) -> None:
    process = Composition(Settings(data_dir=tmp_path, data_threads=3, data_queue_max=5))
    try:
        given = process.block_services().get(DATA_WORK)
        assert given is process.pools().data
        assert process.pools().data.capacity == 8
    finally:
        asyncio.run(process.aclose())
    assert process.pools().data.full()  # closed with the process


def test_the_api_pool_becomes_the_loops_default_executor() -> None:
    pools = WorkPools(PoolSettings(PoolSize(1, 0), PoolSize(1, 0), api_threads=2))

    async def main() -> str:
        pools.install_default(asyncio.get_running_loop())
        return await asyncio.to_thread(lambda: threading.current_thread().name)

    try:
        assert asyncio.run(main()).startswith("dagwright-api")
    finally:
        pools.close()


def test_a_served_apps_handlers_wait_on_the_api_pool(tmp_path: Path) -> None:
    """A server's handlers' `asyncio.to_thread` (its store reads) run on the API pool, not on
    asyncio's default threads, which once queued them behind table work."""
    from support.server import live_server

    before = set(threading.enumerate())
    with live_server("sqlite", tmp_path / "server") as server:
        response = server.api.http.get("/api/v1/apps")  # a store read in a thread
        assert response.status_code == 200, response.text
        new = {t.name.rsplit("_", 1)[0] for t in set(threading.enumerate()) - before}
    assert "dagwright-api" in new
    assert "asyncio" not in new
