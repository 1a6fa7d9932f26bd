"""A run's spans, built from its events: the run, each node, each sub-flow iteration and each
model call, with the GenAI semantic conventions on model calls and errors as span events.

Spans are made after the fact from the events' clock (`t` from RunStarted's wall-clock
start), so tracing adds nothing to the executor's hot path: a node's span is exported when
the node settles, the run's when the run finishes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from dagwright import __version__
from dagwright.registry import Usage
from dagwright.runtime.events import (
    IterationFinished,
    IterationStarted,
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeStarted,
    NodeUsage,
    NodeWaiting,
    RunEvent,
    RunFinished,
    RunStarted,
)
from dagwright.telemetry.context import TraceLinks, span_id_for

SCOPE: Final = InstrumentationScope("dagwright", __version__)
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
# A human_input node pausing the run (services/human.py): the run's error code.
PAUSED_CODE: Final = "waiting_for_human"

Export = Callable[[ReadableSpan], None]
Attributes = dict[str, Any]


def _usage_attributes(usage: Usage) -> Attributes:
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
        "dagwright.usage.cost": usage.cost,
        "dagwright.usage.calls": usage.calls,
    }


def _error_event(error_type: str, message: str, at: int) -> Event:
    return Event(
        "exception", {"exception.type": error_type, "exception.message": message}, timestamp=at
    )


@dataclass(slots=True)
class _Open:
    """A span begun and not yet exported."""

    start: float  # `t` of its start
    attributes: Attributes
    usage: Usage = field(default_factory=Usage)
    calls: int = 0  # model calls seen, to number their spans


class RunSpans:
    """Turns one run's events into spans and hands each finished span to `export`.
    `parent_span` is asked, when the run's span ends, for the span the run hangs under (None:
    the run is the trace's root)."""

    def __init__(
        self,
        run_id: str,
        trace_id: int,
        parent_span: Callable[[], int | None],
        export: Export,
        resource: Resource,
        attributes: Mapping[str, Any],
        links: TraceLinks,
        *,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> None:
        self.run_id = run_id
        self.trace_id = trace_id
        self._parent_span = parent_span
        self._export = export
        self._resource = resource
        self._attributes = dict(attributes)
        self._links = links
        self._kind = kind
        self._wall0 = time.time()
        self._flow = "run"
        self._nodes: dict[str, _Open] = {}
        self._iterations: dict[str, _Open] = {}

    # -- ids and clock -------------------------------------------------------------------

    def _ns(self, t: float) -> int:
        return int((self._wall0 + t) * 1e9)

    def _context(self, key: str) -> SpanContext:
        return SpanContext(self.trace_id, span_id_for(self.run_id, key), False, _SAMPLED)

    def _parent_of(self, path: str) -> SpanContext:
        """A node's parent: the iteration its path is in (`refine[2]/check` -> `refine[2]`),
        or the run."""
        if "/" in path:
            return self._context(f"iteration:{path.rsplit('/', 1)[0]}")
        return self._context("run")

    def _span(
        self,
        name: str,
        key: str,
        parent: SpanContext | None,
        start: int,
        end: int,
        attributes: Attributes,
        *,
        events: tuple[Event, ...] = (),
        status: Status | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> None:
        self._export(
            ReadableSpan(
                name,
                context=self._context(key),
                parent=parent,
                resource=self._resource,
                attributes=attributes,
                events=events,
                kind=kind,
                status=status or Status(StatusCode.UNSET),
                start_time=start,
                end_time=max(end, start),
                instrumentation_scope=SCOPE,
            )
        )

    # -- events --------------------------------------------------------------------------

    def on(self, event: RunEvent) -> None:
        if isinstance(event, NodeUsage):
            self._model_call(event)
        elif isinstance(event, NodeStarted):
            self._links.node_started(self.run_id, event.node)
            attributes = {"dagwright.node": event.node, "dagwright.block": event.block}
            self._nodes[event.node] = _Open(event.t, attributes)
        elif isinstance(event, NodeFinished):
            self._node_finished(event)
        elif isinstance(event, NodeWaiting):  # a pause, not a failure: the run goes on
            at = self._ns(event.t)
            paused = Event("waiting_for_human", {"message": event.message}, timestamp=at)
            self._end_node(event.node, event.t, {}, (paused,), Status(StatusCode.UNSET))
        elif isinstance(event, NodeFailed):
            at = self._ns(event.t)
            error = _error_event(event.error_type, event.message, at)
            status = Status(StatusCode.ERROR, f"{event.error_type}: {event.message}")
            self._end_node(event.node, event.t, {}, (error,), status)
        elif isinstance(event, NodeCancelled):
            cancelled = Event("cancelled", {"reason": event.reason}, timestamp=self._ns(event.t))
            status = Status(StatusCode.ERROR, f"cancelled: {event.reason}")
            self._end_node(event.node, event.t, {}, (cancelled,), status)
        elif isinstance(event, IterationStarted):
            key = event.node if event.index is None else f"{event.node}[{event.index}]"
            opened: Attributes = {"dagwright.node": event.node}
            if event.index is not None:  # a single sub-flow call has no index
                opened["dagwright.iteration"] = event.index
            self._iterations[key] = _Open(event.t, opened)
        elif isinstance(event, IterationFinished):
            self._iteration_finished(event)
        elif isinstance(event, RunStarted):
            self._wall0 = event.started_at
            self._flow = event.flow
        elif isinstance(event, RunFinished):
            self._run_finished(event)

    def _model_call(self, event: NodeUsage) -> None:
        usage, call = event.usage, event.call
        node = self._nodes.get(event.node)
        if node is None:  # usage of a node whose start was not seen: counted, not drawn
            return
        node.usage.add(usage)
        node.calls += 1
        model = call.model or "unknown"
        provider = call.provider or "unknown"
        latency = call.latency or 0.0
        attributes: Attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.system": provider,  # the older name, still read by many back-ends
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            **_usage_attributes(usage),
            "dagwright.scripted": call.scripted,
        }
        if call.attempts is not None:
            attributes["dagwright.attempts"] = call.attempts
        self._span(
            f"chat {model}",
            f"call:{event.node}:{node.calls}",
            self._context(f"node:{event.node}"),
            self._ns(max(event.t - latency, node.start)),
            self._ns(event.t),
            attributes,
            kind=SpanKind.CLIENT,
        )

    def _node_finished(self, event: NodeFinished) -> None:
        attributes: Attributes = {"dagwright.reused": event.reused}
        if event.branch is not None:
            attributes["dagwright.branch"] = event.branch
        events: tuple[Event, ...] = ()
        if event.error is not None:  # a failure the node's error policy handled
            error_type, _, message = event.error.partition(": ")
            events = (_error_event(error_type, message, self._ns(event.t)),)
            attributes["dagwright.error_handled"] = True
        self._end_node(event.node, event.t, attributes, events, Status(StatusCode.OK))

    def _end_node(
        self,
        path: str,
        t: float,
        attributes: Attributes,
        events: tuple[Event, ...],
        status: Status,
    ) -> None:
        self._links.node_ended(self.run_id, path)
        node = self._nodes.pop(path, None)
        if node is None:
            return
        merged = {**node.attributes, **attributes}
        if node.usage.calls:
            merged.update(_usage_attributes(node.usage))
        name = f"node {path}"
        start, end = self._ns(node.start), self._ns(t)
        parent = self._parent_of(path)
        self._span(name, f"node:{path}", parent, start, end, merged, events=events, status=status)

    def _iteration_finished(self, event: IterationFinished) -> None:
        key = event.node if event.index is None else f"{event.node}[{event.index}]"
        opened = self._iterations.pop(key, None)
        if opened is None:
            return
        events: tuple[Event, ...] = ()
        status = Status(StatusCode.OK)
        if event.status == "waiting":  # a pause: the continuing run's iteration follows
            paused = {"message": event.error or ""}
            events = (Event("waiting_for_human", paused, timestamp=self._ns(event.t)),)
            status = Status(StatusCode.UNSET)
        elif event.status != "succeeded":
            message = event.error or event.status
            events = (_error_event(event.status, message, self._ns(event.t)),)
            status = Status(StatusCode.ERROR, message)
        opened.attributes["dagwright.status"] = event.status
        self._span(
            f"iteration {key}",
            f"iteration:{key}",
            self._context(f"node:{event.node}"),
            self._ns(opened.start),
            self._ns(event.t),
            opened.attributes,
            events=events,
            status=status,
        )

    def _run_finished(self, event: RunFinished) -> None:
        attributes: Attributes = {
            **self._attributes,
            "dagwright.run.id": self.run_id,
            "dagwright.flow": self._flow,
            "dagwright.status": event.status,
            **_usage_attributes(event.usage),
        }
        events: tuple[Event, ...] = ()
        status = Status(StatusCode.OK)
        if event.error is not None and event.error.code == PAUSED_CODE:
            # Waiting for a person: the continuing run's spans join this trace later.
            attributes["dagwright.status"] = "waiting"
        elif event.error is not None:
            at = self._ns(event.t)
            events = (
                _error_event(event.error.error_type or event.error.code, event.error.message, at),
            )
            attributes["dagwright.error.code"] = event.error.code
            if event.error.node is not None:
                attributes["dagwright.error.node"] = event.error.node
            status = Status(StatusCode.ERROR, event.error.message)
        parent_id = self._parent_span()
        parent = None
        if parent_id is not None:
            parent = SpanContext(self.trace_id, parent_id, True, _SAMPLED)
        self._span(
            f"run {self._flow}",
            "run",
            parent,
            self._ns(0.0),
            self._ns(event.t),
            attributes,
            events=events,
            status=status,
            kind=self._kind,
        )
