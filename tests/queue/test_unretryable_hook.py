"""The executor's side of durable runs: a block declared not retryable is announced to
`ExecutorOptions.before_unretryable` — with the node's path, inside sub-flows too — before
it is called, and a failed announcement fails the node without calling it."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import dagwright.blocks.input as io_blocks
import dagwright.blocks.iteration as iteration_blocks
from dagwright.errors import BlockDefinitionError
from dagwright.registry import Registry, block
from dagwright.runtime import CompiledFlow, Executor, ExecutorOptions, compile_flow, parse_flow
from support import blocks as test_blocks
from support.flows import edge, node

CALLS: list[str] = []  # what happened, in order: "announce <path>", "call <value>"


@block(
    "hk_send",
    category="data_process",
    description="Pretends to send a message, once.",
    side_effects="not_retryable",
)
async def hk_send(x: Any) -> Any:
    """Records the call and passes x on."""
    CALLS.append(f"call {x}")
    return x


@block(
    "hk_post",
    category="data_process",
    description="Pretends to post, again if need be.",
    side_effects="retryable",
)
async def hk_post(x: Any) -> Any:
    """Records the call and passes x on."""
    CALLS.append(f"post {x}")
    return x


def plan() -> CompiledFlow:
    each = {
        "nodes": [
            node("item", "json_input", name="item"),
            node("send", "hk_send"),
            node("y", "output", name="y"),
        ],
        "edges": [edge("item", "send.x"), edge("send", "y")],
    }
    document = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "t",
        "nodes": [
            node("xs", "json_input", name="xs"),
            node("post", "hk_post"),
            node("first", "hk_send"),
            node("m", "map", subflow="each", output="y", concurrency=1),
            node("out", "output", name="ys"),
        ],
        "edges": [
            edge("xs", "post.x"),
            edge("post", "first.x"),
            edge("first", "m.items"),
            edge("m.output", "out"),
        ],
        "subflows": {"each": each},
    }
    registry = Registry.from_modules(
        [io_blocks, test_blocks, iteration_blocks, sys.modules[__name__]]
    )
    return compile_flow(parse_flow(document), registry)


async def test_not_retryable_blocks_are_announced_before_their_call() -> None:
    CALLS.clear()
    announced: list[tuple[str, str, str]] = []

    async def announce(run_id: str, node_path: str, block_name: str) -> None:
        announced.append((run_id, node_path, block_name))
        CALLS.append(f"announce {node_path}")

    run = Executor(ExecutorOptions(before_unretryable=announce)).start(plan(), {"xs": [1, 2]})
    result = await run.result()
    assert result.status == "succeeded", result.error
    assert result.outputs == {"ys": [1, 2]}
    # The retryable block is not announced; each not-retryable call is, first, by its path.
    assert CALLS == [
        "post [1, 2]",
        "announce first",
        "call [1, 2]",
        "announce m[0]/send",
        "call 1",
        "announce m[1]/send",
        "call 2",
    ]
    assert {run_id for run_id, _, _ in announced} == {run.run_id}
    assert {name for _, _, name in announced} == {"hk_send"}


async def test_a_failed_announcement_fails_the_node_uncalled() -> None:
    CALLS.clear()

    async def refuse(run_id: str, node_path: str, block_name: str) -> None:
        raise ConnectionError("the database is gone")

    result = await Executor(ExecutorOptions(before_unretryable=refuse)).run(plan(), {"xs": [1]})
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "first"
    assert "the database is gone" in result.error.message
    assert CALLS == ["post [1]"]


async def test_without_a_hook_nothing_changes() -> None:
    CALLS.clear()
    result = await Executor().run(plan(), {"xs": [3]})
    assert result.status == "succeeded"
    assert CALLS == ["post [3]", "call [3]", "call 3"]


def test_side_effects_must_be_a_known_kind() -> None:
    with pytest.raises(BlockDefinitionError, match="side_effects"):

        @block("hk_bad", category="data_process", description="x", side_effects="sometimes")  # type: ignore[arg-type]
        def hk_bad(x: Any) -> Any:
            """Never declared."""
            return x

    assert hk_send.__dagwright_block__.retryable is False  # type: ignore[attr-defined]
    assert hk_post.__dagwright_block__.retryable is True  # type: ignore[attr-defined]
    assert hk_send.__dagwright_block__.to_schema()["side_effects"] == "not_retryable"  # type: ignore[attr-defined]
