"""The services a block may use: each a Protocol (what a block may call) and a typed key
(`MODELS`, `TABLES`...) that a block declares (`@block(..., needs=(MODELS,))`) and looks its
service up by (`ctx.service(MODELS)`, typed `ModelAccess`).

A run is given a `BlockServices`: the process's services by key, each built when a block
first asks for it (composition.py provides them). Starting a run checks every node's
declared needs against it and fails, before any node runs, naming every missing service and
the nodes that need it (`MissingServiceError`). A block declares what it always needs, or
what its config says it needs (`needs=lambda config: ...`); a service it looks up only for
some input values (a table given by name rather than as rows) is not declared, and its
lookup fails at that node, with the same error, when the run lacks it.

A new kind of service goes here: its Protocol and its key; the composition root provides it.
The types in the Protocols' signatures are imported for type checking only: this module
loads none of the model gateway, the data layer or Qdrant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    ParamSpec,
    Protocol,
    TypeVar,
    runtime_checkable,
)

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.data.engine import QueryEngine
    from dagwright.data.isolation import SandboxSettings
    from dagwright.data.table_catalogue import TableCatalogue
    from dagwright.egress import EgressPolicy
    from dagwright.embedding.embedder import Embedder
    from dagwright.embedding.service import Hit
    from dagwright.llm.gateway import CallResult, ChatRequest, DeltaFn
    from dagwright.mcp.client import StdioAllowList
    from dagwright.methods.data_copilot.library import InterfaceLibrary

T = TypeVar("T")
P = ParamSpec("P")


class MissingServiceError(DagwrightError):
    """A run lacks a service its blocks need (model providers, tables...): the message names
    each missing service and the nodes that need it."""

    code = "service_unavailable"


class Service(Generic[T]):
    """The key of one kind of service; `T` is what a block gets for it."""

    __slots__ = ("built_off_loop", "name", "what")

    def __init__(self, name: str, what: str, built_off_loop: bool = False) -> None:
        self.name = name
        self.what = what
        # Its build imports heavy modules (the data layer, Qdrant, AutoTQA): a run that needs
        # it has it built in a thread before its nodes run (`BlockServices.unbuilt`), not by
        # a block's first lookup on the event loop, which it would stall (a server's early
        # calls, while start-up's thread still imports them: api/startup.py).
        self.built_off_loop = built_off_loop

    def __repr__(self) -> str:
        return f"Service({self.name!r})"


# -- the Protocols ---------------------------------------------------------------------------


class ModelAccess(Protocol):
    """Calls to the configured model providers (the LLM gateway)."""

    async def chat(
        self, provider_name: str | None, request: ChatRequest, on_delta: DeltaFn | None = None
    ) -> CallResult: ...

    async def complete(
        self,
        provider_name: str | None,
        prompt: str,
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        on_delta: DeltaFn | None = None,
    ) -> CallResult: ...

    async def embed(
        self,
        provider_name: str | None,
        texts: list[str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
    ) -> CallResult: ...


class ExampleSearch(Protocol):
    """The few-shot example store (Qdrant)."""

    async def upsert(self, namespace: str, examples: list[dict[str, Any]]) -> list[str]: ...

    async def query(
        self,
        namespace: str,
        text: str,
        k: int = 5,
        filter: dict[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]: ...


class Tables(Protocol):
    """The query engine over every registered data source, and the embedders that rank its
    tables by meaning (a provider's through the process's model gateway)."""

    def engine(self) -> QueryEngine: ...

    def catalogue(self) -> TableCatalogue: ...

    def embedder(self, spec: str) -> Embedder: ...


class AppInvocation(Protocol):
    """Runs another app's published (or pinned) version as a child of the calling run."""

    async def invoke(
        self,
        app: str,
        version: str | None,
        inputs: Mapping[str, Any],
        *,
        parent_run_id: str,
        parent_node: str,
    ) -> dict[str, Any]:
        """The child run's outputs; raises when it does not succeed, naming the child run."""
        ...


@runtime_checkable  # isinstance: what a store is (checks its methods only)
class Secrets(Protocol):
    """Where a run reads secret values from, by name (never written into flows or events)."""

    def get(self, name: str) -> str:
        """The secret's value. Raises SecretNotFoundError when it is not set, ValueError
        when the name is not a valid secret name."""
        ...

    def names(self) -> list[str]:
        """The names of the secrets that are set, sorted; never their values."""
        ...


class PendingRequest(Protocol):
    """A request to a person, as the run that asked sees it."""

    @property
    def id(self) -> str: ...


class HumanRequests(Protocol):
    """Where a paused run's questions to people go (a dagwright server's requests)."""

    def ask(
        self,
        run_id: str,
        node: str,
        message: str,
        form: dict[str, Any],
        timeout_s: float | None,
    ) -> PendingRequest:
        """Record a request for the node (its path in the run: `loop[2]/approve` inside a
        map item) waiting for an answer, expiring after `timeout_s` seconds when given."""
        ...


class AutoTqa(Protocol):
    """Answers a question with the AutoTQA agents."""

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The finished conversation as a dict: `id`, `status` (completed | round_limit |
        failed), `answer` (with its evidence), `turns`, `usage`."""
        ...


class HeavyWork(Protocol):
    """A bounded pool for one kind of heavy work (dagwright/workpools.py's `WorkPool`)."""

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on one of the pool's threads, awaited; refused at once
        (PoolBusyError, HTTP 429) when the pool's queue is full: for work a request starts."""
        ...

    async def run_queued(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """As `run`, waiting for room instead of refusing: for work already under way (a
        running flow's next call), bounded where that work was admitted."""
        ...


# -- the keys --------------------------------------------------------------------------------

MODELS: Final = Service[ModelAccess]("models", "model providers (the LLM gateway)")
EXAMPLES: Final = Service[ExampleSearch](
    "examples", "the few-shot example store", built_off_loop=True
)
TABLES: Final = Service[Tables]("tables", "the data sources' query engine", built_off_loop=True)
APPS: Final = Service[AppInvocation]("apps", "calls to other apps (a dagwright server)")
SECRETS: Final = Service[Secrets]("secrets", "secrets")
AUTOTQA: Final = Service[AutoTqa]("autotqa", "the AutoTQA agents", built_off_loop=True)
HUMAN: Final = Service[HumanRequests]("human", "requests to people (a dagwright server)")
# Services of one feature each, typed by their class.
INTERFACES: Final[Service[InterfaceLibrary]] = Service(
    "interfaces", "Data-Copilot's interface libraries (the database)", built_off_loop=True
)
# The operator's settings for what runs on this host, typed by their value classes.
SANDBOX: Final[Service[SandboxSettings]] = Service(
    "sandbox", "the Python sandbox's isolation settings"
)
MCP_STDIO: Final[Service[StdioAllowList]] = Service(
    "mcp_stdio", "the commands stdio MCP servers may be started with"
)
# Built off the loop: it looks up this host's own addresses (a resolver call).
EGRESS: Final[Service[EgressPolicy]] = Service(
    "egress", "the outbound-traffic policy (where flows may connect)", built_off_loop=True
)
SOURCE_PATHS: Final[Service[SourcePaths]] = Service(
    "source_paths", "the local folders file and SQLite data may be read from"
)
# Where table work runs (sampling, discovery, queries): never the API's threads.
DATA_WORK: Final = Service[HeavyWork]("data_work", "the data work pool (table work's threads)")


# -- what a run is given ---------------------------------------------------------------------


class BlockServices:
    """The services a run's blocks may use, by key: given ready (`provide`) or built on the
    first lookup (`provide_lazily`). Lookups may come from blocks running in threads: a
    service is built once, under a lock."""

    __slots__ = ("_factories", "_lock", "_parent", "_ready")

    def __init__(
        self,
        given: Mapping[Service[Any], object] | None = None,
        parent: BlockServices | None = None,
    ) -> None:
        """`given`: services ready by key (tests; the process's go through `provide`, whose
        value mypy checks against its key's type)."""
        self._ready: dict[Service[Any], object] = dict(given or {})
        wrong = [key for key in self._ready if not isinstance(key, Service)]
        if wrong:
            raise TypeError(f"services are given by their Service key, not {wrong!r}")
        self._factories: dict[Service[Any], Callable[[], object]] = {}
        self._lock = threading.Lock()
        self._parent = parent

    def provide(self, service: Service[T], value: T) -> None:
        self._ready[service] = value

    def provide_lazily(self, service: Service[T], factory: Callable[[], T]) -> None:
        self._factories[service] = factory

    def with_service(self, service: Service[T], value: T) -> BlockServices:
        """These services and one more (a view: what is built later is seen through it)."""
        extended = BlockServices(parent=self)
        extended.provide(service, value)
        return extended

    def provides(self, service: Service[Any]) -> bool:
        if service in self._ready or service in self._factories:
            return True
        return self._parent is not None and self._parent.provides(service)

    def get(self, service: Service[T]) -> T:
        """The service, built now if it is provided lazily; MissingServiceError when it is
        not provided."""
        if service in self._ready:
            found: T = self._ready[service]  # type: ignore[assignment]  # typed by provide()
            return found
        if service not in self._factories:
            if self._parent is not None:
                return self._parent.get(service)
            raise MissingServiceError(
                f"this block needs {service.what} ({service.name}), which the run was not given"
            )
        with self._lock:
            if service not in self._ready:
                self._ready[service] = self._factories[service]()
            built: T = self._ready[service]  # type: ignore[assignment]
            return built

    def unbuilt(self, nodes: Iterable[tuple[str, Sequence[Service[Any]]]]) -> list[Service[Any]]:
        """The services these nodes need that are built off the loop and not built yet."""
        found: list[Service[Any]] = []
        for _, needs in nodes:
            for service in needs:
                if service.built_off_loop and service not in found and not self._has(service):
                    found.append(service)
        return found

    def _has(self, service: Service[Any]) -> bool:
        if service in self._ready:
            return True
        if service in self._factories:
            return False
        return self._parent is not None and self._parent._has(service)

    def build(self, services: Iterable[Service[Any]]) -> None:
        """Builds these services (in a thread: `Service.built_off_loop`)."""
        for service in services:
            self.get(service)

    def built(self) -> list[str]:
        """The names of the services built (or given) so far (for tests and benchmarks)."""
        names = {service.name for service in self._ready}
        if self._parent is not None:
            names.update(self._parent.built())
        return sorted(names)


def check_needs(nodes: Iterable[tuple[str, Sequence[Service[Any]]]], given: BlockServices) -> None:
    """Raises MissingServiceError naming every service `given` lacks and the nodes (id,
    declared needs) that need it; nothing is built."""
    missing: dict[Service[Any], list[str]] = {}
    for node_id, needs in nodes:
        for service in needs:
            if not given.provides(service):
                missing.setdefault(service, []).append(node_id)
    if missing:
        parts = [
            f"{service.what} ({service.name}) for node{'s' if len(ids) > 1 else ''} "
            + ", ".join(repr(node_id) for node_id in ids)
            for service, ids in missing.items()
        ]
        raise MissingServiceError(
            "this process does not provide what the flow's blocks need: " + "; ".join(parts)
        )
