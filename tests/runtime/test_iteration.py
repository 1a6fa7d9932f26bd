"""Sub-flows, map, repeat and their nested trace, on real runs of the executor: order,
concurrency measured by timestamps, failure policies, cancellation of every iteration,
usage, depth, and re-running from a sub-flow node."""

from __future__ import annotations

import sys
import time
from typing import Any, TypedDict

import pytest
from pydantic import BaseModel

import dagwright.blocks.input as io_blocks
import dagwright.blocks.iteration as iteration_blocks
from dagwright.registry import APPS, BlockServices, NodeContext, Registry, Usage, block
from dagwright.runtime import (
    AppFlows,
    CompiledFlow,
    Executor,
    ExecutorOptions,
    IterationFinished,
    IterationStarted,
    NodeCancelled,
    NodeFinished,
    NodeStarted,
    NodeWaiting,
    ReusedOutput,
    build_trace,
    compile_flow,
    iteration_nodes,
    parse_flow,
)
from dagwright.runtime.pause import WAITING_FOR_HUMAN, WaitingForHuman
from support import blocks as test_blocks
from support.flows import edge, node


class Draft(TypedDict):
    state: str
    done: bool


class GrowConfig(BaseModel):
    until: int = 3


@block("it_grow", category="data_process", description="Adds a '+' to the state.", inline=True)
def it_grow(config: GrowConfig, state: str) -> Draft:
    """Appends '+' to the state; done once it holds `until` of them."""
    grown = state + "+"
    return {"state": grown, "done": grown.count("+") >= config.until}


@block("it_metered", category="data_process", description="Records a model call.")
async def it_metered(ctx: NodeContext, x: Any = None) -> Any:
    """Accounts for one pretend model call and passes x on."""
    ctx.record_usage(Usage(prompt_tokens=3, completion_tokens=2, cost=0.25, calls=1))
    return x


@block("it_ask", category="data_process", description="Waits for a person below zero.")
def it_ask(x: int) -> int:
    """Passes a positive x on; a negative one waits for a person, as human_input does."""
    if x < 0:
        raise WaitingForHuman(f"asked about {x}")
    return x


def registry() -> Registry:
    return Registry.from_modules([io_blocks, test_blocks, iteration_blocks, sys.modules[__name__]])


def doc(nodes: list, edges: list, subflows: dict | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"format": "dagwright.flow", "version": 1, "name": "t"}
    data.update(nodes=nodes, edges=edges)
    if subflows is not None:
        data["subflows"] = subflows
    return data


def plan_of(nodes: list, edges: list, subflows: dict | None = None) -> CompiledFlow:
    return compile_flow(parse_flow(doc(nodes, edges, subflows)), registry())


def sub(nodes: list, edges: list) -> dict[str, Any]:
    return {"nodes": nodes, "edges": edges}


# item -> item + 1, with a constant 1: three nodes around an add
INC = sub(
    [
        node("item", "json_input", name="item"),
        node("one", "t_const", value=1),
        node("add", "t_add"),
        node("y", "output", name="y"),
    ],
    [edge("item", "add.a"), edge("one", "add.b"), edge("add", "y")],
)


def sleeper(block_name: str, seconds: float) -> dict[str, Any]:
    return sub(
        [
            node("item", "json_input", name="item"),
            node("wait", block_name, seconds=seconds),
            node("y", "output", name="y"),
        ],
        [edge("item", "wait.x"), edge("wait", "y")],
    )


def map_flow(subflow: dict, **config: Any) -> CompiledFlow:
    return plan_of(
        [
            node("xs", "json_input", name="xs"),
            node("m", "map", subflow="each", **config),
            node("out", "output", name="ys"),
            node("failed", "output", name="failed"),
        ],
        [edge("xs", "m.items"), edge("m.output", "out"), edge("m.failed", "failed")],
        {"each": subflow},
    )


async def test_map_returns_results_in_input_order_with_nested_events() -> None:
    plan = map_flow(INC, output="y", concurrency=3)
    result = await Executor().run(plan, {"xs": [10, 20, 30, 40]})
    assert result.status == "succeeded", result.error
    assert result.outputs == {"ys": [11, 21, 31, 41], "failed": []}
    finished = {e.node: e.output for e in result.events if isinstance(e, NodeFinished)}
    assert finished["m[2]/add"] == 31
    assert finished["m[0]/item"] == 10
    iterations = [e for e in result.events if isinstance(e, IterationFinished)]
    assert sorted(e.index for e in iterations) == [0, 1, 2, 3]
    assert all(e.node == "m" and e.status == "succeeded" for e in iterations)
    trace = build_trace(result.events, plan.blocks())
    assert [it.index for it in trace["m"].iterations] == [0, 1, 2, 3]
    assert [it.status for it in trace["m"].iterations] == ["succeeded"] * 4
    inner = iteration_nodes(trace, "m", 1)
    assert set(inner) == {"item", "one", "add", "y"}
    assert inner["add"].inputs == {"a": 20, "b": 1}
    assert inner["add"].output == 21


@pytest.mark.parametrize("block_name", ["t_sleep", "t_sleep_sync"])
async def test_map_runs_items_concurrently_up_to_the_limit(block_name: str) -> None:
    plan = map_flow(sleeper(block_name, 0.2), output="y", concurrency=3)
    started = time.perf_counter()
    result = await Executor().run(plan, {"xs": list(range(6))})
    took = time.perf_counter() - started
    assert result.outputs["ys"] == list(range(6))
    # Six items of 0.2 s, three at a time: two waves, never one, never six.
    assert 0.38 < took < 0.7
    starts = sorted(
        e.t for e in result.events if isinstance(e, NodeStarted) and e.node.endswith("/wait")
    )
    assert starts[2] - starts[0] < 0.1  # the first wave started together
    assert starts[3] - starts[0] > 0.15  # the fourth waited for a free place


async def test_map_item_policies() -> None:
    failing = sub(
        [
            node("item", "json_input", name="item"),
            node("sign", "t_is_positive"),
            node("bad", "t_fail", message="not positive"),
            node("y", "output", name="y"),
        ],
        [
            edge("item", "sign.x"),
            edge("sign", "y", branch="true"),
            edge("sign", "bad.x", branch="false"),
            edge("bad", "y"),
        ],
    )
    items = {"xs": [1, -2, 3, -4]}
    skipped = await Executor().run(map_flow(failing, output="y", on_item_error="skip"), items)
    assert skipped.outputs["ys"] == [1, 3]
    assert [f["index"] for f in skipped.outputs["failed"]] == [1, 3]
    assert "not positive" in skipped.outputs["failed"][0]["error"]
    assert "m[1]" in skipped.outputs["failed"][0]["error"]

    defaulted = await Executor().run(
        map_flow(failing, output="y", on_item_error="default", default=0), items
    )
    assert defaulted.outputs["ys"] == [1, 0, 3, 0]

    failed = await Executor().run(map_flow(failing, output="y", concurrency=1), items)
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error.node == "m"
    assert "m[1] failed" in failed.error.message
    assert "not positive" in failed.error.message
    # concurrency 1 and fail-fast: the items after the failing one never started
    assert not any(isinstance(e, IterationStarted) and e.index == 2 for e in failed.events)
    trace = build_trace(failed.events)
    assert [it.status for it in trace["m"].iterations] == ["succeeded", "failed"]
    assert trace["m[1]/bad"].status == "failed"


async def test_items_that_wait_for_a_person_are_waiting_not_failed() -> None:
    asking = sub(
        [
            node("item", "json_input", name="item"),
            node("ask", "it_ask"),
            node("y", "output", name="y"),
        ],
        [edge("item", "ask.x"), edge("ask", "y")],
    )
    result = await Executor().run(map_flow(asking, output="y"), {"xs": [1, -2, 3, -4]})
    assert result.status == "failed"  # the root run stops; services record it as waiting
    assert result.error is not None
    assert (result.error.code, result.error.node) == (WAITING_FOR_HUMAN, "m")
    assert "2 of 4 items wait for a person" in result.error.message
    waiting = {e.node: e.message for e in result.events if isinstance(e, NodeWaiting)}
    assert set(waiting) == {"m[1]/ask", "m[3]/ask", "m"}
    assert waiting["m[1]/ask"] == "asked about -2"
    finished = {e.index: e.status for e in result.events if isinstance(e, IterationFinished)}
    assert finished == {0: "succeeded", 1: "waiting", 2: "succeeded", 3: "waiting"}
    trace = build_trace(result.events)
    assert [it.status for it in trace["m"].iterations] == [
        "succeeded",
        "waiting",
        "succeeded",
        "waiting",
    ]
    assert (trace["m"].status, trace["m[1]/ask"].status) == ("waiting", "waiting")
    assert trace["m[1]/ask"].error == "asked about -2"
    assert trace["m[0]/ask"].status == "succeeded"


async def test_a_failing_item_cancels_the_items_still_running() -> None:
    mixed = sub(
        [
            node("item", "json_input", name="item"),
            node("sign", "t_is_positive"),
            node("slow", "t_sleep", seconds=5),
            node("bad", "t_fail"),
            node("y", "output", name="y"),
        ],
        [
            edge("item", "sign.x"),
            edge("sign", "slow.x", branch="true"),
            edge("sign", "bad.x", branch="false"),
            edge("slow", "y"),
            edge("bad", "y"),
        ],
    )
    started = time.perf_counter()
    result = await Executor().run(map_flow(mixed, concurrency=4), {"xs": [1, 2, -3, 4]})
    assert time.perf_counter() - started < 1
    assert result.status == "failed"
    cancelled = {e.node for e in result.events if isinstance(e, NodeCancelled)}
    assert {"m[0]/slow", "m[1]/slow", "m[3]/slow"} <= cancelled


async def test_cancelling_the_run_stops_every_iteration_at_once() -> None:
    plan = map_flow(sleeper("t_sleep", 5), concurrency=50)
    run = Executor().start(plan, {"xs": list(range(50))})
    waiting = 0
    async for event in run.stream():
        waiting += isinstance(event, NodeStarted) and event.node.endswith("/wait")
        if waiting == 50:
            break
    started = time.perf_counter()
    run.cancel("stop")
    result = await run.result()
    assert time.perf_counter() - started < 0.5
    assert result.status == "cancelled"
    cancelled = {e.node for e in result.events if isinstance(e, NodeCancelled)}
    assert {f"m[{i}]/wait" for i in range(50)} <= cancelled
    assert "m" in cancelled
    trace = build_trace(result.events)
    assert {it.status for it in trace["m"].iterations} == {"cancelled"}


GROW = sub(
    [
        node("state", "text_input", name="state"),
        node("grow", "it_grow", until=3),
        node("next", "output", name="state"),
        node("done", "output", name="done"),
    ],
    [edge("state", "grow.state"), edge("grow.state", "next"), edge("grow.done", "done")],
)


def repeat_flow(**config: Any) -> CompiledFlow:
    return plan_of(
        [
            node("start", "text_input", name="start"),
            node("loop", "repeat", subflow="grow", **config),
            node("out", "output", name="answer"),
            node("rounds", "output", name="rounds"),
            node("stopped", "output", name="stopped"),
        ],
        [
            edge("start", "loop.state"),
            edge("loop.output", "out"),
            edge("loop.rounds", "rounds"),
            edge("loop.stopped", "stopped"),
        ],
        {"grow": GROW},
    )


async def test_repeat_runs_until_the_subflow_says_stop() -> None:
    result = await Executor().run(repeat_flow(max_rounds=10), {"start": "a"})
    assert result.status == "succeeded", result.error
    assert result.outputs == {"answer": "a+++", "rounds": 3, "stopped": "until"}
    trace = build_trace(result.events)
    assert [it.index for it in trace["loop"].iterations] == [0, 1, 2]
    assert trace["loop[1]/grow"].inputs == {"state": "a+"}
    assert trace["loop[2]/grow"].output == {"state": "a+++", "done": True}


async def test_repeat_stops_at_max_rounds_and_says_so() -> None:
    result = await Executor().run(repeat_flow(max_rounds=2), {"start": "a"})
    assert result.outputs == {"answer": "a++", "rounds": 2, "stopped": "max_rounds"}
    strict = await Executor().run(repeat_flow(max_rounds=2, on_max_rounds="fail"), {"start": "a"})
    assert strict.status == "failed"
    assert strict.error is not None
    assert strict.error.code == "repeat_exhausted"


async def test_nested_subflows_have_nested_paths_and_usage_counts_once() -> None:
    metered = sub(
        [
            node("item", "json_input", name="item"),
            node("meter", "it_metered"),
            node("y", "output", name="y"),
        ],
        [edge("item", "meter.x"), edge("meter", "y")],
    )
    outer = sub(
        [
            node("xs", "json_input", name="xs"),
            node("inner", "map", subflow="metered", output="y"),
            node("ys", "output", name="ys"),
        ],
        [edge("xs", "inner.items"), edge("inner.output", "ys")],
    )
    plan = plan_of(
        [
            node("xs", "json_input", name="xs"),
            node("call", "subflow", subflow="outer", output="ys"),
            node("out", "output", name="ys"),
        ],
        [edge("xs", "call.xs"), edge("call", "out")],
        {"outer": outer, "metered": metered},
    )
    result = await Executor().run(plan, {"xs": [1, 2]})
    assert result.status == "succeeded", result.error
    assert result.outputs == {"ys": [1, 2]}
    finished = {e.node for e in result.events if isinstance(e, NodeFinished)}
    assert {"call/inner", "call/inner[0]/meter", "call/inner[1]/meter"} <= finished
    assert result.usage.calls == 2
    assert result.usage.prompt_tokens == 6
    assert {e.run_id for e in result.events} == {result.run_id}


async def test_rerun_reuses_a_map_nodes_output() -> None:
    plan = plan_of(
        [
            node("xs", "json_input", name="xs"),
            node("m", "map", subflow="each", output="y"),
            node("out", "output", name="ys"),
        ],
        [edge("xs", "m.items"), edge("m.output", "out")],
        {"each": INC},
    )
    first = await Executor().run(plan, {"xs": [1]})
    assert first.outputs == {"ys": [2]}
    # Re-run from `out`: the map's earlier output (changed here, to see it used) is reused.
    # The earlier run's record also holds the map's inner nodes, by path: they come back
    # whole in the map's output and are not nodes of this flow.
    reused = {
        "xs": ReusedOutput([1]),
        "m": ReusedOutput({"output": [9], "failed": []}),
        "m[0]/add": ReusedOutput(2),
    }
    run = Executor().start(plan, {"xs": [1]}, reuse=reused)
    result = await run.result()
    assert result.outputs == {"ys": [9]}
    assert not any(isinstance(e, IterationStarted) for e in result.events)


class Apps(AppFlows):
    """App flows from documents held in memory, compiled as the server compiles them."""

    def __init__(self, docs: dict[str, dict[str, Any]]) -> None:
        self.docs = docs
        self.plans = {
            slug: compile_flow(parse_flow(flow), registry(), self) for slug, flow in docs.items()
        }

    def app_flow(self, app: str, version: str) -> Any:
        return parse_flow(self.docs[app])

    async def compiled_app(self, app: str, version: str) -> CompiledFlow:
        return self.plans[app]


def calling(app: str) -> dict[str, Any]:
    return doc(
        [
            node("x", "json_input", name="x"),
            node("call", "subflow", app=f"{app}@published", output="y"),
            node("y", "output", name="y"),
        ],
        [edge("x", "call.x"), edge("call", "y")],
    )


async def test_app_references_run_as_nested_spans_and_recursion_hits_the_depth_limit() -> None:
    leaf = doc([node("x", "json_input", name="x"), node("y", "output", name="y")], [edge("x", "y")])
    apps = Apps({"leaf": leaf, "loop": calling("leaf")})
    caller = compile_flow(parse_flow(calling("leaf")), registry(), apps)
    executor = Executor(ExecutorOptions(services=BlockServices({APPS: apps})))
    result = await executor.run(caller, {"x": 5})
    assert result.outputs == {"y": 5}
    assert any(e.node == "call/y" for e in result.events if isinstance(e, NodeFinished))

    # `loop` calling its published version is valid while that version calls `leaf`;
    # publishing it closes the loop, and at run time the depth limit stops it, saying why.
    looping = compile_flow(parse_flow(calling("loop")), registry(), apps)
    apps.plans["loop"] = looping
    result = await executor.run(looping, {"x": 1})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "subflow_depth"
    assert "limit is 16" in result.error.message


async def test_map_over_an_empty_list_runs_nothing() -> None:
    result = await Executor().run(map_flow(INC, output="y"), {"xs": []})
    assert result.outputs == {"ys": [], "failed": []}
    assert not any(isinstance(e, IterationStarted) for e in result.events)
