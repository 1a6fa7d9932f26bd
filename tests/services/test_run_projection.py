"""One fold from run events to node records: the trace the CLI prints (runtime/trace.py) and
the node rows the server records (services/runs/recorder.py) agree for the same run, nested
iteration paths, skipped, failed, recovered and cancelled nodes and model usage included, on
SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import Engine

import dagwright.blocks.input as io_blocks
import dagwright.blocks.iteration as iteration_blocks
from dagwright.registry import BlockServices, Registry
from dagwright.runtime import (
    CompiledFlow,
    Executor,
    ExecutorOptions,
    NodeStarted,
    NodeTrace,
    build_trace,
    compile_flow,
    parse_flow,
)
from dagwright.services.runs.records import NodeRecord
from dagwright.services.runs.service import RunService
from support import blocks as test_blocks
from support.blocks import GREETER, Greeter
from support.database import DATABASES, clear, migrated_engine
from support.flows import edge, node

SETTLED = ("succeeded", "reused", "recovered", "skipped", "failed", "cancelled")


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


@pytest.fixture
async def runs(engine: Engine) -> AsyncIterator[RunService]:
    clear(engine)
    executor = Executor(ExecutorOptions(services=BlockServices({GREETER: Greeter("hi")})))
    service = RunService(engine, executor, "r1")
    service.start_writer()
    yield service
    await service.close()


def plan() -> CompiledFlow:
    """A map over items whose positive ones make a (pretend) model call and whose negative
    ones fail (left out: on_item_error skip), a node whose failure its policy recovers, a
    top-level model call, and a slow node last, cancelled while it sleeps."""
    each = {
        "nodes": [
            node("item", "json_input", name="item"),
            node("sign", "t_is_positive"),
            node("ask", "t_metered"),
            node("bad", "t_fail", message="not positive"),
            node("y", "output", name="y"),
        ],
        "edges": [
            edge("item", "sign.x"),
            edge("sign", "ask.x", branch="true"),
            edge("sign", "bad.x", branch="false"),
            edge("ask", "y"),
            edge("bad", "y"),
        ],
    }
    recovered = node("guess", "t_fail", message="no guess")
    recovered["on_error"] = {"fallback": "default", "default": "unknown"}
    document = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "projection",
        "nodes": [
            node("xs", "json_input", name="xs"),
            node("m", "map", subflow="each", output="y", on_item_error="skip"),
            recovered,
            node("top", "t_metered"),
            node("slow", "t_sleep", seconds=5),
            node("out", "output", name="out"),
            node("guessed", "output", name="guessed"),
        ],
        "edges": [
            edge("xs", "m.items"),
            edge("m.output", "slow.x"),
            edge("slow", "out"),
            edge("xs", "guess.x"),
            edge("guess", "guessed"),
            edge("guess", "top.x"),
        ],
        "subflows": {"each": each},
    }
    registry = Registry.from_modules([io_blocks, test_blocks, iteration_blocks])
    return compile_flow(parse_flow(document), registry)


def projected(trace: NodeTrace) -> dict[str, Any]:
    """What the server stores of a node the CLI traced: a recovered node is stored as
    succeeded (without the error its policy absorbed); a node that never started stores ""
    as its block."""
    recovered = trace.status == "recovered"
    done = trace.status in ("succeeded", "reused", "recovered")
    usage = None
    if trace.metered:
        usage = {
            "prompt_tokens": trace.usage.prompt_tokens,
            "completion_tokens": trace.usage.completion_tokens,
            "cost": trace.usage.cost,
            "calls": trace.usage.calls,
            "model": trace.usage.model,
            "scripted": trace.usage.scripted,
        }
    return {
        "status": "succeeded" if recovered else trace.status,
        "block": trace.block or "",
        "inputs": trace.inputs,
        "output": trace.output if done else None,
        "branch": trace.branch if done else None,
        "error": None if recovered else trace.error,
        "started": trace.started,
        "duration": trace.duration,
        "usage": usage,
    }


def stored(record: NodeRecord) -> dict[str, Any]:
    return {
        "status": record.status,
        "block": record.block,
        "inputs": record.inputs,
        "output": record.output,
        "branch": record.branch,
        "error": record.error,
        "started": record.started,
        "duration": record.duration,
        "usage": record.usage,
    }


async def test_the_cli_trace_and_the_recorded_node_rows_agree(runs: RunService) -> None:
    compiled = plan()
    live = await runs.start(compiled, {"xs": [1, -2, 3]}, app_id=None, version_id=None)
    async for event in live.run.stream():
        if isinstance(event, NodeStarted) and event.node == "slow":
            break
    await runs.cancel(live.run_id)
    record = await live.wait()
    assert record.status == "cancelled"

    traces = build_trace(live.run.events, compiled.blocks())
    rows = {n.node: n for n in (await asyncio.to_thread(runs.get, live.run_id)).nodes}
    settled = {path: trace for path, trace in traces.items() if trace.status in SETTLED}
    assert set(rows) == set(settled)
    for path, trace in settled.items():
        assert stored(rows[path]) == projected(trace), path
    # What the server keeps when the run finishes is what it stored.
    assert {n.node: stored(n) for n in record.nodes} == {p: stored(n) for p, n in rows.items()}

    # The cases the run covers, as stored.
    assert rows["m[0]/ask"].usage == {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost": 0.5,
        "calls": 1,
        "model": "m",
        "scripted": False,
    }
    assert rows["top"].usage is not None
    assert rows["top"].usage["calls"] == 1
    assert (rows["m[1]/bad"].status, rows["m[1]/bad"].error) == (
        "failed",
        "ValueError: not positive",
    )
    assert (rows["m[1]/ask"].status, rows["m[1]/ask"].usage) == ("skipped", None)
    assert rows["m[0]/bad"].status == "skipped"
    assert (rows["guess"].status, rows["guess"].output, rows["guess"].error) == (
        "succeeded",
        "unknown",
        None,
    )
    assert traces["guess"].status == "recovered"
    assert rows["m"].status == "succeeded"
    assert rows["m"].output is not None
    assert rows["m"].output["output"] == ["hi", "hi"]
    assert [failure["index"] for failure in rows["m"].output["failed"]] == [1]
    assert (rows["slow"].status, rows["slow"].error) == ("cancelled", "cancelled by request")
    assert rows["slow"].duration is not None
    assert 0 <= rows["slow"].duration < 5
    assert rows["slow"].inputs == {"x": ["hi", "hi"]}
    # Never reached: pending in the trace, no row.
    assert traces["out"].status == "pending"
    assert "out" not in rows
    assert record.usage == {"prompt_tokens": 30, "completion_tokens": 15, "cost": 1.5, "calls": 3}
