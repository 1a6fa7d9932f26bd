"""The composition root: every service of one dagwright process, built from one `Settings`.

The server (api/state.py), the command line (cli/) and AutoTQA outside the server
(`local_tqa`, below) each make a `Composition` and ask it for what they use; nothing else builds a
database engine, a secret store, the model gateway, the example store or the data sources.
A service is built the first time it is asked for — a flow of text blocks imports neither
the model gateway nor Qdrant nor the data layer (SQLAlchemy, DuckDB, Arrow), which is most of
a cold start — and `aclose()` closes what was built, last built first.

A new service goes here: a method that builds it from the settings and the services it
depends on, and, when blocks may use it, a line in `block_services()`.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from dagwright.settings import Settings

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from dagwright.charts.renderer import ChartRenderer
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.data.isolation import SandboxSettings
    from dagwright.egress import EgressPolicy
    from dagwright.embedding.embedder import Embedder
    from dagwright.embedding.service import ExampleStore
    from dagwright.llm.gateway import LLMGateway
    from dagwright.mcp.client import StdioAllowList
    from dagwright.methods.data_copilot.library import InterfaceLibrary
    from dagwright.registry import Registry
    from dagwright.registry.services import AutoTqa, BlockServices, Secrets
    from dagwright.runtime import Executor
    from dagwright.services.apps import AppService
    from dagwright.services.data_sources import DataSourceService
    from dagwright.services.evaluations import EvaluationService
    from dagwright.services.human import HumanInbox
    from dagwright.services.invoke import InProcessInvoker
    from dagwright.services.queue.durable import DurableRunner
    from dagwright.services.queue.settings import QueueSettings
    from dagwright.services.queue.submit import RunQueue
    from dagwright.services.runs.service import RunService
    from dagwright.services.secret_store import DatabaseSecrets
    from dagwright.tabular import TableAccess
    from dagwright.telemetry.tracing import RunTracing
    from dagwright.tqa.service import TqaService
    from dagwright.workpools import WorkPools

T = TypeVar("T")
logger = logging.getLogger(__name__)
INVOKE_DEPTH = 8  # apps calling apps, nested at most this deep
# The query engine and every connector kind: DuckDB, Arrow, sqlglot, most of a second of CPU.
DATA_LAYER = ("dagwright.data.engine", "dagwright.data.catalog", "dagwright.data.connectors")


def import_data_layer() -> None:
    """Imports the data layer, off the event loop (by start-up's thread, or a run's thread
    before its table blocks run): imported by a request on the loop, it held the GIL ~1.4 s
    and stalled every other request (tests/security/test_source_paths.py's health probe)."""
    for module in DATA_LAYER:
        importlib.import_module(module)


# "standalone" (`dagwright run` of a file): secrets from the environment (DAGWRIGHT_SECRET_<NAME>),
# tables from the settings file's and the demo's sources, AutoTQA opened per question, no
# app calls. "server" (the server and the commands that act on its database): the encrypted
# secret store, the data source registry, apps, runs and AutoTQA in the database.
ProcessKind = Literal["standalone", "server"]


class Composition:
    """The services of one process, each built once, on first use (thread-safe: blocks in
    threads may ask for one), and closed together by `aclose()`."""

    def __init__(
        self,
        settings: Settings,
        *,
        kind: ProcessKind = "server",
        notice: Callable[[str], None] = print,
        record: Path | None = None,
        replay: Path | None = None,
        replica: str | None = None,
    ) -> None:
        self.settings = settings
        self.kind = kind
        self._notice = notice
        self._record = record
        self._replay = replay
        self._replica = replica or settings.replica
        self._lock = threading.RLock()
        self._built: dict[str, object] = {}
        self._given: dict[str, object] = {}  # the argument each service was built with
        self._stack = ExitStack()
        self._async_closers: list[Callable[[], Awaitable[None]]] = []
        # The gateway closes after everything else: runs still closing may call models.
        self._gateway_closer: Callable[[], Awaitable[None]] | None = None
        self._embedders: dict[str, Embedder] = {}

    def _once(self, name: str, build: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            found: T = self._built[name]  # type: ignore[assignment]
            return found

    def _once_given(self, name: str, given: object, build: Callable[[], T]) -> T:
        """`_once` for a service shaped by an argument (`given`; None: none asked for). Asking
        again with another one is a wiring mistake that would otherwise pass unnoticed (the
        first shape wins), so it raises."""
        with self._lock:
            if name in self._built and given is not None and self._given.get(name) is not given:
                raise RuntimeError(
                    f"the {name} service was already built with {self._given.get(name)!r}: "
                    f"ask for it with {given!r} before anything else does"
                )
            if name not in self._built:
                self._given[name] = given
            return self._once(name, build)

    def built(self) -> list[str]:
        """The services built so far, by name (for tests and benchmarks)."""
        return sorted(self._built)

    # -- the foundations -------------------------------------------------------------------

    def data_dir(self, create: bool = True) -> Path:
        folder = self.settings.data_dir
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        return folder

    def registry(self) -> Registry:
        """The built-in blocks and those of DAGWRIGHT_BLOCKS_PATH's folders."""

        def build() -> Registry:
            from dagwright.registry import Registry

            self.sandbox()  # sets the memory_mb ceiling the sandbox blocks' configs check
            return Registry.default(self.settings.block_folders)

        return self._once("registry", build)

    def database(self) -> Engine:
        """The database (migrated): DAGWRIGHT_DATABASE_URL, else SQLite in the data folder."""

        def build() -> Engine:
            from dagwright.store.db import database_url, make_engine, migrate

            engine = make_engine(database_url(self.data_dir(), self.settings.database_url))
            self._stack.callback(engine.dispose)
            migrate(engine)
            return engine

        return self._once("database", build)

    def secrets(self) -> Secrets:
        """Where runs read secrets: the environment when standalone, else the secret store."""
        if self.kind == "server":
            return self.secret_store()

        def build() -> Secrets:
            from dagwright.secrets import EnvSecrets

            return EnvSecrets()

        return self._once("secrets", build)

    def secret_store(self) -> DatabaseSecrets:
        """The encrypted secret store in the database (DAGWRIGHT_SECRET_KEY, else the data
        folder's key file)."""

        def build() -> DatabaseSecrets:
            from dagwright.services.secret_store import DatabaseSecrets, master_key_from

            key = master_key_from(self.data_dir(), self.settings.secret_key)
            return DatabaseSecrets(self.database(), key)

        return self._once("secret_store", build)

    def pools(self) -> WorkPools:
        """The heavy-work pools (data, evaluation) and the API's own (dagwright/workpools.py),
        sized by the settings; closed at shutdown, dropping queued work, abandoning running."""

        def build() -> WorkPools:
            from dagwright.workpools import PoolSettings, PoolSize, WorkPools

            s = self.settings
            pools = WorkPools(
                PoolSettings(
                    data=PoolSize(s.data_threads, s.data_queue_max, s.pool_retry_after),
                    evaluation=PoolSize(
                        s.evaluation_threads, s.evaluation_queue_max, s.pool_retry_after
                    ),
                    api_threads=s.api_threads,
                )
            )
            self._stack.callback(pools.close)
            return pools

        return self._once("pools", build)

    # -- models and embeddings -------------------------------------------------------------

    def gateway(self) -> LLMGateway:
        """The configured model providers, or the scripted model (announced as such)."""

        def build() -> LLMGateway:
            from dagwright.llm.wiring import model_access

            gateway = self._stack.enter_context(
                model_access(
                    self.settings.model_providers(),
                    record=self._record,
                    replay=self._replay,
                    secrets=self.secrets(),
                    notice=self._notice,
                )
            )
            self._gateway_closer = gateway.aclose
            return gateway

        return self._once("gateway", build)

    def embedder(self, spec: str) -> Embedder:
        """An embedder by its spec ("hashing:256", "minilm", "openai:<provider>"), one per
        spec for the process (a local model loads once); a provider's through the gateway."""
        with self._lock:
            found = self._embedders.get(spec)
            if found is None:
                from dagwright.embedding.embedders import (
                    CachedEmbedder,
                    calls_a_provider,
                    make_embedder,
                )

                gateway = self.gateway() if calls_a_provider(spec) else None
                found = self._embedders[spec] = CachedEmbedder(make_embedder(spec, gateway))
            return found

    def examples(self) -> ExampleStore:
        """The example store: the Qdrant server at DAGWRIGHT_QDRANT_URL, else the data
        folder's local Qdrant, opened on first use (the local folder admits one process)."""

        def build() -> ExampleStore:
            from dagwright.embedding.service import ExampleStore

            if self.settings.qdrant_url:
                store = ExampleStore.remote(
                    self.settings.qdrant_url, self.embedder, api_key=self.settings.qdrant_api_key
                )
            else:
                store = ExampleStore.local(
                    self.data_dir(create=False) / "qdrant", self.embedder, lazy=True
                )
            self._stack.callback(store.close)
            return store

        return self._once("examples", build)

    # -- data ------------------------------------------------------------------------------

    def data_sources(self) -> DataSourceService:
        """The data source registry (settings file, demo, added through the API) and the
        query engine over it."""

        def build() -> DataSourceService:
            from dagwright.services.data_sources import (
                DataSourceService,
                catalogue_options,
                demo_folder,
                limit_process_memory,
                query_limits,
            )

            limit_process_memory(self.settings.process_memory)
            data = DataSourceService(
                self.database(),
                self.secrets(),
                file_sources=self.settings.sources,
                demo_folder=demo_folder(self.settings),
                limits=query_limits(self.settings),
                paths=self.source_paths,
                embedders=self.embedder,
                egress=self.egress,
                catalogue=catalogue_options(self.settings),
            )
            self._stack.callback(data.close)
            return data

        return self._once("data_sources", build)

    def tables(self) -> TableAccess:
        """What table blocks query: the data source registry when the process has the
        database; for `dagwright run`, the settings file's sources and the demo's. With it
        the data layer (`import_data_layer`): a run builds it in a thread before its blocks
        ask for its engine on the event loop (`Service.built_off_loop`)."""
        import_data_layer()
        if self.kind == "server":
            return self.data_sources()

        def build() -> TableAccess:
            from dagwright.services.data_sources import settings_table_access

            tables = settings_table_access(
                self.secrets(), self.settings, self.source_paths, self.embedder, self.egress
            )
            self._stack.callback(tables.close)
            return tables

        return self._once("tables", build)

    def source_paths(self) -> SourcePaths:
        """The rule local file and SQLite data is read under: the data directory's source
        roots (DAGWRIGHT_SOURCE_ROOTS, else its defaults), never its own files."""

        def build() -> SourcePaths:
            from dagwright.data.connectors.common import SourcePaths

            return SourcePaths.for_data_dir(
                self.settings.data_dir,
                roots=self.settings.source_root_folders,
                database_url=self.settings.database_url,
                settings_file=self.settings.settings_file,
            )

        return self._once("source_paths", build)

    def sandbox(self) -> SandboxSettings:
        """Where the Python sandbox finds bubblewrap, and whether code may run without it."""
        from dagwright.data.isolation import SandboxSettings
        from dagwright.data.sandbox_budget import SandboxBudget, set_ceiling

        s = self.settings
        budget = SandboxBudget(
            max_concurrent=s.sandbox_max_concurrent,
            memory_mb=s.sandbox_memory_budget_mb,
            max_call_mb=s.sandbox_max_call_mb,
            queue_wait_s=s.sandbox_queue_wait_s,
            queue_max=s.sandbox_queue_max,
            folder=s.sandbox_budget_dir.strip(),
        )
        set_ceiling(budget)  # what block configs are checked against at save time
        return SandboxSettings(
            bwrap=s.sandbox_bwrap.strip(),
            allow_unisolated=s.sandbox_allow_unisolated,
            budget=budget,
            cgroup=s.sandbox_cgroup,
        )

    def egress(self) -> EgressPolicy:
        """Where flows and API callers may connect out: public addresses and the operator's
        DAGWRIGHT_EGRESS_ALLOW, never this host's own addresses (dagwright/egress.py)."""
        from dagwright.egress import EgressPolicy, own_addresses

        def build() -> EgressPolicy:
            return EgressPolicy.from_text(
                self.settings.egress_allow, own_addresses(self.settings.host)
            )

        return self._once("egress", build)

    def charts(self) -> ChartRenderer:
        """Renders chart specs in isolated child processes, a few at once (charts/renderer)."""

        def build() -> ChartRenderer:
            from dagwright.charts.renderer import ChartRenderer, RenderLimits

            limits = RenderLimits(
                concurrency=self.settings.charts_concurrency,
                timeout_s=self.settings.charts_timeout,
                memory_mb=self.settings.charts_memory_mb,
                max_rows=self.settings.charts_max_rows,
                spares=self.settings.charts_concurrency,
            )
            renderer = ChartRenderer(limits, self.sandbox())
            self._async_closers.append(renderer.close)  # its warm spares end with the process
            return renderer

        return self._once("charts", build)

    def mcp_stdio(self) -> StdioAllowList:
        """The commands stdio MCP servers may be started with (DAGWRIGHT_MCP_STDIO_COMMANDS)."""
        from dagwright.mcp.client import StdioAllowList

        return StdioAllowList(self.settings.stdio_commands)

    def interfaces(self) -> InterfaceLibrary:
        """Data-Copilot's interface libraries, in the database."""

        def build() -> InterfaceLibrary:
            from dagwright.methods.data_copilot.library import InterfaceLibrary

            return InterfaceLibrary(self.database())

        return self._once("interfaces", build)

    # -- apps and runs ---------------------------------------------------------------------

    def executor(self, node_timeout: float | None = None) -> Executor:
        def build() -> Executor:
            from dagwright.runtime import Executor, ExecutorOptions
            from dagwright.runtime.executor import shared_thread_pool

            options = ExecutorOptions(
                node_timeout=node_timeout,
                retry_budget=self.settings.retry_budget,
                services=self.block_services(),
                thread_pool=shared_thread_pool(self.settings.threads),
            )
            return Executor(options)

        return self._once_given("executor", node_timeout, build)

    def palette(self) -> Registry:
        """The blocks apps are built from: the registry's, and in a process with the database
        (server, worker, the commands on its database) Data-Copilot's designed interfaces as
        tool blocks too."""
        if self.kind != "server":
            return self.registry()

        def build() -> Registry:
            from dagwright.methods.data_copilot.tool_blocks import library_blocks

            return self.registry().extended(library_blocks(self.interfaces()))

        return self._once("palette", build)

    def apps(self) -> AppService:
        def build() -> AppService:
            from dagwright.services.apps import AppService

            return AppService(self.database(), self.palette())

        return self._once("apps", build)

    def runs(self, recover_interrupted: bool = False) -> RunService:
        """The run service over this process's executor; its writer is started, and it is
        closed by `aclose()`. A server's first call marks the runs a crash left running as
        interrupted, before the writer starts."""

        def build() -> RunService:
            from dagwright.services.runs.service import RunService

            runs = RunService(self.database(), self.executor(), self._replica)
            runs.admission = self._admit_run
            runs.tracing = self.tracing()
            if runs.tracing is not None:
                self._async_closers.append(runs.tracing.close)  # after runs.close
            if recover_interrupted:
                runs.recover_interrupted()
            runs.start_writer()
            self._async_closers.append(runs.close)
            return runs

        return self._once_given("runs", True if recover_interrupted else None, build)

    def queue_settings(self) -> QueueSettings:
        """Queue mode's settings (DAGWRIGHT_QUEUE, DAGWRIGHT_WORKER_*)."""
        from dagwright.services.queue.settings import QueueSettings

        settings = self.settings
        return QueueSettings(
            enabled=settings.queue == "procrastinate",
            concurrency=settings.worker_concurrency,
            max_depth=settings.queue_max_depth,
            app_limit=settings.queue_app_limit,
            heartbeat=settings.worker_heartbeat,
            stalled_after=settings.worker_stalled_after,
            alive_file=settings.worker_alive_file,
            shutdown_grace=settings.worker_shutdown_grace,
            evaluation_chunk=settings.queue_evaluation_chunk,
            poll_interval=settings.worker_poll_interval,
        )

    def run_queue(self) -> RunQueue | None:
        """In queue mode, where an API process queues runs for the workers (the queue's
        tables installed in the database first); else None."""

        def build() -> RunQueue | None:
            settings = self.queue_settings()
            if not settings.enabled:
                return None  # without importing the queue (Procrastinate, psycopg: ~0.2 s)
            from dagwright.services.queue.submit import run_queue

            return run_queue(self.runs(), self.settings.database_url, settings)

        return self._once("run_queue", build)

    def durable_runner(self) -> DurableRunner:
        """What a worker executes queued runs with: this process's run service, whose
        executor records each not-retryable block as begun before calling it."""

        def build() -> DurableRunner:
            from dagwright.services.queue.durable import DurableRunner
            from dagwright.services.queue.jobs import conninfo, install_schema

            conninfo(self.settings.database_url)  # queue mode needs PostgreSQL
            install_schema(self.database())
            runs = self.runs(recover_interrupted=True)
            runs.executor.options.before_unretryable = runs.mark_begun
            return DurableRunner(runs, self.apps(), self.evaluations, lambda: self.tqa().runner)

        return self._once("durable_runner", build)

    def evaluations(self) -> EvaluationService:
        """Evaluations of app versions over datasets (their tables under the data folder)."""

        def build() -> EvaluationService:
            from dagwright.services.datasets import DatasetService
            from dagwright.services.evaluations import EvaluationService

            folder = self.data_dir() / "sources" / "eval-datasets"
            datasets = DatasetService(self.database(), self.data_sources(), folder, self.examples())
            evaluations = EvaluationService(self.database(), self.apps(), self.runs(), datasets)
            evaluations.work = self.pools().evaluation
            evaluations.max_concurrency = self.settings.evaluation_max_concurrency
            return evaluations

        return self._once("evaluations", build)

    def tqa(self) -> TqaService:
        """AutoTQA: its agents are published apps, called through the run service."""

        def build() -> TqaService:
            from dagwright.tqa.service import TqaService

            tqa = TqaService(
                self.database(),
                self.apps(),
                self.runs(),
                self.data_sources(),
                examples=self.examples(),
                # In queue mode background conversations (and those an approval lets go
                # on) are queued for the workers.
                queue=self.run_queue() if self.kind == "server" else None,
                max_conversations=self.settings.tqa_max_conversations,
            )
            self._async_closers.append(tqa.close)  # before the runs close
            return tqa

        return self._once("tqa", build)

    def app_invoker(self) -> InProcessInvoker:
        """How a block calls another app: a child run in this process's run service."""

        def build() -> InProcessInvoker:
            from dagwright.services.invoke import InProcessInvoker

            return InProcessInvoker(self.apps(), self.runs(), INVOKE_DEPTH)

        return self._once("app_invoker", build)

    def _autotqa(self) -> AutoTqa:
        if self.kind == "server":
            return self.tqa()
        return LocalTqa(self.settings, self._notice)

    def human_inbox(self) -> HumanInbox:
        """Where `human_input` blocks write their requests (answered through the API)."""

        def build() -> HumanInbox:
            from dagwright.services.human import HumanInbox

            return HumanInbox(self.database())

        return self._once("human_inbox", build)

    def tracing(self) -> RunTracing | None:
        """Run tracing to the configured collector; None (no OpenTelemetry import) else."""
        endpoint = self.settings.traces_endpoint
        if endpoint is None:
            return None
        from dagwright.telemetry.tracing import RunTracing

        return RunTracing.to_otlp(endpoint)

    # -- what blocks may use ---------------------------------------------------------------

    def block_services(self) -> BlockServices:
        """The services a run's blocks may ask for, each built when a block first does."""

        def build() -> BlockServices:
            from dagwright.registry import (
                APPS,
                AUTOTQA,
                DATA_WORK,
                EGRESS,
                EXAMPLES,
                HUMAN,
                INTERFACES,
                MCP_STDIO,
                MODELS,
                SANDBOX,
                SECRETS,
                SOURCE_PATHS,
                TABLES,
                BlockServices,
            )

            services = BlockServices()
            services.provide_lazily(SECRETS, self.secrets)
            services.provide_lazily(MODELS, self.gateway)
            services.provide_lazily(EXAMPLES, self.examples)
            services.provide_lazily(TABLES, self.tables)
            services.provide_lazily(INTERFACES, self.interfaces)
            services.provide_lazily(AUTOTQA, self._autotqa)
            services.provide_lazily(SANDBOX, self.sandbox)
            services.provide_lazily(MCP_STDIO, self.mcp_stdio)
            services.provide_lazily(EGRESS, self.egress)
            services.provide_lazily(SOURCE_PATHS, self.source_paths)
            services.provide_lazily(DATA_WORK, lambda: self.pools().data)
            if self.kind == "server":  # a database of runs: apps to call, runs that wait
                services.provide_lazily(APPS, self.app_invoker)
                services.provide_lazily(HUMAN, self.human_inbox)
            return services

        return self._once("block_services", build)

    def stop_heavy_work(self) -> None:
        """At SIGTERM, before the server's grace period runs (api/stopping.py): the heavy
        pools drop their queued calls and refuse new ones, running queries are interrupted,
        so that the requests waiting on them answer within the grace instead of being cut
        off at its end. Safe from any thread; builds nothing."""
        with self._lock:
            pools = cast("WorkPools | None", self._built.get("pools"))
            built = self._built.get("data_sources") or self._built.get("tables")
            tables = cast("TableAccess | None", built)
        if pools is not None:
            pools.close()
        if tables is not None:
            tables.interrupt_queries()

    def _admit_run(self, needs: set[str]) -> None:
        """Refuses (PoolBusyError, 429) a run whose blocks need table work while the data
        pool is full: before it is recorded or anything of it waits."""
        from dagwright.registry import TABLES

        if TABLES.name in needs:
            self.pools().data.admit()

    # -- closing ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Closes every service built, last built first (async ones on the calling loop).
        One that fails to close does not keep the others open: each is closed, then the
        first failure is raised."""
        closers = list(reversed(self._async_closers))
        self._async_closers.clear()
        if self._gateway_closer is not None:
            closers.append(self._gateway_closer)
            self._gateway_closer = None
        failures: list[BaseException] = []
        try:
            for close in closers:
                try:
                    await close()
                except Exception as exc:
                    logger.exception("closing %s failed", getattr(close, "__qualname__", close))
                    failures.append(exc)
        finally:
            self._stack.close()
        if failures:
            raise failures[0]


# -- AutoTQA outside the server ------------------------------------------------------------


@asynccontextmanager
async def local_tqa(
    notice: Callable[[str], None] = print, settings: Settings | None = None
) -> AsyncIterator[TqaService]:
    """AutoTQA in a process without the server (the command line, `dagwright run` of a flow
    with `autotqa_ask`), over the same database, data sources, secrets and model providers
    the server would use (`load_settings()` unless given), open for the block's time."""
    from dagwright.settings import load_settings

    process = Composition(settings or load_settings(), notice=notice, replica="cli")
    try:
        yield process.tqa()
    finally:
        await process.aclose()


class LocalTqa:
    """For `dagwright run`: each question opens the local AutoTQA and closes it after."""

    def __init__(self, settings: Settings, notice: Callable[[str], None] = print) -> None:
        self._settings = settings
        self._notice = notice

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        async with local_tqa(self._notice, self._settings) as tqa:
            return await tqa.ask_question(request)
