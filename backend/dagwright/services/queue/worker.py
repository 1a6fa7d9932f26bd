"""A worker process's loop: fetch run jobs, execute them durably, resume those of dead
workers.

Procrastinate fetches jobs (highest priority first, LISTEN/NOTIFY for no polling delay) and
keeps this worker's heartbeat fresh. It does not, by itself, give a dead worker's jobs to
anyone: every worker therefore sweeps, each heartbeat, for jobs whose worker has been silent
for `stalled_after` seconds and puts them back in the queue, where any worker takes them up
and resumes their runs (services/queue/durable.py). Two workers sweeping at once is harmless:
a job already back in the queue is refused the second time.

SIGTERM (a deploy, `docker stop`) hands the worker's jobs over instead of leaving them to the
sweep: Procrastinate stops fetching and waits `shutdown_grace` seconds for the jobs in progress
(`shutdown_graceful_timeout`), then cancels those still going with a shutdown reason, and the
tasks' retry strategy (`HandOver`) puts each back in the queue at once. A cancelled run first
goes back to "queued" with the node results it recorded (RunService.hand_over), so the worker
that takes its job resumes it; a cancelled chunk of an evaluation keeps the results it
recorded, and the worker that takes it runs the rest. A worker killed outright (SIGKILL, a
lost machine, a second SIGTERM) leaves its jobs to the sweep.

Only the sweep counts a worker's death (services/queue/deaths.py): a job that lost its
workers MAX_ATTEMPTS times is given up, however often it was handed over cleanly besides (a
long conversation lives through any number of deploys).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final

import procrastinate
from procrastinate.exceptions import ConnectorException, JobAborted
from procrastinate.job_context import JobContext
from procrastinate.jobs import Job, Status
from procrastinate.retry import BaseRetryStrategy, RetryDecision

from dagwright.services.queue.deaths import count_death, deaths_of
from dagwright.services.queue.durable import SUPERSEDED, DurableRunner
from dagwright.services.queue.jobs import (
    CONVERSATION_TASK,
    EVALUATION_TASK,
    EXAMPLES_TASK,
    FINISH_TASK,
    QUEUE,
    TASK,
    conninfo,
    defer_conversation_again,
    defer_examples,
    defer_finish,
)
from dagwright.services.queue.settings import QueueSettings

log = logging.getLogger(__name__)

# A run, evaluation or conversation whose workers died this many times while running one of
# its jobs (a run that kills its worker, say by exhausting its memory) fails instead of being
# given to yet another worker. Hand-overs at SIGTERM are no deaths: they do not count.
MAX_ATTEMPTS: Final = 5
EVALUATION_TASKS: Final = (EVALUATION_TASK, EXAMPLES_TASK, FINISH_TASK)
# Jobs whose worker died MAX_ATTEMPTS times end their work failed rather than go back again.
GIVEN_UP_TASKS: Final = (TASK, *EVALUATION_TASKS, CONVERSATION_TASK)


class HandOver(BaseRetryStrategy):
    """Back in the queue at once when the worker cut the job short at shutdown (its task
    cancelled), never after an error: a run's failure is recorded on the run, and retrying
    the job would only find it final."""

    def get_retry_decision(self, *, exception: BaseException, job: Job) -> RetryDecision | None:
        if isinstance(exception, asyncio.CancelledError | JobAborted):
            return RetryDecision(retry_in={"seconds": 0})
        return None


def worker_app(
    database_url: str | None, runner: DurableRunner, settings: QueueSettings
) -> procrastinate.App:
    """A Procrastinate app (not yet opened) whose tasks execute runs and evaluations."""
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=conninfo(database_url))
    )
    hand_over = HandOver()

    @app.task(name=TASK, queue=QUEUE, pass_context=True, retry=hand_over)
    async def run(
        context: JobContext, run_id: str, inputs: dict[str, Any], deadline: float | None
    ) -> str:
        job = context.job
        assert job.id is not None  # a fetched job has its id
        # Procrastinate counts every return to the queue, hand-overs too: 0 when no worker
        # took the job before, so nothing of the run is recorded (a handed-over run resumes).
        return await runner.execute(
            run_id, job.id, inputs, deadline, first_attempt=job.attempts == 0
        )

    @app.task(name=EVALUATION_TASK, queue=QUEUE, retry=hand_over)
    async def evaluate(evaluation_id: str, concurrency: int) -> str:
        chunks = await runner.plan_evaluation(evaluation_id, settings.evaluation_chunk)
        if chunks is None:
            return "completed"
        if not chunks:  # every example has a result: only the scoring is left
            await defer_finish(app, evaluation_id)
            return "scoring"
        queued = await defer_examples(app, evaluation_id, chunks, concurrency)
        return f"{queued} chunk(s) queued"

    @app.task(name=EXAMPLES_TASK, queue=QUEUE, retry=hand_over)
    async def evaluate_examples(evaluation_id: str, example_ids: list[str]) -> str:
        if await runner.run_examples(evaluation_id, example_ids):
            await defer_finish(app, evaluation_id)
            return "last examples done"
        return "done"

    @app.task(name=FINISH_TASK, queue=QUEUE, retry=hand_over)
    async def finish_evaluation(evaluation_id: str) -> str:
        return await runner.finish_evaluation(evaluation_id)

    @app.task(name=CONVERSATION_TASK, queue=QUEUE, retry=hand_over)
    async def converse(conversation_id: str) -> str:
        status = await runner.converse(conversation_id)
        if status == SUPERSEDED:
            await defer_conversation_again(app, conversation_id)
        return status

    return app


async def work(
    runner: DurableRunner, database_url: str | None, settings: QueueSettings, name: str
) -> None:
    """Execute queued runs until the process is told to stop (SIGINT or SIGTERM)."""
    app = worker_app(database_url, runner, settings)
    async with app.open_async():
        sweeper = asyncio.create_task(_sweep(app, runner, settings), name="dagwright-sweeper")
        try:
            await app.run_worker_async(
                queues=[QUEUE],
                name=name,
                concurrency=settings.concurrency,
                update_heartbeat_interval=settings.heartbeat,
                stalled_worker_timeout=settings.stalled_after,
                shutdown_graceful_timeout=settings.shutdown_grace,
                fetch_job_polling_interval=settings.poll_interval,
                # The run's row is the record; a finished job is only clutter.
                delete_jobs="successful",
            )
        finally:
            sweeper.cancel()
            await asyncio.gather(sweeper, return_exceptions=True)


async def _sweep(app: procrastinate.App, runner: DurableRunner, settings: QueueSettings) -> None:
    while True:
        await asyncio.sleep(settings.heartbeat)
        if settings.alive_file is not None:
            settings.alive_file.touch()
        try:
            await resume_stalled(app, runner, settings.stalled_after)
        except Exception:  # the database may be briefly unreachable: next time
            log.warning("looking for the jobs of dead workers failed", exc_info=True)


async def resume_stalled(
    app: procrastinate.App, runner: DurableRunner, stalled_after: float
) -> int:
    """Put back in the queue the jobs (runs, evaluations) of workers silent for
    `stalled_after` seconds, or give up those whose workers died MAX_ATTEMPTS times; returns
    how many went back."""
    manager = app.job_manager
    stalled = list(
        await manager.get_stalled_jobs(queue=QUEUE, seconds_since_heartbeat=stalled_after)
    )
    job_ids = [job.id for job in stalled if job.id is not None]
    if not job_ids:
        return 0
    died = await deaths_of(app.connector, job_ids)
    resumed = 0
    for job in stalled:
        assert job.id is not None  # a stored job has its id
        try:
            if died.get(job.id, 0) + 1 >= MAX_ATTEMPTS and job.task_name in GIVEN_UP_TASKS:
                await _give_up(app, runner, job)
                continue
            await manager.retry_job(job)
        except ConnectorException:  # another worker's sweep took it first
            continue
        # Counted once back in the queue: of two sweeps that found it, only the one whose
        # retry took it counts (a sweep stopped in between misses one death, no more).
        await count_death(app.connector, job.id)
        resumed += 1
        log.warning("job %s of a dead worker is back in the queue", job.id)
    return resumed


async def _give_up(app: procrastinate.App, runner: DurableRunner, job: Job) -> None:
    await app.job_manager.finish_job(job, status=Status.FAILED, delete_job=False)
    if job.task_name in EVALUATION_TASKS:
        message = f"the worker running a job of it died {MAX_ATTEMPTS} times"
        await runner.fail_evaluation(str(job.task_kwargs["evaluation_id"]), "worker_lost", message)
        return
    if job.task_name == CONVERSATION_TASK:
        message = f"the worker running it died {MAX_ATTEMPTS} times"
        conversation_id = str(job.task_kwargs["conversation_id"])
        await runner.fail_conversation(conversation_id, "worker_lost", message)
        return
    message = f"its worker died {MAX_ATTEMPTS} times while running it"
    await runner.runs.close_queued(str(job.task_kwargs["run_id"]), "failed", "worker_lost", message)
