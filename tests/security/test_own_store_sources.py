"""Data sources over the server's own database (issue 29, item 4).

Before the fix, on PostgreSQL, `PUT /api/v1/sources/own` with a `postgres` source at the
server's own database answered 200, and SQL through it read the store's tables: the API
keys' hashes, the runs, and the secrets' ciphertext (which the secret key decrypts). Now a
source whose server is the store's (localhost, 127.0.0.1, ::1, 0.0.0.0, this machine's name,
a Unix socket; the default port spelt or not) and whose database is the store's is refused
with `source_is_own_store` (400): when it is added, when a stored one is loaded, each time
it connects, and before a Spider import loads its databases there.
"""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from support.data_sources import MYSQL_URL, POSTGRES_URL, mysql_problem
from support.probe import health_probe
from support.server import Api, ServerProcess, error_of, postgres_schema

FIXTURES = Path(__file__).parents[1] / "fixtures" / "evaluation"


@pytest.fixture(scope="module")
def store_url() -> Iterator[str]:
    with postgres_schema() as url:
        yield url


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, store_url: str) -> Iterator[ServerProcess]:
    """A server whose store is PostgreSQL, with one source stored before the fix (written
    straight into its table) that reaches the store."""
    process = ServerProcess(
        data_dir=tmp_path_factory.mktemp("own-store"), replica="own", database_url=store_url
    ).start()
    plain = store_url.replace("+psycopg", "")
    with psycopg.connect(plain, autocommit=True) as connection:
        connection.execute(
            "INSERT INTO data_sources (name, kind, config, description, created_at, updated_at)"
            " VALUES ('stored', 'postgres', %s, '', now(), now())",
            [json.dumps({"url": "postgresql://postgres@localhost/test"})],
        )
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def api(server: ServerProcess) -> Iterator[Api]:
    client = server.api()
    try:
        yield client
    finally:
        client.close()


def store_schema(store_url: str) -> str:
    return store_url.rsplit("search_path%3D", 1)[1]


ALIASES = [
    "postgresql://postgres@127.0.0.1:5432/test",
    "postgresql://postgres@localhost/test",
    "postgresql://postgres@[::1]:5432/test",
    "postgresql://postgres@0.0.0.0/test",
    "postgres://postgres@127.0.0.2:5432/test",
    f"postgresql://postgres@{socket.gethostname()}/test",
    "postgresql://postgres@/test",  # the Unix socket
    "postgresql://postgres@127.0.0.1/other?dbname=test",
    "postgresql://test@127.0.0.1",  # no database: libpq's default is the user's name
]


@pytest.mark.parametrize("url", ALIASES)
def test_a_source_over_the_stores_database_is_refused(
    server: ServerProcess, api: Api, store_url: str, url: str
) -> None:
    with health_probe(server.base_url):
        response = api.http.put(
            "/api/v1/sources/own",
            json={"kind": "postgres", "config": {"url": url, "schemas": [store_schema(store_url)]}},
        )
    error = error_of(response, 400)
    assert error["code"] == "source_is_own_store", error
    assert error["source"] == "own"
    assert api.http.get("/api/v1/sources/own").status_code == 404
    # Nothing reads the secrets through it.
    sql = f"SELECT * FROM own.{store_schema(store_url)}.secrets"
    assert api.http.post("/api/v1/query", json={"sql": sql}).status_code != 200


def test_a_stored_source_over_the_store_is_refused_when_used(api: Api) -> None:
    """Stored before the fix: listed, but every use answers the refusal (and the other
    sources go on working)."""
    listed = {s["name"] for s in api.http.get("/api/v1/sources").json()}
    assert "stored" in listed
    error = error_of(api.http.post("/api/v1/sources/stored/check"), 400)
    assert error["code"] == "source_is_own_store", error
    answer = api.http.post(
        "/api/v1/query", json={"sql": "SELECT COUNT(*) AS n FROM hr.main.Employee"}
    )
    assert answer.status_code == 200, answer.text


def test_another_database_on_the_same_server_is_still_a_source(api: Api) -> None:
    """The control: the rule is about the store's database, not the server."""
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS own_store_control (n int)")
    response = api.http.put(
        "/api/v1/sources/elsewhere",
        json={"kind": "postgres", "config": {"url": POSTGRES_URL, "schemas": ["public"]}},
    )
    assert response.status_code == 200, response.text
    checked = api.http.post("/api/v1/sources/elsewhere/check")
    assert checked.status_code == 200, checked.text
    assert "elsewhere.public.own_store_control" in checked.json()["tables"]


def test_a_mysql_source_is_still_a_source_on_a_postgres_store(api: Api) -> None:
    """MariaDB holds no store here (the store is PostgreSQL or SQLite): its sources pass."""
    problem = mysql_problem()
    if problem:
        pytest.skip(problem)
    response = api.http.put(
        "/api/v1/sources/maria", json={"kind": "mysql", "config": {"url": MYSQL_URL}}
    )
    assert response.status_code == 200, response.text


def test_spider_is_not_loaded_into_the_stores_database(
    server: ServerProcess, api: Api, store_url: str
) -> None:
    name = f"own_sp_{uuid.uuid4().hex[:8]}"  # a schema left by a run of the old code stays
    pack = server.data_dir.resolve() / "sources" / "spider"
    shutil.copytree(FIXTURES / "spider", pack, dirs_exist_ok=True)
    response = api.http.post(
        "/api/v1/datasets",
        json={
            "name": name,
            "kind": "spider",
            "path": str(pack / "train_queries.csv"),
            "server_url": "postgresql://postgres@localhost:5432/test",
        },
    )
    error = error_of(response, 400)
    assert error["code"] == "source_is_own_store", error
    with psycopg.connect(store_url.replace("+psycopg", ""), autocommit=True) as connection:
        schemas = connection.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [f"{name}%"]
        ).fetchall()
    assert schemas == []
    assert api.http.get(f"/api/v1/datasets/{name}").status_code == 404
    assert not (server.data_dir / "sources" / "eval-datasets" / name).exists()


# -- the rule itself -------------------------------------------------------------------------


def test_the_connector_checks_again_when_it_connects() -> None:
    """A connector made without the check (as a source whose host later resolved to the
    store's server) is refused on its first connection, before any SQL is sent."""
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.data.connectors.own_store import OwnStoreError
    from dagwright.data.connectors.postgres import PostgresConfig, PostgresConnector

    store = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
    rule = SourcePaths.for_data_dir(Path("/nonexistent-data"), database_url=store)
    config = PostgresConfig.model_validate({"url": "postgresql://postgres@localhost/test"})
    connector = PostgresConnector("later", config, None, rule)
    with pytest.raises(OwnStoreError):
        connector.schemas()


@pytest.mark.parametrize(
    ("store", "source", "schemas", "reached"),
    [
        ("postgresql+psycopg://u@localhost/app", "postgresql://x@127.0.0.1:5432/app", None, True),
        ("postgresql+psycopg://u@localhost/app", "postgresql://x@127.0.0.1:5433/app", None, False),
        ("postgresql+psycopg://u@localhost/app", "postgresql://x@127.0.0.1/data", None, False),
        ("postgresql+psycopg://u@localhost/app", "mysql://x@127.0.0.1:5432/app", None, False),
        ("postgresql://u@db.invalid/app", "postgresql://x@db.invalid/app", None, True),
        ("postgresql://u@db.invalid/app", "postgresql://x@other.invalid/app", None, False),
        ("postgresql://u@h/app?host=/run/pg", "postgresql://x@[::1]/app", None, True),
        ("mysql+pymysql://u@127.0.0.1/app", "mysql://x@localhost", None, True),  # all dbs
        ("mysql+pymysql://u@127.0.0.1/app", "mysql://x@localhost/data", None, False),
        ("mysql+pymysql://u@127.0.0.1/app", "mysql://x@localhost/data", ["APP"], True),
        ("mysql+pymysql://u@127.0.0.1/app", "mariadb://x@localhost:3306/app", None, True),
        ("sqlite:///data/dagwright.db", "postgresql://x@localhost/app", None, False),
    ],
)
def test_which_urls_reach_the_store(
    store: str, source: str, schemas: list[str] | None, reached: bool
) -> None:
    from dagwright.data.connectors.own_store import OwnStore

    own = OwnStore.from_url(store)
    assert (own is not None and own.reached_by(source, schemas)) is reached


def test_the_servers_own_addresses_are_this_machine() -> None:
    from dagwright.data.connectors.own_store import OwnStore

    address = socket.gethostbyname(socket.gethostname())
    own = OwnStore.from_url("postgresql://u@localhost/app")
    assert own is not None
    assert own.reached_by(f"postgresql://x@{address}/app", None)
