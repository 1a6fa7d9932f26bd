"""Where sync blocks run (runtime/executor.py, SyncPolicy): quick ones move onto the event
loop after their first calls in threads, slow ones stay in threads, a block that overruns on
the loop goes back to threads for good, `blocking=True` and nodes with a timeout always use a
thread, and a long run of quick nodes still gives the loop its turns.

Behaviour is asserted by the thread each call ran on; the policies used here have budgets
far from the blocks' real times, so a loaded machine cannot flip an outcome."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import pytest

import dagwright.blocks.input as io_blocks
from dagwright.errors import BlockDefinitionError
from dagwright.registry import NodeContext, Registry, block
from dagwright.runtime import (
    CompiledFlow,
    Executor,
    ExecutorOptions,
    NodeFinished,
    NodeMessage,
)
from dagwright.runtime import executor as executor_module
from dagwright.runtime.executor import SyncPolicy
from support.flows import compiled, edge, node

# Calls recorded by the blocks: (block name, whether the call ran on the loop's thread).
CALLS: list[tuple[str, bool]] = []
DELAY = {"p_work": 0.0}


def _record(name: str) -> None:
    CALLS.append((name, threading.current_thread() is threading.main_thread()))


@block("p_start", category="data_process", description="1.", inline=True)
def p_start() -> int:
    """Starts a chain."""
    return 1


@block("p_quick", category="data_process", description="x + 1, a plain sync block.")
def p_quick(x: int) -> int:
    """A plain sync block (neither inline nor blocking)."""
    _record("p_quick")
    return x + 1


@block("p_work", category="data_process", description="x + 1 after DELAY seconds.")
def p_work(x: int) -> int:
    """A plain sync block whose duration the test sets."""
    _record("p_work")
    if DELAY["p_work"]:
        time.sleep(DELAY["p_work"])
    return x + 1


@block("p_slow", category="data_process", description="x + 1 after 50 ms.")
def p_slow(x: int) -> int:
    """A plain sync block that blocks its thread for 50 ms."""
    _record("p_slow")
    time.sleep(0.05)
    return x + 1


@block("p_blocking", category="data_process", description="x + 1.", blocking=True)
def p_blocking(x: int) -> int:
    """Quick, but declared blocking: always in a thread."""
    _record("p_blocking")
    return x + 1


@block("p_tell", category="data_process", description="x + 1, with a message.")
def p_tell(ctx: NodeContext, x: int) -> int:
    """A plain sync block that reports through its context."""
    _record("p_tell")
    ctx.emit("note", x=x)
    return x + 1


@block("p_tick", category="data_process", description="x + 1 after 10 ms.")
async def p_tick(x: int) -> int:
    """An async block that waits 10 ms."""
    await asyncio.sleep(0.01)
    return x + 1


@block("p_spin", category="data_process", description="x + 1 after 0.2 ms.", inline=True)
def p_spin(x: int) -> int:
    """Holds the loop for 0.2 ms (an inline block doing real work)."""
    end = time.perf_counter() + 0.0002
    while time.perf_counter() < end:
        pass
    return x + 1


REGISTRY = Registry.from_modules([io_blocks, sys.modules[__name__]])


@pytest.fixture(autouse=True)
def _fresh() -> None:
    CALLS.clear()
    DELAY["p_work"] = 0.0


def chain(block_name: str, length: int, timeout: float | None = None) -> CompiledFlow:
    nodes = [node("s", "p_start")]
    edges = []
    previous = "s"
    for i in range(length):
        nodes.append(node(f"n{i}", block_name, timeout=timeout))
        edges.append(edge(previous, f"n{i}.x"))
        previous = f"n{i}"
    nodes.append(node("out", "output", name="result"))
    edges.append(edge(previous, "out"))
    return compiled(nodes, edges, REGISTRY)


def on_loop(name: str) -> list[bool]:
    return [loop for block_name, loop in CALLS if block_name == name]


def executor(policy: SyncPolicy) -> Executor:
    return Executor(ExecutorOptions(sync_policy=policy))


async def test_a_quick_sync_block_moves_onto_the_loop_after_its_trials() -> None:
    policy = SyncPolicy(budget=0.5, trials=2)
    result = await executor(policy).run(chain("p_quick", 6))
    assert result.outputs == {"result": 7}
    # The first calls of a new block type never hold the loop: they are timed in threads.
    assert on_loop("p_quick") == [False, False, True, True, True, True]
    assert policy.placement()[f"{__name__}.p_quick"] == "loop"
    # What the executor learnt holds for its later runs.
    await executor(policy).run(chain("p_quick", 3))
    assert on_loop("p_quick")[6:] == [True, True, True]


async def test_a_slow_sync_block_stays_in_threads_and_async_branches_go_on() -> None:
    policy = SyncPolicy(budget=0.01, trials=2)
    nodes = [node("s", "p_start"), node("out", "output", name="slow"), node("o2", "output")]
    nodes[2]["config"] = {"name": "fast"}
    edges = []
    for branch, block_name, length in (("a", "p_slow", 5), ("b", "p_tick", 5)):
        previous = "s"
        for i in range(length):
            nodes.append(node(f"{branch}{i}", block_name))
            edges.append(edge(previous, f"{branch}{i}.x"))
            previous = f"{branch}{i}"
        edges.append(edge(previous, "out" if branch == "a" else "o2"))
    result = await executor(policy).run(compiled(nodes, edges, REGISTRY))
    assert result.outputs == {"slow": 6, "fast": 6}
    assert on_loop("p_slow") == [False] * 5
    assert policy.placement()[f"{__name__}.p_slow"] == "trial"
    finished = {e.node: e.t for e in result.events if isinstance(e, NodeFinished)}
    # The async branch (5 x 10 ms) ran while the first slow node (50 ms) held its thread.
    assert finished["b4"] < finished["a1"]


async def test_a_block_that_overruns_on_the_loop_goes_back_to_threads_for_good() -> None:
    policy = SyncPolicy(budget=0.02, allowance=0.02, trials=2)
    ex = executor(policy)
    await ex.run(chain("p_work", 3))
    assert on_loop("p_work") == [False, False, True]
    DELAY["p_work"] = 0.06  # now every call overruns: the first on the loop sends it back
    await ex.run(chain("p_work", 3))
    assert on_loop("p_work")[3:] == [True, False, False]
    assert policy.placement()[f"{__name__}.p_work"] == "thread"
    DELAY["p_work"] = 0.0  # quick again: it stays in threads all the same
    await ex.run(chain("p_work", 4))
    assert on_loop("p_work")[6:] == [False] * 4


async def test_a_short_overrun_is_paid_back_by_quick_calls() -> None:
    policy = SyncPolicy(budget=0.05, allowance=0.2, trials=1)
    ex = executor(policy)
    await ex.run(chain("p_work", 2))
    DELAY["p_work"] = 0.1  # 50 ms over the budget: within the allowance
    await ex.run(chain("p_work", 1))
    DELAY["p_work"] = 0.0
    await ex.run(chain("p_work", 3))
    assert on_loop("p_work") == [False, True, True, True, True, True]
    assert policy.placement()[f"{__name__}.p_work"] == "loop"


async def test_blocking_blocks_and_nodes_with_a_timeout_always_use_a_thread() -> None:
    policy = SyncPolicy(budget=0.5, trials=1)
    await executor(policy).run(chain("p_blocking", 4))
    assert on_loop("p_blocking") == [False] * 4
    await executor(policy).run(chain("p_quick", 2))
    assert on_loop("p_quick") == [False, True]
    # A timeout can only be kept in a thread (the run stops waiting for it).
    await executor(policy).run(chain("p_quick", 3, timeout=5.0))
    assert on_loop("p_quick")[2:] == [False] * 3
    options = ExecutorOptions(sync_policy=policy, node_timeout=5.0)
    await Executor(options).run(chain("p_quick", 2))
    assert on_loop("p_quick")[5:] == [False] * 2


async def test_a_block_on_the_loop_reports_through_its_context() -> None:
    policy = SyncPolicy(budget=0.5, trials=1)
    result = await executor(policy).run(chain("p_tell", 4))
    assert on_loop("p_tell") == [False, True, True, True]
    notes = [e for e in result.events if isinstance(e, NodeMessage) and e.kind == "note"]
    assert [(e.node, e.data["x"]) for e in notes] == [("n0", 1), ("n1", 2), ("n2", 3), ("n3", 4)]
    for message in notes:  # each message comes before its node's end
        end = next(
            e for e in result.events if isinstance(e, NodeFinished) and e.node == message.node
        )
        assert result.events.index(message) < result.events.index(end)


async def test_a_long_chain_of_quick_nodes_gives_the_loop_turns() -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    # 300 nodes x 0.2 ms: 60 ms that a worker not yielding would hold the loop for.
    result = await executor(SyncPolicy(turn=0.002)).run(chain("p_spin", 300))
    task.cancel()
    assert result.outputs == {"result": 301}
    # A turn every 2 ms: some 30 of them (a worker that never yields lets through ~6).
    assert ticks - before >= 20


def test_blocking_contradicts_inline_and_async() -> None:
    with pytest.raises(BlockDefinitionError, match="contradict"):

        @block("p_bad", category="data_process", description="x.", inline=True, blocking=True)
        def p_bad(x: int) -> int:
            """Both."""
            return x

    with pytest.raises(BlockDefinitionError, match="blocking=True is for sync"):

        @block("p_bad_async", category="data_process", description="x.", blocking=True)
        async def p_bad_async(x: int) -> int:
            """Async and blocking."""
            return x


def test_block_modes() -> None:
    modes = {name: REGISTRY.get(name).mode for name in ("p_quick", "p_blocking", "p_spin")}
    assert modes == {"p_quick": "auto", "p_blocking": "thread", "p_spin": "inline"}
    assert REGISTRY.get("p_tick").mode == "async"
    assert isinstance(ExecutorOptions().sync_policy, SyncPolicy)
    assert ExecutorOptions().sync_policy is not ExecutorOptions().sync_policy


class _Usage:
    def __init__(self, cpu: float, voluntary: int, involuntary: int) -> None:
        self.cpu = cpu
        self.ru_nvcsw, self.ru_nivcsw = voluntary, involuntary


@pytest.mark.parametrize(
    ("after", "counted"),
    [
        (_Usage(0.001, 10, 12), False),  # taken off the CPU by the OS: not the block's doing
        (_Usage(0.001, 11, 12), True),  # waited of its own accord (I/O, sleep, a lock)
        (_Usage(0.090, 10, 12), True),  # computed for most of the overrun
        (_Usage(0.001, 10, 10), True),  # no switch at all: it held the loop
    ],
)
def test_an_overrun_spent_preempted_costs_no_debt(
    monkeypatch: pytest.MonkeyPatch, after: _Usage, counted: bool
) -> None:
    readings = iter([_Usage(0.0, 10, 10), after])
    current = _Usage(0.0, 10, 10)

    def usage() -> _Usage:
        nonlocal current
        current = next(readings)
        return current

    monkeypatch.setattr(executor_module, "_thread_usage", usage)
    monkeypatch.setattr(executor_module.time, "thread_time", lambda: current.cpu)
    policy = SyncPolicy(budget=0.001, allowance=0.004)
    timing = policy.timing(p_quick)
    timing.inline = True
    policy.mark()
    policy.ran_inline(timing, 0.1)  # 100 ms on the loop
    assert timing.pinned is counted
