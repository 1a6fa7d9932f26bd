"""A sweep that runs now and then every few seconds on the running event loop, until closed:
the recovery of dead processes' conversations and evaluations, and the human inbox's
timeouts. A round that fails (the database gone a moment, say) is logged and the next round
tries again, so one bad moment never stops the sweep for good."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class PeriodicSweep:
    """`work()` at `start()` and then every `interval` seconds; `close()` cancels it."""

    def __init__(
        self, work: Callable[[], Awaitable[object]], interval: float, *, name: str, what: str
    ) -> None:
        self._work = work
        self._interval = interval
        self._name = name  # the asyncio task's name
        self._what = what  # for the log: "recovering evaluations of stopped processes"
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop(), name=self._name)

    async def _loop(self) -> None:
        while True:
            try:
                await self._work()
            except Exception:  # the next round tries again
                log.warning("%s failed", self._what, exc_info=True)
            await asyncio.sleep(self._interval)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
