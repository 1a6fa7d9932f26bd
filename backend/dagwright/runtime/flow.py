"""The flow file format (documented in docs/flow-format.md): versioned JSON, read strictly.

A flow is nodes (a block with its configuration) and edges (output port -> input port, with
a branch label when the source is a condition). Edges are a list, not a map keyed by node
pair, so any number of edges may leave one output or enter one port. A document may also
hold sub-flows (named graphs that `subflow`, `map` and `repeat` nodes run), and any node may
carry an error policy (`on_error`). Both fields are optional, so older documents still load.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dagwright.errors import FlowFormatError, describe_validation_error

FORMAT: Final = "dagwright.flow"
FORMAT_VERSION: Final = 1
SUPPORTED_VERSIONS = (1,)

NODE_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Position(_Strict):
    x: float
    y: float


Fallback = Literal["fail", "default", "error_branch"]
ERROR_PORT: Final = "error"  # the output port a node with `fallback: error_branch` gains


class ErrorPolicy(_Strict):
    """What the executor does when a node fails: retry it with exponential backoff, then fail
    the run, pass a default value on, or send the error down the node's `error` port."""

    retry: int = Field(0, ge=0, le=10, description="attempts after the first")
    backoff: float = Field(0.5, ge=0, le=60, description="seconds before the first retry")
    backoff_factor: float = Field(2.0, ge=1, le=10, description="each wait is this much longer")
    max_backoff: float = Field(30.0, ge=0, le=600, description="the longest wait, in seconds")
    fallback: Fallback = "fail"
    default: Any = Field(None, description="the output when fallback is 'default'")

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number `attempt` (1 for the first retry)."""
        return float(min(self.backoff * self.backoff_factor ** (attempt - 1), self.max_backoff))


class Node(_Strict):
    id: str = Field(pattern=NODE_ID_PATTERN)
    block: str
    config: dict[str, Any] = Field(default_factory=dict)
    label: str | None = None
    position: Position | None = None
    timeout: float | None = Field(default=None, gt=0, description="seconds; overrides the block's")
    on_error: ErrorPolicy | None = None


class PortRef(_Strict):
    node: str
    port: str = "output"

    def __str__(self) -> str:
        return f"{self.node}.{self.port}"


class Edge(_Strict):
    source: PortRef
    target: PortRef
    branch: str | None = None

    def __str__(self) -> str:
        branch = f" [{self.branch}]" if self.branch else ""
        return f"{self.source} -> {self.target}{branch}"


class SubFlow(_Strict):
    """A graph stored inside a flow document and run by its sub-flow nodes; the editor shows
    it as a group. Its input and output nodes are its ports."""

    description: str = ""
    nodes: list[Node] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)


class Flow(_Strict):
    format: Literal["dagwright.flow"] = FORMAT
    version: Literal[1] = FORMAT_VERSION
    name: str = "untitled"
    description: str = ""
    nodes: list[Node] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    # By name; a sub-flow's nodes may call the others (validation names any recursion). None
    # rather than {} when there are none, so documents without sub-flows are saved as before.
    subflows: dict[str, SubFlow] | None = None

    @field_validator("subflows")
    @classmethod
    def _subflow_names(cls, subflows: dict[str, SubFlow] | None) -> dict[str, SubFlow] | None:
        for name in subflows or {}:
            if re.fullmatch(NODE_ID_PATTERN, name) is None:
                raise ValueError(f"sub-flow name {name!r} is not a valid id")
        return subflows or None

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, exclude_none=True)

    def subflow(self, name: str) -> Flow:
        """The named sub-flow as a flow of its own, seeing the same sub-flows (KeyError when
        the document has none of that name)."""
        sub = (self.subflows or {})[name]
        return Flow(
            name=name,
            description=sub.description,
            nodes=sub.nodes,
            edges=sub.edges,
            subflows=self.subflows,
        )


def parse_flow(data: Any) -> Flow:
    """A Flow from decoded JSON; every problem with the document's shape is listed."""
    if not isinstance(data, dict):
        raise FlowFormatError(f"a flow is a JSON object, not {type(data).__name__}")
    declared = data.get("format")
    if declared != FORMAT:
        raise FlowFormatError(
            f"not a dagwright flow: 'format' must be {FORMAT!r}, not {declared!r}"
        )
    version = data.get("version")
    if version not in SUPPORTED_VERSIONS:
        readable = ", ".join(str(v) for v in SUPPORTED_VERSIONS)
        raise FlowFormatError(
            f"flow format version {version!r} is not supported; this dagwright reads {readable}"
        )
    try:
        return Flow.model_validate(data)
    except ValidationError as exc:
        raise FlowFormatError(f"invalid flow document: {describe_validation_error(exc)}") from None


def loads_flow(text: str, source: str = "flow") -> Flow:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlowFormatError(
            f"{source}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    try:
        return parse_flow(data)
    except FlowFormatError as exc:
        raise FlowFormatError(f"{source}: {exc.message}") from None


def load_flow(path: str | Path) -> Flow:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FlowFormatError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise FlowFormatError(f"{path}: not UTF-8 text") from None
    return loads_flow(text, source=str(path))
