"""What a running block may see of its run: ids, services, progress events and usage."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, ParamSpec, TypeVar

from dagwright.registry.services import DATA_WORK, BlockServices, Service

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(slots=True)
class Usage:
    """Tokens and money a node (or a run) spent on model calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost += other.cost
        self.calls += other.calls

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form, in run and node records, events and the API: {prompt_tokens,
        completion_tokens, cost, calls}."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "calls": self.calls,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Read back from its JSON form (a key missing or null counts as none)."""
        return cls(
            int(data.get("prompt_tokens") or 0),
            int(data.get("completion_tokens") or 0),
            float(data.get("cost") or 0.0),
            int(data.get("calls") or 0),
        )


@dataclass(slots=True, frozen=True)
class ModelCall:
    """Which model answered a call and how: what a usage event says besides the counts."""

    provider: str | None = None
    model: str | None = None
    latency: float | None = None  # seconds from the first attempt to the answer
    attempts: int | None = None
    scripted: bool = False  # answered by dagwright's scripted server, not a model
    tokens_estimated: bool = False  # the provider reported no usage; counted as chars / 4

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form in a usage event: what is known of the call (no null fields)."""
        known = (
            ("provider", self.provider),
            ("model", self.model),
            ("latency", self.latency),
            ("attempts", self.attempts),
            ("scripted", self.scripted),
            ("tokens_estimated", self.tokens_estimated),
        )
        return {name: value for name, value in known if value is not None}


# emit(node_id, kind, data): the runtime turns it into a NodeMessage event.
EmitFn = Callable[[str, str, dict[str, Any]], None]
# record(node_id, usage, call): the runtime adds usage to the node's and run's totals.
UsageFn = Callable[[str, Usage, ModelCall], None]


@dataclass(slots=True)
class ModelUsage(Usage):
    """Usage with who answered: the model of the last call and whether any call was answered
    by dagwright's scripted server (a node's usage, as traced and stored, so that a stored
    trace labels scripted answers as the live stream does)."""

    model: str | None = None
    scripted: bool = False

    def add_call(self, usage: Usage, call: ModelCall) -> None:
        self.add(usage)
        self.model = call.model
        self.scripted = self.scripted or call.scripted

    def to_dict(self) -> dict[str, Any]:
        """Usage's JSON form and {model, scripted}."""
        return {**Usage.to_dict(self), "model": self.model, "scripted": self.scripted}


_UNKNOWN_CALL: Final = ModelCall()


class NodeContext:
    """Given to a block that declares a parameter annotated `NodeContext`."""

    __slots__ = ("_emit", "_record", "_services", "node_id", "path", "run_id")

    def __init__(
        self,
        run_id: str,
        node_id: str,
        emit: EmitFn,
        record: UsageFn,
        services: BlockServices,
        path: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.node_id = node_id
        # Where the node is in its run: its id, or inside a sub-flow's iteration the id under
        # the iteration's path (`loop[2]/approve`), as the run's trace names it.
        self.path = node_id if path is None else path
        self._emit = emit
        self._record = record
        self._services = services

    def emit(self, kind: str, **data: Any) -> None:
        """Report progress (a token delta, a log line...) as a live event of this node."""
        self._emit(self.node_id, kind, data)

    def record_usage(self, usage: Usage, call: ModelCall | None = None) -> None:
        """Account for a model call (`call`: which model answered, if known): summed per node
        and per run, and shown as a usage event."""
        self._record(self.node_id, usage, call if call is not None else _UNKNOWN_CALL)

    def service(self, service: Service[T]) -> T:
        """The run's instance of a service the block declared (`needs=`), by its key
        (registry/services.py); MissingServiceError when the run was not given it."""
        return self._services.get(service)

    async def table_work(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` (sampling, discovery, a query) on the process's data pool
        (`DATA_WORK`), never on the event loop's default executor, which answers the API.
        The run was admitted (a full pool refuses new runs: RunService.admission), so a full
        pool makes this call wait its turn, not fail the run half-done. A run not given the
        pool (tests that build their own services; every process's runs are given it) uses a
        thread."""
        if self._services.provides(DATA_WORK):
            return await self._services.get(DATA_WORK).run_queued(fn, *args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)
