"""Executor semantics, measured on real runs: parallelism by timestamps, skipping, merging,
failures, timeouts, cancellation, run-time type checks and events."""

from __future__ import annotations

import asyncio
import time

import pytest

from dagwright.errors import InputError
from dagwright.registry import BlockServices, MissingServiceError
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    NodeUsage,
    RunFinished,
    RunStarted,
    build_trace,
)
from support.flows import compiled, edge, node


def started(events: list, node_id: str) -> float:
    return next(e.t for e in events if isinstance(e, NodeStarted) and e.node == node_id)


def finished(events: list, node_id: str) -> float:
    return next(e.t for e in events if isinstance(e, NodeFinished) and e.node == node_id)


def out(name: str = "out", output: str = "result") -> dict:
    return node(name, "output", name=output)


async def test_chain_computes_in_order() -> None:
    plan = compiled(
        [
            node("n", "json_input", name="n"),
            node("c", "t_const", value=2),
            node("add", "t_add"),
            node("add2", "t_add"),
            out(),
        ],
        [
            edge("n", "add.a"),
            edge("c", "add.b"),
            edge("add", "add2.a"),
            edge("c", "add2.b"),
            edge("add2", "out"),
        ],
    )
    result = await Executor().run(plan, {"n": "1"})
    assert result.status == "succeeded"
    assert result.outputs == {"result": 5}
    assert started(result.events, "add2") >= finished(result.events, "add")


@pytest.mark.parametrize("block", ["t_sleep", "t_sleep_sync"])
async def test_independent_branches_run_concurrently(block: str) -> None:
    branches = [node(f"s{i}", block, seconds=0.3) for i in range(4)]
    plan = compiled(
        [
            node("c", "t_const", value=1),
            *branches,
            node("join", "t_add"),
            node("join2", "t_add"),
            node("join3", "t_add"),
            out(),
        ],
        [
            *(edge("c", f"s{i}.x") for i in range(4)),
            edge("s0", "join.a"),
            edge("s1", "join.b"),
            edge("join", "join2.a"),
            edge("s2", "join2.b"),
            edge("join2", "join3.a"),
            edge("s3", "join3.b"),
            edge("join3", "out"),
        ],
    )
    begin = time.perf_counter()
    result = await Executor().run(plan)
    wall = time.perf_counter() - begin
    assert result.outputs == {"result": 4}
    starts = [started(result.events, f"s{i}") for i in range(4)]
    ends = [finished(result.events, f"s{i}") for i in range(4)]
    # Every branch started before any finished: they overlapped in time.
    assert max(starts) < min(ends)
    assert wall < 0.3 * 2  # serial would take 1.2 s


async def test_sync_block_does_not_block_the_loop() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("s", "t_sleep_sync", seconds=0.3), out()],
        [edge("c", "s.x"), edge("s", "out")],
    )
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    await Executor().run(plan)
    task.cancel()
    assert ticks >= 15  # the loop kept turning while the block slept in its thread


def condition_flow(value: int) -> dict:
    nodes = [
        node("c", "t_const", value=value),
        node("cond", "t_is_positive"),
        node("pos1", "t_add"),
        node("pos2", "t_add"),
        node(
            "neg",
            "t_add",
        ),
        out(),
    ]
    edges = [
        edge("c", "cond.x"),
        edge("cond", "pos1.a", branch="true"),
        edge("pos1", "pos2.a"),
        edge("cond", "neg.a", branch="false"),
        edge("pos2", "out"),
        edge("neg", "out"),
    ]
    return {"nodes": nodes, "edges": edges}


async def test_condition_skips_branch_not_taken_and_propagates() -> None:
    result = await Executor().run(compiled(**condition_flow(-3)))
    assert result.status == "succeeded"
    assert result.outputs == {"result": -3}  # the merged port took the branch that ran
    skipped = {e.node for e in result.events if isinstance(e, NodeSkipped)}
    assert skipped == {"pos1", "pos2"}
    started_nodes = {e.node for e in result.events if isinstance(e, NodeStarted)}
    assert not started_nodes & skipped
    cond = next(e for e in result.events if isinstance(e, NodeFinished) and e.node == "cond")
    assert cond.branch == "false"
    traces = build_trace(result.events)
    assert traces["pos2"].status == "skipped"
    assert "branch not taken" in (traces["pos2"].error or "")


async def test_condition_true_branch() -> None:
    result = await Executor().run(compiled(**condition_flow(5)))
    assert result.outputs == {"result": 5}
    assert {e.node for e in result.events if isinstance(e, NodeSkipped)} == {"neg"}


async def test_output_on_branch_not_taken_is_absent_not_none() -> None:
    plan = compiled(
        [
            node("c", "t_const", value=-1),
            node("cond", "t_is_positive"),
            node("yes", "output", name="yes"),
            node("no", "output", name="no"),
        ],
        [
            edge("c", "cond.x"),
            edge("cond", "yes", branch="true"),
            edge("cond", "no", branch="false"),
        ],
    )
    result = await Executor().run(plan)
    assert result.outputs == {"no": -1}


async def test_none_output_is_a_value_not_a_skip() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("n", "t_none"), out()],
        [edge("c", "n.x"), edge("n", "out")],
    )
    result = await Executor().run(plan)
    assert result.outputs == {"result": None}
    assert not any(isinstance(e, NodeSkipped) for e in result.events)


async def test_merge_takes_first_value_to_arrive() -> None:
    plan = compiled(
        [
            node("slow_src", "t_const", value="slow"),
            node("fast_src", "t_const", value="fast"),
            node("slow", "t_sleep", seconds=0.2),
            node("fast", "t_sleep", seconds=0.01),
            out(),
        ],
        [
            edge("slow_src", "slow.x"),
            edge("fast_src", "fast.x"),
            edge("slow", "out"),
            edge("fast", "out"),
        ],
    )
    result = await Executor().run(plan)
    assert result.outputs == {"result": "fast"}
    # The output did not wait for the slow branch, and the run still let it finish.
    assert started(result.events, "out") < finished(result.events, "slow")
    assert result.status == "succeeded"


async def test_many_edges_from_one_output_all_deliver() -> None:
    plan = compiled(
        [node("c", "t_const", value=2), node("a", "t_add"), node("b", "t_add"), out()],
        [edge("c", "a.a"), edge("c", "a.b"), edge("c", "b.a"), edge("a", "b.b"), edge("b", "out")],
    )
    assert (await Executor().run(plan)).outputs == {"result": 6}


async def test_multiple_output_ports() -> None:
    plan = compiled(
        [
            node("c", "t_const", value=7),
            node("p", "t_pair"),
            node("u", "t_upper"),
            node("o1", "output", name="left"),
            node("o2", "output", name="right"),
        ],
        [edge("c", "p.x"), edge("p.left", "o1"), edge("p.right", "u.text"), edge("u", "o2")],
    )
    assert (await Executor().run(plan)).outputs == {"left": 7, "right": "7"}


async def test_failing_node_fails_run_and_cancels_running_nodes() -> None:
    plan = compiled(
        [
            node("c", "t_const", value=1),
            node("bad", "t_fail", message="disk on fire"),
            node("slow", "t_sleep", seconds=10),
            node("after", "t_add"),
            out(),
        ],
        [
            edge("c", "bad.x"),
            edge("c", "slow.x"),
            edge("bad", "after.a"),
            edge("slow", "after.b"),
            edge("after", "out"),
        ],
    )
    begin = time.perf_counter()
    result = await Executor().run(plan)
    assert time.perf_counter() - begin < 2
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "bad"
    assert result.error.code == "node_failed"
    assert result.error.message == "node 'bad' (t_fail) failed: ValueError: disk on fire"
    failed = [e for e in result.events if isinstance(e, NodeFailed)]
    assert [(e.node, e.error_type, e.message) for e in failed] == [
        ("bad", "ValueError", "disk on fire")
    ]
    cancelled = [e.node for e in result.events if isinstance(e, NodeCancelled)]
    assert cancelled == ["slow"]
    assert isinstance(result.events[-1], RunFinished)
    trace = build_trace(result.events, plan.blocks())
    assert trace["after"].status == "pending"
    assert trace["slow"].status == "cancelled"
    assert trace["bad"].status == "failed"


async def test_node_timeout() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("hang", "t_sleep", seconds=30, timeout=0.1), out()],
        [edge("c", "hang.x"), edge("hang", "out")],
    )
    begin = time.perf_counter()
    result = await Executor().run(plan)
    assert time.perf_counter() - begin < 1
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "node_timeout"
    assert result.error.node == "hang"
    assert "did not finish within 0.1s" in result.error.message


async def test_default_node_timeout_applies_to_sync_blocks() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("s", "t_sleep_sync", seconds=1), out()],
        [edge("c", "s.x"), edge("s", "out")],
    )
    result = await Executor(ExecutorOptions(node_timeout=0.1)).run(plan)
    assert result.error is not None
    assert result.error.code == "node_timeout"


async def test_run_timeout() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("s", "t_sleep", seconds=5), out()],
        [edge("c", "s.x"), edge("s", "out")],
    )
    result = await Executor(ExecutorOptions(run_timeout=0.1)).run(plan)
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.code == "run_timeout"
    assert [e.node for e in result.events if isinstance(e, NodeCancelled)] == ["s"]


async def test_cancel_a_run() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("s", "t_sleep", seconds=30), out()],
        [edge("c", "s.x"), edge("s", "out")],
    )
    run = Executor().start(plan)
    await asyncio.sleep(0.05)
    run.cancel()
    result = await run.result()
    assert result.status == "cancelled"
    assert run.status == "cancelled"
    assert [e.node for e in result.events if isinstance(e, NodeCancelled)] == ["s"]


async def test_cancelling_the_caller_cancels_the_run() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("s", "t_sleep", seconds=30), out()],
        [edge("c", "s.x"), edge("s", "out")],
    )
    run = Executor().start(plan)
    caller = asyncio.create_task(run.result())
    await asyncio.sleep(0.05)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert run.status == "cancelled"
    assert [e.node for e in run.events if isinstance(e, NodeCancelled)] == ["s"]
    assert isinstance(run.events[-1], RunFinished)


async def test_wrong_output_type_fails_naming_node_and_types() -> None:
    plan = compiled(
        [node("w", "t_wrong_type"), node("add", "t_add"), out()],
        [edge("w", "add.a"), edge("add", "out")],
    )
    result = await Executor().run(plan)
    assert result.error is not None
    assert result.error.code == "output_type"
    assert result.error.node == "w"
    assert "expected int, got str 'not a number'" in result.error.message


async def test_any_into_typed_port_is_checked_at_run_time() -> None:
    plan = compiled(
        [node("j", "json_input", name="j"), node("u", "t_upper"), out()],
        [edge("j", "u.text"), edge("u", "out")],
    )
    ok = await Executor().run(plan, {"j": '"abc"'})
    assert ok.outputs == {"result": "ABC"}
    bad = await Executor().run(plan, {"j": "42"})
    assert bad.error is not None
    assert bad.error.code == "input_type"
    assert bad.error.node == "u"
    assert "input 'text' from j.output -> u.text: expected str, got int 42" in bad.error.message


async def test_inputs_checked_before_anything_runs() -> None:
    plan = compiled([node("q", "text_input", name="question"), out()], [edge("q", "out")])
    with pytest.raises(InputError, match="missing required input 'question'"):
        Executor().start(plan, {})
    with pytest.raises(InputError, match=r"unknown input.*'questoin'.*takes question"):
        Executor().start(plan, {"question": "a", "questoin": "b"})


async def test_input_default_and_coercion_errors() -> None:
    plan = compiled([node("n", "number_input", name="n", default=2.5), out()], [edge("n", "out")])
    assert (await Executor().run(plan)).outputs == {"result": 2.5}
    bad = await Executor().run(plan, {"n": "many"})
    assert bad.error is not None
    assert bad.error.node == "n"
    assert "input 'n' takes a number, not 'many'" in bad.error.message


async def test_concurrency_limit_is_respected() -> None:
    count = 8
    plan = compiled(
        [
            node("c", "t_const", value=0),
            *(node(f"s{i}", "t_sleep", seconds=0.05) for i in range(count)),
            *(node(f"o{i}", "output", name=f"o{i}") for i in range(count)),
        ],
        [
            *(edge("c", f"s{i}.x") for i in range(count)),
            *(edge(f"s{i}", f"o{i}") for i in range(count)),
        ],
    )
    result = await Executor(ExecutorOptions(concurrency=2)).run(plan)
    assert result.status == "succeeded"
    spans = [
        (started(result.events, f"s{i}"), finished(result.events, f"s{i}")) for i in range(count)
    ]
    overlap = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert overlap == 2


async def test_long_chain_and_long_skip_chain_do_not_overflow() -> None:
    length = 2500
    nodes = [node("c", "t_const", value=-1), node("cond", "t_is_positive")]
    edges = [edge("c", "cond.x"), edge("cond", "a0.a", branch="true")]
    for i in range(length):
        nodes.append(node(f"a{i}", "t_add"))
        if i:
            edges.append(edge(f"a{i - 1}", f"a{i}.a"))
    nodes += [node("b0", "t_add"), out()]
    edges += [
        edge("cond", "b0.a", branch="false"),
        edge(f"a{length - 1}", "out"),
        edge("b0", "out"),
    ]
    for i in range(1, length):
        nodes.append(node(f"b{i}", "t_add"))
        edges.append(edge(f"b{i - 1}", f"b{i}.a"))
    edges[-1] = edge(f"b{length - 2}", f"b{length - 1}.a")
    edges.append(edge(f"b{length - 1}", "out"))
    edges.remove(edge("b0", "out"))
    result = await Executor().run(compiled(nodes, edges))
    assert result.status == "succeeded"
    assert result.outputs == {"result": -1}
    assert sum(isinstance(e, NodeSkipped) for e in result.events) == length


async def test_blocks_report_progress_as_events() -> None:
    plan = compiled(
        [
            node("a", "t_emit"),
            node("b", "t_emit_sync"),
            node("o1", "output", name="a"),
            node("o2", "output", name="b"),
        ],
        [edge("a", "o1"), edge("b", "o2")],
    )
    result = await Executor().run(plan)
    messages = [(e.node, e.kind, e.data) for e in result.events if isinstance(e, NodeMessage)]
    assert ("a", "delta", {"text": "hel"}) in messages
    assert ("a", "delta", {"text": "lo"}) in messages
    assert ("b", "delta", {"text": "hi"}) in messages
    assert build_trace(result.events)["a"].messages[0]["text"] == "hel"


async def test_event_stream_is_live_ordered_and_replayable() -> None:
    plan = compiled(
        [node("c", "t_const", value=1), node("s", "t_sleep", seconds=0.05), out()],
        [edge("c", "s.x"), edge("s", "out")],
    )
    run = Executor().start(plan)

    async def collect() -> list:
        return [event async for event in run.stream()]

    first, second = await asyncio.gather(collect(), collect())
    late = await collect()  # a consumer arriving after the end still gets everything
    assert first == second == late == run.events
    kinds = [e.type for e in first]
    assert kinds[0] == "run_started"
    assert kinds[-1] == "run_finished"
    assert kinds.count("node_started") == kinds.count("node_finished") == 3
    times = [e.t for e in first]
    assert times == sorted(times)
    assert isinstance(first[0], RunStarted)
    assert first[-1].to_dict()["outputs"] == {"result": 1}


async def test_global_concurrency_limit_spans_runs() -> None:
    from support.blocks import GAUGE, Gauge

    plan = compiled(
        [
            node("c", "t_const", value=0),
            *(node(f"s{i}", "t_gauged", seconds=0.05) for i in range(3)),
            *(node(f"o{i}", "output", name=f"o{i}") for i in range(3)),
        ],
        [*(edge("c", f"s{i}.x") for i in range(3)), *(edge(f"s{i}", f"o{i}") for i in range(3))],
    )
    gauge = Gauge()
    executor = Executor(
        ExecutorOptions(global_concurrency=2, services=BlockServices({GAUGE: gauge}))
    )
    runs = [executor.start(plan) for _ in range(2)]
    results = [await run.result() for run in runs]
    assert all(r.status == "succeeded" for r in results)
    assert gauge.peak == 2  # six sleeping nodes over two runs, never more than two at once
    unlimited = Gauge()
    free = Executor(ExecutorOptions(services=BlockServices({GAUGE: unlimited})))
    for result in [await run.result() for run in [free.start(plan) for _ in range(2)]]:
        assert result.status == "succeeded"
    assert unlimited.peak == 6


async def test_services_and_usage_are_summed_per_node_and_run() -> None:
    from support.blocks import GREETER, Greeter

    plan = compiled(
        [
            node("a", "t_metered"),
            node("b", "t_metered"),
            node("o1", "output", name="a"),
            node("o2", "output", name="b"),
        ],
        [edge("a", "o1"), edge("b", "o2")],
    )
    executor = Executor(ExecutorOptions(services=BlockServices({GREETER: Greeter("hi")})))
    result = await executor.run(plan)
    assert result.outputs == {"a": "hi", "b": "hi"}
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (20, 10)
    assert (result.usage.cost, result.usage.calls) == (1.0, 2)
    trace = build_trace(result.events, plan.blocks())
    assert trace["a"].usage.total_tokens == 15
    usage_event = next(e for e in result.events if isinstance(e, NodeUsage))
    assert usage_event.kind == "usage"
    assert usage_event.data["model"] == "m"
    assert result.events[-1].to_dict()["usage"]["calls"] == 2

    # A run that lacks a service its nodes declare fails before any node runs.
    with pytest.raises(MissingServiceError) as missing:
        await Executor().run(plan)
    assert missing.value.code == "service_unavailable"
    assert "a test's greeter (greeter) for nodes 'a', 'b'" in missing.value.message
