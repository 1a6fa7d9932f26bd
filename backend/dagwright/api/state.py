"""The server's services, built once at start-up and closed at shut-down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from sqlalchemy import Engine

from dagwright.api.auth import RateLimiter
from dagwright.api.settings import ServerSettings
from dagwright.data.isolation import log_isolation
from dagwright.embedding.embedders import CachedEmbedder, make_embedder
from dagwright.embedding.service import ExampleStore
from dagwright.invocation import AppInvoker
from dagwright.llm.gateway import LLMGateway
from dagwright.llm.wiring import model_access
from dagwright.methods.data_copilot.library import InterfaceLibrary
from dagwright.methods.data_copilot.tool_blocks import library_blocks
from dagwright.registry import Registry
from dagwright.runtime import Executor, ExecutorOptions
from dagwright.secrets import Secrets
from dagwright.services.apps import AppService
from dagwright.services.data_sources import DataSourceService, sources_from_settings_file
from dagwright.services.endpoints import EndpointResolver
from dagwright.services.human import HumanInbox, HumanService
from dagwright.services.invoke import InProcessInvoker
from dagwright.services.keys import KeyService
from dagwright.services.runs.service import RunService
from dagwright.services.secret_store import DatabaseSecrets, master_key_from
from dagwright.services.triggers import TriggerService
from dagwright.store.db import database_url, make_engine, migrate
from dagwright.tabular import TableAccess
from dagwright.telemetry.config import tracing_from_env
from dagwright.tqa.access import TqaAccess
from dagwright.tqa.service import TqaService


@dataclass(slots=True)
class Services:
    settings: ServerSettings
    registry: Registry
    engine: Engine
    apps: AppService
    keys: KeyService
    secrets: DatabaseSecrets
    runs: RunService
    gateway: LLMGateway
    limiter: RateLimiter
    endpoints: EndpointResolver
    examples: ExampleStore
    data: DataSourceService
    tqa: TqaService


async def services(request: Request) -> Services:
    # async on purpose: FastAPI runs sync dependencies in a thread pool, a hop per request.
    found: Services = request.app.state.services
    return found


@asynccontextmanager
async def serving(app: FastAPI, settings: ServerSettings) -> AsyncIterator[None]:
    """FastAPI lifespan: open the database (migrating it), the model gateway and the run
    writer; mark runs a crash left running as interrupted; undo it all at shut-down."""
    log_isolation()  # which isolation python_on_tables gets (docs/security/sandbox.md)
    async with AsyncExitStack() as stack:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        engine = make_engine(settings.database_url or database_url(settings.data_dir))
        stack.callback(engine.dispose)
        migrate(engine)
        interfaces = InterfaceLibrary(engine)
        # Data-Copilot's designed interfaces join the palette as tool blocks.
        registry = Registry.default().extended(library_blocks(interfaces))
        apps = AppService(engine, registry)
        secrets = DatabaseSecrets(engine, master_key_from(settings.data_dir))
        gateway = stack.enter_context(model_access(secrets=secrets))
        stack.push_async_callback(gateway.aclose)
        # Opened on first use: with local Qdrant only one process may hold the folder.
        examples = ExampleStore.from_environment(
            settings.data_dir, lambda spec: CachedEmbedder(make_embedder(spec, gateway)), lazy=True
        )
        stack.callback(examples.close)
        data = DataSourceService(
            engine,
            secrets,
            file_sources=sources_from_settings_file(),
            demo_folder=settings.data_dir / "demo",
        )
        stack.callback(data.close)
        blocks_services: dict[type, object] = {
            Secrets: secrets,
            LLMGateway: gateway,
            ExampleStore: examples,
            TableAccess: data,
        }
        executor = Executor(ExecutorOptions(services=blocks_services))
        runs = RunService(engine, executor, settings.replica)
        runs.tracing = tracing_from_env()  # None (no SDK import) unless a collector is set
        if runs.tracing is not None:
            stack.push_async_callback(runs.tracing.close)  # after runs.close (LIFO)
        blocks_services[AppInvoker] = InProcessInvoker(apps, runs, settings.invoke_depth)
        runs.recover_interrupted()
        runs.start_writer()
        stack.push_async_callback(runs.close)
        # AutoTQA: its agents are published apps, called through the run service.
        tqa = TqaService(engine, apps, runs, data, examples=examples)
        blocks_services[TqaAccess] = tqa
        # Data-Copilot's blocks read and store the interface libraries.
        blocks_services[InterfaceLibrary] = interfaces
        stack.push_async_callback(tqa.close)  # before the runs close (callbacks run LIFO)
        # Cron schedules and webhooks (routes/triggers.py); every replica schedules, one fires.
        app.state.triggers = TriggerService(engine, apps, runs, secrets)
        app.state.triggers.start()
        stack.push_async_callback(app.state.triggers.close)  # before the runs close (LIFO)
        # Runs paused at human_input nodes (routes/human.py); timeouts swept by every replica.
        blocks_services[HumanInbox] = HumanInbox(engine)
        app.state.human = HumanService(engine, apps, runs)
        app.state.human.start()
        stack.push_async_callback(app.state.human.close)
        keys = KeyService(engine)
        app.state.services = Services(
            settings=settings,
            registry=registry,
            engine=engine,
            apps=apps,
            keys=keys,
            secrets=secrets,
            runs=runs,
            gateway=gateway,
            limiter=RateLimiter(settings.rate_limit),
            endpoints=EndpointResolver(apps, keys),
            examples=examples,
            data=data,
            tqa=tqa,
        )
        yield
