"""Running a system over many examples: at most `concurrency` at a time, each outcome handed
to a sink in small batches as examples finish (so an interrupted batch keeps what it did and
a resumed one skips it), with progress (rate, ETA, tokens, cost) after every example.

The system is any `Target`: an app version (services/evaluations.py), or a stand-in for
measuring the harness itself (benchmarks/eval_harness.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from dagwright.errors import DagwrightError


@dataclass(frozen=True, slots=True)
class Task:
    example_id: str
    inputs: dict[str, Any]


@dataclass(slots=True)
class Outcome:
    example_id: str
    prediction: Any = None
    run_id: str | None = None
    error: dict[str, Any] | None = None  # {code, message}: the system failed on it
    latency: float = 0.0  # seconds
    tokens: int = 0
    cost: float = 0.0


Target = Callable[[Task], Awaitable[Outcome]]

NO_ANSWER = "no_answer"  # the error code of an example whose system gave no answer


def is_blank(prediction: Any) -> bool:
    """No answer: None, an empty or blank text, an empty list or object. It counts as an
    error of the system, not as an answer that happens to be wrong."""
    if prediction is None:
        return True
    if isinstance(prediction, str):
        return not prediction.strip()
    if isinstance(prediction, list | dict | tuple):
        return not prediction
    return False


Sink = Callable[[list[Outcome]], None]


@dataclass(slots=True)
class Progress:
    total: int  # examples this batch runs (those done before are not counted)
    done: int = 0
    errors: int = 0
    tokens: int = 0
    cost: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def rate(self) -> float:
        """Examples per second so far."""
        return self.done / self.elapsed if self.done and self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate (None before the first example finishes)."""
        return (self.total - self.done) / self.rate if self.rate else None

    def add(self, outcome: Outcome) -> None:
        self.done += 1
        self.errors += outcome.error is not None
        self.tokens += outcome.tokens
        self.cost += outcome.cost

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "done": self.done,
            "errors": self.errors,
            "tokens": self.tokens,
            "cost": self.cost,
            "elapsed": self.elapsed,
            "rate": self.rate,
            "eta": self.eta,
        }


async def _attempt(target: Target, task: Task) -> Outcome:
    start = time.perf_counter()
    try:
        return await target(task)
    except DagwrightError as exc:
        error = exc.to_dict()
    except Exception as exc:  # one example's failure is recorded, the batch goes on
        error = {"code": "target_failed", "message": f"{type(exc).__name__}: {exc}"}
    return Outcome(task.example_id, error=error, latency=time.perf_counter() - start)


async def run_batch(
    tasks: Iterable[Task],
    total: int,
    target: Target,
    sink: Sink,
    *,
    concurrency: int = 4,
    on_progress: Callable[[Progress], None] | None = None,
    flush_size: int = 64,
    flush_interval: float = 0.25,
) -> Progress:
    """Runs every task through `target`. Outcomes go to `sink` by `flush_size` or every
    `flush_interval` seconds, and all that finished are flushed even when the batch is
    cancelled (Ctrl-C) or fails."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    progress = Progress(total)
    pending = iter(tasks)
    buffer: list[Outcome] = []
    last_flush = time.monotonic()

    def flush() -> None:
        nonlocal last_flush
        if buffer:
            sink(list(buffer))
            buffer.clear()
        last_flush = time.monotonic()

    async def worker() -> None:
        for task in pending:  # one shared iterator: each task is taken once
            outcome = await _attempt(target, task)
            buffer.append(outcome)
            progress.add(outcome)
            if len(buffer) >= flush_size or time.monotonic() - last_flush >= flush_interval:
                flush()
            if on_progress is not None:
                on_progress(progress)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    finally:
        flush()
    return progress
