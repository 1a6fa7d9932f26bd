"""What a running block may see of its run: ids, and a way to report progress as events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# emit(node_id, kind, data): the runtime turns it into a NodeMessage event.
EmitFn = Callable[[str, str, dict[str, Any]], None]


class NodeContext:
    """Given to a block that declares a parameter annotated `NodeContext`."""

    __slots__ = ("_emit", "node_id", "run_id")

    def __init__(self, run_id: str, node_id: str, emit: EmitFn) -> None:
        self.run_id = run_id
        self.node_id = node_id
        self._emit = emit

    def emit(self, kind: str, **data: Any) -> None:
        """Report progress (a token delta, a log line...) as a live event of this node."""
        self._emit(self.node_id, kind, data)
