"""The process's thread pools, one per kind of work, so that heavy work never waits in front
of the API's own blocking calls (docs/architecture.md, "Pools").

- `data`: table work — sampling, discovery, DuckDB queries, a sandboxed call's waiting;
- `evaluation`: an evaluation's scoring and bookkeeping in the server's process;
- `api`: the API handlers' blocking calls (store reads): the event loop's default executor,
  so every `asyncio.to_thread` of a route lands here and nowhere near the heavy pools.

A heavy pool is bounded twice: `workers` threads, and at most `queue_max` calls waiting for
one. What is past that depends on who asks:

- work a request starts (`run`, and a run's admission: `admit`) is refused at once with
  `PoolBusyError` (HTTP 429 + Retry-After) rather than queued behind minutes of work: the
  caller learns to come back instead of timing out;
- work already under way (a running flow's next table call, an evaluation's scoring:
  `run_queued`) waits for room without holding a thread, since failing it would throw away
  what was done; how much of it there can be is bounded where it is admitted (the runs that
  were, an evaluation's concurrency).

A heavy pool's threads are daemon threads: at shutdown `close()` drops the queued calls
(their callers get `PoolClosedError`) and the process exits without joining a thread still
inside a long DuckDB query — a ThreadPoolExecutor's threads are joined at exit, which is what
made a server's graceful shutdown overrun its grace period.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from dagwright.errors import DagwrightError, RetryLaterError

logger = logging.getLogger(__name__)
P = ParamSpec("P")
T = TypeVar("T")


class PoolBusyError(RetryLaterError):
    """A heavy pool's threads are busy and its queue is full (``pool_busy``): HTTP 429 with
    Retry-After to an API caller, a failed node (naming the pool) to a flow."""

    code = "pool_busy"


class PoolClosedError(DagwrightError):
    """The process is shutting down: a heavy call that had not started was dropped."""

    code = "shutting_down"


@dataclass(frozen=True)
class PoolSize:
    workers: int
    queue_max: int
    retry_after: float = 2.0  # seconds, the Retry-After of a refused call


_STOP = object()


class WorkPool:
    """A bounded pool of daemon threads for one kind of heavy work."""

    def __init__(self, name: str, size: PoolSize) -> None:
        if size.workers < 1 or size.queue_max < 0:
            raise ValueError(f"pool {name}: workers must be >= 1 and queue_max >= 0")
        self.name = name
        self.size = size
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._pending = 0  # calls admitted and not finished: running or queued
        self._running = 0
        self._closed = False
        self._threads: list[threading.Thread] = []
        # Callers of `run_queued` waiting for room: woken (on their loops) as calls finish.
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def capacity(self) -> int:
        return self.size.workers + self.size.queue_max

    def pending(self) -> int:
        """Calls admitted and not yet finished (running and queued)."""
        with self._lock:
            return self._pending

    def full(self) -> bool:
        """Whether a call now would be refused."""
        with self._lock:
            return self._closed or self._pending >= self.capacity

    def admit(self) -> None:
        """Raises PoolBusyError when a call now would be refused (a request checks this
        before it starts work that will need the pool)."""
        if self.full():
            raise self._busy()

    def _busy(self) -> PoolBusyError:
        return PoolBusyError(
            f"the server's {self.name} pool is full ({self.size.workers} running, "
            f"{self.size.queue_max} waiting): try again later",
            self.size.retry_after,
        )

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """Queues the call (in the caller's context variables); PoolBusyError when the pool
        is full, PoolClosedError once it is closed."""
        future: Future[T] = Future()
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        with self._lock:
            if self._closed:
                raise PoolClosedError(f"the {self.name} pool is closed: the server is stopping")
            if self._pending >= self.capacity:
                raise self._busy()
            self._pending += 1
            if len(self._threads) < min(self.size.workers, self._pending):
                self._start_thread()
        self._queue.put((future, call))
        return future

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on one of the pool's threads, awaited. A cancelled caller
        leaves a running call to finish on its own (a thread cannot be stopped); a queued one
        is dropped."""
        future = self.submit(fn, *args, **kwargs)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.cancel()  # a queued call is skipped by the worker that takes it
            raise

    async def run_queued(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """As `run`, but waits (on the caller's loop, no thread held) for room when the pool
        is full, instead of refusing: for work already under way. PoolClosedError once the
        pool is closed."""
        while True:
            try:
                return await self.run(fn, *args, **kwargs)
            except PoolBusyError:
                await self._room()

    async def _room(self) -> None:
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        entry = (loop, waiter)
        with self._lock:
            if self._closed or self._pending < self.capacity:
                return
            self._waiters.append(entry)
        try:
            await waiter
        finally:
            with self._lock:
                if entry in self._waiters:
                    self._waiters.remove(entry)

    def _wake_waiters(self) -> None:
        """Called with the lock held: every waiter tries again (few wait: they are bounded
        where their work was admitted)."""
        waiters, self._waiters = self._waiters, []
        for loop, waiter in waiters:
            loop.call_soon_threadsafe(_resolve, waiter)

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"dagwright-{self.name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            future, call = item
            try:
                if not future.set_running_or_notify_cancel():
                    continue
                with self._lock:
                    self._running += 1
                try:
                    result = call()
                except BaseException as exc:  # handed to the caller, as an executor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                finally:
                    with self._lock:
                        self._running -= 1
            finally:
                with self._lock:
                    self._pending -= 1
                    self._wake_waiters()

    def close(self) -> None:
        """Refuses new calls, fails the queued ones (PoolClosedError) and lets the threads go:
        a call still running is abandoned to its daemon thread, not waited for."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = len(self._threads)
            self._wake_waiters()  # to find the pool closed
        dropped = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            future, _ = item
            with self._lock:
                self._pending -= 1
            if future.set_running_or_notify_cancel():
                future.set_exception(PoolClosedError(f"the {self.name} pool closed"))
            dropped += 1
        for _ in range(threads):
            self._queue.put(_STOP)
        if dropped or self._running:
            logger.warning(
                "the %s pool closed: %d queued calls dropped, %d abandoned running",
                self.name,
                dropped,
                self._running,
            )


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


@dataclass(frozen=True)
class PoolSettings:
    data: PoolSize
    evaluation: PoolSize
    api_threads: int


class WorkPools:
    """The process's pools, built once by the composition root."""

    def __init__(self, settings: PoolSettings) -> None:
        self.data = WorkPool("data", settings.data)
        self.evaluation = WorkPool("evaluation", settings.evaluation)
        # The API pool is the loop's default executor (asyncio takes only a ThreadPoolExecutor);
        # its calls are short store reads, so it needs no queue bound of its own.
        self.api = ThreadPoolExecutor(settings.api_threads, thread_name_prefix="dagwright-api")

    def install_default(self, loop: asyncio.AbstractEventLoop) -> None:
        """Makes the API pool the loop's default executor (`asyncio.to_thread`'s)."""
        loop.set_default_executor(self.api)

    def close(self) -> None:
        """Closes the heavy pools. The API pool, the loop's default executor, is shut down
        by the loop as it closes (`asyncio.run`), after the last handler's call."""
        self.data.close()
        self.evaluation.close()
