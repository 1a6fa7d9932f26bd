"""Running a compiled flow from the command line with the process's services: secrets from
the environment and, when the flow calls models, the configured providers (or the scripted
model, announced)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from dagwright.embedding.embedders import CachedEmbedder, make_embedder
from dagwright.embedding.service import ExampleStore
from dagwright.llm.gateway import LLMGateway
from dagwright.llm.wiring import model_access
from dagwright.runtime import CompiledFlow, Executor, ExecutorOptions, RunEvent, RunResult
from dagwright.secrets import EnvSecrets, Secrets
from dagwright.services.data_sources import settings_table_access
from dagwright.store.db import data_directory
from dagwright.tabular import TableAccess


def uses_models(plan: CompiledFlow) -> bool:
    return any(node.spec.category == "llm" for node in plan.every_node())


async def _execute(
    executor: Executor,
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    on_event: Callable[[RunEvent], None] | None,
    gateway: LLMGateway | None,
) -> RunResult:
    try:
        return await executor.run(plan, inputs, on_event=on_event)
    finally:
        if gateway is not None:
            await gateway.aclose()


def run_plan(
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    *,
    node_timeout: float | None = None,
    record: Path | None = None,
    replay: Path | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    notice: Callable[[str], None] = print,
) -> RunResult:
    with ExitStack() as stack:
        secrets = EnvSecrets()
        services: dict[type, object] = {Secrets: secrets}
        gateway = None
        if uses_models(plan) or record is not None or replay is not None:
            gateway = stack.enter_context(
                model_access(record=record, replay=replay, secrets=secrets, notice=notice)
            )
            services[LLMGateway] = gateway
        # Opened only if a block asks for examples (the local folder admits one process).
        examples = ExampleStore.from_environment(
            data_directory(create=False),
            lambda spec: CachedEmbedder(make_embedder(spec, gateway)),
            lazy=True,
        )
        stack.callback(examples.close)
        services[ExampleStore] = examples
        tables = settings_table_access(secrets, data_directory(create=False) / "demo")
        stack.callback(tables.close)
        services[TableAccess] = tables
        if any(node.spec.name == "autotqa_ask" for node in plan.nodes):
            from dagwright.tqa.access import TqaAccess
            from dagwright.tqa.local import LocalTqa

            services[TqaAccess] = LocalTqa(notice)
        executor = Executor(ExecutorOptions(node_timeout=node_timeout, services=services))
        return asyncio.run(_execute(executor, plan, inputs, on_event, gateway))
