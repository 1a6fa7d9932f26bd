"""Putting runs on the queue (the API side of queue mode): limits first, then the run and its
job in one transaction."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import Any, Final

from sqlalchemy import Connection, bindparam, func, select

from dagwright.errors import RetryLaterError
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.queue.jobs import (
    Priority,
    defer_conversation,
    defer_evaluation,
    defer_run,
    deferring_app,
    install_schema,
)
from dagwright.services.queue.settings import QueueSettings
from dagwright.services.runs.replicas import ACTIVE_STATUSES
from dagwright.services.runs.service import RunService
from dagwright.services.runs.writer import RUNS

# Queue runs waiting, and queue runs of one app waiting or running: built once (the app as a
# parameter), so each submit reuses the compiled statement.
_ROOM: Final = select(
    func.count().filter(RUNS.c.status == "queued"),
    func.count().filter(RUNS.c.app_id == bindparam("app_id")),
).where(RUNS.c.job_id.is_not(None), RUNS.c.status.in_(ACTIVE_STATUSES))


class QueueFullError(RetryLaterError):
    """The queue, or one app's share of it, is at its limit (HTTP 429 with Retry-After)."""

    code = "queue_full"


class RunQueue:
    """Queues runs for `dagwright worker` processes. The limits are checked before a run is
    queued, not reserved: runs queued at the same moment through several API processes may
    pass a limit by as many."""

    def __init__(self, runs: RunService, database_url: str | None, settings: QueueSettings) -> None:
        self.runs = runs
        self.settings = settings
        self._app = deferring_app(database_url)

    async def submit(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any],
        *,
        app_id: str,
        version_id: str,
        mode: str,
        priority: Priority,
        deadline: float | None = None,
    ) -> str:
        """Queue a run of an app version; returns its run id. QueueFullError when the queue
        or the app is at its limit; InputError (nothing queued) for inputs the flow does
        not take."""
        await asyncio.to_thread(self._check_room, app_id)
        job = functools.partial(
            defer_run, self._app, inputs=dict(inputs), priority=priority, deadline=deadline
        )
        return await self.runs.record_queued(
            plan, inputs, job, app_id=app_id, version_id=version_id, mode=mode
        )

    async def submit_evaluation(self, evaluation_id: str, concurrency: int) -> None:
        """Queue an evaluation for a worker (nothing when it is queued already)."""

        def defer() -> None:
            with self.runs.engine.begin() as conn:
                defer_evaluation(self._app, conn, evaluation_id, concurrency)

        await asyncio.to_thread(defer)

    def conversation_job(self, conversation_id: str) -> Callable[[Connection], int]:
        """What writes a conversation's job, in the transaction of the caller that records
        or claims the conversation (tqa/recording.py). Conversations are interactive: they
        are not counted against the runs' limits (their agents' runs are not queued), but
        against their own (DAGWRIGHT_TQA_MAX_CONVERSATIONS, tqa/admission.py)."""
        return functools.partial(defer_conversation, self._app, conversation_id=conversation_id)

    def _check_room(self, app_id: str) -> None:
        with self.runs.engine.connect() as conn:
            queued, of_app = conn.execute(_ROOM, {"app_id": app_id}).one()
        wait = self.settings.retry_after
        if queued >= self.settings.max_depth:
            raise QueueFullError(
                f"the run queue is full ({queued} runs waiting); try again in {wait}s", wait
            )
        if of_app >= self.settings.app_limit:
            raise QueueFullError(
                f"this app has {of_app} queued or running runs, its limit; try again in {wait}s",
                wait,
            )


def run_queue(
    runs: RunService, database_url: str | None, settings: QueueSettings
) -> RunQueue | None:
    """The run queue of an API process in queue mode (the queue's tables installed in the
    database if they were not), else None."""
    if not settings.enabled:
        return None
    queue = RunQueue(runs, database_url, settings)  # refuses a database other than PostgreSQL
    install_schema(runs.engine)
    return queue
