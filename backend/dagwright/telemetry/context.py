"""W3C trace context and the ids of a run's spans, without the OpenTelemetry SDK.

Span ids are derived from the run id and the span's key (`run`, `node:refine[2]/check`...):
a span's id is known before the span is exported, so a child run started by a node (an app
invoking an app) or a call to another server can name its parent span while that node is
still running, and a run resumed later (on any replica) keeps its trace.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from dagwright.runtime.executor import Run

_TRACEPARENT: Final = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


@dataclass(frozen=True, slots=True)
class TraceParent:
    """A span to hang spans under: the `traceparent` header's trace id, span id and flags."""

    trace_id: int
    span_id: int
    sampled: bool = True

    @classmethod
    def parse(cls, header: str | None) -> TraceParent | None:
        """The header's value, or None when it is absent or invalid: W3C says to ignore a bad
        header and start a new trace rather than refuse the request."""
        if not header:
            return None
        found = _TRACEPARENT.match(header.strip().lower())
        if found is None:
            return None
        trace_id, span_id = int(found[1], 16), int(found[2], 16)
        if trace_id == 0 or span_id == 0:
            return None
        return cls(trace_id, span_id, bool(int(found[3], 16) & 1))

    def header(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{'01' if self.sampled else '00'}"


def _digest(text: str, size: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big")
    return value or 1  # 0 is the invalid id


def trace_id_for(run_id: str) -> int:
    """The trace id of a run that starts a trace of its own."""
    return _digest(f"trace:{run_id}", 16)


def span_id_for(run_id: str, key: str) -> int:
    """The id of the span `key` of run `run_id`: `run`, `node:<path>`, `iteration:<path>`,
    `call:<path>:<n>`."""
    return _digest(f"{run_id}|{key}", 8)


class TraceLinks:
    """The trace of each run this process is tracing, and which node paths are running, so a
    node's outgoing call can carry its span as `traceparent`."""

    def __init__(self) -> None:
        self._traces: dict[str, int] = {}
        self._top: dict[str, frozenset[str]] = {}  # run -> its flow's own node ids
        self._running: dict[str, dict[str, set[str]]] = {}  # run -> node id -> nested paths

    def register(self, run_id: str, trace_id: int, nodes: frozenset[str]) -> None:
        self._traces[run_id] = trace_id
        self._top[run_id] = nodes
        self._running[run_id] = {}

    def forget(self, run_id: str) -> None:
        self._traces.pop(run_id, None)
        self._top.pop(run_id, None)
        self._running.pop(run_id, None)

    def trace_of(self, run_id: str) -> int | None:
        return self._traces.get(run_id)

    def node_started(self, run_id: str, path: str) -> None:
        running = self._running.get(run_id)
        if running is not None and "/" in path:
            running.setdefault(path.rsplit("/", 1)[-1], set()).add(path)

    def node_ended(self, run_id: str, path: str) -> None:
        paths = self._running.get(run_id, {}).get(path.rsplit("/", 1)[-1])
        if paths is not None:
            paths.discard(path)

    def span_of(self, run_id: str, node_id: str) -> int:
        """The span of the node `node_id` of the run. A node of the flow itself is its own
        span. A block inside a sub-flow knows its id, not its path (`refine[2]/check`): when
        exactly one running path ends with that id that is its span, otherwise (several map
        items at once) the run's span."""
        if node_id in self._top.get(run_id, ()):
            return span_id_for(run_id, f"node:{node_id}")
        paths = self._running.get(run_id, {}).get(node_id, set())
        if len(paths) == 1:
            return span_id_for(run_id, f"node:{next(iter(paths))}")
        return span_id_for(run_id, "run")

    def parent_for(self, run_id: str, node_id: str) -> TraceParent | None:
        """Where a call made by that node hangs in the trace, or None when the run is not
        being traced."""
        trace_id = self._traces.get(run_id)
        if trace_id is None:
            return None
        return TraceParent(trace_id, self.span_of(run_id, node_id))


# This process's runs: the run service registers them, blocks calling out read them.
LINKS: Final = TraceLinks()


def traceparent_for(run_id: str, node_id: str) -> str | None:
    """The `traceparent` header for a call that node `node_id` of run `run_id` makes to
    another service, or None when the run is not traced."""
    parent = LINKS.parent_for(run_id, node_id)
    return None if parent is None else parent.header()


class RunTracer(Protocol):
    """What the run service calls to trace a run it starts (telemetry/tracing.py)."""

    def follow(
        self,
        run: Run,
        traceparent: TraceParent | None = None,
        *,
        parent_run_id: str | None = None,
        parent_node: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> None: ...

    async def close(self, grace: float = 5.0) -> None: ...
