"""Data sources that try to read what is not data (issue 13, finding 4).

Before the fix a `files` source over the data directory's key file and a `sqlite` source over
`dagwright.db` read back every secret (and the API-key and run tables): source paths were
not restricted. Now file and SQLite paths must be absolute and lie, symlinks and `..`
resolved, under a source root (by default `<data dir>/sources`, `<data dir>/billing` and the
demo's folders; DAGWRIGHT_SOURCE_ROOTS to choose), never in the data directory's own files;
a folder's files are checked again when they are read. Every way of adding a source is tried
against a real server or the command line: the API (`PUT /api/v1/sources/{name}`),
dagwright.toml and `dagwright data add`. Each refusal is the typed error
`source_path_forbidden` (HTTP 400) naming the path and the allowed roots.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.probe import health_probe
from support.server import Api, ServerProcess, error_of, subprocess_environment


@pytest.fixture(scope="module")
def data_dir(server_process: ServerProcess) -> Path:
    """The server's data directory, with a CSV and a SQLite file under sources/."""
    folder = server_process.data_dir.resolve()
    sources = folder / "sources"
    (sources / "lake").mkdir(parents=True, exist_ok=True)
    (sources / "lake" / "fish.csv").write_text("id,name\n1,cod\n2,eel\n")
    with sqlite3.connect(sources / "shop.db") as connection:
        connection.executescript("CREATE TABLE items (id INTEGER); INSERT INTO items VALUES (7);")
    connection.close()
    return folder


def put(server: ServerProcess, api: Api, name: str, kind: str, path: str) -> httpx.Response:
    """PUT a source under the health probe."""
    with health_probe(server.base_url):
        response = api.http.put(
            f"/api/v1/sources/{name}", json={"kind": kind, "config": {"path": path}}
        )
    return response


def query(api: Api, sql: str) -> httpx.Response:
    return api.http.post("/api/v1/query", json={"sql": sql})


def forbidden(response: httpx.Response, path: str) -> dict[str, Any]:
    error = error_of(response, 400)
    assert error["code"] == "source_path_forbidden", error
    assert path in error["message"]
    assert any(root.endswith("/sources") for root in error["roots"]), error
    assert "/sources" in error["message"]  # the message names the allowed roots too
    return error


@pytest.fixture(scope="module")
def lake(server_process: ServerProcess, api: Api, data_dir: Path) -> str:
    """Sources `lake` (a folder of CSV files) and `shop` (SQLite) under the default root."""
    for name, kind, path in (
        ("lake", "files", data_dir / "sources" / "lake"),
        ("shop", "sqlite", data_dir / "sources" / "shop.db"),
    ):
        response = put(server_process, api, name, kind, str(path))
        assert response.status_code == 200, response.text
    return "lake"


def test_a_source_under_a_root_works(api: Api, lake: str) -> None:
    answer = query(api, "SELECT f.name, i.id FROM lake.main.fish f, shop.main.items i ORDER BY 1")
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [{"name": "cod", "id": 7}, {"name": "eel", "id": 7}]


FORBIDDEN: list[tuple[str, str, str]] = [
    # (kind, path relative to the data directory or absolute, what it is)
    ("sqlite", "dagwright.db", "the server's database: API keys, runs, encrypted secrets"),
    ("files", "secret.key", "the key that decrypts every secret"),
    ("files", "dagwright.db", "the database read as a file"),
    ("sqlite", ".", "the data directory itself"),
    ("files", ".", "the data directory itself"),
    ("files", "qdrant", "Qdrant's storage"),
    ("files", "sources/../secret.key", "a .. out of a root"),
    ("files", "sources/lake/../../dagwright.db", "two .. out of a root"),
    ("files", "/etc/passwd", "a system file"),
    ("files", "/etc", "a system folder"),
    ("files", "/proc/self/environ", "the server's environment"),
    ("files", "~/.ssh", "a home folder"),
]


@pytest.mark.parametrize(
    ("kind", "where", "what"), FORBIDDEN, ids=[f"{k}:{w}" for k, w, _ in FORBIDDEN]
)
def test_the_api_refuses_a_path_outside_the_roots(
    server_process: ServerProcess, api: Api, data_dir: Path, kind: str, where: str, what: str
) -> None:
    path = where if where.startswith(("/", "~")) else f"{data_dir}/{where}"
    forbidden(put(server_process, api, "leak", kind, path), path)
    assert api.http.get("/api/v1/sources/leak").status_code == 404  # nothing stored


@pytest.mark.parametrize("path", ["dagwright.db", "sources/shop.db", "./sources/lake"])
def test_the_api_refuses_a_relative_path(
    server_process: ServerProcess, api: Api, path: str
) -> None:
    error = forbidden(put(server_process, api, "leak", "sqlite", path), path)
    assert "relative" in error["message"]


def test_a_symlink_to_a_forbidden_file_is_refused(
    server_process: ServerProcess, api: Api, data_dir: Path
) -> None:
    link = data_dir / "sources" / "innocent.db"
    link.symlink_to(data_dir / "dagwright.db")
    try:
        error = forbidden(put(server_process, api, "leak", "sqlite", str(link)), str(link))
        assert str(data_dir / "dagwright.db") in error["message"]  # what it resolves to
    finally:
        link.unlink()


def test_a_symlink_planted_in_an_allowed_folder_is_refused_when_read(
    server_process: ServerProcess, api: Api, data_dir: Path, lake: str
) -> None:
    lake = data_dir / "sources" / "lake"
    planted = [lake / "keys.csv", lake / "deep" / "part.csv"]
    planted[1].parent.mkdir()
    (lake / "deep" / "part0.csv").write_text("x\n1\n")
    planted[0].symlink_to(data_dir / "secret.key")
    planted[1].symlink_to(data_dir / "dagwright.db")
    try:
        with health_probe(server_process.base_url):
            for sql in ("SELECT * FROM lake.main.keys", "SELECT * FROM lake.main.deep"):
                api.http.post("/api/v1/sources/lake/check")  # the folder is listed afresh
                error = error_of(query(api, sql), 400)
                assert error["code"] == "source_path_forbidden", error
                assert "resolves to" in error["message"]
        # The rest of the folder is still readable.
        assert query(api, "SELECT count(*) AS n FROM lake.main.fish").json()["rows"] == [{"n": 2}]
    finally:
        for path in planted:
            path.unlink()


def test_a_sqlite_file_swapped_for_a_symlink_is_refused(
    server_process: ServerProcess, api: Api, data_dir: Path
) -> None:
    target = data_dir / "sources" / "swap.db"
    with sqlite3.connect(target) as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
    connection.close()
    assert put(server_process, api, "swap", "sqlite", str(target)).status_code == 200
    assert query(api, "SELECT count(*) AS n FROM swap.main.t").status_code == 200
    target.unlink()
    target.symlink_to(data_dir / "dagwright.db")
    try:
        api.http.post("/api/v1/sources/swap/check")
        error = error_of(query(api, "SELECT * FROM swap.main.api_keys"), 400)
        assert error["code"] == "source_path_forbidden"
    finally:
        api.http.delete("/api/v1/sources/swap")
        target.unlink()


# -- dagwright.toml ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def toml_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose dagwright.toml (in its working directory) names forbidden sources next
    to an allowed one."""
    folder = tmp_path_factory.mktemp("toml-server").resolve()
    (folder / "sources").mkdir()
    (folder / "sources" / "ok.csv").write_text("a\n1\n")
    (folder / "dagwright.toml").write_text(
        f"""
[sources.ok]
kind = "files"
path = "{folder}/sources/ok.csv"

[sources.key]
kind = "files"
path = "{folder}/secret.key"

[sources.db]
kind = "sqlite"
path = "{folder}/dagwright.db"

[sources.passwd]
kind = "files"
path = "/etc/passwd"
"""
    )
    server = ServerProcess(data_dir=folder, replica="toml-sources").start()
    try:
        yield server
    finally:
        server.stop()


def test_the_settings_file_cannot_name_a_forbidden_path(toml_server: ServerProcess) -> None:
    api = toml_server.api()
    try:
        with health_probe(toml_server.base_url):
            listed = {s["name"]: s["origin"] for s in api.http.get("/api/v1/sources").json()}
            assert {
                "ok": "file",
                "key": "file",
                "db": "file",
                "passwd": "file",
            }.items() <= listed.items()
            # The allowed source works; each forbidden one answers every use with the refusal.
            assert query(api, "SELECT a FROM ok.main.ok").json()["rows"] == [{"a": 1}]
            for name, sql in (
                ("key", 'SELECT * FROM key.main."secret"'),
                ("db", "SELECT * FROM db.main.api_keys"),
                ("passwd", "SELECT * FROM passwd.main.passwd"),
            ):
                error = error_of(query(api, sql), 400)
                assert error["code"] == "source_path_forbidden", error
                assert error["source"] == name
                checked = error_of(api.http.post(f"/api/v1/sources/{name}/check"), 400)
                assert checked["code"] == "source_path_forbidden"
    finally:
        api.close()


# -- the command line --------------------------------------------------------------------------


def dagwright(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m dagwright ...` with its data directory in `folder` and no settings file."""
    env = subprocess_environment(DAGWRIGHT_DATA_DIR=str(folder / "data"))
    return subprocess.run(
        [sys.executable, "-m", "dagwright", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def refused_cleanly(done: subprocess.CompletedProcess[str], code: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert f"error [{code}]" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_the_command_line_refuses_a_forbidden_path(tmp_path: Path) -> None:
    folder = tmp_path.resolve()
    data = folder / "data"
    (data / "sources").mkdir(parents=True)
    (data / "sources" / "ok.csv").write_text("a\n1\n")
    ok = dagwright(
        folder,
        "data",
        "add",
        "ok",
        "files",
        "--config",
        json.dumps({"path": str(data / "sources")}),
    )
    assert ok.returncode == 0, ok.stderr
    assert "ok.main.ok" in ok.stdout
    for kind, path in (
        ("files", str(data / "secret.key")),
        ("sqlite", str(data / "dagwright.db")),
        ("files", f"{data}/sources/../secret.key"),
        ("sqlite", "data/dagwright.db"),
    ):
        done = dagwright(
            folder, "data", "add", "leak", kind, "--config", json.dumps({"path": path})
        )
        refused_cleanly(done, "source_path_forbidden")
        assert path in done.stderr
    listed = dagwright(folder, "data", "sources")
    assert "leak" not in listed.stdout


def test_the_command_line_reports_a_forbidden_path_in_the_settings_file(tmp_path: Path) -> None:
    folder = tmp_path.resolve()
    (folder / "data").mkdir()
    (folder / "dagwright.toml").write_text(
        f'[sources.key]\nkind = "files"\npath = "{folder}/data/secret.key"\n'
    )
    done = dagwright(folder, "data", "query", 'SELECT * FROM key.main."secret"')
    refused_cleanly(done, "source_path_forbidden")


def test_the_command_line_refuses_sql_bombs_without_a_traceback(tmp_path: Path) -> None:
    for sql, code in (
        ("SELECT " + "(" * 5000 + "1" + ")" * 5000, "sql_too_deep"),
        ("SELECT " + "NOT " * 5000 + "true", "sql_too_deep"),
        ("SELECT length(repeat('ab', 1000000000))", "sql_refused"),
    ):
        refused_cleanly(dagwright(tmp_path, "data", "query", sql), code)
    slow = dagwright(
        tmp_path,
        "data",
        "query",
        "--timeout",
        "1",
        "SELECT count(*) FROM range(100000) a(x), range(100000) b(y)"
        " WHERE md5(x::VARCHAR || y::VARCHAR) = 'x'",
    )
    refused_cleanly(slow, "query_timeout")


def test_environment_roots_replace_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path.resolve()
    lake = folder / "lake"
    lake.mkdir()
    (lake / "t.csv").write_text("a\n1\n")
    monkeypatch.setenv("DAGWRIGHT_SOURCE_ROOTS", str(lake))  # passed on to the command
    config = json.dumps({"path": str(lake)})
    added = dagwright(folder, "data", "add", "lake", "files", "--config", config)
    assert added.returncode == 0, added.stderr
    assert "lake.main.t" in added.stdout
    (folder / "data" / "sources").mkdir()
    (folder / "data" / "sources" / "x.csv").write_text("a\n1\n")
    config = json.dumps({"path": str(folder / "data" / "sources")})
    refused_cleanly(
        dagwright(folder, "data", "add", "x", "files", "--config", config), "source_path_forbidden"
    )
