"""A run's retry budget: the seconds every retry in one run may cost together, so that retries
at different levels (the gateway's per model call, a node's error policy around it) share
one bound instead of multiplying (node retries x gateway attempts x timeouts, each with its
backoff: under 30 % model faults a run took over 2 minutes).

A retry is granted only if its wait fits in what is left; the wait and the retried attempt
are charged as they happen; a retried attempt may run only for what is left after its wait
(`RetryBudgetSpent` when that runs out). First attempts are not charged: a run's worst case
is its first attempts plus the budget. The executor opens the budget for a root run (its
sub-flows share it) in a context variable, which tasks and threads started from the run
inherit, so the gateway finds it without being handed it (`run_context`)."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TypeVar

from dagwright.errors import DagwrightError

T = TypeVar("T")


class RetryBudgetSpent(DagwrightError):
    """A failure not retried (or a retried attempt cut short): the run's retry budget is
    spent. The message carries the failure it would have retried."""

    code = "retry_budget_spent"


class RetryBudget:
    """Seconds of retrying left to one run (waits plus retried attempts), shared by every
    level that retries. The monotonic clock is a seam for tests."""

    __slots__ = ("_clock", "seconds", "spent")

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.spent = 0.0
        self._clock = clock

    @property
    def left(self) -> float:
        return max(0.0, self.seconds - self.spent)

    def grants(self, wait: float) -> bool:
        """Whether a retry after `wait` seconds fits (with some time left for its attempt)."""
        return wait < self.left

    def charge(self, seconds: float) -> None:
        self.spent += max(0.0, seconds)

    async def retried(self, attempt: Callable[[], Awaitable[T]], what: str) -> T:
        """Run a retried attempt within what is left, charging the time it takes."""
        started = self._clock()
        cut = asyncio.timeout(self.left)
        try:
            async with cut:
                return await attempt()
        except TimeoutError:
            if not cut.expired():
                raise  # the attempt's own timeout, not the budget's
            raise RetryBudgetSpent(
                f"{what}: the run's retry budget ({self.seconds:g}s) ran out during a retry"
            ) from None
        finally:
            self.charge(self._clock() - started)


_CURRENT: ContextVar[RetryBudget | None] = ContextVar("dagwright_retry_budget", default=None)


def current_budget() -> RetryBudget | None:
    """The budget of the run this code runs in (None outside a run, or with no budget)."""
    return _CURRENT.get()


def run_context(seconds: float | None) -> contextvars.Context:
    """The context a root run's task runs in: the caller's, with a fresh budget of `seconds`
    (None: no budget). Its sub-flows run in that task and share it."""
    context = contextvars.copy_context()
    if seconds is not None:
        context.run(_CURRENT.set, RetryBudget(seconds))
    return context
