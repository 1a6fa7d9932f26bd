"""The attacker's catalogue runs against a real server process (its own GIL and event loop,
as in production), while a health probe (support.probe) checks that nobody else was made to
wait."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.server import Api, ServerProcess


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`dagwright serve` as a child process on SQLite, no admin token (a local install)."""
    data_dir: Path = tmp_path_factory.mktemp("security-server")
    server = ServerProcess(data_dir=data_dir, replica="security").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(server_process: ServerProcess) -> Iterator[Api]:
    """An HTTP client of the module's server (no admin token: the server has none)."""
    client = server_process.api()
    try:
        yield client
    finally:
        client.close()
