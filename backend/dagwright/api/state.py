"""The server's services, built once at start-up and closed at shut-down."""

from __future__ import annotations

import asyncio
import gc
import importlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI, Request
from starlette.routing import BaseRoute

from dagwright.api.startup import Startup
from dagwright.api.stopping import stop_first_on_signals
from dagwright.settings import Settings

if TYPE_CHECKING:
    # Imported by start-up's thread (api/startup.py), not by the module: they cost most of
    # a second, and the server answers its health check before they are needed.
    from sqlalchemy import Engine

    from dagwright.api.auth import RateLimiter
    from dagwright.charts.renderer import ChartRenderer
    from dagwright.composition import Composition
    from dagwright.egress import EgressPolicy
    from dagwright.embedding.service import ExampleStore
    from dagwright.llm.gateway import LLMGateway
    from dagwright.mcp.client import StdioAllowList
    from dagwright.registry import Registry
    from dagwright.services.apps import AppService
    from dagwright.services.data_sources import DataSourceService
    from dagwright.services.endpoints import EndpointResolver
    from dagwright.services.evaluations import EvaluationService
    from dagwright.services.human import HumanService
    from dagwright.services.keys import KeyService
    from dagwright.services.queue.submit import RunQueue
    from dagwright.services.runs.service import RunService
    from dagwright.services.secret_store import DatabaseSecrets
    from dagwright.services.triggers import TriggerService
    from dagwright.tqa.service import TqaService
    from dagwright.workpools import WorkPools


@dataclass(slots=True)
class Services:
    settings: Settings  # the process's (api/settings.py: the server's checks of them)
    registry: Registry
    engine: Engine
    apps: AppService
    keys: KeyService
    secrets: DatabaseSecrets
    runs: RunService
    gateway: LLMGateway
    limiter: RateLimiter
    endpoints: EndpointResolver
    mcp_stdio: StdioAllowList
    egress: EgressPolicy
    pools: WorkPools  # heavy work's (dagwright/workpools.py): a route's table work goes there
    queue: RunQueue | None = None  # queue mode (services/queue): async runs go to workers
    # Built by start-up's second stage (api/startup.py): only its routes use them, and the
    # gate holds those until it is done.
    later: LaterServices | None = None

    def _later(self) -> LaterServices:
        assert self.later is not None, "a route of start-up's first stage used a later service"
        return self.later

    @property
    def examples(self) -> ExampleStore:
        return self._later().examples

    @property
    def data(self) -> DataSourceService:
        return self._later().data

    @property
    def tqa(self) -> TqaService:
        return self._later().tqa

    @property
    def evaluations(self) -> EvaluationService:
        return self._later().evaluations

    @property
    def charts(self) -> ChartRenderer:
        return self._later().charts


@dataclass(slots=True)
class LaterServices:
    """The services of the second stage's routes (AutoTQA, evaluations, examples, data
    sources): ~0.1 s of CPU that the first answer of the core's routes does not wait for."""

    examples: ExampleStore
    data: DataSourceService
    tqa: TqaService
    evaluations: EvaluationService
    charts: ChartRenderer


async def services(request: Request) -> Services:
    # async on purpose: FastAPI runs sync dependencies in a thread pool, a hop per request.
    found: Services = request.app.state.services
    return found


@dataclass(slots=True)
class _Prepared:
    """What start-up's thread built in its first stage, for the event loop to start and
    publish."""

    routers: list[APIRouter]
    services: Services


@dataclass(slots=True)
class _PreparedRest:
    """... and in its second."""

    routers: list[APIRouter]
    later: LaterServices
    triggers: TriggerService
    human: HumanService


def _prepare(process: Composition, load_routes: Callable[[], list[APIRouter]]) -> _Prepared:
    """Start-up's thread, its first stage (api/startup.py): the core's route modules and the
    blocking builds its routes need (the database and its migrations, the registry, the
    gateway, the apps, runs and keys). The rest is the second stage's (`_prepare_rest`)."""
    routers = load_routes()
    from dagwright.api.auth import RateLimiter
    from dagwright.data.isolation import log_isolation
    from dagwright.services.endpoints import EndpointResolver
    from dagwright.services.keys import KeyService

    # Which isolation python_on_tables gets (docs/security/sandbox.md).
    log_isolation(process.sandbox())
    engine = process.database()
    apps = process.apps()  # over the palette: Data-Copilot's interfaces are tool blocks there
    runs = process.runs(recover_interrupted=True)
    keys = KeyService(engine)
    services = Services(
        settings=process.settings,
        registry=process.palette(),
        engine=engine,
        apps=apps,
        keys=keys,
        secrets=process.secret_store(),
        runs=runs,
        gateway=process.gateway(),
        limiter=RateLimiter(process.settings.rate_limit),
        endpoints=EndpointResolver(apps, keys),
        mcp_stdio=process.mcp_stdio(),
        egress=process.egress(),
        pools=process.pools(),
        queue=process.run_queue(),  # None unless queue mode (docs/deploy.md)
    )
    return _Prepared(routers=routers, services=services)


def _prepare_rest(
    process: Composition, services: Services, load_routes: Callable[[], list[APIRouter]]
) -> _PreparedRest:
    """Start-up's thread, its second stage: the other route modules, the services only they
    use, and the data layer."""
    routers = load_routes()
    from dagwright.composition import import_data_layer
    from dagwright.services.human import HumanService
    from dagwright.services.triggers import TriggerService, WebhookPolicy

    later = LaterServices(
        examples=process.examples(),
        data=process.data_sources(),
        tqa=process.tqa(),
        evaluations=process.evaluations(),
        charts=process.charts(),
    )
    import_data_layer()
    # The guarded outbound clients (httpx2, httpcore2): ~50 ms of imports that a flow's first
    # http_request, mcp_tool or remote app would otherwise hold the event loop for.
    importlib.import_module("dagwright.egress_http")
    engine, apps, runs, queue = services.engine, services.apps, services.runs, services.queue
    return _PreparedRest(
        routers=routers,
        later=later,
        # Cron schedules and webhooks (routes/triggers.py); every replica schedules, one fires.
        triggers=TriggerService(
            engine,
            apps,
            runs,
            services.secrets,
            queue=queue,
            webhooks=WebhookPolicy(
                services.settings.webhook_tolerance, services.settings.webhook_rate_limit
            ),
        ),
        # ... and AutoTQA conversations waiting for a tool call's approval (tqa/approvals.py).
        human=HumanService(engine, apps, runs, conversations=later.tqa),
    )


def _recover_evaluations(
    app: FastAPI, services: Services, later: LaterServices
) -> Callable[[], Awaitable[None]]:
    """Evaluations of processes that died: resumed here (by the RunningEvaluations the
    evaluation routes use), or ended (services/evaluation_recovery.py). Returns the stop."""
    from dagwright.services.evaluation_recovery import EvaluationRecovery
    from dagwright.services.evaluation_runs import RunningEvaluations

    if not hasattr(app.state, "evaluations_running"):
        app.state.evaluations_running = RunningEvaluations()
    recovery = EvaluationRecovery(
        later.evaluations, app.state.evaluations_running, services.runs.stale_after
    )
    recovery.start()
    return recovery.close


def _tune_garbage_collector() -> None:
    """What start-up built lives as long as the process (modules, routes, schemas, services:
    about 170,000 objects): frozen, the collector no longer walks it. Under load each full
    collection walked it all, about a third of a published call's CPU (0.31 ms of 0.92 ms)
    and pauses of a hundred milliseconds and more that every request in flight waited out.
    Young collections less often too: a call allocates a few hundred objects, nearly all
    freed by reference counting, so a collection every 700 allocations mostly found nothing
    (benchmarks/server_throughput.py: 0.92 -> 0.55 ms of CPU per call, p99 626 -> 362 ms,
    same load)."""
    gc.freeze()
    gc.set_threshold(10_000, 20, 20)
    gc.enable()


@asynccontextmanager
async def serving(
    app: FastAPI,
    settings: Settings,
    startup: Startup,
    install_routes: Callable[[list[APIRouter]], list[BaseRoute]],
    load_core: Callable[[], list[APIRouter]],
    load_rest: Callable[[], list[APIRouter]],
) -> AsyncIterator[None]:
    """FastAPI lifespan: open the database (migrating it), the model gateway and the run
    writer; mark runs a crash left running as interrupted; undo it all at shut-down. All of
    it after the server begins to answer, in two stages (api/startup.py)."""
    from dagwright.composition import Composition

    async with AsyncExitStack() as stack:

        async def build() -> None:
            process = Composition(settings)
            stack.push_async_callback(process.aclose)  # last (callbacks run LIFO)
            # Every `asyncio.to_thread` of a handler now waits on the API's own pool, never
            # behind table work or scoring (their pools: dagwright/workpools.py).
            loop = asyncio.get_running_loop()
            process.pools().install_default(loop)
            stop_first_on_signals(loop, process.stop_heavy_work)
            prepared = await asyncio.to_thread(_prepare, process, load_core)
            # Started in the thread, the writer is open; on the loop it also starts its
            # poller (cancel requests, recovery of the runs of dead processes).
            services = prepared.services
            services.runs.start_writer()
            app.state.services = services
            # The core's routes answer from here; the rest wait for the second stage.
            startup.release(install_routes(prepared.routers))
            rest = await asyncio.to_thread(_prepare_rest, process, services, load_rest)
            rest.triggers.start()
            stack.push_async_callback(rest.triggers.close)  # before the runs close (LIFO)
            rest.human.start()
            stack.push_async_callback(rest.human.close)
            app.state.triggers = rest.triggers
            app.state.human = rest.human
            services.later = rest.later
            # Background conversations of server processes that died: resumed here (its
            # close, tqa.close, is the composition's).
            rest.later.tqa.start_recovery()
            if services.queue is None:  # queue mode: the workers go on with them
                stack.push_async_callback(_recover_evaluations(app, services, rest.later))
            install_routes(rest.routers)

        async def prepare() -> None:
            # No collection while start-up builds: each full one walked all it had built so
            # far (~0.1 s of its CPU, most of it before the core's routes answer).
            gc.disable()
            try:
                await build()
            finally:
                _tune_garbage_collector()

        startup.begin(prepare())
        try:
            yield
        finally:
            await startup.settled()
            # What start-up froze may be collected again (and at exit: native objects in
            # cycles, DuckDB's types, would be reported leaked).
            gc.unfreeze()
