"""Typed run events. The executor yields them; the debug panel, run history and published
endpoints consume them. Plain slotted dataclasses: a run emits several per node and they must
cost next to nothing to make. `t` is seconds since the run started (monotonic clock).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, ClassVar, Literal

from dagwright.registry.context import Usage

RunStatus = Literal["succeeded", "failed", "cancelled"]


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
class NodeStarted(RunEvent):
    type: ClassVar[str] = "node_started"
    node: str
    block: str
    inputs: dict[str, Any]


@dataclass(slots=True)
class NodeFinished(RunEvent):
    type: ClassVar[str] = "node_finished"
    node: str
    output: Any
    duration: float
    branch: str | None = None  # the branch a condition took
    reused: bool = False  # taken from an earlier run (a debug re-run from a later node)


@dataclass(slots=True)
class NodeSkipped(RunEvent):
    type: ClassVar[str] = "node_skipped"
    node: str
    reason: str


@dataclass(slots=True)
class NodeFailed(RunEvent):
    type: ClassVar[str] = "node_failed"
    node: str
    error_type: str
    message: str
    duration: float


@dataclass(slots=True)
class NodeCancelled(RunEvent):
    type: ClassVar[str] = "node_cancelled"
    node: str
    reason: str


@dataclass(slots=True)
class NodeMessage(RunEvent):
    """Progress a block reports while it runs (an LLM token delta, a log line)."""

    type: ClassVar[str] = "node_message"
    node: str
    kind: str
    data: dict[str, Any]


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
