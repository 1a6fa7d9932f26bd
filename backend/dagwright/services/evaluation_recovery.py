"""Evaluations of processes that died (the embedded default, no queue).

An evaluation a process runs in-process names that process's replica lease (`replica`, see
services/runs/replicas.py; store/evaluation_holds.py): no other process runs it while the
lease is live (a second `eval run`, CLI or API, is refused: `evaluation_held`). Every server
process looks, at start-up and then every `stale_after` seconds, for running evaluations
whose lease is missing or stale: their process died (SIGKILL, OOM, power) or froze past the
limit. One a server ran (`resumable`) it takes over with a conditional update (from the dead
lease to its own: one process wins) and resumes: the examples with a result are not run
again, those in flight when the process died are (their runs were marked interrupted by the
runs' own recovery). A process that was only frozen stops at its next result (the sink sees
the evaluation is no longer its own).

One the command line ran is marked interrupted (`holder_lost`) instead: the same command
resumes it, and it may have answered model calls from a recording the server does not have.

Bounded as a conversation is (tqa/recovery.py): an evaluation whose server processes died
MAX_ATTEMPTS times while running it ends failed (`server_lost`), its results kept."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from dagwright.periodic import PeriodicSweep

if TYPE_CHECKING:
    from dagwright.services.evaluation_runs import RunningEvaluations
    from dagwright.services.evaluations import EvaluationService

log = logging.getLogger(__name__)

MAX_ATTEMPTS: Final = 5  # as a conversation's and a queue job's
DEFAULT_CONCURRENCY: Final = 4  # an evaluation started before its concurrency was kept
SERVER_LOST: Final = "server_lost"
HOLDER_LOST: Final = "holder_lost"
COMMAND_LOST: Final = (
    "the command running it stopped: the same `dagwright eval run` goes on with the examples left"
)


class EvaluationRecovery:
    """The sweep of one server process: takes over the evaluations of dead processes and
    runs them with `running` (this process's RunningEvaluations)."""

    def __init__(
        self, evaluations: EvaluationService, running: RunningEvaluations, stale_after: float
    ) -> None:
        self._evaluations = evaluations
        self._running = running
        self._sweep = PeriodicSweep(
            self.recover,
            stale_after,
            name="dagwright-evaluation-recovery",
            what="recovering evaluations of stopped processes",
        )

    async def recover(self) -> list[str]:
        """Take over the server evaluations of dead processes (or end them, past
        MAX_ATTEMPTS) and mark their command-line ones interrupted; returns the ids this
        process resumed. Safe while other processes do the same."""
        evaluations = self._evaluations
        taken: list[str] = []
        for orphan in await asyncio.to_thread(evaluations.orphaned):
            if not orphan.resumable:
                await asyncio.to_thread(
                    evaluations.give_up,
                    orphan.id,
                    orphan.dead,
                    "interrupted",
                    HOLDER_LOST,
                    COMMAND_LOST,
                )
                continue
            if orphan.attempts >= MAX_ATTEMPTS:
                message = f"the server process running it stopped {orphan.attempts} times"
                await asyncio.to_thread(
                    evaluations.give_up, orphan.id, orphan.dead, "failed", SERVER_LOST, message
                )
                continue
            if not await asyncio.to_thread(evaluations.take_over, orphan.id, orphan.dead):
                continue  # another process took it first, or it ended
            log.warning(
                "evaluation %s: its server process (lease %s) stopped; resumed here",
                orphan.id,
                orphan.dead,
            )
            concurrency = orphan.settings.get("concurrency") or DEFAULT_CONCURRENCY
            self._running.start(evaluations, orphan.id, int(concurrency))
            taken.append(orphan.id)
        return taken

    def start(self) -> None:
        """Sweep now and then every `stale_after` seconds, on the running loop."""
        self._sweep.start()

    async def close(self) -> None:
        await self._sweep.close()


__all__ = ["HOLDER_LOST", "MAX_ATTEMPTS", "SERVER_LOST", "EvaluationRecovery"]
