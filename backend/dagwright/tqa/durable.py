"""Running a recorded conversation to its end in any process: the embedded server's
background task, a queue worker's job (services/queue), or the continuation after a tool call
was approved. What the database holds decides how it goes on: a finished conversation is
left as it is; otherwise its request, knowledge and recorded turns are loaded and the
orchestrator takes the next turn after the last recorded one (the turn that was under way
when a worker died is taken again, so an agent call in flight is made again). A cancel
requested through any replica is seen here within `CANCEL_POLL` seconds and cancels the
conversation, its agent call in flight included."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from dagwright.store.models import utcnow
from dagwright.tqa.conversation import FINAL, Conversation
from dagwright.tqa.failures import ConversationCancelled, ConversationSuperseded

if TYPE_CHECKING:
    from dagwright.tqa.orchestrator import Orchestrator
    from dagwright.tqa.recording import ConversationStore

log = logging.getLogger(__name__)
T = TypeVar("T")
CANCEL_POLL: Final = 1.0  # seconds between looks for a cancel request


class ConversationRunner:
    def __init__(self, orchestrator: Orchestrator, store: ConversationStore) -> None:
        self._orchestrator = orchestrator
        self._store = store

    async def run(self, conversation_id: str, hand_over: bool = False) -> str:
        """Runs (or resumes) the recorded conversation until it ends or waits for an
        approval; returns its status. `hand_over` (a queue worker): when this process
        stops, the conversation is left running as recorded for another to resume, not
        ended as cancelled."""
        conversation = await asyncio.to_thread(self._store.load, conversation_id)
        conversation.handed_over_on_stop = hand_over
        if conversation.status in FINAL or conversation.status == "waiting":
            return conversation.status
        if await asyncio.to_thread(self._store.cancel_requested, conversation_id):
            await self._cancelled(conversation)
            return conversation.status
        if conversation.turns:
            log.info(
                "conversation %s resumes after %d recorded turn(s)",
                conversation_id,
                len(conversation.turns),
            )
        try:
            await self.watched(conversation, self._go_on(conversation))
        except ConversationSuperseded:
            log.warning("conversation %s was taken up by another process", conversation_id)
            return "superseded"
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # this process is stopping, not the conversation being cancelled
        # The orchestrator recorded how it ended, a cancel included.
        return conversation.status

    async def fail(self, conversation_id: str, code: str, message: str) -> None:
        """Ends a conversation no process can finish (e.g. every worker running it died)."""
        await asyncio.to_thread(self._store.fail, conversation_id, code, message)

    async def _go_on(self, conversation: Conversation) -> Conversation:
        return await self._orchestrator.ask(conversation.request, conversation=conversation)

    async def watched(self, conversation: Conversation, work: Awaitable[T]) -> T:
        """`work`, cancelled when a cancel of the conversation is requested (by any
        process): CancelledError then reaches its caller as the conversation's end."""
        task = asyncio.ensure_future(work)
        watcher = asyncio.create_task(self._watch(conversation, task))
        try:
            return await task
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher

    async def _watch(self, conversation: Conversation, task: asyncio.Future[Any]) -> None:
        conversation_id = conversation.id
        while not task.done():
            await asyncio.sleep(CANCEL_POLL)
            try:
                cancelled = await asyncio.to_thread(self._store.cancel_requested, conversation_id)
            except Exception:  # the database may be briefly unreachable: look again later
                log.warning("could not read conversation %s's cancel", conversation_id)
                continue
            if cancelled:
                conversation.cancel_requested = True
                task.cancel()
                return

    async def _cancelled(self, conversation: Conversation) -> None:
        conversation.status = "failed"
        conversation.error = ConversationCancelled("the conversation was cancelled").failure()
        conversation.finished_at = utcnow()
        await asyncio.to_thread(self._store.finish, conversation)
