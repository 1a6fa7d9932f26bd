"""Runs: start flows and record every run, so that none is ever lost.

The crash-safety contract, in the order of the writes:

1. the run row is committed as "running" (with its inputs and the process's replica lease)
   before the executor starts, so a run that began always has a row, whatever happens to the
   process later;
2. node results are written as the nodes settle, in group commits shared with every other
   run (see run_writer.py): a crash keeps what finished before it;
3. the final state (status, outputs, error, usage, duration) is committed last, and
   `LiveRun.wait()` resolves only after that commit.

Each process holds a replica lease (services/replicas.py), a fresh id that its runs carry in
`runs.replica` and a heartbeat that says it is alive. A process that dies leaves its runs
"running" and its lease unrefreshed; `recover_interrupted()`, run at start-up and then every
`stale_after` seconds by every process, marks "interrupted" the runs whose lease is missing or
stale, whichever replica they belonged to, and never those of a live process (several
processes may share a replica name: `dagwright serve --workers 2`). Cancelling works across
replicas: any replica sets `cancel_requested_at`, and the process running the run notices
within half a second.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Generic, TypeVar

from pydantic_core import from_json, to_json, to_jsonable_python
from sqlalchemy import Connection, Engine, RowMapping, func, select, update

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.registry import Usage
from dagwright.runtime.events import (
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    RunFinished,
)
from dagwright.runtime.executor import Executor, ReusedOutput, Run, resolve_inputs
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.replicas import (
    ACTIVE_STATUSES,
    HEARTBEAT,
    STALE_AFTER,
    ReplicaLease,
)
from dagwright.services.run_writer import RUN_NODES, RUNS, RunWriter
from dagwright.store.models import FINAL_STATUSES, new_id, utcnow
from dagwright.telemetry.context import RunTracer, TraceParent

log = logging.getLogger(__name__)

MAX_VALUE_BYTES: Final = 256 * 1024  # a stored value whose JSON is larger keeps a preview only
PREVIEW_BYTES: Final = 2 * 1024
MAX_PAGE: Final = 200
CANCEL_POLL_INTERVAL: Final = 0.5  # seconds between looks for cancel requests of other replicas
CANCEL_REASON: Final = "cancelled by request"
WAITING_FOR_HUMAN: Final = "waiting_for_human"  # the code of services.human.WaitingForHuman

T = TypeVar("T")


# -- records -----------------------------------------------------------------------------


@dataclass(slots=True)
class NodeRecord:
    """One node's result in a run (a `run_nodes` row)."""

    node: str
    block: str
    status: str  # succeeded | reused | skipped | failed | cancelled
    inputs: dict[str, Any] | None = None
    output: Any = None
    branch: str | None = None
    error: str | None = None  # "ValueError: message" when failed; the reason when skipped
    started: float | None = None  # seconds since the run started
    duration: float | None = None
    usage: dict[str, Any] | None = None  # {prompt_tokens, completion_tokens, cost, calls}


@dataclass(slots=True)
class RunRecord:
    """A run as stored: the `runs` row and, from `get`, its node results in start order."""

    id: str
    app_id: str | None
    version_id: str | None
    parent_run_id: str | None
    parent_node: str | None
    mode: str
    status: str
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None  # {code, message, node}
    usage: dict[str, Any] | None
    replica: str
    cancel_requested_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration: float | None
    nodes: list[NodeRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (datetimes as ISO 8601 strings)."""
        data: dict[str, Any] = to_jsonable_python(self)
        return data


@dataclass(slots=True)
class Page(Generic[T]):
    items: builtins.list[T]
    total: int  # every match, not only this page
    offset: int
    limit: int


_RUN_COLUMNS: Final = tuple(c.name for c in RUNS.c)
_NODE_COLUMNS: Final = tuple(c.name for c in RUN_NODES.c if c.name != "run_id")


def _aware(value: datetime | None) -> datetime | None:
    # SQLite (and PostgreSQL's `timestamp`) give naive datetimes; everything is written in UTC.
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def _run_record(row: Mapping[Any, Any], nodes: builtins.list[NodeRecord]) -> RunRecord:
    return RunRecord(
        id=row["id"],
        app_id=row["app_id"],
        version_id=row["version_id"],
        parent_run_id=row["parent_run_id"],
        parent_node=row["parent_node"],
        mode=row["mode"],
        status=row["status"],
        inputs=row["inputs"] or {},
        outputs=row["outputs"],
        error=row["error"],
        usage=row["usage"],
        replica=row["replica"],
        cancel_requested_at=_aware(row["cancel_requested_at"]),
        created_at=_aware(row["created_at"]) or utcnow(),
        started_at=_aware(row["started_at"]),
        finished_at=_aware(row["finished_at"]),
        duration=row["duration"],
        nodes=nodes,
    )


def _node_records(rows: Sequence[Mapping[Any, Any]]) -> builtins.list[NodeRecord]:
    """In the order the nodes started; skipped nodes (never started) after them, by id."""
    records = [NodeRecord(**{name: row[name] for name in _NODE_COLUMNS}) for row in rows]
    records.sort(key=lambda r: (r.started is None, r.started or 0.0, r.node))
    return records


# -- values ------------------------------------------------------------------------------


def json_value(value: Any) -> Any:
    """`value` made JSON-safe for storage; a value whose JSON exceeds MAX_VALUE_BYTES becomes
    {"truncated": true, "size": <bytes>, "preview": <its first PREVIEW_BYTES of JSON>}."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is str and len(value) * 6 + 2 <= MAX_VALUE_BYTES:  # 6: the longest escape, \uXXXX
        return value
    try:
        # The same serializer as to_jsonable_python(value, fallback=repr), through JSON text:
        # that measures the size for free, and NaN/inf become strings (JSON has no such
        # numbers; PostgreSQL refuses them).
        text = to_json(value, fallback=repr, inf_nan_mode="strings")
    except Exception:  # e.g. bytes that are not UTF-8: the repr still says what it was
        text = to_json(repr(value))
    if len(text) > MAX_VALUE_BYTES:
        preview = text[:PREVIEW_BYTES].decode("utf-8", "ignore")  # "ignore": a cut character
        return {"truncated": True, "size": len(text), "preview": preview}
    return from_json(text)


def json_ports(values: Mapping[str, Any]) -> dict[str, Any]:
    """Port name -> value, each value made safe (and capped) on its own."""
    return {name: json_value(value) for name, value in values.items()}


def _usage_dict(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost": usage.cost,
        "calls": usage.calls,
    }


def _final_row(
    run_id: str,
    status: str,
    outputs: dict[str, Any] | None,
    error: dict[str, Any] | None,
    usage: dict[str, Any] | None,
    duration: float | None,
) -> dict[str, Any]:
    # Always the same keys: the writer updates every final row of a batch in one executemany.
    return {
        "run_id_": run_id,
        "status": status,
        "outputs": outputs,
        "error": error,
        "usage": usage,
        "finished_at": utcnow(),
        "duration": duration,
    }


# -- live runs ---------------------------------------------------------------------------


class LiveRun:
    """A run started by this process: `run` streams its events live; `wait()` returns its
    record once the final state is committed."""

    __slots__ = ("_done", "_row", "cancel_requested_at", "run", "run_id")

    def __init__(self, run: Run, row: dict[str, Any]) -> None:
        self.run_id = run.run_id
        self.run = run
        self.cancel_requested_at: datetime | None = None
        self._row = row
        self._done: asyncio.Future[RunRecord] = asyncio.get_running_loop().create_future()

    @property
    def recorded(self) -> bool:
        """True once the final state is committed (or could not be)."""
        return self._done.done()

    async def wait(self) -> RunRecord:
        # Shielded: a caller that gives up waiting must not cancel the recording.
        return await asyncio.shield(self._done)

    def _settle(self, record: RunRecord | None, error: BaseException | None = None) -> None:
        if self._done.done():
            return
        if error is not None:
            self._done.set_exception(error)
            self._done.exception()  # marks it retrieved: nobody has to call wait()
        elif record is not None:
            self._done.set_result(record)


# -- the service -------------------------------------------------------------------------


class RunService:
    """Runs of one server process. `replica` is the configured replica name (for people); the
    process's lease id, which its runs carry, is `lease_id`. `heartbeat` and `stale_after`
    (seconds) tune the lease: see services/replicas.py."""

    def __init__(
        self,
        engine: Engine,
        executor: Executor,
        replica: str,
        *,
        flush_interval: float = 0.02,
        max_batch: int = 500,
        heartbeat: float = HEARTBEAT,
        stale_after: float = STALE_AFTER,
    ) -> None:
        if stale_after <= heartbeat:
            raise ValueError("stale_after must be longer than the heartbeat interval")
        self.engine = engine
        self.executor = executor
        self.replica = replica
        self.stale_after = stale_after
        self.lease = ReplicaLease(engine, replica, heartbeat=heartbeat)
        self.writer = RunWriter(engine, flush_interval=flush_interval, max_batch=max_batch)
        self._live: dict[str, LiveRun] = {}
        self._recorders: set[asyncio.Task[None]] = set()
        self._poller: asyncio.Task[None] | None = None
        self._open_lock = threading.Lock()
        self._opened = False
        self._bounded: dict[float, Executor] = {}  # deadline -> an executor that keeps it
        # Exports each run's trace (telemetry/tracing.py) when a collector is configured.
        self.tracing: RunTracer | None = None

    @property
    def lease_id(self) -> str:
        """This process's replica lease: the `replica` of the runs it records."""
        return self.lease.id

    # -- life cycle -------------------------------------------------------------------------

    def start_writer(self) -> None:
        """Start the writer thread, take this process's lease and keep it fresh; inside an
        event loop, also start the poller (cancel requests from other replicas, and the
        periodic recovery of the runs of dead processes)."""
        self._open()
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # the first start() starts the poller
        self._ensure_poller()

    def stop_writer(self) -> None:
        """Flush what is queued, stop the writer thread (and the poller) and release the
        lease."""
        poller, self._poller = self._poller, None
        if poller is not None and not poller.done():
            # From any thread; a closed loop (RuntimeError) took the task with it.
            with contextlib.suppress(RuntimeError):
                poller.get_loop().call_soon_threadsafe(poller.cancel)
        self._shut()

    async def close(self, grace: float = 5.0) -> None:
        """Shut down gracefully: cancel the runs still going and record them as cancelled,
        then flush and stop the writer, and release the lease."""
        for live in builtins.list(self._live.values()):
            live.run.cancel("the server is shutting down")
        if self._recorders:
            await asyncio.wait(builtins.list(self._recorders), timeout=grace)
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
        await asyncio.to_thread(self._shut)

    def _open(self) -> None:
        """Writer, lease and heartbeat: the lease is committed before any run is written."""
        with self._open_lock:
            if self._opened:
                return
            self.writer.start()
            self.lease.acquire()
            # Through the writer: the lease stays fresh exactly as long as runs get recorded.
            self.lease.start_heartbeat(self.writer.call)
            self._opened = True

    def _shut(self) -> None:
        with self._open_lock:
            self._opened = False
            self.lease.stop_heartbeat()
            self.writer.stop()  # what is queued (final states, a last heartbeat) is written
            try:
                # After the runs are recorded. A run still unrecorded now (its recording
                # outlived the grace period) has no live lease: survivors mark it interrupted.
                self.lease.release()
            except Exception:  # it goes stale instead
                log.warning("releasing replica lease %s failed", self.lease.id, exc_info=True)

    async def _ready(self) -> None:
        if not self._opened:
            await asyncio.to_thread(self._open)
        self._ensure_poller()

    @property
    def live_runs(self) -> dict[str, LiveRun]:
        """Runs of this process whose final state is not yet committed."""
        return dict(self._live)

    # -- starting runs ----------------------------------------------------------------------

    async def start(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any],
        *,
        app_id: str | None,
        version_id: str | None,
        mode: str = "debug",
        parent_run_id: str | None = None,
        parent_node: str | None = None,
        reuse: Mapping[str, ReusedOutput] | None = None,
        deadline: float | None = None,
        traceparent: str | None = None,
    ) -> LiveRun:
        """Record the run as running, then start it. Raises InputError (nothing recorded) for
        inputs the flow does not take. Nodes in `reuse` pass on the given outputs unrun. A
        run still going `deadline` seconds after it started fails with `run_timeout`. A traced
        run hangs under `traceparent` (a W3C header's value) when it is valid."""
        values = resolve_inputs(plan, inputs)  # bad inputs are no run: refuse before writing
        nodes = plan.nodes
        now = utcnow()
        run_id = new_id()
        row: dict[str, Any] = {
            "id": run_id,
            "app_id": app_id,
            "version_id": version_id,
            "parent_run_id": parent_run_id,
            "parent_node": parent_node,
            "mode": mode,
            "status": "running",
            "inputs": json_ports({nodes[i].interface_name or "": v for i, v in values.items()}),
            "outputs": None,
            "error": None,
            "usage": None,
            "replica": self.lease.id,
            "cancel_requested_at": None,
            "created_at": now,
            "started_at": now,
            "finished_at": None,
            "duration": None,
        }
        await self._ready()
        try:
            await asyncio.wrap_future(self.writer.insert_run(row))
        except asyncio.CancelledError:
            # The row may commit although nobody will run it: close it now rather than leave
            # it "running" until the next start-up.
            error = {"code": "cancelled", "message": "cancelled before it started", "node": None}
            self.writer.finish_run(_final_row(run_id, "cancelled", None, error, None, 0.0))
            raise
        try:
            run = self._executor(deadline).start(plan, inputs, run_id, reuse)
        except Exception as exc:
            message = f"the run could not start: {type(exc).__name__}: {exc}"
            error = {"code": "start_failed", "message": message, "node": None}
            self.writer.finish_run(_final_row(run_id, "failed", None, error, None, 0.0))
            raise
        if self.tracing is not None:
            self.tracing.follow(
                run,
                TraceParent.parse(traceparent),
                parent_run_id=parent_run_id,
                parent_node=parent_node,
                attributes={"dagwright.app.id": app_id or "", "dagwright.run.mode": mode},
            )
        live = LiveRun(run, row)
        self._live[run_id] = live
        recorder = asyncio.get_running_loop().create_task(
            self._record(live), name=f"dagwright-record-{run_id}"
        )
        self._recorders.add(recorder)
        recorder.add_done_callback(self._recorders.discard)
        return live

    def _executor(self, deadline: float | None) -> Executor:
        """The executor, or one like it whose runs end at `deadline` (the runtime's own run
        timeout: the run fails with `run_timeout` and its running nodes are cancelled)."""
        if deadline is None:
            return self.executor
        bounded = self._bounded.get(deadline)
        if bounded is None:
            if len(self._bounded) >= 64:  # deadlines are few (per app): a bound all the same
                self._bounded.clear()
            options = dataclasses.replace(self.executor.options, run_timeout=deadline)
            bounded = self._bounded[deadline] = Executor(options)
        return bounded

    async def _record(self, live: LiveRun) -> None:
        """Follow the run's events: queue each node result as it settles, then the final
        state, and settle `wait()` once that is committed."""
        run_id = live.run_id
        writer = self.writer
        started: dict[str, tuple[str, dict[str, Any], float]] = {}  # node -> block, inputs, t
        usage: dict[str, Usage] = {}
        # The model that answered each node, and whether it was dagwright's scripted one: the
        # stored trace must label scripted answers as the live stream does.
        models: dict[str, dict[str, Any]] = {}
        rows: builtins.list[dict[str, Any]] = []
        blocks: dict[str, str] | None = None
        final: dict[str, Any] | None = None
        try:
            async for event in live.run.stream():
                row: dict[str, Any] | None = None
                if isinstance(event, NodeMessage):
                    if event.kind == "usage":
                        data = event.data
                        usage.setdefault(event.node, Usage()).add(
                            Usage(
                                data.get("prompt_tokens", 0),
                                data.get("completion_tokens", 0),
                                data.get("cost", 0.0),
                                data.get("calls", 0),
                            )
                        )
                        answered = models.setdefault(event.node, {"scripted": False})
                        answered["model"] = data.get("model")
                        answered["scripted"] = answered["scripted"] or bool(data.get("scripted"))
                    continue
                if isinstance(event, NodeStarted):
                    # Inputs are copied now: a block may change a dict it was given.
                    started[event.node] = (event.block, json_ports(event.inputs), event.t)
                    continue
                if isinstance(event, NodeFinished):
                    status = "reused" if event.reused else "succeeded"
                    row = self._node_row(run_id, event.node, status, started, usage, event.duration)
                    row["output"] = json_value(event.output)
                    row["branch"] = event.branch
                elif isinstance(event, NodeFailed):
                    took = event.duration
                    row = self._node_row(run_id, event.node, "failed", started, usage, took)
                    row["error"] = f"{event.error_type}: {event.message}"
                elif isinstance(event, NodeCancelled):
                    begun = started.get(event.node)
                    ran = event.t - begun[2] if begun else None
                    row = self._node_row(run_id, event.node, "cancelled", started, usage, ran)
                    row["error"] = event.reason
                elif isinstance(event, NodeSkipped):
                    if blocks is None:  # skipped nodes never started: their block is in the plan
                        blocks = live.run.plan.blocks()
                    row = self._node_row(run_id, event.node, "skipped", started, usage, None)
                    row["block"] = blocks.get(event.node, "")
                    row["error"] = event.reason
                elif isinstance(event, RunFinished):
                    error = event.error
                    # A human_input node paused the run (services/human.py): it is waiting,
                    # not failed, until an answer resumes it.
                    paused = error is not None and error.code == WAITING_FOR_HUMAN
                    final = _final_row(
                        run_id,
                        "waiting" if paused else event.status,
                        json_ports(event.outputs),
                        None
                        if error is None
                        else {"code": error.code, "message": error.message, "node": error.node},
                        _usage_dict(event.usage),
                        event.duration,
                    )
                if row is not None:
                    if row["usage"] is not None and row["node"] in models:
                        row["usage"] = {**row["usage"], **models[row["node"]]}
                    rows.append(row)
                    writer.put_node(row)
            if final is None:  # the stream always ends with RunFinished; this is a safeguard
                raise RuntimeError(f"run {run_id} ended without a run_finished event")
            await asyncio.wrap_future(writer.finish_run(final))
        except asyncio.CancelledError:
            live._settle(None, RuntimeError(f"the recording of run {run_id} was cancelled"))
            raise
        except Exception as exc:
            log.exception("run %s: recording failed", run_id)
            live._settle(None, exc)
        else:
            record_row = {**live._row, **final}
            if live.cancel_requested_at is not None:
                record_row["cancel_requested_at"] = live.cancel_requested_at
            nodes = _node_records(rows)
            live._settle(_run_record(record_row, nodes))
        finally:
            self._live.pop(run_id, None)

    @staticmethod
    def _node_row(
        run_id: str,
        node: str,
        status: str,
        started: dict[str, tuple[str, dict[str, Any], float]],
        usage: dict[str, Usage],
        duration: float | None,
    ) -> dict[str, Any]:
        # Every key of run_nodes, always: the writer upserts a batch with one executemany.
        begun = started.get(node)
        spent = usage.get(node)
        return {
            "run_id": run_id,
            "node": node,
            "block": begun[0] if begun else "",
            "status": status,
            "inputs": begun[1] if begun else None,
            "output": None,
            "branch": None,
            "error": None,
            "started": begun[2] if begun else None,
            "duration": duration,
            "usage": _usage_dict(spent) if spent is not None else None,
        }

    def reuse_from(
        self, plan: CompiledFlow, run_id: str, from_node: str
    ) -> tuple[dict[str, Any], dict[str, ReusedOutput]]:
        """For a re-run from `from_node`: the earlier run's inputs, and the outputs of its
        nodes that are upstream of `from_node` (not it, nor anything after it) and that
        succeeded there, for the new run to pass on without running them again."""
        try:
            rerun = plan.downstream(from_node)
        except KeyError as exc:
            raise InputError(f"reuse.from_node: {exc.args[0]}") from None
        earlier = self.get(run_id)
        reuse = {
            node.node: ReusedOutput(node.output, node.branch)
            for node in earlier.nodes
            if node.status in ("succeeded", "reused") and node.node not in rerun
        }
        return dict(earlier.inputs), reuse

    # -- reading ----------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord:
        with self.engine.connect() as conn:
            row = conn.execute(select(RUNS).where(RUNS.c.id == run_id)).mappings().first()
            if row is None:
                raise NotFoundError(f"no run {run_id!r}", code="run_not_found")
            node_rows = (
                conn.execute(select(RUN_NODES).where(RUN_NODES.c.run_id == run_id)).mappings().all()
            )
        return _run_record(row, _node_records(node_rows))

    def list(
        self,
        *,
        app_id: str | None = None,
        status: str | None = None,
        mode: str | None = None,
        version_id: str | None = None,
        offset: int = 0,
        limit: int = 50,
    ) -> Page[RunRecord]:
        """Runs, newest first, without their nodes; `limit` is capped at MAX_PAGE."""
        offset = max(offset, 0)
        limit = min(max(limit, 0), MAX_PAGE)
        where = [
            column == value
            for column, value in (
                (RUNS.c.app_id, app_id),
                (RUNS.c.status, status),
                (RUNS.c.mode, mode),
                (RUNS.c.version_id, version_id),
            )
            if value is not None
        ]
        with self.engine.connect() as conn:
            total = conn.execute(select(func.count()).select_from(RUNS).where(*where)).scalar_one()
            rows: Sequence[RowMapping] = []
            if limit:
                rows = (
                    conn.execute(
                        select(RUNS)
                        .where(*where)
                        .order_by(RUNS.c.created_at.desc(), RUNS.c.id.desc())
                        .offset(offset)
                        .limit(limit)
                    )
                    .mappings()
                    .all()
                )
        return Page([_run_record(row, []) for row in rows], int(total), offset, limit)

    # -- cancelling -------------------------------------------------------------------------

    async def cancel(self, run_id: str) -> RunRecord:
        """Cancel a run of this replica now; for another replica's run, record the request,
        which that replica acts on within CANCEL_POLL_INTERVAL. A finished run is a
        ConflictError (run_finished)."""
        live = self._live.get(run_id)
        if live is not None:
            if live.run.status is None:
                live.cancel_requested_at = utcnow()
                live.run.cancel(CANCEL_REASON)
            record = await live.wait()
            if record.status != "cancelled":  # it had finished before the request came
                raise _finished(record)
            return record
        record = await asyncio.to_thread(self.get, run_id)
        if record.status in FINAL_STATUSES:
            raise _finished(record)
        requested = utcnow()

        def request(conn: Connection) -> None:
            conn.execute(
                update(RUNS)
                .where(
                    RUNS.c.id == run_id,
                    RUNS.c.status.in_(ACTIVE_STATUSES),
                    RUNS.c.cancel_requested_at.is_(None),
                )
                .values(cancel_requested_at=requested)
            )

        await self._ready()
        await asyncio.wrap_future(self.writer.call(request))
        record.cancel_requested_at = record.cancel_requested_at or requested
        return record

    def _ensure_poller(self) -> None:
        loop = asyncio.get_running_loop()
        poller = self._poller
        if poller is None or poller.done() or poller.get_loop() is not loop:
            self._poller = loop.create_task(self._poll(), name="dagwright-run-poller")

    async def _poll(self) -> None:
        """Every CANCEL_POLL_INTERVAL: cancel requests for the runs of this process; every
        `stale_after` seconds: recover the runs of dead processes."""
        loop = asyncio.get_running_loop()
        next_recovery = loop.time() + self.stale_after
        while True:
            await asyncio.sleep(min(CANCEL_POLL_INTERVAL, self.stale_after))
            if self._live:  # nothing of ours is running: no query
                await self._act_on_cancel_requests()
            if loop.time() >= next_recovery:
                next_recovery = loop.time() + self.stale_after
                try:
                    await asyncio.to_thread(self.recover_interrupted)
                except Exception:  # the database may be briefly unreachable: next time
                    log.warning("recovering interrupted runs failed", exc_info=True)

    async def _act_on_cancel_requests(self) -> None:
        try:
            requests = await asyncio.to_thread(self._cancel_requests)
        except Exception:  # the database may be briefly unreachable: try next time
            log.warning("looking for cancel requests failed", exc_info=True)
            return
        for run_id, requested in requests:
            live = self._live.get(run_id)
            if live is not None and live.run.status is None:
                live.cancel_requested_at = _aware(requested)
                live.run.cancel(CANCEL_REASON)

    def _cancel_requests(self) -> builtins.list[tuple[str, datetime]]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(RUNS.c.id, RUNS.c.cancel_requested_at).where(
                    RUNS.c.replica == self.lease.id,
                    RUNS.c.status == "running",
                    RUNS.c.cancel_requested_at.is_not(None),
                )
            ).all()
        return [(row[0], row[1]) for row in rows]

    # -- recovery ---------------------------------------------------------------------------

    def recover_interrupted(self) -> int:
        """Mark "interrupted" the runs left queued or running by server processes that
        stopped: those whose replica lease is missing or stale (see services/replicas.py),
        whatever their replica; never the runs of this process. Runs at start-up and every
        `stale_after` seconds; safe while other processes do the same. Returns how many."""
        return self.lease.recover(self.stale_after)


def _finished(record: RunRecord) -> ConflictError:
    return ConflictError(f"run {record.id} has already finished ({record.status})", "run_finished")


__all__ = [
    "LiveRun",
    "NodeRecord",
    "Page",
    "RunRecord",
    "RunService",
    "json_ports",
    "json_value",
]
