"""Demo data: Figure 1's files, the generated billing tables, and loading them into the real
PostgreSQL and MariaDB test servers (skipped, saying why, when a server does not answer)."""

from __future__ import annotations

import datetime
import os
import sqlite3
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pymysql
import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.demo import (
    billing_table_infos,
    generate_billing,
    load_billing,
    load_figure1,
)
from dagwright.data.engine import QueryEngine
from support.source_paths import TEMPORARY_FOLDERS

POSTGRES_URL = os.environ.get(
    "DAGWRIGHT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
).replace("postgresql+psycopg://", "postgresql://")
MYSQL: dict[str, Any] = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
NAME = f"dw_demo_{uuid.uuid4().hex[:8]}"  # this module's schema and database


def test_figure1_answers_toms_bonus_by_a_join(tmp_path: Path) -> None:
    files = load_figure1(tmp_path)
    assert set(files) == {"sqlite", "csv"}
    with sqlite3.connect(files["sqlite"]) as connection:
        employees = connection.execute("SELECT ID, Name, Depno FROM Employee").fetchall()
        departments = dict(connection.execute("SELECT Depno, DepName FROM Department"))
    connection.close()
    salary = pacsv.read_csv(files["csv"])
    assert salary.column_names == ["ID", "Bonus"]
    employee = pa.table({"ID": [e[0] for e in employees], "Name": [e[1] for e in employees]})
    joined = employee.join(salary, "ID")
    tom = joined.filter(pc.field("Name") == "Tom")
    assert tom.column("Bonus").to_pylist() == [1569]
    assert departments == {1: "R&D", 2: "FINANCE"}
    # built again over the old file
    assert load_figure1(tmp_path)["sqlite"].exists()


def test_figure1_through_the_query_engine(tmp_path: Path) -> None:
    files = load_figure1(tmp_path)
    catalog = Catalog.from_config(
        {
            "hr": {"kind": "sqlite", "path": str(files["sqlite"])},
            "finance": {"kind": "files", "path": str(files["csv"])},
        },
        paths=TEMPORARY_FOLDERS,
    )
    engine = QueryEngine(catalog)
    try:
        result = engine.query(
            "SELECT s.Bonus FROM hr.main.Employee AS e JOIN finance.main.salary AS s "
            "ON e.ID = s.ID WHERE e.Name = 'Tom'"
        )
    finally:
        engine.close()
        catalog.close()
    assert result.table.to_pylist() == [{"Bonus": 1569}]


def test_billing_is_deterministic_and_sized() -> None:
    tables = generate_billing(5000, seed=3)
    again = generate_billing(5000, seed=3)
    assert all(tables[name].equals(again[name]) for name in tables)
    assert not generate_billing(5000, seed=4)["daily_billing"].equals(tables["daily_billing"])
    assert tables["daily_billing"].num_rows == 5000
    with pytest.raises(ValueError, match="at least 12"):
        generate_billing(5)


def test_billing_matches_its_metadata_and_keys() -> None:
    tables = generate_billing(3000)
    infos = {info.name: info for info in billing_table_infos("billing")}
    for name, table in tables.items():
        assert table.schema == infos[name].arrow_schema(), name
        key = infos[name].primary_key[0]
        assert pc.count_distinct(table[key]).as_py() == table.num_rows
    tenants = set(tables["tenants"]["tenant_id"].to_pylist())
    clusters = set(tables["clusters"]["cluster_id"].to_pylist())
    for name in ("daily_billing", "operations_events"):
        assert set(tables[name]["tenant_id"].to_pylist()) <= tenants
        assert set(tables[name]["cluster_id"].to_pylist()) <= clusters
    assert infos["daily_billing"].foreign_keys[0].ref_table == "tenants"


def test_billing_story_and_case_trap() -> None:
    tables = generate_billing(3000)
    assert tables["tenants"].slice(0, 1).to_pylist()[0]["tenant_name"] == "Eugene"
    assert set(tables["tenants"]["home_region"].to_pylist()) <= {
        "cn-hangzhou",
        "us-west-2",
        "eu-central-1",
        "ap-southeast-1",
        "us-east-1",
    }
    assert tables["clusters"]["region"][0].as_py() == "cn-Hangzhou"
    billing = tables["daily_billing"]
    assert set(billing["region"].to_pylist()) >= {"CN-HANGZHOU"}
    eugene = billing.filter((pc.field("cluster_id") == 1) & (pc.field("service") == "compute"))
    costs = [Decimal(str(c)) for c in eugene["cost_usd"].to_pylist()]
    by_day = dict(zip(eugene["billing_date"].to_pylist(), costs, strict=True))
    spike = by_day[datetime.date(2024, 1, 10)]
    usual = sorted(costs)[len(costs) // 2]
    assert spike > 2 * usual
    events = tables["operations_events"]
    story = events.filter(pc.field("detail") == "nodes 3 -> 9").to_pylist()
    assert [(e["cluster_id"], e["event_type"]) for e in story] == [(1, "scale_out")]
    assert story[0]["event_time"].date() == datetime.date(2024, 1, 10)


def test_cost_is_exact_decimal() -> None:
    cost = generate_billing(100)["daily_billing"]["cost_usd"]
    assert cost.type == pa.decimal128(14, 4)
    assert all(isinstance(v, Decimal) and v > 0 for v in cost.to_pylist())


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    problems = []
    try:
        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except psycopg.OperationalError as error:
        problems.append(f"PostgreSQL at {POSTGRES_URL}: {error}")
    try:
        pymysql.connect(**MYSQL, connect_timeout=3).close()
    except pymysql.err.OperationalError as error:
        problems.append(f"MariaDB at {MYSQL['host']}:{MYSQL['port']}: {error}")
    if problems:
        pytest.skip("; ".join(problems))
    tables = generate_billing(20_000)
    folder = tmp_path_factory.mktemp("parquet")
    try:
        places = load_billing(tables, POSTGRES_URL, NAME, MYSQL, NAME, folder)
        yield {"tables": tables, "places": places, "folder": folder}
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as postgres:
            postgres.execute(f'DROP SCHEMA IF EXISTS "{NAME}" CASCADE')
        mysql = pymysql.connect(**MYSQL)
        with mysql.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS `{NAME}`")
        mysql.close()


def test_load_places_each_table(loaded: dict[str, Any]) -> None:
    assert loaded["places"] == {
        "tenants": f"postgres:{NAME}.tenants",
        "daily_billing": f"postgres:{NAME}.daily_billing",
        "clusters": f"mysql:{NAME}.clusters",
        "operations_events": f"parquet:{loaded['folder'] / 'operations_events.parquet'}",
    }


def test_postgres_rows_keys_and_comments(loaded: dict[str, Any]) -> None:
    billing = loaded["tables"]["daily_billing"]
    with psycopg.connect(POSTGRES_URL) as connection:
        count, total = connection.execute(
            f'SELECT count(*), sum(cost_usd) FROM "{NAME}".daily_billing'
        ).fetchone() or (0, 0)
        assert count == billing.num_rows
        assert total == pc.sum(billing["cost_usd"]).as_py()
        comment = connection.execute(
            "SELECT obj_description(%s::regclass)", (f'"{NAME}".daily_billing',)
        ).fetchone()
        assert comment == ("Daily cost of each cluster per billed service, in US dollars",)
        foreign = connection.execute(
            "SELECT count(*) FROM information_schema.table_constraints "
            "WHERE table_schema = %s AND constraint_type = 'FOREIGN KEY'",
            (NAME,),
        ).fetchone()
        assert foreign == (1,)  # daily_billing -> tenants; clusters live in MariaDB
        region = connection.execute(
            f"SELECT count(*) FROM \"{NAME}\".daily_billing WHERE region = 'cn-Hangzhou'"
        ).fetchone()
        assert region == (0,)  # the case trap: the billing export writes CN-HANGZHOU


def test_mysql_rows_nulls_and_comments(loaded: dict[str, Any]) -> None:
    clusters = loaded["tables"]["clusters"]
    connection = pymysql.connect(**MYSQL, database=NAME)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT cluster_id, cluster_name, region, labels FROM clusters ORDER BY 1"
            )
            rows = cursor.fetchall()
            cursor.execute(
                "SELECT column_comment FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'clusters' AND column_name = 'tier'",
                (NAME,),
            )
            assert cursor.fetchone() == ("Serverless or Dedicated",)
    finally:
        connection.close()
    expected = clusters.select(["cluster_id", "cluster_name", "region", "labels"]).to_pylist()
    assert [tuple(row.values()) for row in expected] == list(rows)
    assert any(row[3] is None for row in rows)


def test_mysql_without_load_data_local(loaded: dict[str, Any]) -> None:
    """With LOAD DATA LOCAL refused, rows go in by batched inserts (here into the module's
    database again, replacing the table with the same rows)."""
    clusters = loaded["tables"]["clusters"]
    params = {**MYSQL, "local_infile": False}
    places = load_billing({"clusters": clusters}, None, NAME, params, NAME, None)
    assert places == {"clusters": f"mysql:{NAME}.clusters"}
    connection = pymysql.connect(**MYSQL, database=NAME)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*), count(labels) FROM clusters")
            counts = cursor.fetchone()
    finally:
        connection.close()
    assert counts == (clusters.num_rows, clusters.num_rows - clusters["labels"].null_count)


def test_parquet_file(loaded: dict[str, Any]) -> None:
    events = pq.read_table(loaded["folder"] / "operations_events.parquet")
    assert events.equals(loaded["tables"]["operations_events"])


def test_load_refuses_unknown_tables_and_missing_targets() -> None:
    with pytest.raises(ValueError, match="not a billing table"):
        load_billing({"invoices": pa.table({"a": [1]})}, None, "s", None, "d", None)
    tables = generate_billing(100)
    with pytest.raises(ValueError, match="no PostgreSQL URL"):
        load_billing({"tenants": tables["tenants"]}, None, "s", None, "d", None)
