"""Evaluation services over a real migrated SQLite database, the real data sources (files,
SQLite), run service and executor: apps are run exactly as the server runs them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from cryptography.fernet import Fernet
from sqlalchemy import Engine

from dagwright.data.connectors.common import SourcePaths
from dagwright.registry import SECRETS, TABLES, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions
from dagwright.services.apps import AppService
from dagwright.services.data_sources import DataSourceService
from dagwright.services.datasets import DatasetService
from dagwright.services.evaluations import EvaluationService
from dagwright.services.runs.service import RunService
from dagwright.services.secret_store import DatabaseSecrets
from support.database import migrated_engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation"


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from migrated_engine("sqlite", tmp_path_factory)


@pytest_asyncio.fixture
async def evaluations(engine: Engine, tmp_path: Path) -> AsyncIterator[EvaluationService]:
    # Sources may read only under <data dir>/sources: the datasets' tables go there.
    secrets = DatabaseSecrets(engine, Fernet.generate_key())
    data = DataSourceService(engine, secrets, paths=lambda: SourcePaths.for_data_dir(tmp_path))
    services = BlockServices({SECRETS: secrets, TABLES: data})
    apps = AppService(engine, Registry.default())
    runs = RunService(engine, Executor(ExecutorOptions(services=services)), "test-eval")
    runs.start_writer()
    try:
        yield EvaluationService(
            engine, apps, runs, DatasetService(engine, data, tmp_path / "sources" / "eval")
        )
    finally:
        await runs.close()
        data.close()
