"""Folding a run's events into a per-node trace: what the debug panel and `--trace` show."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dagwright.registry.context import Usage
from dagwright.runtime.events import (
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    RunEvent,
)

NodeStatus = Literal["pending", "running", "succeeded", "reused", "skipped", "failed", "cancelled"]


@dataclass(slots=True)
class NodeTrace:
    node: str
    block: str | None = None
    status: NodeStatus = "pending"
    inputs: dict[str, Any] | None = None
    output: Any = None
    branch: str | None = None
    started: float | None = None  # seconds since the run started
    finished: float | None = None
    duration: float | None = None
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)  # model calls of this node, summed


def build_trace(
    events: Iterable[RunEvent], blocks: Mapping[str, str] | None = None
) -> dict[str, NodeTrace]:
    """Node traces: first the given nodes (id -> block name) in order, so nodes never reached
    show as pending, then any others in the order they appear in the events."""
    traces = {node: NodeTrace(node, block) for node, block in (blocks or {}).items()}

    def of(node: str) -> NodeTrace:
        if node not in traces:
            traces[node] = NodeTrace(node)
        return traces[node]

    for event in events:
        if isinstance(event, NodeStarted):
            trace = of(event.node)
            trace.block, trace.status = event.block, "running"
            trace.inputs, trace.started = event.inputs, event.t
        elif isinstance(event, NodeFinished):
            trace = of(event.node)
            trace.status = "reused" if event.reused else "succeeded"
            trace.output, trace.branch = event.output, event.branch
            trace.finished, trace.duration = event.t, event.duration
        elif isinstance(event, NodeSkipped):
            trace = of(event.node)
            trace.status, trace.error = "skipped", event.reason
        elif isinstance(event, NodeFailed):
            trace = of(event.node)
            trace.status, trace.error = "failed", f"{event.error_type}: {event.message}"
            trace.finished, trace.duration = event.t, event.duration
        elif isinstance(event, NodeCancelled):
            trace = of(event.node)
            trace.status, trace.error, trace.finished = "cancelled", event.reason, event.t
        elif isinstance(event, NodeMessage):
            trace = of(event.node)
            trace.messages.append({"kind": event.kind, "t": event.t, **event.data})
            if event.kind == "usage":
                trace.usage.add(
                    Usage(
                        event.data["prompt_tokens"],
                        event.data["completion_tokens"],
                        event.data["cost"],
                        event.data["calls"],
                    )
                )
    return traces
