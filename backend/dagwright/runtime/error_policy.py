"""Per-node error policies (a node's `on_error`, see runtime/flow.py): the executor retries a
failing call here, and asks here what a failure that the policy absorbs becomes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from dagwright.errors import DagwrightError
from dagwright.registry.budget import RetryBudgetSpent, current_budget
from dagwright.runtime.flow import ErrorPolicy
from dagwright.runtime.pause import WaitingForHuman


async def call_with_retries(
    policy: ErrorPolicy,
    attempt: Callable[[], Awaitable[Any]],
    report: Callable[[dict[str, Any]], None],
) -> Any:
    """The first attempt that succeeds; the last failure once `policy.retry` retries are
    spent. Each retry is reported (attempt, error, delay) before its wait, so a trace shows
    why a node took long. Cancellation and a pause for a person are never retried. Retries
    share the run's retry budget (registry/budget.py) with the model calls inside them: one
    whose wait does not fit in what is left is not made (the last failure is raised), and a
    retried attempt runs only for what is left."""
    budget = current_budget()
    retries = 0
    while True:
        try:
            if retries == 0 or budget is None:
                return await attempt()
            return await budget.retried(attempt, "a retried node")
        except (WaitingForHuman, RetryBudgetSpent):
            raise
        except Exception as exc:
            retries += 1
            if retries > policy.retry:
                raise
            delay = policy.delay(retries)
            if budget is not None and not budget.grants(delay):
                raise
            report(
                {
                    "attempt": retries,
                    "retries": policy.retry,
                    "error": describe(exc),
                    "delay": delay,
                }
            )
            await asyncio.sleep(delay)
            if budget is not None:
                budget.charge(delay)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc or repr(exc)}"


def error_record(node_id: str, block: str, exc: BaseException) -> dict[str, Any]:
    """What a node's `error` port carries when its policy routes a failure on."""
    return {
        "node": node_id,
        "block": block,
        "type": type(exc).__name__,
        "code": exc.code if isinstance(exc, DagwrightError) else "node_failed",
        "message": str(exc) or repr(exc),
    }
