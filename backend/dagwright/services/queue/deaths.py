"""How many times the workers running a job died: what gives a job up (services/queue/worker.py).

Procrastinate's `attempts` counts every return of a job to the queue, the hand-overs of
workers stopping cleanly (SIGTERM, a deploy) as well as the sweep's resumption of a dead
worker's job; only the deaths say a job may be what kills its workers, and its events do
not tell the two apart (both are "deferred_for_retry"). The sweep counts them here, one row
per job that lost a worker, gone with its job.
"""

from __future__ import annotations

from typing import Final

from procrastinate.connector import BaseConnector

# Created by install_schema (services/queue/jobs.py) next to Procrastinate's tables.
TABLE: Final = """
CREATE TABLE IF NOT EXISTS dagwright_job_deaths (
    job_id bigint PRIMARY KEY REFERENCES procrastinate_jobs (id) ON DELETE CASCADE,
    deaths integer NOT NULL
)
"""

_DEATHS: Final = """
SELECT job_id, deaths FROM dagwright_job_deaths WHERE job_id = ANY(%(job_ids)s)
"""

_COUNT_ONE: Final = """
INSERT INTO dagwright_job_deaths (job_id, deaths) VALUES (%(job_id)s, 1)
ON CONFLICT (job_id) DO UPDATE SET deaths = dagwright_job_deaths.deaths + 1
"""


async def deaths_of(connector: BaseConnector, job_ids: list[int]) -> dict[int, int]:
    """The recorded deaths of the jobs' workers, by job id (those without any left out)."""
    rows = await connector.execute_query_all_async(_DEATHS, job_ids=job_ids)
    return {int(row["job_id"]): int(row["deaths"]) for row in rows}


async def count_death(connector: BaseConnector, job_id: int) -> None:
    """One more death of a worker running the job."""
    await connector.execute_query_async(_COUNT_ONE, job_id=job_id)
