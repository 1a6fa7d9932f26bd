"""Typed run events. The executor yields them; the debug panel, run history and published
endpoints consume them. Plain slotted dataclasses: a run emits several per node and they must
cost next to nothing to make. `t` is seconds since the run started (monotonic clock).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Literal

from dagwright.registry.context import ModelCall, Usage

RunStatus = Literal["succeeded", "failed", "cancelled"]
# An iteration (a map item, a repeat round, a sub-flow call) may also stop to wait for a
# person (runtime/pause.py): it is neither done nor failed until an answer resumes the run.
IterationStatus = Literal["succeeded", "failed", "cancelled", "waiting"]


@dataclass(slots=True)
class RunEvent:
    type: ClassVar[str] = "event"
    run_id: str
    t: float

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.type}
        for f in fields(self):
            value = getattr(self, f.name)
            # Nested records (usage, error) become dicts; values are passed as they are.
            is_record = is_dataclass(value) and not isinstance(value, type)
            data[f.name] = asdict(value) if is_record else value
        return data


@dataclass(slots=True)
class RunStarted(RunEvent):
    type: ClassVar[str] = "run_started"
    flow: str
    inputs: dict[str, Any]
    started_at: float  # wall-clock seconds since the epoch, to place `t` in time


@dataclass(slots=True)
class NodeEvent(RunEvent):
    """An event about one node. Inside a sub-flow, `node` is a path: `refine[2]/check` is
    node `check` of round 2 of node `refine`, `call/check` node `check` of a single call."""

    node: str


@dataclass(slots=True)
class NodeStarted(NodeEvent):
    type: ClassVar[str] = "node_started"
    block: str
    inputs: dict[str, Any]


@dataclass(slots=True)
class NodeFinished(NodeEvent):
    type: ClassVar[str] = "node_finished"
    output: Any
    duration: float
    branch: str | None = None  # the branch a condition took ("error": a failure routed on)
    reused: bool = False  # taken from an earlier run (a debug re-run from a later node)
    # A failure the node's error policy turned into this output (a default or the error
    # branch), as "Type: message"; None for a real result.
    error: str | None = None


@dataclass(slots=True)
class NodeSkipped(NodeEvent):
    type: ClassVar[str] = "node_skipped"
    reason: str


@dataclass(slots=True)
class NodeFailed(NodeEvent):
    type: ClassVar[str] = "node_failed"
    error_type: str
    message: str
    duration: float


@dataclass(slots=True)
class NodeWaiting(NodeEvent):
    """The node stopped to wait for a person (a `human_input` node, or a sub-flow node whose
    iterations did): the run ends as `waiting`, not failed, and an answer resumes it."""

    type: ClassVar[str] = "node_waiting"
    message: str
    duration: float


@dataclass(slots=True)
class NodeCancelled(NodeEvent):
    type: ClassVar[str] = "node_cancelled"
    reason: str


@dataclass(slots=True)
class NodeMessage(NodeEvent):
    """Progress a block reports while it runs (an LLM token delta, a log line)."""

    type: ClassVar[str] = "node_message"
    kind: str
    data: dict[str, Any]


@dataclass(slots=True)
class NodeUsage(NodeEvent):
    """A model call a node made: what it spent and which model answered. The stream shows it
    as it always has, a node message of kind "usage" whose data holds both."""

    type: ClassVar[str] = "node_message"
    kind: ClassVar[str] = "usage"
    usage: Usage
    call: ModelCall

    @property
    def data(self) -> dict[str, Any]:
        """The message's data on the stream: the call's details, then the counts."""
        return {**self.call.to_dict(), **self.usage.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "run_id": self.run_id,
            "t": self.t,
            "node": self.node,
            "kind": self.kind,
            "data": self.data,
        }


@dataclass(slots=True)
class IterationStarted(NodeEvent):
    """A sub-flow node starts one run of its sub-flow: map item or repeat round `index`, or
    the single call of a `subflow` node (index None). Its nodes' events follow, with ids
    prefixed `node[index]/`."""

    type: ClassVar[str] = "iteration_started"
    index: int | None


@dataclass(slots=True)
class IterationFinished(NodeEvent):
    type: ClassVar[str] = "iteration_finished"
    index: int | None
    status: IterationStatus
    duration: float
    error: str | None
    outputs: dict[str, Any] | None = None  # the sub-flow's outputs when it succeeded


@dataclass(slots=True)
class RunError:
    """Why a run did not succeed: the node to blame (if any), a code and the real message."""

    code: str
    message: str
    node: str | None = None
    error_type: str | None = None


@dataclass(slots=True)
class RunFinished(RunEvent):
    type: ClassVar[str] = "run_finished"
    status: RunStatus
    outputs: dict[str, Any]
    duration: float
    error: RunError | None = None
    usage: Usage = field(default_factory=Usage)  # every model call of the run, summed
