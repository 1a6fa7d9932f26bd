"""The one fold of a run's events into per-node traces: what `--trace` prints, and what the
server records of each node (services/runs/recorder.py writes a row per settled trace).

Nodes inside sub-flows are traced under their path (`refine[2]/check`); a sub-flow node
lists its iterations (map items, repeat rounds, or its single call) with their status."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from dagwright.registry.context import ModelUsage
from dagwright.runtime.events import (
    IterationFinished,
    IterationStarted,
    NodeCancelled,
    NodeFailed,
    NodeFinished,
    NodeMessage,
    NodeSkipped,
    NodeStarted,
    NodeUsage,
    NodeWaiting,
    RunEvent,
)

NodeStatus = Literal[
    "pending",
    "running",
    "succeeded",
    "reused",
    "recovered",
    "skipped",
    "failed",
    "cancelled",
    "waiting",
]
IterationStatus = Literal["running", "succeeded", "failed", "cancelled", "waiting"]


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
    usage: ModelUsage = field(default_factory=ModelUsage)  # model calls of this node, summed
    metered: bool = False  # the node reported usage (made model calls); `usage` sums it
    iterations: list[IterationTrace] = field(default_factory=list)  # by index


class RunTrace:
    """Folds a run's events, one at a time, into node traces (`nodes`, by node path).

    `blocks` (id -> block name) lists nodes up front, in order, so that nodes never reached
    show as pending. `copy_inputs` copies a node's inputs when it starts (a block may change a
    dict it was given later); `keep_messages=False` keeps no progress messages (token deltas
    are many and a recorder has no use for them)."""

    __slots__ = ("_copy_inputs", "_keep_messages", "nodes")

    def __init__(
        self,
        blocks: Mapping[str, str] | None = None,
        *,
        copy_inputs: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        keep_messages: bool = True,
    ) -> None:
        self.nodes = {node: NodeTrace(node, block) for node, block in (blocks or {}).items()}
        self._copy_inputs = copy_inputs
        self._keep_messages = keep_messages

    def _of(self, node: str) -> NodeTrace:
        trace = self.nodes.get(node)
        if trace is None:
            trace = self.nodes[node] = NodeTrace(node)
        return trace

    def apply(self, event: RunEvent) -> NodeTrace | None:  # noqa: C901, PLR0912
        """Fold one event in; returns the node's trace when the event settled the node
        (finished, failed, waiting, cancelled or skipped), else None."""
        if isinstance(event, NodeUsage):
            trace = self._of(event.node)
            if self._keep_messages:
                trace.messages.append({"kind": event.kind, "t": event.t, **event.data})
            trace.usage.add_call(event.usage, event.call)
            trace.metered = True
            return None
        if isinstance(event, NodeMessage):
            if self._keep_messages:
                trace = self._of(event.node)
                trace.messages.append({"kind": event.kind, "t": event.t, **event.data})
            return None
        if isinstance(event, NodeStarted):
            trace = self._of(event.node)
            trace.block, trace.status, trace.started = event.block, "running", event.t
            copy = self._copy_inputs
            trace.inputs = event.inputs if copy is None else copy(event.inputs)
            return None
        if isinstance(event, NodeFinished):
            trace = self._of(event.node)
            trace.status = "reused" if event.reused else "succeeded"
            if event.error is not None and not event.reused:
                # a failure its error policy turned into an output
                trace.status, trace.error = "recovered", event.error
            trace.output, trace.branch = event.output, event.branch
            trace.finished, trace.duration = event.t, event.duration
            return trace
        if isinstance(event, NodeFailed):
            trace = self._of(event.node)
            trace.status, trace.error = "failed", f"{event.error_type}: {event.message}"
            trace.finished, trace.duration = event.t, event.duration
            return trace
        if isinstance(event, NodeWaiting):
            trace = self._of(event.node)
            trace.status, trace.error = "waiting", event.message
            trace.finished, trace.duration = event.t, event.duration
            return trace
        if isinstance(event, NodeCancelled):
            trace = self._of(event.node)
            trace.status, trace.error, trace.finished = "cancelled", event.reason, event.t
            if trace.started is not None:  # a node cancelled before it started ran for no time
                trace.duration = event.t - trace.started
            return trace
        if isinstance(event, NodeSkipped):
            trace = self._of(event.node)
            trace.status, trace.error = "skipped", event.reason
            return trace
        if isinstance(event, IterationStarted):
            self._of(event.node).iterations.append(IterationTrace(event.index, started=event.t))
        elif isinstance(event, IterationFinished):
            iteration = _iteration(self._of(event.node), event.index)
            iteration.status, iteration.error = event.status, event.error
            iteration.finished, iteration.duration = event.t, event.duration
            iteration.outputs = event.outputs
        return None

    def forget(self, node: str) -> None:
        """Let go of a settled node's trace (a recorder that has written it keeps no copy of
        every output until the run ends)."""
        self.nodes.pop(node, None)

    def traces(self) -> dict[str, NodeTrace]:
        """The node traces, each node's iterations in index order (map items finish in any
        order)."""
        for trace in self.nodes.values():
            if len(trace.iterations) > 1:
                trace.iterations.sort(key=lambda it: -1 if it.index is None else it.index)
        return self.nodes


def build_trace(
    events: Iterable[RunEvent], blocks: Mapping[str, str] | None = None
) -> dict[str, NodeTrace]:
    """Node traces: first the given nodes (id -> block name) in order, so nodes never reached
    show as pending, then any others in the order they appear in the events."""
    fold = RunTrace(blocks)
    for event in events:
        fold.apply(event)
    return fold.traces()


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
