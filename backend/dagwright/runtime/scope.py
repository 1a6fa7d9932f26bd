"""How a child run (one sub-flow call, one map item, one repeat round) hangs off the run that
started it. Its own module so the executor and the sub-flow host share it without importing
each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dagwright.registry import Usage
from dagwright.runtime.events import RunEvent


@dataclass(slots=True, frozen=True)
class RunScope:
    run_id: str  # the root run's id: a child's events and NodeContexts carry it
    t0: float  # the root run's clock origin, so a child's `t` is on the root's timeline
    usage: Usage  # the root's total: model calls inside a sub-flow count for the run
    emit: Callable[[RunEvent], None]  # the parent's, wrapped to prefix node ids with a path
    depth: int  # 1 for a child of the root run
    path: str  # the prefix of the child's node ids in the root's trace (`outer[1]/inner[0]/`)
