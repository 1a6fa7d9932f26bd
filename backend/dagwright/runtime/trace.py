"""Folding a run's events into a per-node trace: what the debug panel and `--trace` show.

Nodes inside sub-flows are traced under their path (`refine[2]/check`); a sub-flow node
lists its iterations (map items, repeat rounds, or its single call) with their status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dagwright.registry.context import Usage
from dagwright.runtime.events import (
    IterationFinished,
    IterationStarted,
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    RunEvent,
)

NodeStatus = Literal[
    "pending", "running", "succeeded", "reused", "recovered", "skipped", "failed", "cancelled"
]
IterationStatus = Literal["running", "succeeded", "failed", "cancelled"]


@dataclass(slots=True)
class IterationTrace:
    index: int | None  # the item or round; None for a sub-flow node's single call
    status: IterationStatus = "running"
    started: float | None = None
    finished: float | None = None
    duration: float | None = None
    error: str | None = None
    outputs: dict[str, Any] | None = None

    @staticmethod
    def prefix(node: str, index: int | None) -> str:
        """How the iteration's nodes are named: `node[index]/inner` or `node/inner`."""
        return f"{node}/" if index is None else f"{node}[{index}]/"


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
    iterations: list[IterationTrace] = field(default_factory=list)  # by index


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
            if event.error is not None and not event.reused:
                # a failure its error policy turned into an output
                trace.status, trace.error = "recovered", event.error
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
        elif isinstance(event, IterationStarted):
            of(event.node).iterations.append(IterationTrace(event.index, started=event.t))
        elif isinstance(event, IterationFinished):
            iteration = _iteration(of(event.node), event.index)
            iteration.status, iteration.error = event.status, event.error
            iteration.finished, iteration.duration = event.t, event.duration
            iteration.outputs = event.outputs
    for trace in traces.values():
        if len(trace.iterations) > 1:  # map items finish in any order
            trace.iterations.sort(key=lambda it: -1 if it.index is None else it.index)
    return traces


def _iteration(trace: NodeTrace, index: int | None) -> IterationTrace:
    # The latest first: items of a map still running are at the end.
    for iteration in reversed(trace.iterations):
        if iteration.index == index:
            return iteration
    iteration = IterationTrace(index)
    trace.iterations.append(iteration)
    return iteration


def iteration_nodes(
    traces: Mapping[str, NodeTrace], node: str, index: int | None
) -> dict[str, NodeTrace]:
    """The traces of one iteration's nodes, by their id inside the sub-flow: what the debug
    panel opens when an iteration of a sub-flow node is clicked."""
    prefix = IterationTrace.prefix(node, index)
    return {
        path[len(prefix) :]: trace
        for path, trace in traces.items()
        if path.startswith(prefix) and "/" not in path[len(prefix) :]
    }
