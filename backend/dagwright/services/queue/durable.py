"""Durable runs: a worker executes a queued run, and resumes one whose worker died.

What a run has recorded decides how it goes on (the run's rows in services/runs):
- nodes that succeeded (or were reused) keep their result: the resumed run passes their
  recorded output on without running them (only the flow's own nodes: a sub-flow, map or
  repeat node that did not finish runs again whole), except a result stored truncated (too
  large to keep whole), whose node runs again;
- nodes that had not settled run again: at least once, which blocks with side effects
  accept by declaring `side_effects="retryable"`;
- a block declared `side_effects="not_retryable"` is recorded as "running" before it is
  called (the executor awaits RunService.mark_begun): a resume that finds it begun but not
  settled fails the run with `not_retryable`, naming the node, instead of calling it twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from dagwright.errors import ConflictError, DagwrightError, InputError
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.apps import AppService
from dagwright.services.evaluations import EvaluationService
from dagwright.services.runs.recorder import LiveRun
from dagwright.services.runs.records import NodeRecord, reusable
from dagwright.services.runs.service import RunService
from dagwright.store.models import FINAL_STATUSES

log = logging.getLogger(__name__)

NOT_RETRYABLE: Final = "not_retryable"
# What running a conversation answers when another process took it over (tqa/durable.py).
SUPERSEDED: Final = "superseded"


def begun_unretryable(nodes: list[NodeRecord]) -> NodeRecord | None:
    """A not-retryable block's node that began and did not settle, if any: only
    RunService.mark_begun writes "running", and the node's result overwrites it."""
    return next((node for node in nodes if node.status == "running"), None)


class Conversations(Protocol):
    """What runs a recorded AutoTQA conversation on (tqa/durable.py's ConversationRunner)."""

    async def run(self, conversation_id: str, hand_over: bool = False) -> str: ...

    async def fail(self, conversation_id: str, code: str, message: str) -> None: ...


class DurableRunner:
    """Executes the queue's jobs in a worker process: runs, the planning, examples and
    scoring of evaluations (their service built on first use by `evaluations`), and AutoTQA
    conversations (built on first use by `conversations`)."""

    def __init__(
        self,
        runs: RunService,
        apps: AppService,
        evaluations: Callable[[], EvaluationService],
        conversations: Callable[[], Conversations] | None = None,
    ) -> None:
        self.runs = runs
        self.apps = apps
        self._evaluations = evaluations
        self._conversations = conversations

    async def converse(self, conversation_id: str) -> str:
        """Run the conversation, or resume it after its last recorded turn; returns its
        status (`waiting` when a tool call awaits approval: answering it queues it again)."""
        if self._conversations is None:
            raise InputError("this worker runs no AutoTQA conversations")
        conversations = await asyncio.to_thread(self._conversations)
        # Cut short when this worker stops, it is handed over (worker.py) and resumed.
        return await conversations.run(conversation_id, hand_over=True)

    async def fail_conversation(self, conversation_id: str, code: str, message: str) -> None:
        """The conversation ends failed with why (its recorded turns kept)."""
        if self._conversations is None:
            raise InputError("this worker runs no AutoTQA conversations")
        conversations = await asyncio.to_thread(self._conversations)
        await conversations.fail(conversation_id, code, message)

    async def plan_evaluation(self, evaluation_id: str, chunk: int) -> dict[int, list[str]] | None:
        """The chunks of the evaluation's examples (the n-th `chunk` examples of the dataset's
        order, by n) that hold an example without a result; None when it is complete."""
        evaluations = await asyncio.to_thread(self._evaluations)
        try:
            ids, done = await asyncio.to_thread(evaluations.plan, evaluation_id)
        except ConflictError as exc:
            if exc.code != "evaluation_complete":
                raise
            return None
        chunks = (ids[start : start + chunk] for start in range(0, len(ids), chunk))
        return {n: part for n, part in enumerate(chunks) if not done.issuperset(part)}

    async def run_examples(self, evaluation_id: str, example_ids: list[str]) -> bool:
        """Run those of the examples that have no result yet; True when the evaluation then
        has a result for every example."""
        evaluations = await asyncio.to_thread(self._evaluations)
        return await evaluations.run_examples(evaluation_id, example_ids)

    async def fail_evaluation(self, evaluation_id: str, code: str, message: str) -> None:
        """The evaluation ends failed with why (its results kept)."""
        evaluations = await asyncio.to_thread(self._evaluations)
        await asyncio.to_thread(evaluations.fail, evaluation_id, code, message)

    async def finish_evaluation(self, evaluation_id: str) -> str:
        """Score the evaluation (unless another did); returns its status."""
        evaluations = await asyncio.to_thread(self._evaluations)
        finished = await asyncio.to_thread(evaluations.finish, evaluation_id)
        return finished.status

    async def execute(
        self,
        run_id: str,
        job_id: int,
        inputs: Mapping[str, Any],
        deadline: float | None,
        *,
        first_attempt: bool = False,
    ) -> str:
        """Run (or resume) the queued run until its final state is recorded; returns that
        status. A run that is already final (a job retried after its run ended) is left
        as it is. On its job's first attempt nobody has run it yet: there is nothing
        recorded to reuse or refuse, and its row is not read before it is claimed."""
        start = self._start_fresh if first_attempt else self._start_again
        started = await start(run_id, job_id, inputs, deadline)
        if isinstance(started, str):
            return started
        try:
            return (await started.wait()).status
        except asyncio.CancelledError:
            # The worker is stopping and its grace period is over: the run goes back to the
            # queue with what it recorded, for another worker to resume (worker.py).
            status = await self.runs.hand_over(started)
            log.info("run %s handed back to the queue (%s)", run_id, status)
            raise

    async def _start_fresh(
        self, run_id: str, job_id: int, inputs: Mapping[str, Any], deadline: float | None
    ) -> LiveRun | str:
        """Claim and start a run nobody ran; its status when it could not start."""
        row = await self.runs.claim(run_id, job_id)
        if row is None:  # cancelled before a worker took it
            return (await asyncio.to_thread(self.runs.get, run_id)).status
        try:
            plan = await asyncio.to_thread(self._plan, run_id, row["app_id"], row["version_id"])
        except DagwrightError as exc:  # its app or version is gone: the run cannot start
            await self.runs.close_queued(run_id, "failed", "start_failed", exc.message)
            return "failed"
        return self.runs.start_claimed(plan, row, inputs, reuse={}, deadline=deadline)

    async def _start_again(
        self, run_id: str, job_id: int, inputs: Mapping[str, Any], deadline: float | None
    ) -> LiveRun | str:
        """Resume a run from what it recorded, after its job was taken up again (its worker
        stopped or died); its status when it does not run (again)."""
        record = await asyncio.to_thread(self.runs.get, run_id)
        if record.status in FINAL_STATUSES:
            return record.status
        if record.cancel_requested_at is not None:
            await self.runs.close_queued(run_id, "cancelled", "cancelled", "cancelled by request")
            return "cancelled"
        begun = begun_unretryable(record.nodes)
        if begun is not None:
            message = (
                f"node {begun.node!r} ({begun.block}) had begun when its worker stopped, and "
                "its block is not retryable: the run stops rather than call it twice"
            )
            await self.runs.close_queued(run_id, "failed", NOT_RETRYABLE, message, begun.node)
            return "failed"
        try:
            plan = await asyncio.to_thread(self._plan, run_id, record.app_id, record.version_id)
        except DagwrightError as exc:  # its app or version is gone: the run cannot start
            await self.runs.close_queued(run_id, "failed", "start_failed", exc.message)
            return "failed"
        reuse = reusable(record.nodes, nested=False)
        if reuse:
            log.info("run %s resumes with %d recorded node result(s)", run_id, len(reuse))
        live = await self.runs.resume(
            plan, run_id, inputs, job_id=job_id, reuse=reuse, deadline=deadline
        )
        if live is None:  # finished or cancelled meanwhile
            return (await asyncio.to_thread(self.runs.get, run_id)).status
        return live

    def _plan(self, run_id: str, app_id: str | None, version_id: str | None) -> CompiledFlow:
        if app_id is None or version_id is None:
            raise InputError(f"run {run_id} names no app version: it cannot be queued")
        return self.apps.compiled_version(app_id, version_id)
