"""AutoTQA in a process without the server (the command line, `dagwright run` of a flow with
`autotqa_ask`): the same database, data sources, secrets and model providers the server
would use, opened for the time of a `local_tqa()` block."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import ExitStack, asynccontextmanager
from typing import Any

from dagwright.tqa.access import TqaAccess
from dagwright.tqa.service import TqaService


@asynccontextmanager
async def local_tqa(notice: Callable[[str], None] = print) -> AsyncIterator[TqaService]:
    from dagwright.embedding.embedders import CachedEmbedder, make_embedder
    from dagwright.embedding.service import ExampleStore
    from dagwright.invocation import AppInvoker
    from dagwright.llm.gateway import LLMGateway
    from dagwright.llm.wiring import model_access
    from dagwright.registry import Registry
    from dagwright.runtime import Executor, ExecutorOptions
    from dagwright.secrets import Secrets
    from dagwright.services.apps import AppService
    from dagwright.services.data_sources import DataSourceService, sources_from_settings_file
    from dagwright.services.invoke import InProcessInvoker
    from dagwright.services.runs.service import RunService
    from dagwright.services.secret_store import DatabaseSecrets, master_key_from
    from dagwright.store.db import data_directory, database_url, make_engine, migrate
    from dagwright.tabular import TableAccess

    with ExitStack() as stack:
        folder = data_directory()
        engine = make_engine(os.environ.get("DAGWRIGHT_DATABASE_URL") or database_url(folder))
        stack.callback(engine.dispose)
        migrate(engine)
        secrets = DatabaseSecrets(engine, master_key_from(folder))
        gateway = stack.enter_context(model_access(secrets=secrets, notice=notice))
        examples = ExampleStore.from_environment(
            folder, lambda spec: CachedEmbedder(make_embedder(spec, gateway)), lazy=True
        )
        stack.callback(examples.close)
        data = DataSourceService(
            engine, secrets, file_sources=sources_from_settings_file(), demo_folder=folder / "demo"
        )
        stack.callback(data.close)
        services: dict[type, object] = {
            Secrets: secrets,
            LLMGateway: gateway,
            ExampleStore: examples,
            TableAccess: data,
        }
        apps = AppService(engine, Registry.default())
        runs = RunService(engine, Executor(ExecutorOptions(services=services)), "cli")
        services[AppInvoker] = InProcessInvoker(apps, runs)
        tqa = TqaService(engine, apps, runs, data, examples=examples)
        services[TqaAccess] = tqa
        runs.start_writer()
        try:
            yield tqa
        finally:
            await tqa.close()
            await runs.close()
            await gateway.aclose()


class LocalTqa(TqaAccess):
    """For `dagwright run`: each question opens the local AutoTQA and closes it after."""

    def __init__(self, notice: Callable[[str], None] = print) -> None:
        self._notice = notice

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        async with local_tqa(self._notice) as tqa:
            return await tqa.ask_question(request)
