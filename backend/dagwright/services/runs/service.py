"""The run service: start flows, record every run (see the package's crash-safety contract),
read runs back, cancel them on any replica and recover those of dead processes."""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from sqlalchemy import Connection, Engine, bindparam, func, insert, select, update

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.registry import Usage
from dagwright.runtime.executor import Executor, ReusedOutput, Run, resolve_inputs
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.runs.recorder import LiveRun, final_row, record
from dagwright.services.runs.records import (
    RunRecord,
    aware,
    json_ports,
    node_records,
    reusable,
    run_record,
)
from dagwright.services.runs.replicas import (
    ACTIVE_STATUSES,
    HEARTBEAT,
    STALE_AFTER,
    ReplicaLease,
)
from dagwright.services.runs.writer import RUN_NODES, RUNS, RunWriter
from dagwright.store.models import FINAL_STATUSES, new_id, utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window
from dagwright.telemetry.context import RunTracer, TraceParent

log = logging.getLogger(__name__)

CANCEL_POLL_INTERVAL: Final = 0.5  # seconds between looks for cancel requests of other replicas
CANCEL_REASON: Final = "cancelled by request"
HAND_OVER_REASON: Final = "its worker is stopping: another resumes it"
_CANCELLED: Final = {"code": "cancelled", "message": CANCEL_REASON, "node": None}
# The runs a caller waits for as it starts them (debug runs, published calls): refused with 429
# when a pool they need is full (`RunService.admission`), before anything of them is written.
ADMITTED_MODES: Final = frozenset({"debug", "published"})


# -- the service -------------------------------------------------------------------------


class RunService:
    """Runs of one server process. `replica` is the configured replica name (for people); the
    process's lease id, which its runs carry, is `lease_id`. `heartbeat` and `stale_after`
    (seconds) tune the lease: see replicas.py."""

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
        # Checks a new run a request starts (`ADMITTED_MODES`) against the heavy pools before
        # it is recorded: given the names of the services its nodes need, raises
        # (PoolBusyError, 429) when one it needs is full. Background runs (an evaluation's
        # examples, conversations, resumes) were admitted with their work: they wait.
        self.admission: Callable[[set[str]], None] | None = None
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
        """Record the run as running, then start it. Raises PoolBusyError (nothing recorded)
        when `admission` refuses it, InputError (nothing recorded) for
        inputs the flow does not take. Nodes in `reuse` pass on the given outputs unrun. A
        run still going `deadline` seconds after it started fails with `run_timeout`. A traced
        run hangs under `traceparent` (a W3C header's value) when it is valid."""
        if self.admission is not None and mode in ADMITTED_MODES:
            self.admission({service.name for _, needs in plan.needs() for service in needs})
        row = self._new_row(plan, inputs, app_id, version_id, mode, parent_run_id, parent_node)
        run_id = row["id"]
        await self._ready()
        try:
            await asyncio.wrap_future(self.writer.insert_run(row))
        except asyncio.CancelledError:
            # The row may commit although nobody will run it: close it now rather than leave
            # it "running" until the next start-up.
            error = {"code": "cancelled", "message": "cancelled before it started", "node": None}
            self.writer.finish_run(final_row(run_id, "cancelled", None, error, None, 0.0))
            raise
        run = self._start_recorded(plan, inputs, run_id, reuse, deadline)
        if self.tracing is not None:
            self.tracing.follow(
                run,
                TraceParent.parse(traceparent),
                parent_run_id=parent_run_id,
                parent_node=parent_node,
                attributes={"dagwright.app.id": app_id or "", "dagwright.run.mode": mode},
            )
        live = LiveRun(run, row)
        self._follow(live)
        return live

    def _new_row(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any],
        app_id: str | None,
        version_id: str | None,
        mode: str,
        parent_run_id: str | None = None,
        parent_node: str | None = None,
        status: str = "running",
    ) -> dict[str, Any]:
        """A new `runs` row. Raises InputError for inputs the flow does not take: bad inputs
        are no run, refused before anything is written."""
        values = resolve_inputs(plan, inputs)
        nodes = plan.nodes
        now = utcnow()
        return {
            "id": new_id(),
            "app_id": app_id,
            "version_id": version_id,
            "parent_run_id": parent_run_id,
            "parent_node": parent_node,
            "mode": mode,
            "status": status,
            "inputs": json_ports({nodes[i].interface_name or "": v for i, v in values.items()}),
            "outputs": None,
            "error": None,
            "usage": None,
            "replica": self.lease.id,
            "cancel_requested_at": None,
            "created_at": now,
            "started_at": now if status == "running" else None,
            "finished_at": None,
            "duration": None,
        }

    # -- durable runs (queue mode: services/queue) ----------------------------------------

    async def record_queued(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any],
        queue_job: Callable[[Connection, str], int],
        *,
        app_id: str | None,
        version_id: str | None,
        mode: str,
    ) -> str:
        """Record a run as queued, in the transaction in which `queue_job(connection, run id)`
        queues the job that will run it (returning the job's id): the run is queued exactly
        when its job exists. Returns the run id; InputError (nothing recorded) for inputs
        the flow does not take."""
        row = self._new_row(plan, inputs, app_id, version_id, mode, status="queued")

        def enqueue(conn: Connection) -> None:
            job_id = queue_job(conn, row["id"])
            # Values as parameters, not in the statement: compiled once, not per run.
            conn.execute(_INSERT_RUN, {**row, "job_id": job_id})

        await self._ready()
        await asyncio.wrap_future(self.writer.call(enqueue))
        return str(row["id"])

    async def resume(
        self,
        plan: CompiledFlow,
        run_id: str,
        inputs: Mapping[str, Any],
        *,
        job_id: int,
        reuse: Mapping[str, ReusedOutput],
        deadline: float | None = None,
    ) -> LiveRun | None:
        """Take up a queued run, or one whose worker died, in this process: it becomes this
        process's (its lease) and starts, passing on the outputs in `reuse` (recorded by an
        earlier attempt, and not written again). None when the run is no longer queued or
        running (it finished, or was cancelled, meanwhile)."""
        row = await self.claim(run_id, job_id)
        if row is None:
            return None
        return self.start_claimed(plan, row, inputs, reuse=reuse, deadline=deadline)

    async def claim(self, run_id: str, job_id: int) -> dict[str, Any] | None:
        """Make a queued run (or one whose worker died) this process's, "running"; returns
        its row, or None when it is no longer queued or running."""
        taken: list[dict[str, Any]] = []
        params = {"run": run_id, "lease": self.lease.id, "job": job_id, "now": utcnow()}

        def take(conn: Connection) -> None:
            row = conn.execute(_CLAIM, params).mappings().first()
            if row is not None:
                taken.append(dict(row))

        await self._ready()
        await asyncio.wrap_future(self.writer.call(take))
        return taken[0] if taken else None

    def start_claimed(
        self,
        plan: CompiledFlow,
        row: dict[str, Any],
        inputs: Mapping[str, Any],
        *,
        reuse: Mapping[str, ReusedOutput],
        deadline: float | None = None,
    ) -> LiveRun:
        """Start a run claimed by `claim` (its row), passing on the outputs in `reuse`."""
        run = self._start_recorded(plan, inputs, str(row["id"]), reuse, deadline)
        live = LiveRun(run, row, resumed=bool(reuse))
        self._follow(live)
        return live

    async def close_queued(
        self, run_id: str, status: str, code: str, message: str, node: str | None = None
    ) -> None:
        """End a queued (or resumable) run without running it: cancelled before it started,
        or failed because resuming it could repeat a call that must not be repeated."""
        error = {"code": code, "message": message, "node": node}

        def close(conn: Connection) -> None:
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id, RUNS.c.status.in_(ACTIVE_STATUSES))
                .values(status=status, error=error, finished_at=utcnow())
            )

        await self._ready()
        await asyncio.wrap_future(self.writer.call(close))

    async def hand_over(self, live: LiveRun) -> str:
        """Stop a queue run of this process without ending it (its worker is stopping): the
        nodes it cuts short are not recorded, what settled before is, and the run is
        "queued" again for the worker that takes its job back up to resume. Returns the
        run's status after it: "queued", or its final one if it finished first."""
        live.handing_over = True
        if live.run.status is None:
            live.run.cancel(HAND_OVER_REASON)
        return (await live.wait()).status

    async def mark_begun(self, run_id: str, node: str, block: str) -> None:
        """Record that a not-retryable block's node began (status "running"), committed
        before the block is called; its result, when it settles, is written over it."""
        self.writer.put_node(
            {  # every key of run_nodes: the writer upserts a batch with one executemany
                "run_id": run_id,
                "node": node,
                "block": block,
                "status": "running",
                "inputs": None,
                "output": None,
                "branch": None,
                "error": None,
                "started": None,
                "duration": None,
                "usage": None,
            }
        )
        # Queued after the row, so committed with it or after it: once this is, so is the row.
        await asyncio.wrap_future(self.writer.call(_nothing))

    def _follow(self, live: LiveRun) -> None:
        """Record the live run's events from a task of its own."""
        self._live[live.run_id] = live
        recorder = asyncio.get_running_loop().create_task(
            self._record(live), name=f"dagwright-record-{live.run_id}"
        )
        self._recorders.add(recorder)
        recorder.add_done_callback(self._recorders.discard)

    def _start_recorded(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any],
        run_id: str,
        reuse: Mapping[str, ReusedOutput] | None,
        deadline: float | None,
    ) -> Run:
        """Start the run whose row is written; a run that cannot start closes its row as
        failed (`start_failed`) rather than leave it "running"."""
        try:
            return self._executor(deadline).start(plan, inputs, run_id, reuse)
        except Exception as exc:
            message = f"the run could not start: {type(exc).__name__}: {exc}"
            error = {"code": "start_failed", "message": message, "node": None}
            self.writer.finish_run(final_row(run_id, "failed", None, error, None, 0.0))
            raise

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
        try:
            await record(live, self.writer)
        finally:
            self._live.pop(live.run_id, None)

    def reuse_from(
        self, plan: CompiledFlow, run_id: str, from_node: str
    ) -> tuple[dict[str, Any], dict[str, ReusedOutput]]:
        """For a re-run from `from_node`: the earlier run's inputs, and the outputs of its
        nodes that are upstream of `from_node` (not it, nor anything after it) and that
        succeeded there, for the new run to pass on without running them again. Only the
        flow's own nodes: a sub-flow node upstream comes back whole, and one that re-runs
        runs its iterations afresh (nested reuse is for resuming a pause); one whose output
        was stored truncated runs again."""
        try:
            rerun = plan.downstream(from_node)
        except KeyError as exc:
            raise InputError(f"reuse.from_node: {exc.args[0]}") from None
        earlier = self.get(run_id)
        reuse = reusable(earlier.nodes, nested=False)
        return dict(earlier.inputs), {n: out for n, out in reuse.items() if n not in rerun}

    # -- reading ----------------------------------------------------------------------------

    def get(self, run_id: str) -> RunRecord:
        with self.engine.connect() as conn:
            row = conn.execute(select(RUNS).where(RUNS.c.id == run_id)).mappings().first()
            if row is None:
                raise NotFoundError(f"no run {run_id!r}", code="run_not_found")
            node_rows = (
                conn.execute(select(RUN_NODES).where(RUN_NODES.c.run_id == run_id)).mappings().all()
            )
        return run_record(row, node_records(node_rows))

    def children_usage(self, run_id: str) -> builtins.list[Usage]:
        """What the runs `run_id` invoked spent (AutoTQA's Executor counts its tools'), as
        recorded: those that spent nothing are left out."""
        query = select(RUNS.c.usage).where(RUNS.c.parent_run_id == run_id)
        with self.engine.connect() as conn:
            spent = conn.execute(query).scalars().all()
        return [Usage.from_dict(usage) for usage in spent if usage]

    def list(
        self,
        *,
        app_id: str | None = None,
        status: str | None = None,
        mode: str | None = None,
        version_id: str | None = None,
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
    ) -> Page[RunRecord]:
        """Runs, newest first, without their nodes, paged by the store's policy
        (store/paging.py)."""
        at = window(offset, limit)
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
            rows = (
                conn.execute(
                    select(RUNS)
                    .where(*where)
                    .order_by(RUNS.c.created_at.desc(), RUNS.c.id.desc())
                    .offset(at.offset)
                    .limit(at.limit)
                )
                .mappings()
                .all()
            )
        return Page([run_record(row, []) for row in rows], int(total), at.offset, at.limit)

    # -- cancelling -------------------------------------------------------------------------

    async def cancel(self, run_id: str) -> RunRecord:
        """Cancel a run of this replica now; for another replica's run, record the request,
        which that replica acts on within CANCEL_POLL_INTERVAL. A finished run is a
        ConflictError (run_finished). A run paused for a person's answer (`waiting`) is
        cancelled now (services/human.py closes its requests); one that was resumed is a
        ConflictError (run_resumed) naming the run that goes on from it."""
        live = self._live.get(run_id)
        if live is not None:
            if live.run.status is None:
                live.cancel_requested_at = utcnow()
                live.run.cancel(CANCEL_REASON)
            record = await live.wait()
            if record.status == "cancelled":
                return record
            if record.status != "waiting":  # it had finished before the request came
                raise _finished(record)
        record = await asyncio.to_thread(self.get, run_id)
        if record.status in FINAL_STATUSES:
            raise _finished(record)
        if record.status == "resumed":
            raise await asyncio.to_thread(self._resumed, run_id)
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
            # A run still waiting in the queue (services/queue) ends now: no worker has it,
            # and the one that takes its job finds it finished; so does a paused run (nothing
            # of it runs), unless an answer resumed it first.
            conn.execute(
                update(RUNS)
                .where(RUNS.c.id == run_id, RUNS.c.status.in_(("queued", "waiting")))
                .values(status="cancelled", finished_at=requested, error=dict(_CANCELLED))
            )

        await self._ready()
        await asyncio.wrap_future(self.writer.call(request))
        if record.status in ("queued", "waiting"):
            record = await asyncio.to_thread(self.get, run_id)
            if record.status == "resumed":  # an answer came first
                raise await asyncio.to_thread(self._resumed, run_id)
            return record
        record.cancel_requested_at = record.cancel_requested_at or requested
        return record

    def _resumed(self, run_id: str) -> ConflictError:
        """A paused run that was resumed goes on as another run (mode resume, its child)."""
        query = (
            select(RUNS.c.id)
            .where(RUNS.c.parent_run_id == run_id, RUNS.c.mode == "resume")
            .order_by(RUNS.c.created_at.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            child = conn.execute(query).scalar()
        goes_on = f"it goes on as run {child}: cancel that one" if child else "it is starting"
        return ConflictError(f"run {run_id} was resumed: {goes_on}", "run_resumed")

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
                live.cancel_requested_at = aware(requested)
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
        stopped: those whose replica lease is missing or stale (see replicas.py),
        whatever their replica; never the runs of this process. Runs at start-up and every
        `stale_after` seconds; safe while other processes do the same. Returns how many."""
        return self.lease.recover(self.stale_after)


_INSERT_RUN: Final = insert(RUNS)
# A queue run taken by this process (queue mode, PostgreSQL: RETURNING), built once.
_CLAIM: Final = (
    update(RUNS)
    .where(RUNS.c.id == bindparam("run"), RUNS.c.status.in_(ACTIVE_STATUSES))
    .values(
        status="running",
        replica=bindparam("lease"),
        job_id=bindparam("job"),
        started_at=func.coalesce(RUNS.c.started_at, bindparam("now")),
    )
    .returning(*RUNS.c)
)


def _nothing(conn: Connection) -> None:
    """A barrier: its commit says that everything queued before it is written."""


def _finished(record: RunRecord) -> ConflictError:
    return ConflictError(f"run {record.id} has already finished ({record.status})", "run_finished")
