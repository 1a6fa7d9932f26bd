"""How many AutoTQA conversations may run at once. Each one runs several agent flows and
model calls — a task of the server process in the embedded default, a worker's job in queue
mode — so one caller starting thousands would starve everyone else. A new conversation
(background, sync or streamed) is refused while `limit` are running, counted in the database
so the limit holds across API replicas and workers. A conversation waiting for a person's
approval holds nothing and is not counted; one that goes on after it (`go_on`) already
exists and is never refused. The limit is checked, not reserved: conversations started at
the same moment through several processes may pass it by as many."""

from __future__ import annotations

import asyncio
from typing import Final

from dagwright.errors import RetryLaterError
from dagwright.tqa.recording import ConversationStore

DEFAULT_MAX_CONVERSATIONS: Final = 64
# Seconds a refused caller is told to wait: a conversation takes several model calls, so one
# ends seconds, not milliseconds, later.
RETRY_AFTER: Final = 5.0


class ConversationsFullError(RetryLaterError):
    """As many conversations as the limit are running (HTTP 429 with Retry-After)."""

    code = "conversations_full"


class ConversationAdmission:
    def __init__(self, store: ConversationStore, limit: int = DEFAULT_MAX_CONVERSATIONS) -> None:
        if limit < 1:
            raise ValueError("the conversation limit must be at least 1")
        self._store = store
        self.limit = limit

    async def check(self) -> None:
        """ConversationsFullError when `limit` conversations are running (nothing recorded)."""
        running = await asyncio.to_thread(self._store.running)
        if running >= self.limit:
            raise ConversationsFullError(
                f"{running} AutoTQA conversations are running, the limit "
                f"(DAGWRIGHT_TQA_MAX_CONVERSATIONS={self.limit}); try again in "
                f"{RETRY_AFTER:g}s",
                RETRY_AFTER,
            )
