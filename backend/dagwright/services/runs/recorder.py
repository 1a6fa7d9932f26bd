"""Recording a run: follow its events, queue each node result as it settles, then the final
state, and resolve the run's `wait()` once that final state is committed."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime
from typing import Any, Final

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
from dagwright.runtime.executor import Run
from dagwright.services.runs.records import (
    RunRecord,
    json_ports,
    json_value,
    node_records,
    run_record,
)
from dagwright.services.runs.writer import RunWriter
from dagwright.store.models import utcnow

log = logging.getLogger(__name__)

WAITING_FOR_HUMAN: Final = "waiting_for_human"  # the code of services.human.WaitingForHuman


class LiveRun:
    """A run started by this process: `run` streams its events live; `wait()` returns its
    record once the final state is committed. `row` is the `runs` row inserted for it."""

    __slots__ = ("_done", "cancel_requested_at", "row", "run", "run_id")

    def __init__(self, run: Run, row: dict[str, Any]) -> None:
        self.run_id = run.run_id
        self.run = run
        self.row = row
        self.cancel_requested_at: datetime | None = None
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


def usage_dict(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost": usage.cost,
        "calls": usage.calls,
    }


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
    """Follow the run's events: queue each node result as it settles, then the final state,
    and settle `live.wait()` once that is committed."""
    run_id = live.run_id
    started: dict[str, tuple[str, dict[str, Any], float]] = {}  # node -> block, inputs, t
    usage: dict[str, Usage] = {}
    # The model that answered each node, and whether it was dagwright's scripted one: the
    # stored trace must label scripted answers as the live stream does.
    models: dict[str, dict[str, Any]] = {}
    rows: list[dict[str, Any]] = []
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
                row = _node_row(run_id, event.node, status, started, usage, event.duration)
                row["output"] = json_value(event.output)
                row["branch"] = event.branch
            elif isinstance(event, NodeFailed):
                took = event.duration
                row = _node_row(run_id, event.node, "failed", started, usage, took)
                row["error"] = f"{event.error_type}: {event.message}"
            elif isinstance(event, NodeCancelled):
                begun = started.get(event.node)
                ran = event.t - begun[2] if begun else None
                row = _node_row(run_id, event.node, "cancelled", started, usage, ran)
                row["error"] = event.reason
            elif isinstance(event, NodeSkipped):
                if blocks is None:  # skipped nodes never started: their block is in the plan
                    blocks = live.run.plan.blocks()
                row = _node_row(run_id, event.node, "skipped", started, usage, None)
                row["block"] = blocks.get(event.node, "")
                row["error"] = event.reason
            elif isinstance(event, RunFinished):
                error = event.error
                # A human_input node paused the run (services/human.py): it is waiting,
                # not failed, until an answer resumes it.
                paused = error is not None and error.code == WAITING_FOR_HUMAN
                final = final_row(
                    run_id,
                    "waiting" if paused else event.status,
                    json_ports(event.outputs),
                    None
                    if error is None
                    else {"code": error.code, "message": error.message, "node": error.node},
                    usage_dict(event.usage),
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
        "usage": usage_dict(spent) if spent is not None else None,
    }
