"""The job queue itself: Procrastinate on the PostgreSQL the service already uses.

`dagwright.run`: a job carries a run id, its inputs and its deadline; the run's row
(services/runs) carries the job id.

An evaluation is spread over the workers in three kinds of job:
- `dagwright.evaluate` plans it: its examples in fixed chunks (the n-th `evaluation_chunk`
  examples of the dataset's order), a job for each chunk that has an example without a
  result;
- `dagwright.evaluate_examples` runs a chunk's examples one after the other, each result
  recorded once as it comes (a retried chunk skips those that have one). A chunk is in one
  of `concurrency` lanes, a Procrastinate lock each: the workers run at most `concurrency`
  examples of one evaluation at once, whichever workers they are;
- `dagwright.finish_evaluation` scores it, queued by the chunk that finds every example with
  a result (whichever worker ran it); its lock and a check of the status score it once.

`dagwright.converse`: an AutoTQA conversation, which keeps its turns as they come: taken up
again, it goes on after its last recorded turn (tqa/durable.py).

A run's job is deferred inside the transaction that records the queued run (Procrastinate
defers on a connection it is given), so a run is queued exactly when its job exists: a crash
can leave neither a job without a run nor a queued run without a job. The API processes only
defer, through the run writer's connection; workers open an async connection pool and fetch
(services/queue/worker.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, Final

import procrastinate
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.schema import SchemaManager
from procrastinate.types import JSONValue
from sqlalchemy import Connection, Engine, text
from sqlalchemy.engine import make_url

from dagwright.services.queue import deaths
from dagwright.services.queue.settings import QueueConfigError

TASK: Final = "dagwright.run"
EVALUATION_TASK: Final = "dagwright.evaluate"  # plans an evaluation's chunks
EXAMPLES_TASK: Final = "dagwright.evaluate_examples"  # runs one chunk of its examples
FINISH_TASK: Final = "dagwright.finish_evaluation"  # scores it once every example has a result
CONVERSATION_TASK: Final = "dagwright.converse"  # an AutoTQA conversation, resumable
QUEUE: Final = "runs"
# Any fixed number: the transaction-scoped lock under which one process installs the schema.
_SCHEMA_LOCK: Final = 0x6461_6777_7269_6768  # "dagwrigh"


class Priority(IntEnum):
    """Which queued runs a worker takes first: higher before lower, then oldest first."""

    INTERACTIVE = 100  # someone is watching: debug runs, conversations
    PUBLISHED = 50  # async calls of published apps
    SCHEDULED = 20  # schedules and webhooks
    BATCH_SCORE = 10  # scoring an evaluation whose examples are done: short, not last
    BATCH = 0  # evaluation items


def conninfo(database_url: str | None) -> str:
    """The libpq URI of a SQLAlchemy PostgreSQL URL (its `options`, e.g. a search_path,
    kept). Queue mode needs PostgreSQL (None is the embedded SQLite): the jobs live there."""
    backend = "sqlite" if database_url is None else make_url(database_url).get_backend_name()
    if database_url is None or backend != "postgresql":
        raise QueueConfigError(
            "queue mode keeps its jobs in PostgreSQL: set DAGWRIGHT_DATABASE_URL to a "
            f"postgresql+psycopg:// URL (the database is {backend})"
        )
    return make_url(database_url).set(drivername="postgresql").render_as_string(False)


def install_schema(engine: Engine) -> bool:
    """Create Procrastinate's tables, types and functions in the database (its search path)
    unless they are there, True when it did; and the queue's own table of worker deaths
    (services/queue/deaths.py) unless it is there. Processes starting together take turns
    under an advisory lock, so exactly one installs them."""
    with engine.begin() as conn:
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK})
        jobs = conn.execute(text("SELECT to_regclass('procrastinate_jobs')")).scalar()
        if jobs is None:
            # Through the driver: the schema's SQL has % signs that are not placeholders.
            conn.connection.driver_connection.execute(SchemaManager.get_schema())  # type: ignore[union-attr]
        # Apart: a database whose queue was installed before the table came gets it too.
        conn.execute(text(deaths.TABLE))
    return jobs is None


def deferring_app(database_url: str | None) -> procrastinate.App:
    """An app that only defers, on connections it is given (never opened: no pool)."""
    connector = procrastinate.SyncPsycopgConnector(conninfo=conninfo(database_url))
    return procrastinate.App(connector=connector)


def defer_run(
    app: procrastinate.App,
    conn: Connection,
    run_id: str,
    inputs: dict[str, Any],
    *,
    priority: Priority,
    deadline: float | None,
) -> int:
    """Queue the run's job in `conn`'s transaction; returns the job id."""
    deferrer = app.configure_task(
        TASK,
        queue=QUEUE,
        priority=int(priority),
        connection=conn.connection.driver_connection,
    )
    return deferrer.defer(run_id=run_id, inputs=inputs, deadline=deadline)


def defer_evaluation(
    app: procrastinate.App, conn: Connection, evaluation_id: str, concurrency: int
) -> int | None:
    """Queue the job that plans an evaluation, in `conn`'s transaction; returns the job id,
    or None when it is already waiting in the queue. Its lock keeps two plans of one
    evaluation from running at once."""
    key = f"evaluation:{evaluation_id}"
    deferrer = app.configure_task(
        EVALUATION_TASK,
        queue=QUEUE,
        priority=int(Priority.BATCH),
        lock=key,
        queueing_lock=key,
        connection=conn.connection.driver_connection,
    )
    try:
        return deferrer.defer(evaluation_id=evaluation_id, concurrency=concurrency)
    except AlreadyEnqueued:
        return None


async def defer_examples(
    app: procrastinate.App, evaluation_id: str, chunks: Mapping[int, list[str]], lanes: int
) -> int:
    """Queue a job for each chunk of an evaluation's examples (by chunk number), in `lanes`
    lanes; returns how many were queued. A chunk already waiting in the queue is not queued
    twice (its queueing lock): planning an evaluation again adds only what is missing."""
    queued = 0
    for number, example_ids in sorted(chunks.items()):
        deferrer = app.configure_task(
            EXAMPLES_TASK,
            queue=QUEUE,
            priority=int(Priority.BATCH),
            lock=f"evaluation:{evaluation_id}:lane:{number % lanes}",
            queueing_lock=f"evaluation:{evaluation_id}:chunk:{number}",
        )
        ids: list[JSONValue] = list(example_ids)
        try:
            await deferrer.defer_async(evaluation_id=evaluation_id, example_ids=ids)
        except AlreadyEnqueued:
            continue
        queued += 1
    return queued


async def defer_finish(app: procrastinate.App, evaluation_id: str) -> None:
    """Queue the scoring of an evaluation whose examples all have a result (nothing when it
    is waiting in the queue already)."""
    key = f"evaluation:{evaluation_id}:score"
    deferrer = app.configure_task(
        FINISH_TASK,
        queue=QUEUE,
        priority=int(Priority.BATCH_SCORE),
        lock=key,
        queueing_lock=key,
    )
    with contextlib.suppress(AlreadyEnqueued):
        await deferrer.defer_async(evaluation_id=evaluation_id)


def defer_conversation(app: procrastinate.App, conn: Connection, conversation_id: str) -> int:
    """Queue a conversation's job in `conn`'s transaction (the one that records it, or that
    claims it back from waiting); returns the job id. Its lock keeps two jobs of one
    conversation from running at once."""
    deferrer = _conversation_task(
        app, conversation_id, connection=conn.connection.driver_connection
    )
    return deferrer.defer(conversation_id=conversation_id)


async def defer_conversation_again(app: procrastinate.App, conversation_id: str) -> None:
    """Queue another job of a conversation whose worker was taken over (tqa/durable.py).

    The sweep gives a worker that was only slow, not dead, the same job back to another, and
    the first, stopping at its next turn, finishes that job: were the second to die then, no
    job would be left to resume the conversation. This job waits under the conversation's
    lock while one runs, and finds it ended if it did; at most one waits (its queueing
    lock)."""
    deferrer = _conversation_task(
        app, conversation_id, queueing_lock=f"conversation:{conversation_id}:again"
    )
    with contextlib.suppress(AlreadyEnqueued):
        await deferrer.defer_async(conversation_id=conversation_id)


def _conversation_task(
    app: procrastinate.App, conversation_id: str, **options: Any
) -> procrastinate.jobs.JobDeferrer:
    """A conversation's job, interactive, under the conversation's lock (one runs at once)."""
    return app.configure_task(
        CONVERSATION_TASK,
        queue=QUEUE,
        priority=int(Priority.INTERACTIVE),
        lock=f"conversation:{conversation_id}",
        **options,
    )
