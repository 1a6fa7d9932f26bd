"""Recording a run: follow its events, queue each node result as it settles, then the final
state, and resolve the run's `wait()` once that final state is committed."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, update

from dagwright.runtime.events import RunFinished
from dagwright.runtime.executor import Run
from dagwright.runtime.pause import is_pause
from dagwright.runtime.trace import NodeTrace, RunTrace
from dagwright.services.runs.records import (
    RunRecord,
    json_ports,
    json_value,
    node_records,
    run_record,
)
from dagwright.services.runs.writer import RUNS, RunWriter
from dagwright.store.models import utcnow

log = logging.getLogger(__name__)


class LiveRun:
    """A run started by this process: `run` streams its events live; `wait()` returns its
    record once the final state is committed. `row` is the `runs` row inserted for it."""

    __slots__ = ("_done", "cancel_requested_at", "handing_over", "resumed", "row", "run", "run_id")

    def __init__(self, run: Run, row: dict[str, Any], *, resumed: bool = False) -> None:
        self.run_id = run.run_id
        self.run = run
        self.row = row
        # A durable run taken up again (services/queue): the results it reuses are recorded
        # already, by the attempt that produced them, and are not written over.
        self.resumed = resumed
        self.cancel_requested_at: datetime | None = None
        # Stopped for another worker to resume (RunService.hand_over): what the stop cuts
        # short is not recorded, and the run goes back to "queued" instead of ending.
        self.handing_over = False
        self._done: asyncio.Future[RunRecord] = asyncio.get_running_loop().create_future()

    @property
    def recorded(self) -> bool:
        """True once the final state is committed (or could not be)."""
        return self._done.done()

    async def wait(self) -> RunRecord:
        # Shielded: a caller that gives up waiting must not cancel the recording.
        return await asyncio.shield(self._done)

    def resolve(self, record: RunRecord) -> None:
        """The final state is committed: `wait()` returns `record`."""
        if not self._done.done():
            self._done.set_result(record)

    def fail(self, error: BaseException) -> None:
        """The recording failed: `wait()` raises `error`."""
        if not self._done.done():
            self._done.set_exception(error)
            self._done.exception()  # marks it retrieved: nobody has to call wait()


def final_row(
    run_id: str,
    status: str,
    outputs: dict[str, Any] | None,
    error: dict[str, Any] | None,
    usage: dict[str, Any] | None,
    duration: float | None,
) -> dict[str, Any]:
    """The final update of a run's row."""
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


async def record(live: LiveRun, writer: RunWriter) -> None:
    """Follow the run's events through the one fold (runtime/trace.py): queue each node's row
    as the node settles, then the final state, and settle `live.wait()` once that is
    committed."""
    run_id = live.run_id
    fold = RunTrace(copy_inputs=json_ports, keep_messages=False)
    rows: list[dict[str, Any]] = []
    blocks: dict[str, str] | None = None
    final: dict[str, Any] | None = None
    try:
        async for event in live.run.stream():
            settled = fold.apply(event)
            if settled is not None:
                if _written(live, settled):
                    if settled.block is None and settled.status == "skipped" and blocks is None:
                        blocks = live.run.plan.blocks()  # never started: its block is in the plan
                    row = node_row(run_id, settled, blocks)
                    rows.append(row)
                    writer.put_node(row)
                fold.forget(settled.node)
            elif isinstance(event, RunFinished):
                final = _final_of(run_id, event, live.handing_over)
        if final is None:  # the stream always ends with RunFinished; this is a safeguard
            raise RuntimeError(f"run {run_id} ended without a run_finished event")
        if final["status"] == "queued":  # handed over
            await asyncio.wrap_future(writer.call(functools.partial(_requeue, run_id)))
        else:
            await asyncio.wrap_future(writer.finish_run(final))
    except asyncio.CancelledError:
        live.fail(RuntimeError(f"the recording of run {run_id} was cancelled"))
        raise
    except Exception as exc:
        log.exception("run %s: recording failed", run_id)
        live.fail(exc)
    else:
        record_row = {**live.row, **final}
        if live.cancel_requested_at is not None:
            record_row["cancel_requested_at"] = live.cancel_requested_at
        live.resolve(run_record(record_row, node_records(rows)))


def _written(live: LiveRun, settled: NodeTrace) -> bool:
    """Whether a settled node's row is written: not a result a resumed run reuses (recorded
    by the attempt that produced it), nor a node cut short by a hand-over (it runs again
    where the run resumes; a not-retryable one keeps its "running" row, which the resume
    refuses)."""
    if settled.status == "reused":
        return not live.resumed
    return not (settled.status == "cancelled" and live.handing_over)


def _requeue(run_id: str, conn: Connection) -> None:
    """A handed-over run waits in the queue again; its job is put back by the worker."""
    conn.execute(
        update(RUNS).where(RUNS.c.id == run_id, RUNS.c.status == "running").values(status="queued")
    )


def node_row(run_id: str, trace: NodeTrace, blocks: Mapping[str, str] | None) -> dict[str, Any]:
    """The `run_nodes` row of a settled node. A recovered node (its error policy gave an
    output) is stored as succeeded: its output is what the run went on with."""
    status = trace.status
    recovered = status == "recovered"
    block = trace.block
    if block is None:
        block = blocks.get(trace.node, "") if blocks is not None and status == "skipped" else ""
    usage = trace.usage.to_dict() if trace.metered else None
    settled = status in ("succeeded", "reused", "recovered")
    # Every key of run_nodes, always: the writer upserts a batch with one executemany.
    return {
        "run_id": run_id,
        "node": trace.node,
        "block": block,
        "status": "succeeded" if recovered else status,
        "inputs": trace.inputs,
        "output": json_value(trace.output) if settled else None,
        "branch": trace.branch if settled else None,
        "error": None if recovered else trace.error,
        "started": trace.started,
        "duration": None if status == "skipped" else trace.duration,
        "usage": usage,
    }


def _final_of(run_id: str, finished: RunFinished, handing_over: bool) -> dict[str, Any]:
    """The run's final row; for a run handed over (cancelled to be resumed elsewhere), only
    its status back to "queued"."""
    if handing_over and finished.status == "cancelled":
        return {"status": "queued"}
    error = finished.error
    # A human_input node paused the run (runtime/pause.py): it is waiting, not failed,
    # until an answer resumes it.
    paused = is_pause(error)
    return final_row(
        run_id,
        "waiting" if paused else finished.status,
        json_ports(finished.outputs),
        None
        if error is None
        else {"code": error.code, "message": error.message, "node": error.node},
        finished.usage.to_dict(),
        finished.duration,
    )
