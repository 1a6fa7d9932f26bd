"""`dagwright data`: sources, SQL across them, and the cloud-billing demo loaded into the real
PostgreSQL, MariaDB and a Parquet folder, then joined across the three from the terminal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from dagwright.cli.main import app
from support.data_sources import (
    POSTGRES_URL,
    mysql_connect,
    mysql_problem,
    postgres_problem,
    unique_name,
)

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DAGWRIGHT_DATABASE_URL", raising=False)
    monkeypatch.delenv("DAGWRIGHT_SETTINGS", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./dagwright.toml
    return tmp_path / "data"


def test_sources_query_and_refusal(data_dir: Path) -> None:
    listed = runner.invoke(app, ["data", "sources"])
    assert listed.exit_code == 0, listed.output
    assert "hr" in listed.output
    assert "payroll" in listed.output

    sql = (
        "SELECT e.Name, s.Bonus FROM hr.main.Employee e JOIN payroll.main.salary s "
        "ON s.ID = e.ID WHERE e.Name = 'Tom'"
    )
    answered = runner.invoke(app, ["data", "query", sql, "--json"])
    assert answered.exit_code == 0, answered.output
    assert json.loads(answered.stdout) == [{"Name": "Tom", "Bonus": 1569}]

    refused = runner.invoke(app, ["data", "query", "UPDATE hr.main.Employee SET Name = 'x'"])
    assert refused.exit_code == 2
    assert "sql_refused" in refused.output


def test_a_source_added_with_its_own_catalogue_ttl(data_dir: Path) -> None:
    folder = data_dir / "sources" / "shop"
    folder.mkdir(parents=True)
    (folder / "orders.csv").write_text("id,amount\n1,2\n")
    config = json.dumps({"path": str(folder)})
    added = runner.invoke(
        app, ["data", "add", "shop", "files", "--config", config, "--catalogue-ttl", "45"]
    )
    assert added.exit_code == 0, added.output
    assert "shop.main.orders" in added.output
    listed = runner.invoke(app, ["data", "sources"])
    assert "(catalogue TTL 45 s)" in next(
        line for line in listed.output.splitlines() if "shop" in line
    )
    refused = runner.invoke(
        app, ["data", "add", "shop", "files", "--config", config, "--catalogue-ttl", "-1"]
    )
    assert refused.exit_code == 2


@pytest.fixture
def billing_targets() -> Iterator[tuple[str, str]]:
    for problem in (postgres_problem(), mysql_problem()):
        if problem is not None:
            pytest.skip(problem)
    schema, database = unique_name("dw_cli"), unique_name("dw_cli")
    yield schema, database
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")  # type: ignore[arg-type]
    server = mysql_connect()
    try:
        with server.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {database}")
    finally:
        server.close()


def test_demo_load_registers_three_systems_one_query_joins(
    data_dir: Path, billing_targets: tuple[str, str]
) -> None:
    schema, database = billing_targets
    loaded = runner.invoke(
        app,
        [
            "data", "demo-load", "--rows", "2000", "--pg-schema", schema,
            "--mysql-database", database, "--parquet", str(data_dir / "billing"),
        ],
    )  # fmt: skip
    assert loaded.exit_code == 0, loaded.output
    assert "registered billing_pg, billing_my, billing_files" in loaded.output

    sql = (
        f"SELECT count(*) AS n FROM billing_pg.{schema}.daily_billing b "
        f"JOIN billing_my.{database}.clusters c ON c.cluster_id = b.cluster_id "
        f"JOIN billing_pg.{schema}.tenants t ON t.tenant_id = c.tenant_id"
    )
    joined = runner.invoke(app, ["data", "query", sql, "--json"])
    assert joined.exit_code == 0, joined.output
    assert json.loads(joined.stdout) == [{"n": 2000}]
    events = runner.invoke(
        app, ["data", "query", "SELECT count(*) AS n FROM billing_files.main.operations_events"]
    )
    assert events.exit_code == 0, events.output
