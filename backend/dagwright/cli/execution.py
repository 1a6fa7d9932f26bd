"""Running a compiled flow from the command line with the process's services (composition.py):
secrets from the environment and, when a block first asks for them, the configured model
providers (or the scripted model, announced), the example store, the data sources and
AutoTQA. A flow of text blocks imports none of them, which is most of a cold start."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dagwright.composition import Composition
    from dagwright.runtime import CompiledFlow, RunEvent, RunResult
    from dagwright.settings import Settings


async def _execute(
    process: Composition,
    node_timeout: float | None,
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    on_event: Callable[[RunEvent], None] | None,
) -> RunResult:
    try:
        executor = process.executor(node_timeout)
        tracing = process.tracing()  # None, and no OpenTelemetry import, unless configured
        if tracing is not None:
            from dagwright.telemetry.tracing import run_traced

            return await run_traced(tracing, executor, plan, inputs, on_event)
        return await executor.run(plan, inputs, on_event=on_event)
    finally:
        await process.aclose()


def run_plan(
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    settings: Settings | None = None,
    *,
    node_timeout: float | None = None,
    record: Path | None = None,
    replay: Path | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    notice: Callable[[str], None] = print,
) -> RunResult:
    from dagwright.composition import Composition
    from dagwright.settings import load_settings

    process = Composition(
        settings or load_settings(), kind="standalone", notice=notice, record=record, replay=replay
    )
    if record is not None or replay is not None:
        process.gateway()  # a recording is written (or replayed) even if no model is called
    return asyncio.run(_execute(process, node_timeout, plan, inputs, on_event))
