"""The async executor: runs a compiled flow, yielding typed events.

Scheduling is a ready queue drained by a bounded pool of worker coroutines. A node becomes
ready when every wired input port is resolved; a worker that finishes a node keeps going with
the next ready one (so a chain runs in one task without a trip through the event loop per
node) and starts extra workers only when more than one node is ready, up to the run's
concurrency limit. Async blocks are awaited on the loop, `inline` ones called on it,
`blocking` ones run in a thread pool; other sync blocks are placed by SyncPolicy: in threads
until their calls prove quick, then on the loop (a thread hop costs 50-130 us, 15-35 times a
quick block), and back in threads for good once they overrun. A worker that has held the loop
for `SyncPolicy.turn` gives it a turn, so a long chain of quick nodes cannot stall it either.

Skipping is explicit: an edge carries either a value or SKIPPED. A port is resolved by its
first non-skipped value (merge), or as skipped once all its edges are skipped; a node with a
skipped port is skipped itself and passes SKIPPED on.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from dagwright.errors import DagwrightError, InputError
from dagwright.registry import BlockServices, ModelCall, NodeContext, Route, Usage
from dagwright.registry.budget import run_context
from dagwright.registry.services import check_needs
from dagwright.runtime.error_policy import call_with_retries, describe, error_record
from dagwright.runtime.events import (
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    NodeUsage,
    NodeWaiting,
    RunError,
    RunEvent,
    RunFinished,
    RunStarted,
    RunStatus,
)
from dagwright.runtime.pause import WaitingForHuman
from dagwright.runtime.plan import CompiledFlow, PlanEdge, PlanNode
from dagwright.runtime.scope import RunScope
from dagwright.runtime.subflow import SUBFLOWS, SubflowHost


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


# What a branch not taken carries: distinct from None, which a block may return.
SKIPPED: Final = _Marker("SKIPPED")
_PENDING: Final = _Marker("PENDING")

DEFAULT_CONCURRENCY = 64
DEFAULT_THREADS = 128  # DAGWRIGHT_THREADS (settings.py)


class NodeTimeoutError(DagwrightError):
    code = "node_timeout"


class OutputTypeError(DagwrightError):
    """A block returned a value that does not fit its declared output type."""

    code = "output_type"


class InputTypeError(DagwrightError):
    """A value arriving at a port does not fit the port's type (checked when the edge's
    source type only may fit, e.g. Any into str)."""

    code = "input_type"


@functools.cache
def shared_thread_pool(size: int = DEFAULT_THREADS) -> ThreadPoolExecutor:
    """The process's pool of `size` threads for sync blocks (one per size asked for)."""
    # Threads start lazily, so a large bound costs nothing until sync blocks run in parallel.
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix="dagwright-block")


@dataclass(slots=True)
class SyncTiming:
    """What SyncPolicy knows of one sync block type."""

    inline: bool = False  # runs on the loop now
    pinned: bool = False  # overran on the loop: in threads for good
    streak: int = 0  # quick calls in a row, timed in a thread
    debt: float = 0.0  # loop time beyond the budget not yet paid back by quicker calls
    calls_inline: int = 0
    calls_thread: int = 0


class SyncPolicy:
    """Where a sync block declared neither `inline=True` nor `blocking=True` runs.

    Its first calls run in the thread pool, timed inside the thread; after `trials` calls in a
    row each within `budget`, the block type runs on the loop, called directly. Each call on
    the loop is timed too: the time beyond the budget is a debt that quicker calls pay back
    (a leaky bucket), and once it passes `allowance` the type goes back to threads for good.
    So no new block type ever holds the loop on its first call, a call on the loop that does
    not end the type's stay there holds it at most `budget + allowance`, and each type can
    overrun that only once (the call that cannot be interrupted). Nodes with a timeout always
    run in threads, where the run can stop waiting for them.

    On a loaded machine the OS may take the CPU from the loop's thread in the middle of a
    quick call: an overrun during which that thread neither computed nor waited (for I/O, a
    sleep, a lock or the GIL) but was preempted is not the block's doing and costs it no debt
    (Linux: the thread's context switches and CPU time since the mark, taken before it ran).

    Kept by the executor's options, so one server learns each block type once; the counts
    are read and written on the loop only."""

    def __init__(
        self,
        budget: float = 0.001,
        allowance: float = 0.004,
        trials: int = 2,
        turn: float = 0.001,
    ) -> None:
        self.budget = budget
        self.allowance = allowance
        self.trials = trials
        # A worker that has run nodes for this long without the loop turning yields to it.
        self.turn = turn
        self._timings: dict[Callable[..., Any], SyncTiming] = {}
        # The loop thread's context switches and CPU time when a block on the loop last began.
        self._mark: Any = None
        self._mark_cpu = 0.0
        self._marked_at = float("-inf")

    def mark(self) -> None:
        """A sync block is about to run on the loop. Read at most once a `turn` (~5 us a read
        on a loaded machine), so a chain of quick blocks pays it once: an older mark only makes
        `_preempted` more cautious. Runs without such blocks never read it."""
        now = time.perf_counter()
        if _thread_usage is not None and now - self._marked_at >= self.turn:
            self._marked_at = now
            self._mark = _thread_usage()
            self._mark_cpu = time.thread_time()  # getrusage's times are too coarse here

    def _preempted(self, elapsed: float) -> bool:
        """Whether the loop's thread spent most of an overrun taken off the CPU by the OS,
        neither computing nor waiting of its own accord."""
        base = self._mark
        if base is None or _thread_usage is None:
            return False
        now = _thread_usage()
        cpu = time.thread_time() - self._mark_cpu
        waited = now.ru_nvcsw != base.ru_nvcsw  # I/O, sleep, a lock, the GIL
        return not waited and now.ru_nivcsw != base.ru_nivcsw and cpu < elapsed / 2

    def timing(self, fn: Callable[..., Any]) -> SyncTiming:
        found = self._timings.get(fn)
        if found is None:
            found = self._timings[fn] = SyncTiming()
        return found

    def ran_in_thread(self, timing: SyncTiming, elapsed: float) -> None:
        timing.calls_thread += 1
        if timing.pinned or timing.inline:
            return
        if elapsed <= self.budget:
            timing.streak += 1
            if timing.streak >= self.trials:
                timing.inline = True
                timing.debt = 0.0
        else:
            timing.streak = 0

    def ran_inline(self, timing: SyncTiming, elapsed: float) -> None:
        timing.calls_inline += 1
        if elapsed > self.budget and self._preempted(elapsed):
            return
        timing.debt = max(0.0, timing.debt + elapsed - self.budget)
        if timing.debt > self.allowance:
            timing.inline = False
            timing.pinned = True

    def placement(self) -> dict[str, str]:
        """Each block function seen, by module.name: 'loop', 'thread' (for good) or
        'trial' (in threads until its calls prove quick)."""
        return {
            f"{fn.__module__}.{fn.__qualname__}": (
                "loop" if t.inline else "thread" if t.pinned else "trial"
            )
            for fn, t in self._timings.items()
        }


def _linux_thread_usage() -> Callable[[], Any] | None:
    try:
        import resource

        thread = resource.RUSAGE_THREAD  # Linux only
    except (ImportError, AttributeError):
        return None
    return functools.partial(resource.getrusage, thread)


_thread_usage = _linux_thread_usage()


def _timed(fn: Callable[..., Any], kwargs: dict[str, Any]) -> tuple[Any, float]:
    """Call fn in a worker thread and say how long it took there (not the hop)."""
    started = time.perf_counter()
    result = fn(**kwargs)
    return result, time.perf_counter() - started


@dataclass(slots=True)
class ExecutorOptions:
    concurrency: int = DEFAULT_CONCURRENCY  # nodes running at once in one run
    # async and sync nodes running at once across every run of one executor (None: no limit)
    global_concurrency: int | None = None
    node_timeout: float | None = None  # for nodes whose block and flow set none
    run_timeout: float | None = None
    # Seconds every retry of a run may cost together (registry/budget.py): the gateway's and
    # the nodes' error policies share it, so their retries do not multiply. None: unbounded.
    retry_budget: float | None = None
    thread_pool: ThreadPoolExecutor | None = None
    # What blocks may ask their NodeContext for (model providers, secrets...): a run checks
    # at its start that every service its nodes declare (`needs=`) is here.
    services: BlockServices = field(default_factory=BlockServices)
    # Where sync blocks run (loop or threads), learnt per block type; shared by the runs.
    sync_policy: SyncPolicy = field(default_factory=SyncPolicy)
    # Awaited with (run id, node path, block) before a block declared
    # side_effects="not_retryable" is called: a durable run records there that the call
    # began, so that a resume after a crash fails the run rather than call it twice.
    before_unretryable: Callable[[str, str, str], Awaitable[None]] | None = None


@dataclass(frozen=True, slots=True)
class ReusedOutput:
    """A node's output taken from an earlier run instead of running the node again."""

    output: Any
    branch: str | None = None  # for a condition: the branch it took


@dataclass(slots=True)
class RunResult:
    run_id: str
    status: RunStatus
    outputs: dict[str, Any]
    duration: float
    error: RunError | None
    usage: Usage
    events: list[RunEvent] = field(repr=False)


class Run:
    """One execution of a flow: follow it with `events()`, await `result()`, or `cancel()`."""

    def __init__(
        self,
        plan: CompiledFlow,
        input_values: dict[int, Any],
        run_id: str,
        options: ExecutorOptions,
        slots: asyncio.Semaphore | None = None,
        reuse: Mapping[int, ReusedOutput] | None = None,
        scope: RunScope | None = None,
        inner_reuse: Mapping[str, Mapping[str, ReusedOutput]] | None = None,
    ) -> None:
        self.run_id = run_id
        self._reuse = reuse or {}
        # Outputs to pass on inside this run's sub-flow nodes: what a resumed run's iterations
        # had finished before the pause, by iteration (`loop[2]/`), then by path below it
        # (`approve`), so each iteration finds its own at once (split_reuse).
        self.inner_reuse: Mapping[str, Mapping[str, ReusedOutput]] = inner_reuse or {}
        self._slots = slots
        self.plan = plan
        self.events: list[RunEvent] = []
        self._options = options
        self._input_values = input_values
        self._loop = asyncio.get_running_loop()
        self._pool = options.thread_pool or shared_thread_pool()
        nodes = plan.nodes
        self._values: list[list[Any]] = [[_PENDING] * len(n.port_names) for n in nodes]
        self._pending: list[list[int]] = [list(n.port_edge_counts) for n in nodes]
        self._unresolved: list[int] = [len(n.port_names) for n in nodes]
        self._settled = 0  # nodes finished or skipped
        self._ready: deque[tuple[PlanNode, bool]] = deque()  # (node, whether it may wait)
        self._sync = options.sync_policy
        self._ready_waiting = 0  # ready nodes that may wait (async or thread), not inline
        self._running: dict[int, float] = {}
        self._workers: set[asyncio.Task[None]] = set()
        self._outputs: dict[str, Any] = {}
        self._usage = Usage()
        self._outcome: RunError | None = None
        self._ended = False
        self._status: RunStatus | None = None
        self._done = self._loop.create_future()
        self._waiter: asyncio.Future[None] | None = None
        self._t0 = time.perf_counter()
        self._wall0 = time.time()  # the wall-clock moment of t = 0, for RunStarted
        self._forward: Callable[[RunEvent], None] | None = None
        self.depth = 0  # how deep in sub-flow calls this run is (0: a run of its own)
        self.path = ""  # what prefixes this run's node ids in the root's trace (`loop[2]/`)
        if scope is not None:
            self._adopt(scope)
        self._services = options.services
        if plan.calls_subflows:
            self._services = options.services.with_service(SUBFLOWS, SubflowHost(self))
        # A child run has no task: `run_here` runs it in its caller's.
        self._task: asyncio.Task[RunFinished] | None = None
        if scope is None:
            self._task = self._loop.create_task(
                self._main(),
                name=f"dagwright-run-{run_id}",
                context=run_context(options.retry_budget),
            )

    def _adopt(self, scope: RunScope) -> None:
        """Make this run a child span of another (runtime/subflow.py): its events go to the
        parent's stream, on the root's clock and usage."""
        self.run_id = scope.run_id
        self._t0 = scope.t0
        self._usage = scope.usage
        self._forward = scope.emit
        self.depth = scope.depth
        self.path = scope.path

    async def run_here(self) -> RunFinished:
        """Run a child run in the calling task: an iteration costs no task of its own, and
        cancelling the caller cancels the child's nodes."""
        return await self._main()

    # -- public -------------------------------------------------------------------------

    @property
    def status(self) -> RunStatus | None:
        """None while running, then the final status."""
        return self._status

    async def result(self) -> RunResult:
        assert self._task is not None, "a child run is awaited with run_here()"
        finished = await self._task
        return RunResult(
            self.run_id,
            finished.status,
            finished.outputs,
            finished.duration,
            finished.error,
            finished.usage,
            self.events,
        )

    def cancel(self, reason: str = "cancelled by request") -> None:
        self._stop(RunError("cancelled", reason))

    async def stream(self) -> AsyncIterator[RunEvent]:
        """Every event of the run from the first, live until it finishes; any number of
        consumers may follow one run, each from the start."""
        index = 0
        while True:
            while index < len(self.events):
                event = self.events[index]
                index += 1
                yield event
                if isinstance(event, RunFinished):
                    return
            if self._waiter is None or self._waiter.done():
                self._waiter = self._loop.create_future()
            # Shielded: the waiter is shared by every consumer, and a consumer cancelled
            # while waiting (a client leaving a stream) must not cancel it for the others.
            await asyncio.shield(self._waiter)

    # -- events --------------------------------------------------------------------------

    def _now(self) -> float:
        return time.perf_counter() - self._t0

    def _emit(self, event: RunEvent) -> None:
        if self._forward is not None:
            self._forward(event)
            return
        self.events.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _emit_message(self, node_id: str, kind: str, data: dict[str, Any]) -> None:
        self._emit(NodeMessage(self.run_id, self._now(), node_id, kind, data))

    def _emit_message_threadsafe(self, node_id: str, kind: str, data: dict[str, Any]) -> None:
        self._loop.call_soon_threadsafe(self._emit_message, node_id, kind, data)

    def _record_usage(self, node_id: str, usage: Usage, call: ModelCall) -> None:
        self._usage.add(usage)
        self._emit(NodeUsage(self.run_id, self._now(), node_id, usage, call))

    def _record_usage_threadsafe(self, node_id: str, usage: Usage, call: ModelCall) -> None:
        self._loop.call_soon_threadsafe(self._record_usage, node_id, usage, call)

    # -- the run -------------------------------------------------------------------------

    async def _main(self) -> RunFinished:
        self._emit(
            RunStarted(
                self.run_id,
                0.0,
                self.plan.name,
                {self.plan.nodes[i].interface_name or "": v for i, v in self._input_values.items()},
                self._wall0,
            )
        )
        try:
            if self._forward is None:
                await self._build_heavy_services()
            for node in self.plan.nodes:
                if not node.port_names:
                    self._enqueue(node)
            if self._forward is None:
                self._spawn(reserve=0)
            else:
                # A child run (a sub-flow's iteration) works in its caller's task: a sub-flow
                # of quick nodes runs through without one trip through the event loop.
                self._spawn(reserve=1)
                await self._worker()
            if self._settled == len(self.plan.nodes):
                self._stop(None)
            if self._options.run_timeout is None:
                await self._done
            else:
                try:
                    await asyncio.wait_for(asyncio.shield(self._done), self._options.run_timeout)
                except TimeoutError:
                    self._stop(
                        RunError(
                            "run_timeout",
                            f"the run did not finish within {self._options.run_timeout:g}s",
                        )
                    )
        except asyncio.CancelledError:
            self._stop(RunError("cancelled", "the task running the flow was cancelled"))
            await self._stop_workers()
            self._finish()
            raise
        await self._stop_workers()
        return self._finish()

    async def _build_heavy_services(self) -> None:
        """Builds in a thread the services the flow's nodes (its sub-flows' too) need whose
        build imports heavy modules (`Service.built_off_loop`), so that no block's lookup
        imports them on the event loop. A build that fails is left to the node that looks
        the service up: it fails with the error, as it would have."""
        unbuilt = self._services.unbuilt(self.plan.needs())
        if unbuilt:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._services.build, unbuilt)

    def _stop(self, outcome: RunError | None) -> None:
        """End the run: None when every node settled, else the error that ends it."""
        if self._ended:
            return
        self._ended = True
        self._outcome = outcome
        if not self._done.done():  # a cancelled main task has cancelled it already
            self._done.set_result(None)

    async def _stop_workers(self) -> None:
        current = asyncio.current_task()
        workers = [w for w in self._workers if w is not current]
        for worker in workers:
            worker.cancel()
        if workers:
            await asyncio.gather(*workers, return_exceptions=True)
        reason = self._outcome.message if self._outcome else "run ended"
        for index in sorted(self._running, key=self._running.__getitem__):
            self._emit(NodeCancelled(self.run_id, self._now(), self.plan.nodes[index].id, reason))
        self._running.clear()

    def _finish(self) -> RunFinished:
        outcome = self._outcome
        status: RunStatus = "succeeded"
        if outcome is not None:
            status = "cancelled" if outcome.code == "cancelled" else "failed"
        self._status = status
        now = self._now()
        finished = RunFinished(self.run_id, now, status, self._outputs, now, outcome, self._usage)
        self._emit(finished)
        return finished

    # -- scheduling ----------------------------------------------------------------------

    def _enqueue(self, node: PlanNode) -> None:
        waits = node.spec.mode != "inline" and self._sync_timing(node) is None
        self._ready.append((node, waits))
        if waits:
            self._ready_waiting += 1

    def _sync_timing(self, node: PlanNode) -> SyncTiming | None:
        """The timing of a sync block that SyncPolicy has put on the loop, else None."""
        if node.spec.mode != "auto" or node.timeout is not None:
            return None
        if self._options.node_timeout is not None:
            return None
        timing = self._sync.timing(node.spec.fn)
        return timing if timing.inline else None

    def _spawn(self, reserve: int) -> None:
        """Start workers for ready nodes, keeping `reserve` for the calling worker. Only nodes
        that may wait need a worker each to run concurrently: inline ones never yield, so any
        worker runs them in passing."""
        wanted = max(self._ready_waiting, 1 if self._ready else 0) - reserve
        room = self._options.concurrency - len(self._workers)
        for _ in range(min(wanted, room)):
            worker = self._loop.create_task(self._worker())
            self._workers.add(worker)
            worker.add_done_callback(self._workers.discard)

    async def _worker(self) -> None:
        ready = self._ready
        turn = self._sync.turn
        due = time.perf_counter() + turn
        while ready and not self._ended:
            node, waits = ready.popleft()
            if waits:
                self._ready_waiting -= 1
            await self._run_node(node)
            if time.perf_counter() > due:
                # Nodes that return without awaiting (inline, quick sync, async with nothing
                # to wait for) never let the loop turn: give it one, then go on. Twice: the
                # first resumption is queued ahead of the I/O and timers the loop polls next,
                # the second behind them.
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                due = time.perf_counter() + turn

    async def _run_node(self, node: PlanNode) -> None:  # noqa: C901, PLR0912, PLR0915
        index = node.index
        reused = self._reuse.get(index)
        if reused is not None:
            value = reused.output
            policy = node.on_error
            if (
                reused.branch == "error"
                and policy is not None
                and policy.fallback == "error_branch"
            ):
                # It failed in the earlier run and its policy routed the failure: again.
                error = str(value.get("message")) if isinstance(value, dict) else "failed"
                self._route_error(node, value, time.perf_counter(), error, reused=True)
                return
            if node.spec.is_condition and reused.branch is not None:
                value = Route(reused.branch, value)
            self._complete(node, value, time.perf_counter(), reused=True)
            self._spawn(reserve=1)
            return
        inputs = dict(zip(node.port_names, self._values[index], strict=True))
        kwargs = {**node.static_kwargs, **inputs}
        spec = node.spec
        if spec.role == "flow_input":
            kwargs["value"] = self._input_values[index]
        mode = spec.mode
        timing: SyncTiming | None = None  # a sync block placed by SyncPolicy
        if mode == "auto":
            timing = self._sync.timing(spec.fn)
            mode = "inline" if self._sync_timing(node) is not None else "thread"
        if spec.context_param:
            threaded = mode == "thread"
            kwargs[spec.context_param] = NodeContext(
                self.run_id,
                node.id,
                self._emit_message_threadsafe if threaded else self._emit_message,
                self._record_usage_threadsafe if threaded else self._record_usage,
                self._services,
                self.path + node.id,
            )
        slots = self._slots if mode != "inline" and not node.orchestrates else None
        if slots is not None:
            await slots.acquire()  # the executor-wide limit; a node waiting here is not started
        try:
            started = time.perf_counter()
            self._running[index] = started
            begun = NodeStarted(self.run_id, started - self._t0, node.id, spec.name, inputs)
            self._emit(begun)
            try:
                unretryable = not spec.retryable_for(node.config)
                if self._options.before_unretryable is not None and unretryable:
                    # After _emit, whose forwarders gave the event the node's full path in
                    # a sub-flow (`m[2]/send`): the path is the node's key in the run.
                    await self._options.before_unretryable(self.run_id, begun.node, spec.name)
                if node.on_error is not None:
                    result = await self._call_guarded(node, kwargs, mode, timing)
                elif mode == "inline":
                    result = self._call_inline(node, kwargs, timing)
                elif node.timeout is None and self._options.node_timeout is None:
                    result = await self._call(node, kwargs, timing)
                else:
                    result = await self._call_with_timeout(node, kwargs, timing)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                del self._running[index]
                self._fail(node, exc, started)
                return
        finally:
            if slots is not None:
                slots.release()
        del self._running[index]
        self._complete(node, result, started)
        self._spawn(reserve=1)

    async def _call_guarded(
        self, node: PlanNode, kwargs: dict[str, Any], mode: str, timing: SyncTiming | None
    ) -> Any:
        """A node with an error policy: each attempt runs as the block's mode says, and a
        failing one is retried with backoff (runtime/error_policy.py)."""
        assert node.on_error is not None

        async def attempt() -> Any:
            if mode == "inline":
                return self._call_inline(node, kwargs, timing)
            if node.timeout is None and self._options.node_timeout is None:
                return await self._call(node, kwargs, timing)
            return await self._call_with_timeout(node, kwargs, timing)

        return await call_with_retries(
            node.on_error, attempt, functools.partial(self._emit_message, node.id, "retry")
        )

    def _call_inline(
        self, node: PlanNode, kwargs: dict[str, Any], timing: SyncTiming | None
    ) -> Any:
        if timing is None:
            return node.spec.fn(**kwargs)
        self._sync.mark()
        started = time.perf_counter()
        try:
            return node.spec.fn(**kwargs)
        finally:  # a call that fails held the loop as long
            self._sync.ran_inline(timing, time.perf_counter() - started)

    def _call(
        self, node: PlanNode, kwargs: dict[str, Any], timing: SyncTiming | None = None
    ) -> Awaitable[Any]:
        if node.spec.mode == "async":
            return node.spec.fn(**kwargs)  # type: ignore[no-any-return]
        if timing is not None:
            return self._call_timed(node, kwargs, timing)
        # A thread cannot be stopped: on timeout or cancellation the run stops waiting for it.
        return self._loop.run_in_executor(self._pool, functools.partial(node.spec.fn, **kwargs))

    async def _call_timed(self, node: PlanNode, kwargs: dict[str, Any], timing: SyncTiming) -> Any:
        result, elapsed = await self._loop.run_in_executor(self._pool, _timed, node.spec.fn, kwargs)
        self._sync.ran_in_thread(timing, elapsed)
        return result

    async def _call_with_timeout(
        self, node: PlanNode, kwargs: dict[str, Any], timing: SyncTiming | None = None
    ) -> Any:
        limit = node.timeout if node.timeout is not None else self._options.node_timeout
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                return await self._call(node, kwargs, timing)
        except TimeoutError:
            if scope.expired():
                raise NodeTimeoutError(f"did not finish within {limit:g}s") from None
            raise

    def _fail(
        self, node: PlanNode, exc: BaseException, started: float, recoverable: bool = True
    ) -> None:
        """The node failed: its error policy may absorb it (`recoverable`: the failure is
        the node's own, not a value refused on its way in), else the run stops."""
        policy = node.on_error
        # A pause is no failure to absorb: the run stops to wait for a person.
        recoverable = recoverable and not isinstance(exc, WaitingForHuman)
        if recoverable and policy is not None and policy.fallback != "fail":
            self._recover(node, exc, started)
            return
        now = time.perf_counter()
        message = str(exc) or repr(exc)
        error_type = type(exc).__name__
        if isinstance(exc, WaitingForHuman):
            self._emit(NodeWaiting(self.run_id, now - self._t0, node.id, message, now - started))
            why = f"node {node.id!r} ({node.spec.name}) waits for a person: {message}"
            self._stop(RunError(exc.code, why, node.id, error_type))
            return
        self._emit(
            NodeFailed(self.run_id, now - self._t0, node.id, error_type, message, now - started)
        )
        code = exc.code if isinstance(exc, DagwrightError) else "node_failed"
        self._stop(
            RunError(
                code,
                f"node {node.id!r} ({node.spec.name}) failed: {error_type}: {message}",
                node.id,
                error_type,
            )
        )

    def _recover(self, node: PlanNode, exc: BaseException, started: float) -> None:
        """A failure the node's policy turns into an output: its default value down its
        edges, or the error record down its `error` port (and SKIPPED down the others)."""
        assert node.on_error is not None
        deliveries: list[tuple[PlanEdge, Any]] = []
        if node.on_error.fallback == "default":
            result = node.on_error.default
            for edge in node.out_edges:
                value = result[edge.source_port] if node.spec.multi_output else result
                deliveries.append((edge, value))
            if node.interface_name is not None and node.spec.role == "flow_output":
                self._outputs[node.interface_name] = result
        else:
            record = error_record(node.id, node.spec.name, exc)
            self._route_error(node, record, started, describe(exc))
            return
        now = time.perf_counter()
        self._emit(
            NodeFinished(
                self.run_id,
                now - self._t0,
                node.id,
                result,
                now - started,
                error=describe(exc),
            )
        )
        self._settle_one()
        self._deliver(deliveries)
        self._spawn(reserve=1)

    def _route_error(
        self, node: PlanNode, record: Any, started: float, error: str, reused: bool = False
    ) -> None:
        """Send a failure down the node's `error` port, and SKIPPED down its other edges."""
        deliveries: list[tuple[PlanEdge, Any]] = [(edge, SKIPPED) for edge in node.out_edges]
        deliveries.extend((edge, record) for edge in node.error_edges)
        now = time.perf_counter()
        self._emit(
            NodeFinished(
                self.run_id, now - self._t0, node.id, record, now - started, "error", reused, error
            )
        )
        self._settle_one()
        self._deliver(deliveries)
        self._spawn(reserve=1)

    def _complete(self, node: PlanNode, result: Any, started: float, reused: bool = False) -> None:
        """Check the output, record it, and pass values (or SKIPPED) down every edge."""
        spec = node.spec
        branch: str | None = None
        if spec.is_condition:
            if not isinstance(result, Route):
                self._fail(
                    node,
                    OutputTypeError(f"a condition must return Route, got {type(result).__name__}"),
                    started,
                )
                return
            branch, result = result.branch, result.value
            if branch not in spec.branch_names(node.config):
                self._fail(node, OutputTypeError(f"returned unknown branch {branch!r}"), started)
                return
        problem = self._check_output(node, result)
        if problem is not None:
            self._fail(node, OutputTypeError(problem), started)
            return
        now = time.perf_counter()
        self._emit(
            NodeFinished(
                self.run_id, now - self._t0, node.id, result, now - started, branch, reused
            )
        )
        if node.interface_name is not None and spec.role == "flow_output":
            self._outputs[node.interface_name] = result
        deliveries: list[tuple[PlanEdge, Any]] = []
        for edge in node.out_edges:
            if edge.branch is not None and edge.branch != branch:
                deliveries.append((edge, SKIPPED))
            elif spec.multi_output:
                deliveries.append((edge, result[edge.source_port]))
            else:
                deliveries.append((edge, result))
        if node.error_edges:  # it succeeded: its error branch is not taken
            deliveries.extend((edge, SKIPPED) for edge in node.error_edges)
        self._settle_one()
        self._deliver(deliveries)

    def _check_output(self, node: PlanNode, result: Any) -> str | None:
        checks = node.output_checks
        if node.spec.multi_output:
            if not isinstance(result, Mapping):
                return f"returned {type(result).__name__}, expected a dict of output ports"
            for name in node.spec.outputs:
                if name not in result:
                    return f"returned no value for output {name!r}"
                check = checks.get(name)
                problem = check(result[name]) if check else None
                if problem:
                    return f"output {name!r}: {problem}"
            return None
        check = checks.get("output")
        if check is None:
            return None
        problem = check(result)
        return f"output: {problem}" if problem else None

    def _deliver(self, deliveries: list[tuple[PlanEdge, Any]]) -> None:
        """Resolve ports; nodes with every port resolved become ready or are skipped. A work
        list rather than recursion, so skipping down a long chain cannot overflow the stack."""
        nodes = self.plan.nodes
        work = deliveries
        while work:
            edge, value = work.pop()
            target = edge.target
            values = self._values[target]
            if values[edge.slot] is not _PENDING:
                continue  # merged port already resolved: the first non-skipped value won
            if value is SKIPPED:
                self._pending[target][edge.slot] -= 1
                if self._pending[target][edge.slot]:
                    continue
            elif edge.check is not None:
                problem = edge.check(value)
                if problem is not None:
                    self._fail(
                        nodes[target],
                        InputTypeError(
                            f"input {nodes[target].port_names[edge.slot]!r} from {edge.label}: "
                            f"{problem}"
                        ),
                        time.perf_counter(),
                        recoverable=False,
                    )
                    return
            values[edge.slot] = value
            self._unresolved[target] -= 1
            if self._unresolved[target]:
                continue
            node = nodes[target]
            if SKIPPED in values:
                port = node.port_names[values.index(SKIPPED)]
                self._emit(
                    NodeSkipped(
                        self.run_id,
                        self._now(),
                        node.id,
                        f"input {port!r} is on a branch not taken",
                    )
                )
                work.extend((out, SKIPPED) for out in node.out_edges)
                self._settle_one()
            else:
                self._enqueue(node)

    def _settle_one(self) -> None:
        self._settled += 1
        if self._settled == len(self.plan.nodes):
            self._stop(None)


class Executor:
    """Starts runs of compiled flows."""

    def __init__(self, options: ExecutorOptions | None = None) -> None:
        self.options = options or ExecutorOptions()
        limit = self.options.global_concurrency
        self._slots = asyncio.Semaphore(limit) if limit is not None else None

    def start(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        reuse: Mapping[str, ReusedOutput] | None = None,
    ) -> Run:
        """Start a run on the running loop. Raises InputError for unknown or missing inputs,
        MissingServiceError for services its nodes need that the executor lacks, before
        anything runs. Nodes named in `reuse` (by id) do not run: their given output
        is passed on as if they had just produced it."""
        values = resolve_inputs(plan, inputs or {})
        check_needs(plan.needs(), self.options.services)  # MissingServiceError, naming them all
        by_index, inner = split_reuse(plan, reuse or {})
        run_id = run_id or uuid.uuid4().hex
        return Run(plan, values, run_id, self.options, self._slots, by_index, inner_reuse=inner)

    async def run(
        self,
        plan: CompiledFlow,
        inputs: Mapping[str, Any] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
    ) -> RunResult:
        run = self.start(plan, inputs)
        try:
            if on_event is not None:
                async for event in run.stream():
                    on_event(event)
            return await run.result()
        except asyncio.CancelledError:
            run.cancel()
            raise


def split_reuse(
    plan: CompiledFlow, reuse: Mapping[str, ReusedOutput]
) -> tuple[dict[int, ReusedOutput], dict[str, dict[str, ReusedOutput]]]:
    """The outputs to reuse of the flow's own nodes, by node index, and those of nodes inside
    its sub-flow nodes, by the iteration they are in (`m[2]/`, or `s/` for a single call) and
    their path below it (`x/y[0]/z`): a sub-flow node that runs hands each iteration its own
    (runtime/subflow.py). Grouped once here, so resuming a map of n items with m reused
    results costs n + m, not n x m. A sub-flow node that is itself reused returns its whole
    output and runs no iteration. InputError naming a node the flow does not have (a paused
    debug run answered after the node was deleted from the canvas)."""
    by_index: dict[int, ReusedOutput] = {}
    inner: dict[str, dict[str, ReusedOutput]] = {}
    for node, out in reuse.items():
        cut = node.find("/") + 1
        if cut:
            inner.setdefault(node[:cut], {})[node[cut:]] = out
            continue
        try:
            by_index[plan.node(node).index] = out
        except KeyError:
            raise InputError(
                f"the run to go on from had node {node!r}, which the flow no longer has"
            ) from None
    return by_index, inner


def resolve_inputs(plan: CompiledFlow, given: Mapping[str, Any]) -> dict[int, Any]:
    """The raw value for each input node, by node index."""
    unknown = sorted(set(given) - set(plan.inputs))
    problems = []
    if unknown:
        takes = ", ".join(plan.inputs) or "no inputs"
        problems.append(f"unknown input(s) {', '.join(map(repr, unknown))}; the flow takes {takes}")
    index = {node.id: node.index for node in plan.nodes}
    values: dict[int, Any] = {}
    for name, flow_input in plan.inputs.items():
        if name in given:
            values[index[flow_input.node]] = given[name]
        elif flow_input.required:
            problems.append(f"missing required input {name!r}")
        else:
            values[index[flow_input.node]] = flow_input.default
    if problems:
        raise InputError("; ".join(problems))
    return values
