"""Per-node error policies on real runs: retries with backoff (timed), a default value, the
error branch, and what validation refuses."""

from __future__ import annotations

import sys
import time
from typing import Any

from pydantic import BaseModel

import dagwright.blocks.input as io_blocks
from dagwright.registry import Registry, block
from dagwright.runtime import (
    CompiledFlow,
    Executor,
    NodeFinished,
    NodeMessage,
    ReusedOutput,
    build_trace,
    compile_flow,
    parse_flow,
    validate,
)
from support import blocks as test_blocks
from support.flows import edge, node

ATTEMPTS: dict[str, int] = {}


class FlakyConfig(BaseModel):
    key: str
    failures: int = 1  # calls that fail before one succeeds


@block("it_flaky", category="data_process", description="Fails its first calls.")
async def it_flaky(config: FlakyConfig, x: Any = None) -> str:
    """Raises ConnectionError for the first `failures` calls under `key`, then answers."""
    ATTEMPTS[config.key] = ATTEMPTS.get(config.key, 0) + 1
    if ATTEMPTS[config.key] <= config.failures:
        raise ConnectionError(f"attempt {ATTEMPTS[config.key]} refused")
    return f"ok after {ATTEMPTS[config.key]}"


def registry() -> Registry:
    return Registry.from_modules([io_blocks, test_blocks, sys.modules[__name__]])


def flow(nodes: list, edges: list) -> dict[str, Any]:
    return {"format": "dagwright.flow", "version": 1, "name": "p", "nodes": nodes, "edges": edges}


def plan_of(nodes: list, edges: list) -> CompiledFlow:
    return compile_flow(parse_flow(flow(nodes, edges)), registry())


def guarded(node_id: str, block_name: str, on_error: dict[str, Any], **config: Any) -> dict:
    return {**node(node_id, block_name, **config), "on_error": on_error}


async def test_retry_with_backoff_until_an_attempt_succeeds() -> None:
    policy = {"retry": 3, "backoff": 0.05, "backoff_factor": 2}
    plan = plan_of(
        [
            guarded("call", "it_flaky", policy, key="retry", failures=2),
            node("out", "output", name="result"),
        ],
        [edge("call", "out")],
    )
    started = time.perf_counter()
    result = await Executor().run(plan)
    took = time.perf_counter() - started
    assert result.status == "succeeded"
    assert result.outputs == {"result": "ok after 3"}
    assert 0.15 <= took < 0.5  # waited 0.05 then 0.1
    retries = [e.data for e in result.events if isinstance(e, NodeMessage) and e.kind == "retry"]
    assert [r["attempt"] for r in retries] == [1, 2]
    assert [r["delay"] for r in retries] == [0.05, 0.1]
    assert retries[0]["error"] == "ConnectionError: attempt 1 refused"


async def test_retries_spent_fail_the_run_with_the_last_error() -> None:
    plan = plan_of(
        [
            guarded("call", "it_flaky", {"retry": 1, "backoff": 0}, key="spent", failures=5),
            node("out", "output", name="result"),
        ],
        [edge("call", "out")],
    )
    result = await Executor().run(plan)
    assert result.status == "failed"
    assert result.error is not None
    assert "attempt 2 refused" in result.error.message


async def test_default_value_replaces_a_failure() -> None:
    plan = plan_of(
        [
            guarded("call", "t_fail", {"fallback": "default", "default": "unknown"}),
            node("up", "t_upper"),
            node("out", "output", name="result"),
        ],
        [edge("call", "up.text"), edge("up", "out")],
    )
    result = await Executor().run(plan)
    assert result.status == "succeeded"
    assert result.outputs == {"result": "UNKNOWN"}
    trace = build_trace(result.events)
    assert trace["call"].status == "recovered"
    assert trace["call"].error == "ValueError: boom"


async def test_error_branch_routes_the_failure_and_skips_the_normal_path() -> None:
    nodes = [
        guarded("call", "it_flaky", {"fallback": "error_branch"}, key="branch", failures=1),
        node("ok", "output", name="answer"),
        node("handle", "t_upper"),
        node("err", "output", name="error"),
    ]
    edges = [edge("call", "ok"), edge("call.error", "handle.text"), edge("handle", "err")]
    # The error record is a dict, and t_upper takes text: refused at save time.
    problems = validate(parse_flow(flow(nodes, edges)), registry())
    assert [(p.code, p.node, p.port) for p in problems if p.severity == "error"] == [
        ("type_mismatch", "handle", "text")
    ]
    plan = plan_of(nodes[:2] + nodes[3:], [edges[0], edge("call.error", "err")])

    failing = await Executor().run(plan)  # the first call fails
    assert failing.status == "succeeded"
    assert set(failing.outputs) == {"error"}
    assert failing.outputs["error"]["node"] == "call"
    assert failing.outputs["error"]["type"] == "ConnectionError"
    assert failing.outputs["error"]["message"] == "attempt 1 refused"
    routed = next(e for e in failing.events if isinstance(e, NodeFinished) and e.node == "call")
    assert routed.branch == "error"
    assert build_trace(failing.events)["ok"].status == "skipped"

    good = await Executor().run(plan)  # the second succeeds: the error branch is skipped
    assert good.outputs == {"answer": "ok after 2"}
    assert build_trace(good.events)["err"].status == "skipped"

    # Re-run from `err` reusing the failed run's `call`: its failure is routed again.
    record = failing.outputs["error"]
    rerun = Executor().start(plan, reuse={"call": ReusedOutput(record, "error")})
    again = await rerun.result()
    assert again.outputs == {"error": record}
    assert build_trace(again.events)["call"].status == "reused"


def test_validation_of_policies() -> None:
    def codes(nodes: list, edges: list) -> list[tuple[str, str | None]]:
        found = validate(parse_flow(flow(nodes, edges)), registry())
        return [(p.code, p.node) for p in found if p.severity == "error"]

    # the error port exists only with fallback error_branch
    assert codes(
        [node("c", "t_const", value=1), node("out", "output", name="result")],
        [edge("c.error", "out")],
    ) == [("unknown_port", "c")]
    # a condition cannot default; it may route its errors without a branch label
    condition = [
        node("x", "json_input", name="x"),
        guarded("sign", "t_is_positive", {"fallback": "default", "default": 0}),
        node("out", "output", name="result"),
    ]
    wires = [edge("x", "sign.x"), edge("sign", "out", branch="true")]
    assert codes(condition, wires) == [("invalid_config", "sign")]
    condition[1] = guarded("sign", "t_is_positive", {"fallback": "error_branch"})
    assert codes(condition, [*wires, edge("sign.error", "out")]) == []
    # several outputs: the default holds each
    pair = [
        node("x", "json_input", name="x"),
        guarded("p", "t_pair", {"fallback": "default", "default": {"left": 0}}),
        node("out", "output", name="result"),
    ]
    assert codes(pair, [edge("x", "p.x"), edge("p.left", "out")]) == [("invalid_config", "p")]


def test_documents_without_the_new_fields_load_and_save_as_before() -> None:
    old = flow(
        [node("c", "t_const", value=1), node("out", "output", name="result")], [edge("c", "out")]
    )
    parsed = parse_flow(old)
    assert parsed.subflows is None
    assert parsed.nodes[0].on_error is None
    saved = parsed.model_dump(mode="json", exclude_none=True)
    assert "subflows" not in saved
    assert "on_error" not in saved["nodes"][0]
