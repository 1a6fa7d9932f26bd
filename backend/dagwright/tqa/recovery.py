"""Conversations of server processes that died (the embedded default, no queue).

A conversation a server runs in-process names that process's replica lease (`replica`, see
services/runs/replicas.py). Every server process looks, at start-up and then every
`stale_after` seconds, for running conversations whose lease is missing or stale: their
process died (SIGKILL, OOM, power) or froze past the limit. It takes each background one up
with a conditional update (from the dead lease to its own: one process wins) and resumes it
with its own ConversationRunner after the recorded turns (tqa/durable.py): loading it gives it
a new runner token, so a process that was only frozen stops at its next write. In queue mode
the one taking it up queues its job instead, in the same transaction.

A foreground conversation (a sync or streamed ask, the `autotqa_ask` block of a server's run)
is ended failed (`server_lost`) instead, its recorded turns kept: its caller's request died
with the process, so nobody waits for the answer (a stream's caller could read it by id, but
one whose connection broke asks again, and a flow run's block is not taken up where it
stopped), and resuming it would spend model calls and hold a place under the conversation
limit (tqa/admission.py) for nothing. Left running, it would hold that place for good. One
of a process that is no server (the command line) names no lease and is never touched.

Bounded as a queue job is: a conversation whose server processes died MAX_ATTEMPTS times
while running it ends failed (`server_lost`), its recorded turns kept. A server stopping
cleanly hands its conversations over (they stay running under its lease, which it releases)
and that is no death: it takes the attempt back (TqaService.close). A conversation
waiting for an approval is not running (no process holds it): it is never touched."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from dagwright.periodic import PeriodicSweep
from dagwright.tqa.recording import ConversationStore, Deferral

log = logging.getLogger(__name__)

MAX_ATTEMPTS: Final = 5  # as many as a queue job's (services/queue/worker.py)
SERVER_LOST: Final = "server_lost"
FOREGROUND_LOST: Final = (
    "the server process answering it stopped, and the request that asked it with it: ask again"
)

Resume = Callable[[str], Awaitable[None]]


class ConversationRecovery:
    """The sweep of one server process. `lease` is its replica lease's id (read when the
    sweep runs: the run service takes it at start-up); `resume` runs a conversation taken up
    in this process; `job`, in queue mode, the deferral of a conversation's job."""

    def __init__(
        self,
        store: ConversationStore,
        lease: Callable[[], str],
        stale_after: float,
        resume: Resume,
        job: Callable[[str], Deferral] | None = None,
    ) -> None:
        self._store = store
        self._lease = lease
        self._stale_after = stale_after
        self._resume = resume
        self._job = job
        self._sweep = PeriodicSweep(
            self.recover,
            stale_after,
            name="dagwright-conversation-recovery",
            what="recovering conversations of stopped servers",
        )

    async def recover(self) -> list[str]:
        """Take up the background conversations of dead server processes (or end them,
        past MAX_ATTEMPTS) and end their foreground ones; returns the ids this process took
        up. Safe while other processes do the same."""
        lease = self._lease()
        orphaned = await asyncio.to_thread(self._store.orphaned, lease, self._stale_after)
        taken: list[str] = []
        for conversation_id, dead, attempts, foreground in orphaned:
            if foreground or attempts >= MAX_ATTEMPTS:
                message = (
                    FOREGROUND_LOST
                    if foreground
                    else f"the server process running it stopped {attempts} times"
                )
                if await asyncio.to_thread(
                    self._store.give_up, conversation_id, dead, SERVER_LOST, message
                ):
                    log.warning("conversation %s failed: %s", conversation_id, message)
                continue
            job = None if self._job is None else self._job(conversation_id)
            replica = lease if job is None else None
            if not await asyncio.to_thread(
                self._store.take_over, conversation_id, dead, replica, job
            ):
                continue  # another process took it first, or it ended
            log.warning(
                "conversation %s: its server process (lease %s) stopped; %s",
                conversation_id,
                dead,
                "queued again" if job is not None else "resumed here",
            )
            if job is None:
                await self._resume(conversation_id)
            taken.append(conversation_id)
        return taken

    def start(self) -> None:
        """Sweep now and then every `stale_after` seconds, on the running loop."""
        self._sweep.start()

    async def close(self) -> None:
        await self._sweep.close()


__all__ = ["FOREGROUND_LOST", "MAX_ATTEMPTS", "SERVER_LOST", "ConversationRecovery"]
