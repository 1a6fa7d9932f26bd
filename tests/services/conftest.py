"""The database every service test module runs on: SQLite and PostgreSQL, migrated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from support.database import DATABASES, migrated_engine


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)  # the real migrations
