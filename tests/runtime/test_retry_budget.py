"""A run's retries share one budget (issue 29, item 10: "2 of 100 runs under 30 % model faults
took over 2 minutes"): a node's error policy retried a model call that the gateway had
already retried, each level with its timeouts and backoff, so the worst case multiplied
(node attempts x gateway attempts x the provider's timeout). Through the real runtime, an
LLM block and the scripted model server injecting faults: the worst case (every call hangs)
is bounded by the provider's timeout plus the run's retry budget, a run whose fault passes
still succeeds by retrying, and runs under a 30 % fault rate all end within that bound."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from dagwright.llm.gateway import LLMGateway
from dagwright.registry import MODELS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, RunResult, compile_flow, parse_flow
from support.flows import edge, flow_doc, node
from support.models import gateway_for, scripted_server

REGISTRY = Registry.default()
TIMEOUT = 0.5  # the provider's, per attempt
BUDGET = 1.0  # the run's retries together
# What a loaded machine may add to a run's wall clock. Multiplied retries took 7.1 s here
# (12 attempts), so the bounds below still tell the two apart.
SLACK = 2.0
# The gateway's own retries (3 attempts) inside a node retried 3 times: 12 attempts of 0.5 s
# when every call hangs, 6 s and more before the budget.
PROVIDER: dict[str, Any] = {
    "timeout": TIMEOUT,
    "max_attempts": 3,
    "backoff_base": 0.05,
    "backoff_max": 0.1,
}
HANG = {"fault": "hang", "hang_seconds": 30}


def retried_chat() -> dict[str, Any]:
    ask = node("ask", "chat", prompt="{{ question }}")
    ask["on_error"] = {"retry": 3, "backoff": 0.05, "max_backoff": 0.1}
    return flow_doc(
        [node("q", "text_input", name="question"), ask, node("out", "output", name="answer")],
        [edge("q", "ask.question"), edge("ask", "out")],
    )


async def timed_run(gateway: LLMGateway, budget: float | None) -> tuple[RunResult, float]:
    plan = compile_flow(parse_flow(retried_chat()), REGISTRY)
    options = ExecutorOptions(services=BlockServices({MODELS: gateway}), retry_budget=budget)
    began = time.perf_counter()
    result = await Executor(options).run(plan, {"question": "q"})
    return result, time.perf_counter() - began


async def test_when_every_call_hangs_a_run_ends_within_timeout_plus_budget() -> None:
    with scripted_server({"default_reply": HANG}) as server:
        gateway = gateway_for(server, **PROVIDER)
        try:
            result, elapsed = await timed_run(gateway, BUDGET)
        finally:
            await gateway.aclose()
        requests = server.stats()["requests"]
    assert result.status == "failed"
    assert result.error is not None
    assert "retry budget" in result.error.message
    # The first attempt (TIMEOUT) plus retries costing BUDGET together.
    assert elapsed < TIMEOUT + BUDGET + SLACK, elapsed
    assert requests <= 4  # not the 12 attempts the levels multiplied to


async def test_a_fault_that_passes_is_retried_within_the_budget() -> None:
    script = {"default_reply": "fine", "rules": [{"replies": [HANG, HANG, "ok"]}]}
    with scripted_server(script) as server:
        gateway = gateway_for(server, **PROVIDER)
        try:
            result, elapsed = await timed_run(gateway, 5.0)
        finally:
            await gateway.aclose()
    assert result.status == "succeeded", result.error
    assert result.outputs == {"answer": "ok"}
    assert elapsed < 3 * TIMEOUT + SLACK


async def test_runs_under_a_30_percent_fault_rate_end_within_the_bound() -> None:
    # Three faults in every ten replies, the faulty ones together: the worst stretch a run
    # can meet. Twenty runs at once, each with its own budget.
    replies: list[Any] = [HANG, {"fault": "server_error"}, HANG] + ["ok"] * 7
    script = {"rules": [{"replies": replies, "cycle": True}]}
    with scripted_server(script) as server:
        gateway = gateway_for(server, **PROVIDER)
        try:
            done = await asyncio.gather(*(timed_run(gateway, BUDGET) for _ in range(20)))
        finally:
            await gateway.aclose()
    worst = max(elapsed for _, elapsed in done)
    assert worst < TIMEOUT + BUDGET + SLACK, worst
    assert sum(result.status == "succeeded" for result, _ in done) >= 10
