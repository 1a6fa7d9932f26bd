"""The catalogue refresh route (docs/security/catalogue.md) against a real server process:
admin only, a source name that is not one is a 404 that touches no file, and refreshing a
folder of thousands of files runs aside while the health probe stays fast."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.probe import health_probe
from support.server import Api, ServerProcess, error_of

ADMIN = "catalogue-admin-token"
FILES = 3000


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Api, Path]]:
    data_dir: Path = tmp_path_factory.mktemp("catalogue-server")
    roots = tmp_path_factory.mktemp("catalogue-roots")
    folder = roots / "big"
    folder.mkdir()
    for index in range(FILES):
        (folder / f"t_{index:05d}.csv").write_text(f"id,word\n{index},w{index}\n")
    env = {"DAGWRIGHT_ADMIN_TOKEN": ADMIN, "DAGWRIGHT_SOURCE_ROOTS": str(roots)}
    server = ServerProcess(data_dir=data_dir, replica="catalogue", env=env).start()
    api = server.api(ADMIN)
    try:
        put = api.http.put(
            "/api/v1/sources/big", json={"kind": "files", "config": {"path": str(folder)}}
        )
        assert put.status_code == 200, put.text
        yield server, api, data_dir
    finally:
        api.close()
        server.stop()


def test_refresh_is_for_admins_only(served: tuple[ServerProcess, Api, Path]) -> None:
    server, _, data_dir = served
    anonymous = server.api(None)
    try:
        response = anonymous.http.post("/api/v1/sources/big/refresh")
        assert response.status_code in (401, 403), response.text
        assert anonymous.http.get("/api/v1/sources/big/refresh").status_code in (401, 403)
    finally:
        anonymous.close()
    assert not (data_dir / "catalogue" / "big.json").exists()


def test_a_name_that_is_not_a_source_touches_no_file(
    served: tuple[ServerProcess, Api, Path],
) -> None:
    _, api, data_dir = served
    for name in ("nope", "..big", "big.json", "BIG"):
        error = error_of(api.http.post(f"/api/v1/sources/{name}/refresh"), 404)
        assert error["code"] == "source_not_found", error
    folder = data_dir / "catalogue"
    assert not folder.exists() or sorted(p.name for p in folder.iterdir()) in ([], ["big.json"])


def test_a_large_refresh_runs_aside_and_reports_progress(
    served: tuple[ServerProcess, Api, Path],
) -> None:
    server, api, data_dir = served
    with health_probe(server.base_url):
        started = api.http.post("/api/v1/sources/big/refresh")
        assert started.status_code == 202, started.text
        assert started.json()["source"] == "big"
        deadline = time.monotonic() + 240
        status = started.json()
        while status["state"] == "running":
            assert time.monotonic() < deadline, status
            time.sleep(0.2)
            response = api.http.get("/api/v1/sources/big/refresh")
            assert response.status_code == 200, response.text
            status = response.json()
    assert status["state"] == "done", status
    assert (status["tables"], status["read"], status["failed"]) == (FILES, FILES, {})
    stored = data_dir / "catalogue" / "big.json"
    assert stored.stat().st_mode & 0o777 == 0o600  # it holds the sources' values
    again = api.http.post("/api/v1/sources/big/refresh")
    assert again.status_code == 202
    deadline = time.monotonic() + 120
    while (status := api.http.get("/api/v1/sources/big/refresh").json())["state"] != "done":
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert (status["read"], status["kept"]) == (0, FILES)  # nothing changed: nothing read
