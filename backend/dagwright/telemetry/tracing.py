"""Follows runs and exports their spans through an OpenTelemetry span processor (a batching
OTLP/HTTP exporter in the server)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind

from dagwright.runtime.events import RunEvent
from dagwright.runtime.executor import Executor, Run, RunResult
from dagwright.runtime.plan import CompiledFlow
from dagwright.telemetry.context import LINKS, TraceLinks, TraceParent, trace_id_for
from dagwright.telemetry.spans import RunSpans

log = logging.getLogger(__name__)


def default_resource() -> Resource:
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, read by Resource.create, win when set.
    named = "OTEL_SERVICE_NAME" in os.environ
    return Resource.create({} if named else {"service.name": "dagwright"})


class RunTracing:
    """One per process: `follow(run)` exports the run's spans as it goes."""

    def __init__(
        self,
        processor: SpanProcessor,
        resource: Resource | None = None,
        links: TraceLinks = LINKS,
    ) -> None:
        self._processor = processor
        self._resource = resource or default_resource()
        self._links = links
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    def to_otlp(cls, endpoint: str) -> RunTracing:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        # Headers (OTEL_EXPORTER_OTLP_HEADERS) and batching (OTEL_BSP_*) come from the
        # standard variables, read by the exporter and the processor themselves.
        return cls(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))

    def follow(
        self,
        run: Run,
        traceparent: TraceParent | None = None,
        *,
        parent_run_id: str | None = None,
        parent_node: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """Trace `run`: under `traceparent` (an incoming call's), else under node
        `parent_node` of `parent_run_id` (an app invoked by another, in one trace), else as
        a trace of its own."""
        links = self._links
        parent_trace = links.trace_of(parent_run_id) if parent_run_id is not None else None
        if traceparent is not None:
            trace_id = traceparent.trace_id
            remote = traceparent.span_id

            def parent_span() -> int | None:
                return remote
        elif parent_trace is not None and parent_run_id is not None:
            trace_id = parent_trace
            calling_run, calling_node = parent_run_id, parent_node or ""

            def parent_span() -> int | None:
                # Asked when this run ends: the calling node is still running then, so its
                # path inside a sub-flow is known.
                return links.span_of(calling_run, calling_node)
        else:
            trace_id = trace_id_for(run.run_id)

            def parent_span() -> int | None:
                return None

        links.register(run.run_id, trace_id, frozenset(run.plan.blocks()))
        kind = SpanKind.SERVER if traceparent is not None else SpanKind.INTERNAL
        spans = RunSpans(
            run.run_id,
            trace_id,
            parent_span,
            self._export,
            self._resource,
            attributes or {},
            links,
            kind=kind,
        )
        task = asyncio.get_running_loop().create_task(
            self._follow(run, spans), name=f"dagwright-trace-{run.run_id}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, run: Run, spans: RunSpans) -> None:
        try:
            async for event in run.stream():
                spans.on(event)
        except Exception:  # a trace is never worth a run: log and let the run go on
            log.warning("tracing run %s failed", run.run_id, exc_info=True)
        finally:
            self._links.forget(run.run_id)

    def _export(self, span: ReadableSpan) -> None:
        self._processor.on_end(span)

    def flush(self, timeout_millis: int = 30_000) -> bool:
        """Export every span queued so far (blocking)."""
        return self._processor.force_flush(timeout_millis)

    async def close(self, grace: float = 5.0) -> None:
        """Let the runs being followed finish their traces, then flush and stop exporting."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=grace)
        await asyncio.to_thread(self._processor.shutdown)


async def run_traced(
    tracing: RunTracing,
    executor: Executor,
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    on_event: Callable[[RunEvent], None] | None,
) -> RunResult:
    """`executor.run` for `dagwright run`, traced: under the TRACEPARENT variable when set
    (as CI tools pass a trace on), and exported before the command exits."""
    run = executor.start(plan, inputs)
    parent = TraceParent.parse(os.environ.get("TRACEPARENT"))
    tracing.follow(run, parent, attributes={"dagwright.run.mode": "cli"})
    try:
        if on_event is not None:
            async for event in run.stream():
                on_event(event)
        return await run.result()
    except asyncio.CancelledError:
        run.cancel()
        raise
    finally:
        await tracing.close()
