"""What the built-in blocks declare a second call would do (durable runs resumed after a
worker died: services/queue), and that a declaration made per config reaches the executor:
a POST is announced before it is sent (and not sent when the announcement fails), a GET is
not announced."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright.egress import EgressPolicy
from dagwright.registry import EGRESS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, compile_flow, parse_flow
from support.server import edge, flow, node

REGISTRY = Registry.default()


@pytest.mark.parametrize(
    ("method", "kind"),
    [
        ("GET", "none"),
        ("HEAD", "none"),
        ("PUT", "retryable"),
        ("DELETE", "retryable"),
        ("POST", "not_retryable"),
        ("PATCH", "not_retryable"),
    ],
)
def test_an_http_request_is_retried_by_its_method(method: str, kind: str) -> None:
    spec = REGISTRY.get("http_request")
    config = spec.config_model.model_validate({"method": method, "url": "http://x.test/"})
    assert spec.side_effects_for(config) == kind
    assert spec.retryable_for(config) is (kind != "not_retryable")
    assert spec.to_schema()["side_effects"] is None  # it depends on the config
    assert spec.retryable is False  # not for every config


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("invoke_app", "not_retryable"),
        ("invoke_remote", "not_retryable"),
        ("mcp_tool", "not_retryable"),
        ("human_input", "retryable"),
        ("template", "none"),
    ],
)
def test_blocks_that_act_on_the_world_say_so(name: str, kind: str) -> None:
    spec = REGISTRY.get(name)
    assert spec.to_schema()["side_effects"] == kind


async def _announced(method: str) -> tuple[list[str], Any]:
    document = flow(
        [
            node("send", "http_request", method=method, url="http://127.0.0.1:9/hook"),
            node("out", "output", name="out"),
        ],
        [edge("send.status", "out")],
    )
    announced: list[str] = []

    async def refuse(run_id: str, path: str, block_name: str) -> None:
        announced.append(path)
        raise ConnectionError("the run's database is gone")

    plan = compile_flow(parse_flow(document), REGISTRY)
    # Port 9 on loopback is allowed explicitly: the request must reach the (closed) port.
    services = BlockServices({EGRESS: EgressPolicy.from_text("127.0.0.1:9")})
    options = ExecutorOptions(services=services, before_unretryable=refuse)
    result = await Executor(options).run(plan, {})
    return announced, result


async def test_a_post_is_announced_before_it_is_sent_and_a_get_is_not() -> None:
    announced, result = await _announced("POST")
    assert announced == ["send"]
    assert result.status == "failed"
    assert result.error is not None
    assert "the run's database is gone" in result.error.message  # never sent

    announced, result = await _announced("GET")
    assert announced == []
    assert result.status == "failed"  # nothing listens there: the request itself failed
    assert result.error is not None
    assert "the run's database is gone" not in result.error.message
