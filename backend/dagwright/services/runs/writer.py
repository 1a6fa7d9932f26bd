"""The run writer: one background thread that owns the write path of runs and node results.

Runs are recorded at the rate the executor finishes them (the published endpoint aims at
1,000 runs/s on SQLite), so a transaction per write would cost more than the runs themselves.
Writers put operations on a thread-safe queue; the thread groups everything that arrived
within `flush_interval` (at most `max_batch` operations) into one transaction on one reused
connection: a group commit. An operation may carry a `concurrent.futures.Future`, resolved
once its transaction has committed; asyncio callers `await asyncio.wrap_future(future)`.

Within a batch, run inserts go first, node results next, final run updates after them, and
other statements last. Causality makes that order safe: a run's insert is queued before its
node results, and those before its final update, so nothing is ever written before the row
it belongs to (PostgreSQL checks the node -> run foreign key per statement).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from typing import Any, Final

from sqlalchemy import Connection, Engine, Table, bindparam, delete, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import Delete, Insert

from dagwright.store.models import Run, RunNode

log = logging.getLogger(__name__)

RUNS: Final[Table] = Run.metadata.tables["runs"]
RUN_NODES: Final[Table] = RunNode.metadata.tables["run_nodes"]

# Operation kinds, in the order a batch applies them (see the module docstring).
_INSERT_RUN: Final = 0
_NODE: Final = 1
_FINISH_RUN: Final = 2
_CALL: Final = 3
_STOP: Final = 4

Row = Mapping[str, Any]
Call = Callable[[Connection], object]


class WriterStoppedError(RuntimeError):
    """An operation was handed to a writer that is stopped (or was halted)."""


class _Op:
    __slots__ = ("future", "kind", "payload")

    def __init__(self, kind: int, payload: Any, future: Future[None] | None) -> None:
        self.kind = kind
        self.payload = payload
        self.future = future

    def describe(self) -> str:
        if self.kind == _CALL:
            return f"call {getattr(self.payload, '__name__', repr(self.payload))}"
        payload: Row = self.payload
        run_id = payload.get("id", payload.get("run_id_", payload.get("run_id")))
        what = {_INSERT_RUN: "insert of run", _NODE: "node result of run"}.get(
            self.kind, "final update of run"
        )
        node = f" node {payload['node']!r}" if self.kind == _NODE else ""
        return f"{what} {run_id}{node}"


class RunWriter:
    """The group-commit writer thread. `start()` it, feed it, `stop()` it (which flushes)."""

    def __init__(self, engine: Engine, *, flush_interval: float = 0.02, max_batch: int = 500):
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self.engine = engine
        self.flush_interval = flush_interval
        self.max_batch = max_batch
        self.batches = 0  # transactions committed, for tests and benchmarks
        self.operations = 0  # operations committed
        self._queue: queue.SimpleQueue[_Op] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._conn: Connection | None = None
        self._accepting = False
        self._halted = False
        self._lock = threading.Lock()  # start/stop/halt against each other
        self._upsert_node = _node_upsert(engine.dialect.name)
        # The final update names its columns by the keys of the rows given to executemany.
        self._finish = update(RUNS).where(RUNS.c.id == bindparam("run_id_"))

    # -- life cycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._accepting

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            if self._halted:
                raise WriterStoppedError("the run writer was halted")
            self._accepting = True
            self._thread = threading.Thread(
                target=self._main, name="dagwright-run-writer", daemon=True
            )
            self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Write everything queued so far, then end the thread."""
        with self._lock:
            thread = self._thread
            if thread is None:
                return
            self._accepting = False
            self._queue.put(_Op(_STOP, None, None))
        thread.join(timeout)
        if thread.is_alive():  # stuck on the database: it keeps what it holds and goes on
            log.warning("run writer: still writing after %ss; left running", timeout)
            return
        with self._lock:
            self._thread = None
        self._drain_rejected()  # anything queued after the thread's last look is refused

    def halt(self) -> None:
        """Stop at once and drop whatever is queued, as a crash would. For tests of recovery."""
        with self._lock:
            self._halted = True
            self._accepting = False
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(_Op(_STOP, None, None))
        if thread is not None:
            thread.join(10.0)
        self._drain_rejected()

    # -- operations -------------------------------------------------------------------------

    def insert_run(self, row: Row) -> Future[None]:
        """Insert a run row (every column of `runs`)."""
        return self._submit(_INSERT_RUN, row, Future())

    def put_node(self, row: Row) -> None:
        """Upsert a node result by (run_id, node); nobody waits for it."""
        self._submit(_NODE, row, None)

    def finish_run(self, row: Row) -> Future[None]:
        """Update a run: `run_id_` names it, every other key is a column to set. Every row given
        must have the same keys (they are written with one executemany)."""
        return self._submit(_FINISH_RUN, row, Future())

    def call(self, fn: Call) -> Future[None]:
        """Run `fn(connection)` in a batch's transaction (after its inserts and updates)."""
        return self._submit(_CALL, fn, Future())

    def _submit(self, kind: int, payload: Any, future: Future[None] | None) -> Future[None]:
        op = _Op(kind, payload, future)
        if not self._accepting:
            self._reject(op)
        else:
            self._queue.put(op)
            if not self._accepting:  # stopped meanwhile: the thread may never see it
                self._drain_rejected()
        return future if future is not None else _DONE

    def _reject(self, op: _Op) -> None:
        if op.kind == _STOP:
            return
        error = WriterStoppedError("the run writer is stopped: " + op.describe())
        if op.future is not None:
            op.future.set_exception(error)
        else:
            log.error("%s", error)

    def _drain_rejected(self) -> None:
        if self._thread is not None and not self._halted:
            return  # a running thread writes them (stop() flushes)
        while True:
            try:
                op = self._queue.get_nowait()
            except queue.Empty:
                return
            self._reject(op)

    # -- the thread -------------------------------------------------------------------------

    def _main(self) -> None:
        backlog = False
        try:
            while True:
                first = self._queue.get()
                # Wait out the window so that everything arriving in it shares one commit; a
                # backlog (the last batch was full) is written at once.
                if first.kind != _STOP and not backlog and self.flush_interval > 0:
                    time.sleep(self.flush_interval)
                batch = [first]
                while len(batch) < self.max_batch:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                backlog = len(batch) >= self.max_batch
                stop = next((i for i, op in enumerate(batch) if op.kind == _STOP), None)
                if self._halted:
                    for op in batch:
                        self._reject(op)
                    return
                if stop is not None:
                    rest = batch[stop + 1 :]
                    if stop:
                        self._commit(batch[:stop])
                    for op in rest:  # queued after stop() began: refused, never lost silently
                        self._reject(op)
                    return
                try:
                    self._commit(batch)
                except Exception as exc:  # a bug here must not end the thread: fail the batch
                    log.exception("run writer: unexpected error")
                    self._resolve(batch, exc)
        finally:
            self._close_connection()

    def _connection(self) -> Connection:
        if self._conn is None:
            self._conn = self.engine.connect()
        return self._conn

    def _close_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a broken connection cannot be closed cleanly; it is dropped
                log.debug("closing the run writer's connection failed", exc_info=True)

    def _commit(self, batch: list[_Op]) -> None:
        error: Exception | None = None
        for attempt in (1, 2):  # a second try survives a dropped connection or a lock
            try:
                self._write(batch)
            except Exception as exc:
                error = exc
                log.warning(
                    "run writer: batch of %d failed (attempt %d): %s", len(batch), attempt, exc
                )
                self._close_connection()
                continue
            self._resolve(batch, None)
            return
        assert error is not None
        lost = isinstance(error, DBAPIError) and error.connection_invalidated
        if len(batch) == 1 or lost:
            self._fail(batch, error)
            return
        # The database answers but rejects something: write each operation alone, so one bad
        # value fails only its own operation and the rest of the batch is kept.
        for op in batch:
            try:
                self._write([op])
            except Exception as exc:
                self._close_connection()
                self._fail([op], exc)
            else:
                self._resolve([op], None)

    def _fail(self, ops: list[_Op], error: Exception) -> None:
        for op in ops:
            log.error("run writer: %s not written: %s", op.describe(), error)
        self._resolve(ops, error)

    def _resolve(self, ops: list[_Op], error: Exception | None) -> None:
        if error is None:
            self.batches += 1
            self.operations += len(ops)
        for op in ops:
            future = op.future
            if future is None:
                continue
            try:
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)
            except InvalidStateError:  # its waiter was cancelled (asyncio cancels the future)
                pass

    def _write(self, batch: list[_Op]) -> None:
        inserts: list[Row] = []
        nodes: dict[tuple[str, str], Row] = {}  # last write per node wins: one row per key
        finishes: list[Row] = []
        calls: list[Call] = []
        for op in batch:
            kind = op.kind
            if kind == _NODE:
                nodes[op.payload["run_id"], op.payload["node"]] = op.payload
            elif kind == _INSERT_RUN:
                inserts.append(op.payload)
            elif kind == _FINISH_RUN:
                finishes.append(op.payload)
            else:
                calls.append(op.payload)
        conn = self._connection()
        with conn.begin():
            if inserts:
                conn.execute(insert(RUNS), inserts)
            if nodes:
                rows = list(nodes.values())
                if isinstance(self._upsert_node, Delete):
                    conn.execute(self._upsert_node, rows)
                    conn.execute(insert(RUN_NODES), rows)
                else:
                    conn.execute(self._upsert_node, rows)
            for group in _same_keys(finishes):
                conn.execute(self._finish, group)
            for call in calls:
                call(conn)


def _same_keys(rows: list[Row]) -> list[list[Row]]:
    """executemany needs every row to set the same columns; group the rows that do."""
    groups: dict[tuple[str, ...], list[Row]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    return list(groups.values())


def _node_upsert(dialect: str) -> Insert | Delete:
    """An upsert of node results by (run_id, node). For a database without ON CONFLICT, a
    delete by key that the writer follows with an insert in the same transaction."""
    key = [RUN_NODES.c.run_id, RUN_NODES.c.node]
    others = [c.name for c in RUN_NODES.c if c.name not in ("run_id", "node")]
    if dialect in ("postgresql", "sqlite"):
        if dialect == "postgresql":
            pg = postgresql.insert(RUN_NODES)
            return pg.on_conflict_do_update(
                index_elements=key, set_={name: pg.excluded[name] for name in others}
            )
        lite = sqlite.insert(RUN_NODES)
        return lite.on_conflict_do_update(
            index_elements=key, set_={name: lite.excluded[name] for name in others}
        )
    return delete(RUN_NODES).where(
        RUN_NODES.c.run_id == bindparam("run_id"), RUN_NODES.c.node == bindparam("node")
    )


_DONE: Final[Future[None]] = Future()
_DONE.set_result(None)
