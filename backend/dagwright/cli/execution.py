"""Running a compiled flow from the command line with the process's services: secrets from
the environment and, when the flow calls models, the configured providers (or the scripted
model, announced).

Services are built when a block first asks for one (`LazyServices`): a flow of text blocks
imports neither the model gateway nor the example store (Qdrant) nor the data layer (SQL
engine, DuckDB, Arrow), which is most of a cold start."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.secrets import EnvSecrets, Secrets

if TYPE_CHECKING:
    from dagwright.llm.gateway import LLMGateway
    from dagwright.runtime import CompiledFlow, Executor, RunEvent, RunResult

# A factory builds a service and registers its clean-up on the stack it is given.
ServiceFactory = Callable[[ExitStack], object]


def _key(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


class LazyServices(Mapping[type, object]):
    """The run's services by class, each built on first lookup by a factory named by the
    class's import path (so the class's module is not imported until a block needs it).
    Lookups may come from blocks running in threads: building is done once, under a lock."""

    def __init__(
        self,
        ready: Mapping[type, object],
        factories: Mapping[str, ServiceFactory],
        stack: ExitStack,
    ) -> None:
        self._ready: dict[type, object] = dict(ready)
        self._factories = dict(factories)
        self._stack = stack
        self._lock = threading.Lock()

    def __getitem__(self, kind: type) -> object:
        found = self._ready.get(kind)
        if found is not None:
            return found
        if not isinstance(kind, type) or _key(kind) not in self._factories:
            raise KeyError(kind)
        with self._lock:
            found = self._ready.get(kind)
            if found is None:
                found = self._factories.pop(_key(kind))(self._stack)
                self._ready[kind] = found
            return found

    def __iter__(self) -> Iterator[type]:
        return iter(self._ready)  # the services built so far

    def __len__(self) -> int:
        return len(self._ready)

    def built(self) -> list[str]:
        """Import paths of the services built so far (for tests and benchmarks)."""
        return sorted(_key(kind) for kind in self._ready)


def uses_models(plan: CompiledFlow) -> bool:
    return any(node.spec.category == "llm" for node in plan.every_node())


async def _execute(
    executor: Executor,
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    on_event: Callable[[RunEvent], None] | None,
    gateway: LLMGateway | None,
) -> RunResult:
    from dagwright.telemetry.config import tracing_from_env

    tracing = tracing_from_env()  # None, and no OpenTelemetry import, unless configured
    try:
        if tracing is not None:
            from dagwright.telemetry.tracing import run_traced

            return await run_traced(tracing, executor, plan, inputs, on_event)
        return await executor.run(plan, inputs, on_event=on_event)
    finally:
        if gateway is not None:
            await gateway.aclose()


def _examples(gateway: LLMGateway | None) -> ServiceFactory:
    def build(stack: ExitStack) -> object:
        from dagwright.embedding.embedders import CachedEmbedder, make_embedder
        from dagwright.embedding.service import ExampleStore
        from dagwright.store.db import data_directory

        # Opened on first use too (the local folder admits one process).
        examples = ExampleStore.from_environment(
            data_directory(create=False),
            lambda spec: CachedEmbedder(make_embedder(spec, gateway)),
            lazy=True,
        )
        stack.callback(examples.close)
        return examples

    return build


def _tables(secrets: Secrets) -> ServiceFactory:
    def build(stack: ExitStack) -> object:
        from dagwright.services.data_sources import settings_table_access
        from dagwright.store.db import data_directory

        tables = settings_table_access(secrets, data_directory(create=False) / "demo")
        stack.callback(tables.close)
        return tables

    return build


def _interfaces(stack: ExitStack) -> object:
    """Data-Copilot's interface libraries, in the data directory's database (as the server's)."""
    from dagwright.methods.data_copilot.library import InterfaceLibrary
    from dagwright.store.db import database_url, make_engine, migrate

    engine = make_engine(database_url())
    stack.callback(engine.dispose)
    migrate(engine)
    return InterfaceLibrary(engine)


def _tqa(notice: Callable[[str], None]) -> ServiceFactory:
    def build(stack: ExitStack) -> object:
        from dagwright.tqa.local import LocalTqa

        return LocalTqa(notice)

    return build


def run_plan(
    plan: CompiledFlow,
    inputs: Mapping[str, Any],
    *,
    node_timeout: float | None = None,
    record: Path | None = None,
    replay: Path | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    notice: Callable[[str], None] = print,
) -> RunResult:
    from dagwright.runtime import Executor, ExecutorOptions

    with ExitStack() as stack:
        secrets = EnvSecrets()
        ready: dict[type, object] = {Secrets: secrets}
        gateway = None
        if uses_models(plan) or record is not None or replay is not None:
            from dagwright.llm.gateway import LLMGateway
            from dagwright.llm.wiring import model_access

            gateway = stack.enter_context(
                model_access(record=record, replay=replay, secrets=secrets, notice=notice)
            )
            ready[LLMGateway] = gateway
        services = LazyServices(
            ready,
            {
                "dagwright.embedding.service.ExampleStore": _examples(gateway),
                "dagwright.tabular.TableAccess": _tables(secrets),
                "dagwright.tqa.access.TqaAccess": _tqa(notice),
                "dagwright.methods.data_copilot.library.InterfaceLibrary": _interfaces,
            },
            stack,
        )
        executor = Executor(ExecutorOptions(node_timeout=node_timeout, services=services))
        return asyncio.run(_execute(executor, plan, inputs, on_event, gateway))
