"""A real server per test module, on SQLite and on PostgreSQL (modules with other needs
define their own `server`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.database import DATABASES
from support.server import Api, LiveServer, live_server


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with live_server(request.param, tmp_path_factory.mktemp("server")) as running:
        yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api
