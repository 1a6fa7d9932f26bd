"""The server's services, built once at start-up and closed at shut-down."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from sqlalchemy import Engine

from dagwright.api.auth import RateLimiter
from dagwright.api.settings import ServerSettings
from dagwright.composition import Composition
from dagwright.data.isolation import log_isolation
from dagwright.embedding.service import ExampleStore
from dagwright.llm.gateway import LLMGateway
from dagwright.mcp.client import StdioAllowList
from dagwright.methods.data_copilot.tool_blocks import library_blocks
from dagwright.registry import HUMAN, Registry
from dagwright.services.apps import AppService
from dagwright.services.data_sources import DataSourceService
from dagwright.services.endpoints import EndpointResolver
from dagwright.services.human import HumanInbox, HumanService
from dagwright.services.keys import KeyService
from dagwright.services.queue.submit import RunQueue
from dagwright.services.runs.service import RunService
from dagwright.services.secret_store import DatabaseSecrets
from dagwright.services.triggers import TriggerService
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
    mcp_stdio: StdioAllowList
    queue: RunQueue | None = None  # queue mode (services/queue): async runs go to workers


async def services(request: Request) -> Services:
    # async on purpose: FastAPI runs sync dependencies in a thread pool, a hop per request.
    found: Services = request.app.state.services
    return found


# What a request may otherwise import first: the query engine and every connector kind.
_DATA_LAYER = ("dagwright.data.engine", "dagwright.data.catalog", "dagwright.data.connectors")


def _import_data_layer() -> None:
    for module in _DATA_LAYER:
        importlib.import_module(module)


@asynccontextmanager
async def serving(app: FastAPI, settings: ServerSettings) -> AsyncIterator[None]:
    """FastAPI lifespan: open the database (migrating it), the model gateway and the run
    writer; mark runs a crash left running as interrupted; undo it all at shut-down."""
    process = Composition(
        settings.composed(), replica=settings.replica, invoke_depth=settings.invoke_depth
    )
    # Which isolation python_on_tables gets (docs/security/sandbox.md).
    log_isolation(process.sandbox())
    # Importing the data layer's native modules (DuckDB, Arrow, sqlglot) holds the GIL for
    # about a second: left to the first request that touches a source or a table, it stalled
    # every other request that long (tests/security/test_source_paths.py's health probe).
    # They are imported in a thread before the server answers.
    await asyncio.to_thread(_import_data_layer)
    async with AsyncExitStack() as stack:
        stack.push_async_callback(process.aclose)  # last (callbacks run LIFO)
        engine = process.database()
        # Data-Copilot's designed interfaces join the palette as tool blocks.
        registry = process.registry().extended(library_blocks(process.interfaces()))
        apps = process.apps(registry)
        secrets = process.secret_store()
        runs = process.runs(recover_interrupted=True)
        queue = process.run_queue()  # None unless queue mode (docs/deploy.md)
        tqa = process.tqa()
        # Cron schedules and webhooks (routes/triggers.py); every replica schedules, one fires.
        app.state.triggers = TriggerService(engine, apps, runs, secrets, queue=queue)
        app.state.triggers.start()
        stack.push_async_callback(app.state.triggers.close)  # before the runs close (LIFO)
        # Runs paused at human_input nodes (routes/human.py); timeouts swept by every replica.
        process.block_services().provide(HUMAN, HumanInbox(engine))
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
            gateway=process.gateway(),
            limiter=RateLimiter(settings.rate_limit),
            endpoints=EndpointResolver(apps, keys),
            examples=process.examples(),
            data=process.data_sources(),
            tqa=tqa,
            mcp_stdio=process.mcp_stdio(),
            queue=queue,
        )
        yield
