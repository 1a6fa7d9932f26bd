"""What a stored run is: the `runs` and `run_nodes` rows as records, and the values in them.

Values (inputs, outputs) are stored as JSON; a value too large keeps a preview only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from pydantic_core import from_json, to_json, to_jsonable_python

from dagwright.runtime.executor import ReusedOutput
from dagwright.services.runs.writer import RUN_NODES
from dagwright.store.models import utcnow

# Every status a run row takes, and every way a run is started (`mode`): what a run list may
# be filtered by (an unknown one is refused, not answered with an empty page).
RunStatus = Literal[
    "queued", "running", "waiting", "resumed", "succeeded", "failed", "cancelled", "interrupted"
]
RunMode = Literal["debug", "published", "invoke", "eval", "resume", "mcp", "tqa", "cron", "webhook"]
FINISHED: Final = ("succeeded", "reused")  # a node's statuses whose output can be passed on
MAX_VALUE_BYTES: Final = 256 * 1024  # a stored value whose JSON is larger keeps a preview only
PREVIEW_BYTES: Final = 2 * 1024


@dataclass(slots=True)
class NodeRecord:
    """One node's result in a run (a `run_nodes` row)."""

    node: str
    block: str
    status: str  # succeeded | reused | skipped | failed | cancelled
    inputs: dict[str, Any] | None = None
    output: Any = None
    branch: str | None = None
    error: str | None = None  # "ValueError: message" when failed; the reason when skipped
    started: float | None = None  # seconds since the run started
    duration: float | None = None
    usage: dict[str, Any] | None = None  # ModelUsage.to_dict(); None: no model calls


@dataclass(slots=True)
class RunRecord:
    """A run as stored: the `runs` row and, from `get`, its node results in start order."""

    id: str
    app_id: str | None
    version_id: str | None
    parent_run_id: str | None
    parent_node: str | None
    mode: str
    status: str
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None
    error: dict[str, Any] | None  # {code, message, node}
    usage: dict[str, Any] | None  # Usage.to_dict(); None until the run finished
    replica: str
    cancel_requested_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    duration: float | None
    nodes: list[NodeRecord] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (datetimes as ISO 8601 strings)."""
        data: dict[str, Any] = to_jsonable_python(self)
        return data


_NODE_COLUMNS: Final = tuple(c.name for c in RUN_NODES.c if c.name != "run_id")


def aware(value: datetime | None) -> datetime | None:
    """`value` in UTC: SQLite (and PostgreSQL's `timestamp`) give naive datetimes, and
    everything is written in UTC."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


def run_record(row: Mapping[Any, Any], nodes: list[NodeRecord]) -> RunRecord:
    """The record of a `runs` row (or of the row a recorder wrote) with these node results."""
    return RunRecord(
        id=row["id"],
        app_id=row["app_id"],
        version_id=row["version_id"],
        parent_run_id=row["parent_run_id"],
        parent_node=row["parent_node"],
        mode=row["mode"],
        status=row["status"],
        inputs=row["inputs"] or {},
        outputs=row["outputs"],
        error=row["error"],
        usage=row["usage"],
        replica=row["replica"],
        cancel_requested_at=aware(row["cancel_requested_at"]),
        created_at=aware(row["created_at"]) or utcnow(),
        started_at=aware(row["started_at"]),
        finished_at=aware(row["finished_at"]),
        duration=row["duration"],
        nodes=nodes,
    )


def node_records(rows: Sequence[Mapping[Any, Any]]) -> list[NodeRecord]:
    """In the order the nodes started; skipped nodes (never started) after them, by id."""
    records = [NodeRecord(**{name: row[name] for name in _NODE_COLUMNS}) for row in rows]
    records.sort(key=lambda r: (r.started is None, r.started or 0.0, r.node))
    return records


def json_value(value: Any) -> Any:
    """`value` made JSON-safe for storage; a value whose JSON exceeds MAX_VALUE_BYTES becomes
    {"truncated": true, "size": <bytes>, "preview": <its first PREVIEW_BYTES of JSON>}."""
    kind = type(value)
    if value is None or kind is bool or kind is int:
        return value
    if kind is str and len(value) * 6 + 2 <= MAX_VALUE_BYTES:  # 6: the longest escape, \uXXXX
        return value
    try:
        # The same serializer as to_jsonable_python(value, fallback=repr), through JSON text:
        # that measures the size for free, and NaN/inf become strings (JSON has no such
        # numbers; PostgreSQL refuses them).
        text = to_json(value, fallback=repr, inf_nan_mode="strings")
    except Exception:  # e.g. bytes that are not UTF-8: the repr still says what it was
        text = to_json(repr(value))
    if len(text) > MAX_VALUE_BYTES:
        preview = text[:PREVIEW_BYTES].decode("utf-8", "ignore")  # "ignore": a cut character
        return {"truncated": True, "size": len(text), "preview": preview}
    return from_json(text)


def json_ports(values: Mapping[str, Any]) -> dict[str, Any]:
    """Port name -> value, each value made safe (and capped) on its own."""
    return {name: json_value(value) for name, value in values.items()}


def truncated(value: Any) -> bool:
    """Whether a stored value is json_value's preview of a larger one."""
    return isinstance(value, dict) and value.get("truncated") is True and "preview" in value


def reusable(nodes: Iterable[NodeRecord], *, nested: bool) -> dict[str, ReusedOutput]:
    """The recorded results a run going on from these (a resume, a re-run) may pass on
    instead of running their nodes: those that finished, but not one stored truncated (the
    preview is no output: its node runs again). `nested`: inner nodes too, by path
    (`loop[0]/check`), which resuming a pause hands on to each iteration; else only the
    flow's own nodes (a sub-flow node that did not finish runs again whole)."""
    return {
        node.node: ReusedOutput(node.output, node.branch)
        for node in nodes
        if node.status in FINISHED
        and (nested or "/" not in node.node)
        and not truncated(node.output)
    }
