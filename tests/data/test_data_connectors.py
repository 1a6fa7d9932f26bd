"""The connectors against real sources: files, SQLite, PostgreSQL, MariaDB, an HTTP JSON
server and Python values. Metadata (columns, types, keys, comments, row estimates), reads
with pushed filters, splits, and the errors each reports (unreachable, refused credentials,
missing tables, unmapped types) without ever showing a password. And the rule for which
local paths file and SQLite sources may read (``SourcePaths``)."""

from __future__ import annotations

import datetime
import decimal
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagwright.composition import Composition
from dagwright.data.catalog import Catalog, RefusedSource, create_connector
from dagwright.data.connector import Connector, Filter, Split, TableInfo
from dagwright.data.connectors import (
    FilesConnector,
    HttpJsonConnector,
    MemoryConnector,
    MysqlConnector,
    PostgresConnector,
    SqliteConnector,
    connector_kinds,
    register_connector,
)
from dagwright.data.connectors.common import SourcePathError, SourcePaths
from dagwright.egress import EgressPolicy
from dagwright.errors import DataError, DataSourceError
from dagwright.secrets import MappingSecrets
from dagwright.settings import load_settings
from support.data_sources import (
    MysqlDatabase,
    PostgresSchema,
    json_server,
    mysql_database,
    postgres_schema,
)
from support.source_paths import TEMPORARY_FOLDERS

NO_SECRETS = MappingSecrets({})
# The JSON test servers listen on loopback, which the egress policy refuses by default
# (tests/security/test_egress.py): allowed explicitly, as an operator would.
LOOPBACK_ALLOWED = EgressPolicy.from_text("127.0.0.1")


def read_all(connector: Connector, splits: list[Split]) -> pa.Table:
    batches = [batch for split in splits for batch in connector.read(split)]
    schema = batches[0].schema if batches else None
    return pa.Table.from_batches(batches, schema=schema)


def rows(
    connector: Connector, schema: str, table: str, columns: list[str], *filters: Filter
) -> Any:
    splits = connector.splits(schema, table, columns, filters)
    return read_all(connector, splits).to_pylist()


def types(info: TableInfo) -> dict[str, pa.DataType]:
    return {column.name: column.type for column in info.columns}


# --- the registry ---------------------------------------------------------------------------


def test_every_kind_is_registered_with_its_config_model() -> None:
    kinds = connector_kinds()
    assert set(kinds) == {"files", "sqlite", "postgres", "mysql", "http_json", "memory"}
    for kind, cls in kinds.items():
        assert cls.kind == kind
        assert "properties" in cls.config_model.model_json_schema()


def test_a_kind_name_cannot_be_taken_twice() -> None:
    class Impostor(MemoryConnector):
        kind = "files"

    with pytest.raises(ValueError, match="taken by"):
        register_connector(Impostor)


# --- memory ---------------------------------------------------------------------------------


def test_memory_tables_from_every_kind_of_python_value() -> None:
    frame = pd.DataFrame({"x": [1, 2], "y": ["a", "b"]})
    connector = MemoryConnector(
        "flow",
        {
            "rows": [{"id": 1, "name": "a", "gone": None}, {"id": 2, "name": "b", "gone": None}],
            "columns": {"id": [1, 2, 3]},
            "frame": frame,
            "arrow": pa.table({"v": pa.array([1.5], pa.float32())}),
            "values": [3, 1, 2],
        },
    )
    assert connector.tables("main") == ["arrow", "columns", "frame", "rows", "values"]
    info = connector.table_info("main", "rows")
    # An all-null column would have Arrow's null type: it is exposed as text.
    assert types(info) == {"id": pa.int64(), "name": pa.string(), "gone": pa.string()}
    assert info.row_estimate == 2
    assert rows(connector, "main", "values", ["value"]) == [
        {"value": 3},
        {"value": 1},
        {"value": 2},
    ]
    assert rows(connector, "main", "frame", ["y"], Filter("x", ">", 1)) == [{"y": "b"}]
    connector.remove("frame")
    with pytest.raises(DataSourceError) as caught:
        connector.table_info("main", "frame")
    assert caught.value.code == "table_not_found"


def test_memory_values_of_mixed_types_are_type_unmapped_naming_the_column() -> None:
    with pytest.raises(DataSourceError) as caught:
        MemoryConnector("flow", {"bad": [{"id": 1, "v": 1}, {"id": 2, "v": "two"}]})
    assert caught.value.code == "type_unmapped"
    assert "flow.main.bad.v" in caught.value.message


def test_memory_applies_every_filter_kind() -> None:
    data = {"n": [1, 2, 3, None], "s": ["a", "b", "c", "d"]}
    connector = MemoryConnector("m", {"t": data})
    assert rows(connector, "main", "t", ["s"], Filter("n", "in", (1, 3))) == [
        {"s": "a"},
        {"s": "c"},
    ]
    assert rows(connector, "main", "t", ["s"], Filter("n", "is_null")) == [{"s": "d"}]
    assert len(rows(connector, "main", "t", ["s"], Filter("n", "not_null"))) == 3
    assert rows(connector, "main", "t", ["n"], Filter("s", "!=", "a"), Filter("n", "<=", 2)) == [
        {"n": 2}
    ]


# --- files ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("files")
    (root / "people.csv").write_text("id,name,born\n1,Ann,1990-01-02\n2,Bob,1985-05-06\n")
    (root / "scores.tsv").write_text("id\tscore\n1\t9.5\n2\t7.25\n")
    pq.write_table(
        pa.table({"id": list(range(100)), "v": [i * 2 for i in range(100)], "t": ["x"] * 100}),
        root / "numbers.parquet",
        row_group_size=10,
    )
    (root / "events.jsonl").write_text('{"id": 1, "kind": "a"}\n{"id": 2, "kind": null}\n')
    (root / "items.json").write_text(json.dumps([{"sku": "k1", "qty": 3}, {"sku": "k2"}]))
    (root / "_SUCCESS").write_text("")
    (root / "notes.txt").write_text("not a table")
    parts = root / "sales"
    parts.mkdir()
    for year in (2023, 2024):
        pq.write_table(
            pa.table({"year": [year] * 3, "amount": [1, 2, 3]}), parts / f"{year}.parquet"
        )
    return root


@pytest.fixture(scope="module")
def files(folder: Path) -> FilesConnector:
    return FilesConnector.from_config(
        "files", {"path": str(folder)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
    )


def test_files_tables_are_files_and_folders_of_data_files(files: FilesConnector) -> None:
    assert files.schemas() == ["main"]
    assert files.tables("main") == ["events", "items", "numbers", "people", "sales", "scores"]


def test_files_metadata_for_each_format(files: FilesConnector) -> None:
    people = files.table_info("main", "people")
    assert types(people) == {"id": pa.int64(), "name": pa.string(), "born": pa.date32()}
    assert people.row_estimate is None  # CSV: unknown without reading it all
    assert types(files.table_info("main", "scores")) == {"id": pa.int64(), "score": pa.float64()}
    numbers = files.table_info("main", "numbers")
    assert numbers.row_estimate == 100  # Parquet: from the footers
    assert numbers.column("v").source_type == "parquet:int64"
    assert types(files.table_info("main", "events")) == {"id": pa.int64(), "kind": pa.string()}
    assert types(files.table_info("main", "items")) == {"sku": pa.string(), "qty": pa.int64()}


def test_files_read_only_the_asked_columns_with_filters(files: FilesConnector) -> None:
    splits = files.splits("main", "numbers", ["v"], [Filter("id", ">=", 95)])
    table = read_all(files, splits)
    assert table.column_names == ["v"]
    assert table.column("v").to_pylist() == [190, 192, 194, 196, 198]
    assert rows(files, "main", "items", ["qty", "sku"], Filter("qty", "is_null")) == [
        {"qty": None, "sku": "k2"}
    ]
    born = rows(files, "main", "people", ["name"], Filter("born", "<", datetime.date(1989, 1, 1)))
    assert born == [{"name": "Bob"}]


def test_a_folder_of_files_is_one_table_with_a_split_per_file(files: FilesConnector) -> None:
    splits = files.splits("main", "sales", ["year", "amount"], [Filter("amount", ">", 1)])
    assert [Path(split.detail["path"]).name for split in splits] == ["2023.parquet", "2024.parquet"]
    assert [split.count for split in splits] == [2, 2]
    table = read_all(files, splits)
    assert table.to_pylist() == [
        {"year": 2023, "amount": 2},
        {"year": 2023, "amount": 3},
        {"year": 2024, "amount": 2},
        {"year": 2024, "amount": 3},
    ]


def test_files_errors(tmp_path: Path) -> None:
    connector = FilesConnector.from_config(
        "f", {"path": str(tmp_path / "nowhere")}, NO_SECRETS, paths=TEMPORARY_FOLDERS
    )
    with pytest.raises(DataSourceError) as caught:
        connector.tables("main")
    assert caught.value.code == "source_unreachable"
    (tmp_path / "a.csv").write_text("x\n1\n")
    connector = FilesConnector.from_config(
        "f", {"path": str(tmp_path)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
    )
    splits = connector.splits("main", "a", ["x"])
    (tmp_path / "a.csv").unlink()
    with pytest.raises(DataSourceError) as caught:
        read_all(connector, splits)
    assert caught.value.code == "table_not_found"
    with pytest.raises(DataSourceError) as caught:
        connector.table_info("main", "a")
    assert caught.value.code == "table_not_found"


# --- SQLite ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> SqliteConnector:
    path = tmp_path_factory.mktemp("sqlite") / "shop.db"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            """
            CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, vip BOOLEAN,
                                    joined DATE, seen DATETIME, balance NUMERIC(10,2), photo BLOB);
            CREATE TABLE orders (id INTEGER, line INTEGER, customer_id INTEGER REFERENCES customers,
                                 amount REAL, PRIMARY KEY (id, line));
            CREATE VIEW totals AS SELECT customer_id, sum(amount) AS total, 'x' AS tag
                                  FROM orders GROUP BY customer_id;
            INSERT INTO customers VALUES
                (1, 'Ann', 1, '2020-01-02', '2021-02-03 04:05:06', 1.5, x'00ff'),
                (2, 'Bob', 0, NULL, NULL, NULL, NULL);
            INSERT INTO orders VALUES (1, 1, 1, 10.0), (1, 2, 1, 5.5), (2, 1, 2, 7.0);
            """
        )
    return SqliteConnector.from_config(
        "lite", {"path": str(path)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
    )


def test_sqlite_metadata_types_and_keys(lite: SqliteConnector) -> None:
    assert lite.tables("main") == ["customers", "orders", "totals"]
    customers = lite.table_info("main", "customers")
    assert types(customers) == {
        "id": pa.int64(),
        "name": pa.string(),
        "vip": pa.bool_(),
        "joined": pa.date32(),
        "seen": pa.timestamp("us"),
        "balance": pa.float64(),
        "photo": pa.binary(),
    }
    assert customers.column("name").nullable is False
    assert customers.primary_key == ("id",)
    assert customers.row_estimate == 2
    orders = lite.table_info("main", "orders")
    assert orders.primary_key == ("id", "line")
    [key] = orders.foreign_keys
    assert (key.columns, key.ref_table, key.ref_columns) == (("customer_id",), "customers", ("id",))
    # A view's computed columns have no declared type: typed from their values.
    assert types(lite.table_info("main", "totals")) == {
        "customer_id": pa.int64(),
        "total": pa.float64(),
        "tag": pa.string(),
    }


def test_sqlite_reads_typed_values_with_filters_at_the_source(lite: SqliteConnector) -> None:
    [split] = lite.splits("main", "customers", ["name", "joined", "vip"], [Filter("id", "=", 1)])
    assert split.filters == (Filter("id", "=", 1),)
    assert 'WHERE "id" = ?' in split.detail["query"]
    assert read_all(lite, [split]).to_pylist() == [
        {"name": "Ann", "joined": datetime.date(2020, 1, 2), "vip": True}
    ]


def test_sqlite_errors(tmp_path: Path, lite: SqliteConnector) -> None:
    with pytest.raises(DataSourceError) as caught:
        lite.table_info("main", "nope")
    assert caught.value.code == "table_not_found"
    missing = SqliteConnector("gone", tmp_path / "missing.db", TEMPORARY_FOLDERS)
    with pytest.raises(DataSourceError) as caught:
        missing.tables("main")
    assert caught.value.code == "source_unreachable"
    assert "gone" in caught.value.message


def test_sqlite_value_that_does_not_fit_its_column_is_bad_value(tmp_path: Path) -> None:
    path = tmp_path / "loose.db"
    with sqlite3.connect(path) as connection:
        connection.executescript("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), ('many');")
    connector = SqliteConnector("loose", path, TEMPORARY_FOLDERS)
    with pytest.raises(DataSourceError) as caught:
        rows(connector, "main", "t", ["n"])
    assert caught.value.code == "bad_value"
    assert "loose.main.t.n" in caught.value.message


# --- PostgreSQL -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[PostgresSchema]:
    with postgres_schema() as schema:
        schema.execute(
            "CREATE TYPE {schema}.mood AS ENUM ('ok', 'sad')",
            """CREATE TABLE {schema}.customers (
                   id int PRIMARY KEY, name text NOT NULL, balance numeric(12,2), ratio numeric,
                   joined date, seen timestamptz, tags text[], mood {schema}.mood, ref uuid,
                   doc jsonb, ip inet)""",
            "COMMENT ON TABLE {schema}.customers IS 'people who buy'",
            "COMMENT ON COLUMN {schema}.customers.name IS 'full name'",
            """CREATE TABLE {schema}.orders (
                   id bigint PRIMARY KEY, customer_id int REFERENCES {schema}.customers(id),
                   amount float8, region varchar(10))""",
            """INSERT INTO {schema}.customers VALUES
                   (1, 'Ann', 10.50, 0.25, '2020-01-02', '2021-02-03 04:05:06+02', '{a,b}', 'ok',
                    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"k": 1}', '10.0.0.1'),
                   (2, 'Bob', NULL, NULL, NULL, NULL, NULL, 'sad', NULL, NULL, NULL)""",
            """INSERT INTO {schema}.orders
                   SELECT g, 1 + g % 2, g * 1.5, CASE WHEN g % 3 = 0 THEN 'north' ELSE 'south' END
                   FROM generate_series(1, 1000) g""",
            "ANALYZE {schema}.customers",
            "ANALYZE {schema}.orders",
        )
        yield schema


@pytest.fixture(scope="module")
def pg(pg_schema: PostgresSchema) -> PostgresConnector:
    return PostgresConnector.from_config(
        "pg", {"url": pg_schema.url, "schemas": [pg_schema.name], "split_rows": 300}, NO_SECRETS
    )


def test_postgres_metadata(pg: PostgresConnector, pg_schema: PostgresSchema) -> None:
    assert pg.schemas() == [pg_schema.name]
    assert pg.tables(pg_schema.name) == ["customers", "orders"]
    info = pg.table_info(pg_schema.name, "customers")
    assert types(info) == {
        "id": pa.int32(),
        "name": pa.string(),
        "balance": pa.decimal128(12, 2),
        "ratio": pa.float64(),  # unconstrained numeric
        "joined": pa.date32(),
        "seen": pa.timestamp("us", tz="UTC"),
        "tags": pa.list_(pa.string()),
        # No Arrow counterpart: read as text, the source type kept.
        "mood": pa.string(),
        "ref": pa.string(),
        "doc": pa.string(),
        "ip": pa.string(),
    }
    assert info.column("ref").source_type == "uuid"
    assert info.column("mood").source_type == f"{pg_schema.name}.mood"
    assert info.comment == "people who buy"
    assert info.column("name").comment == "full name"
    assert info.column("name").nullable is False
    assert info.primary_key == ("id",)
    assert info.row_estimate == 2
    orders = pg.table_info(pg_schema.name, "orders")
    [key] = orders.foreign_keys
    assert key == key.__class__(("customer_id",), pg_schema.name, "customers", ("id",))
    assert orders.row_estimate == 1000


def test_postgres_reads_every_type(pg: PostgresConnector, pg_schema: PostgresSchema) -> None:
    columns = [c.name for c in pg.table_info(pg_schema.name, "customers").columns]
    [ann, bob] = rows(pg, pg_schema.name, "customers", columns)
    assert ann == {
        "id": 1,
        "name": "Ann",
        "balance": decimal.Decimal("10.50"),
        "ratio": 0.25,
        "joined": datetime.date(2020, 1, 2),
        "seen": datetime.datetime(2021, 2, 3, 2, 5, 6, tzinfo=datetime.UTC),
        "tags": ["a", "b"],
        "mood": "ok",
        "ref": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "doc": '{"k": 1}',
        "ip": "10.0.0.1/32",
    }
    assert bob["balance"] is None
    assert bob["mood"] == "sad"


def test_postgres_pushes_columns_and_filters_as_parameters(
    pg: PostgresConnector, pg_schema: PostgresSchema
) -> None:
    filters = [
        Filter("region", "=", "north"),
        Filter("amount", ">", 1400.0),
        Filter("customer_id", "in", (1,)),
        Filter("region", ">", "m"),  # text ranges depend on collation: not pushed
    ]
    splits = pg.splits(pg_schema.name, "orders", ["id"], filters)
    assert all(split.filters == tuple(filters[:3]) for split in splits)
    query = splits[0].detail["query"]
    assert query.startswith('SELECT "id" AS "id" FROM')
    assert '"region" = $1' in query
    assert "north" not in query
    table = read_all(pg, splits)
    assert table.column_names == ["id"]
    # amount = 1.5 id > 1400: id > 933; north: id % 3 = 0; customer 1: id even.
    assert sorted(table.column("id").to_pylist()) == [i for i in range(934, 1001) if i % 6 == 0]


def test_postgres_splits_a_large_table_into_key_ranges(
    pg: PostgresConnector, pg_schema: PostgresSchema
) -> None:
    splits = pg.splits(pg_schema.name, "orders", ["id"])
    # 1000 rows estimated, split_rows 300: four ranges, open at both ends.
    assert [split.detail["range"] for split in splits] == [
        ("id", None, 251),
        ("id", 251, 501),
        ("id", 501, 751),
        ("id", 751, None),
    ]
    ids = read_all(pg, splits).column("id").to_pylist()
    assert sorted(ids) == list(range(1, 1001))


def test_postgres_read_stopped_early_leaves_the_source_usable(
    pg: PostgresConnector, pg_schema: PostgresSchema
) -> None:
    pg_schema.execute(
        "CREATE TABLE {schema}.bulky AS SELECT g AS id, repeat('x', 10000) AS body"
        " FROM generate_series(1, 1000) g"
    )
    [split] = pg.splits(pg_schema.name, "bulky", ["id", "body"])
    batches = pg.read(split)
    first = next(batches)
    assert 0 < first.num_rows < 1000  # about 4 MB per batch: 10 MB come in several
    batches.close()  # as when DuckDB has enough rows
    assert rows(pg, pg_schema.name, "customers", ["id"]) == [{"id": 1}, {"id": 2}]


def test_postgres_table_outside_the_exposed_schemas_is_not_found(pg: PostgresConnector) -> None:
    for schema, table in [("pg_catalog", "pg_class"), ("public", "anything")]:
        with pytest.raises(DataSourceError) as caught:
            pg.table_info(schema, table)
        assert caught.value.code == "table_not_found"


def test_postgres_unreachable_names_the_source_and_hides_the_password() -> None:
    password = "pg-hunter2-secret"
    connector = PostgresConnector.from_config(
        "warehouse",
        {"url": "postgresql://postgres@127.0.0.1:5439/test", "password_secret": "PG_PASSWORD"},
        MappingSecrets({"PG_PASSWORD": password}),
    )
    with pytest.raises(DataSourceError) as caught:
        connector.schemas()
    error = caught.value
    assert error.code == "source_unreachable"
    assert error.source == "warehouse"
    assert "'warehouse'" in error.message
    assert "127.0.0.1:5439" in error.message
    assert "Connection refused" in error.message  # the driver's own words
    assert password not in error.message
    assert password not in repr(connector)
    assert password not in str(error.__cause__)


def test_postgres_unknown_role_is_source_auth(pg_schema: PostgresSchema) -> None:
    connector = PostgresConnector.from_config(
        "pg", {"url": "postgresql://dw_nobody_here@127.0.0.1:5432/test"}, NO_SECRETS
    )
    with pytest.raises(DataSourceError) as caught:
        connector.schemas()
    assert caught.value.code == "source_auth"
    assert "dw_nobody_here" in caught.value.message


def test_postgres_url_must_not_hold_a_password() -> None:
    with pytest.raises(DataError) as caught:
        create_connector(
            "pg", {"kind": "postgres", "url": "postgresql://u:pw-in-url@localhost/db"}, NO_SECRETS
        )
    assert caught.value.code == "source_config"
    assert "pw-in-url" not in caught.value.message


# --- MariaDB (MySQL protocol) ---------------------------------------------------------------


@pytest.fixture(scope="module")
def my_db() -> Iterator[MysqlDatabase]:
    with mysql_database() as database:
        database.execute(
            """CREATE TABLE customers (
                   id INT PRIMARY KEY COMMENT 'the key', name VARCHAR(20) NOT NULL,
                   credit DECIMAL(10,2), big DECIMAL(50,4), flags BIT(4), visits INT UNSIGNED,
                   joined DATE, seen TIMESTAMP NULL, lasted TIME, born YEAR, doc JSON,
                   kind ENUM('a','b'), spot POINT, photo BLOB) COMMENT='people who buy'""",
            """CREATE TABLE orders (
                   id BIGINT PRIMARY KEY, customer_id INT, amount DOUBLE, region VARCHAR(10),
                   FOREIGN KEY (customer_id) REFERENCES customers (id))""",
            """INSERT INTO customers VALUES
                   (1, 'Ann', 10.50, 1.5, b'0101', 7, '2020-01-02', '2021-02-03 04:05:06',
                    '-01:02:03', 1990, '{"k": 1}', 'a', POINT(1, 2), x'00ff'),
                   (2, 'Bob', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 'b', NULL, NULL)
            """,
            "INSERT INTO orders VALUES "
            + ", ".join(
                f"({i}, {1 + i % 2}, {i * 1.5}, '{'north' if i % 3 == 0 else 'south'}')"
                for i in range(1, 1001)
            ),
            "ANALYZE TABLE customers, orders",
        )
        yield database


@pytest.fixture(scope="module")
def my(my_db: MysqlDatabase) -> MysqlConnector:
    return MysqlConnector.from_config("my", {"url": my_db.url, "split_rows": 300}, NO_SECRETS)


def test_mysql_metadata(my: MysqlConnector, my_db: MysqlDatabase) -> None:
    assert my.schemas() == [my_db.name]
    assert my.tables(my_db.name) == ["customers", "orders"]
    info = my.table_info(my_db.name, "customers")
    assert types(info) == {
        "id": pa.int32(),
        "name": pa.string(),
        "credit": pa.decimal128(10, 2),
        "big": pa.float64(),  # wider than decimal128
        "flags": pa.int64(),
        "visits": pa.uint32(),
        "joined": pa.date32(),
        "seen": pa.timestamp("us", tz="UTC"),
        "lasted": pa.duration("us"),
        "born": pa.int16(),
        "doc": pa.string(),
        "kind": pa.string(),
        "spot": pa.string(),
        "photo": pa.binary(),
    }
    assert info.comment == "people who buy"
    assert info.column("id").comment == "the key"
    assert info.column("visits").source_type == "int(10) unsigned"
    assert info.primary_key == ("id",)
    orders = my.table_info(my_db.name, "orders")
    [key] = orders.foreign_keys
    assert (key.columns, key.ref_schema, key.ref_table, key.ref_columns) == (
        ("customer_id",),
        my_db.name,
        "customers",
        ("id",),
    )
    assert orders.row_estimate is not None
    assert 500 <= orders.row_estimate <= 2000


def test_mysql_reads_every_type(my: MysqlConnector, my_db: MysqlDatabase) -> None:
    columns = [c.name for c in my.table_info(my_db.name, "customers").columns]
    [ann, bob] = rows(my, my_db.name, "customers", columns)
    assert ann == {
        "id": 1,
        "name": "Ann",
        "credit": decimal.Decimal("10.50"),
        "big": 1.5,
        "flags": 5,
        "visits": 7,
        "joined": datetime.date(2020, 1, 2),
        "seen": datetime.datetime(2021, 2, 3, 4, 5, 6, tzinfo=datetime.UTC),
        "lasted": -datetime.timedelta(hours=1, minutes=2, seconds=3),
        "born": 1990,
        "doc": '{"k": 1}',
        "kind": "a",
        "spot": "POINT(1 2)",
        "photo": b"\x00\xff",
    }
    assert set(bob.values()) == {2, "Bob", "b", None}


def test_mysql_pushes_columns_filters_and_splits(my: MysqlConnector, my_db: MysqlDatabase) -> None:
    filters = [Filter("region", "=", "north"), Filter("amount", ">=", 1400.0)]
    splits = my.splits(my_db.name, "orders", ["id", "amount"], filters)
    assert len(splits) > 1  # about 1000 rows with split_rows 300
    assert splits[0].detail["query"].startswith("SELECT `id` AS `id`, `amount` AS `amount` FROM")
    assert "`region` = %s" in splits[0].detail["query"]
    table = read_all(my, splits)
    assert table.column_names == ["id", "amount"]
    assert sorted(table.column("id").to_pylist()) == [i for i in range(934, 1001) if i % 3 == 0]


def test_mysql_read_stopped_early_leaves_the_source_usable(
    my: MysqlConnector, my_db: MysqlDatabase
) -> None:
    my_db.execute(
        "CREATE TABLE many (id INT PRIMARY KEY)",
        "INSERT INTO many VALUES " + ", ".join(f"({i})" for i in range(1, 25001)),
    )
    whole = MysqlConnector.from_config("my", {"url": my_db.url}, NO_SECRETS)  # one split
    for _ in range(6):  # more times than the pool keeps connections
        [split] = whole.splits(my_db.name, "many", ["id"])
        batches = whole.read(split)
        assert next(batches).num_rows == 10_000
        batches.close()
    assert rows(whole, my_db.name, "customers", ["id"]) == [{"id": 1}, {"id": 2}]
    whole.close()


def test_mysql_unknown_user_is_source_auth_without_the_password() -> None:
    password = "my-hunter2-secret"
    connector = MysqlConnector.from_config(
        "shop",
        {"url": "mysql://dw_nobody_here@127.0.0.1:3306/test", "password_secret": "MY_PW"},
        MappingSecrets({"MY_PW": password}),
    )
    with pytest.raises(DataSourceError) as caught:
        connector.tables("test")
    assert caught.value.code == "source_auth"
    assert "'shop'" in caught.value.message
    assert "Access denied" in caught.value.message
    assert password not in caught.value.message


def test_mysql_unreachable_names_the_source() -> None:
    connector = MysqlConnector.from_config(
        "shop", {"url": "mysql://root@127.0.0.1:3309/test", "connect_timeout_s": 2}, NO_SECRETS
    )
    with pytest.raises(DataSourceError) as caught:
        connector.tables("test")
    assert caught.value.code == "source_unreachable"
    assert "'shop'" in caught.value.message
    assert "Can't connect" in caught.value.message


def test_mysql_missing_table(my: MysqlConnector, my_db: MysqlDatabase) -> None:
    with pytest.raises(DataSourceError) as caught:
        my.table_info(my_db.name, "nope")
    assert caught.value.code == "table_not_found"


# --- HTTP JSON ------------------------------------------------------------------------------


def _http_config(url: str, **extra: Any) -> dict[str, Any]:
    return {
        "url": url + "/{region}/users",
        "params": {"region": "eu west"},
        "header_secrets": {"authorization": "API_TOKEN"},
        "tables": {
            "users": {
                "rows": "$.data.items[*]",
                "columns": {
                    "id": "int",
                    "name": "string",
                    "joined": "date",
                    "score": "decimal(6,2)",
                    "meta": "json",
                    "city": "string",
                },
                "fields": {"city": "address.city"},
                "comment": "users of the API",
            }
        },
        **extra,
    }


PAYLOAD = {
    "data": {
        "items": [
            {
                "id": 1,
                "name": "Ann",
                "joined": "2020-01-02",
                "score": 9.5,
                "meta": {"a": [1]},
                "address": {"city": "Lyon"},
            },
            {"id": 2, "name": "Bob", "joined": None, "score": "7.25", "meta": None},
        ]
    }
}


def test_http_json_reads_typed_rows_with_a_secret_header_and_caches() -> None:
    secrets = MappingSecrets({"API_TOKEN": "Bearer tok-secret-123"})
    with json_server({"/eu%20west/users": PAYLOAD}) as server:
        connector = HttpJsonConnector.from_config(
            "api", _http_config(server.url), secrets, LOOPBACK_ALLOWED
        )
        info = connector.table_info("main", "users")
        assert info.comment == "users of the API"
        assert types(info)["score"] == pa.decimal128(6, 2)
        columns = ["id", "name", "joined", "score", "meta", "city"]
        assert rows(connector, "main", "users", columns) == [
            {
                "id": 1,
                "name": "Ann",
                "joined": datetime.date(2020, 1, 2),
                "score": decimal.Decimal("9.50"),
                "meta": '{"a": [1]}',
                "city": "Lyon",
            },
            {
                "id": 2,
                "name": "Bob",
                "joined": None,
                "score": decimal.Decimal("7.25"),
                "meta": None,
                "city": None,
            },
        ]
        assert rows(connector, "main", "users", ["name"], Filter("id", ">", 1)) == [{"name": "Bob"}]
        assert server.hits == {"/eu%20west/users": 1}  # the second read came from the cache
        assert server.last_headers["authorization"] == "Bearer tok-secret-123"
        connector.close()


def test_http_json_cache_expires() -> None:
    with json_server({"/eu%20west/users": PAYLOAD}) as server:
        connector = HttpJsonConnector.from_config(
            "api",
            _http_config(server.url, ttl_s=0),
            MappingSecrets({"API_TOKEN": "t0k3n"}),
            LOOPBACK_ALLOWED,
        )
        rows(connector, "main", "users", ["id"])
        rows(connector, "main", "users", ["id"])
        assert server.hits == {"/eu%20west/users": 2}


def test_http_json_errors_never_show_the_secret() -> None:
    token = "Bearer tok-secret-123"
    with json_server({"/eu%20west/users": 401}) as server:
        connector = HttpJsonConnector.from_config(
            "api", _http_config(server.url), MappingSecrets({"API_TOKEN": token}), LOOPBACK_ALLOWED
        )
        with pytest.raises(DataSourceError) as caught:
            rows(connector, "main", "users", ["id"])
        assert caught.value.code == "source_auth"
        assert token not in caught.value.message
        server.routes["/eu%20west/users"] = 404
        connector = HttpJsonConnector.from_config(
            "api", _http_config(server.url), MappingSecrets({"API_TOKEN": token}), LOOPBACK_ALLOWED
        )
        with pytest.raises(DataSourceError) as caught:
            rows(connector, "main", "users", ["id"])
        assert caught.value.code == "table_not_found"
    with pytest.raises(DataSourceError) as caught:
        rows(connector, "main", "users", ["id"])  # the server is gone
    assert caught.value.code == "source_unreachable"
    assert "'api'" in caught.value.message


def test_http_json_unknown_declared_type_is_type_unmapped() -> None:
    config = _http_config("http://127.0.0.1:1")
    config["tables"]["users"]["columns"]["name"] = "varchar2"
    with pytest.raises(DataSourceError) as caught:
        HttpJsonConnector.from_config("api", config, MappingSecrets({"API_TOKEN": "t0k3n"}))
    assert caught.value.code == "type_unmapped"
    assert "api.main.users.name" in caught.value.message
    assert "varchar2" in caught.value.message


# --- the catalog ----------------------------------------------------------------------------


def test_catalog_from_config_resolves_secrets_and_reports_bad_settings(folder: Path) -> None:
    secrets = MappingSecrets({"PG_PASSWORD": "pg-hunter2-secret"})
    config = {
        "files": {"kind": "files", "path": str(folder)},
        "pg": {
            "kind": "postgres",
            "url": "postgresql://postgres@127.0.0.1:5432/test",
            "password_secret": "PG_PASSWORD",
        },
    }
    with Catalog.from_config(config, secrets, paths=TEMPORARY_FOLDERS) as catalog:
        assert catalog.names() == ["files", "pg"]
        assert "pg-hunter2-secret" not in repr(catalog.source("pg"))
        ref = catalog.resolve(["files", "People"])  # unquoted SQL names ignore case
        assert str(ref) == "files.main.people"
        with pytest.raises(DataSourceError) as caught:
            catalog.resolve(["files", "main", "peeple"])
        assert caught.value.code == "table_not_found"
        assert "did you mean people" in caught.value.message
    for bad, words in [
        ({"x": {"kind": "oracle"}}, "kind 'oracle'"),
        ({"x": {"kind": "files"}}, "path: Field required"),
        ({"Bad-Name": {"kind": "files", "path": "."}}, "cannot name a source"),
        ({"x": {"kind": "postgres", "url": "mysql://h/db"}}, "postgresql://"),
    ]:
        with pytest.raises((DataError, ValueError), match=words):
            Catalog.from_config(bad, NO_SECRETS, paths=TEMPORARY_FOLDERS)


def test_catalog_caches_metadata_until_refreshed(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("x\n1\n")
    with Catalog(
        {
            "f": FilesConnector.from_config(
                "f", {"path": str(tmp_path)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
            )
        }
    ) as catalog:
        assert catalog.tables("f", "main") == ["a"]
        (tmp_path / "b.csv").write_text("y\n2\n")
        assert catalog.tables("f", "main") == ["a"]
        # Resolving a table the cached list does not have reads the list again.
        assert str(catalog.resolve(["f", "main", "b"])) == "f.main.b"
        assert catalog.tables("f", "main") == ["a", "b"]
        catalog.refresh()
        assert [str(ref) for ref in catalog.table_refs()] == ["f.main.a", "f.main.b"]


# --- which local paths sources may read -----------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory as a server leaves it: database, key, Qdrant folder, a sources/
    folder with one CSV and a SQLite file."""
    folder = tmp_path / "data"
    (folder / "qdrant" / "collection").mkdir(parents=True)
    (folder / "qdrant" / "collection" / "points.json").write_text('[{"id": 1}]')
    (folder / "secret.key").write_text("x\n")
    with sqlite3.connect(folder / "dagwright.db") as connection:
        connection.execute("CREATE TABLE api_keys (hash TEXT)")
    (folder / "sources").mkdir()
    (folder / "sources" / "ok.csv").write_text("a\n1\n")
    with sqlite3.connect(folder / "sources" / "ok.db") as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
    return folder


def rule_for(data_dir: Path, **options: Any) -> SourcePaths:
    return SourcePaths.for_data_dir(data_dir, **options)


def refused(make: Any) -> SourcePathError:
    with pytest.raises(SourcePathError) as caught:
        make()
    assert caught.value.code == "source_path_forbidden"
    return caught.value


def test_sources_read_only_under_their_roots(data_dir: Path) -> None:
    rule = rule_for(data_dir)
    assert rule.check(data_dir / "sources" / "ok.csv", "s") == (data_dir / "sources" / "ok.csv")
    files = FilesConnector.from_config(
        "f", {"path": str(data_dir / "sources")}, NO_SECRETS, paths=rule
    )
    assert files.tables("main") == ["ok"]
    lite = SqliteConnector("l", data_dir / "sources" / "ok.db", rule)
    assert lite.tables("main") == ["t"]
    for path in (
        data_dir / "dagwright.db",
        data_dir / "secret.key",
        data_dir / "qdrant" / "collection" / "points.json",
        data_dir / "qdrant",
        data_dir,
        data_dir / "sources" / ".." / "secret.key",
        Path("/etc/passwd"),
        Path("/proc/self/environ"),
    ):
        error = refused(lambda path=path: rule.check(path, "s"))
        assert str(path) in error.message
        assert str(data_dir / "sources") in error.message  # the allowed roots are named
        assert error.roots[0] == str((data_dir / "sources").resolve())
    assert "relative" in refused(lambda: rule.check("data/sources/ok.csv", "s")).message
    # Connectors refuse at creation, whatever the kind's settings.
    refused(
        lambda: FilesConnector.from_config("f", {"path": str(data_dir)}, NO_SECRETS, paths=rule)
    )
    refused(lambda: SqliteConnector("l", data_dir / "dagwright.db", rule))
    refused(lambda: SqliteConnector("l", "sources/ok.db", rule))


def test_a_root_holding_the_data_directory_does_not_open_it(data_dir: Path) -> None:
    rule = rule_for(data_dir, roots=[data_dir.parent, data_dir, "/"])
    assert rule.check(data_dir.parent / "elsewhere.csv", "s")
    for path in (data_dir / "secret.key", data_dir / "sources" / "ok.csv", data_dir / "x.csv"):
        refused(lambda path=path: rule.check(path, "s"))
    # A root inside it opens that folder only, and never the internals.
    rule = rule_for(data_dir, roots=[data_dir / "sources", data_dir / "qdrant"])
    assert rule.check(data_dir / "sources" / "ok.csv", "s")
    refused(lambda: rule.check(data_dir / "qdrant" / "collection" / "points.json", "s"))


def test_symlinks_are_resolved_before_the_check(data_dir: Path) -> None:
    rule = rule_for(data_dir)
    sources = data_dir / "sources"
    (sources / "key.csv").symlink_to(data_dir / "secret.key")
    (sources / "passwd.csv").symlink_to("/etc/passwd")
    (sources / "db.db").symlink_to(data_dir / "dagwright.db")
    (sources / "up").symlink_to(data_dir)
    for link in ("key.csv", "passwd.csv", "up/secret.key"):
        error = refused(lambda link=link: rule.check(sources / link, "s"))
        assert "resolves to" in error.message
    refused(lambda: SqliteConnector("l", sources / "db.db", rule))
    refused(
        lambda: FilesConnector.from_config(
            "f", {"path": str(sources / "up")}, NO_SECRETS, paths=rule
        )
    )


def test_a_symlink_planted_in_an_allowed_folder_is_refused_when_read(data_dir: Path) -> None:
    rule = rule_for(data_dir)
    sources = data_dir / "sources"
    files = FilesConnector.from_config("f", {"path": str(sources)}, NO_SECRETS, paths=rule)
    assert files.tables("main") == ["ok"]
    # Planted after the source was added: a file, and a file deep in a folder table.
    (sources / "stolen.csv").symlink_to(data_dir / "secret.key")
    (sources / "nested").mkdir()
    (sources / "nested" / "part1.csv").write_text("a\n1\n")
    (sources / "nested" / "part2.csv").symlink_to(data_dir / "dagwright.db")
    assert "stolen" in files.tables("main")  # listed, so the refusal is explained...
    for table in ("stolen", "nested"):
        error = refused(lambda table=table: files.table_info("main", table))  # ...never read
        assert "resolves to" in error.message
        refused(lambda table=table: files.splits("main", table, ["a"]))
    assert read_all(files, files.splits("main", "ok", ["a"])).to_pylist() == [{"a": 1}]
    # A split made while the file was fine is checked again when it is read.
    splits = files.splits("main", "ok", ["a"])
    (sources / "ok.csv").unlink()
    (sources / "ok.csv").symlink_to(data_dir / "secret.key")
    refused(lambda: read_all(files, splits))


def test_a_sqlite_file_swapped_for_a_symlink_is_refused(data_dir: Path) -> None:
    rule = rule_for(data_dir)
    lite = SqliteConnector("l", data_dir / "sources" / "ok.db", rule)
    assert lite.tables("main") == ["t"]
    (data_dir / "sources" / "ok.db").unlink()
    (data_dir / "sources" / "ok.db").symlink_to(data_dir / "dagwright.db")
    refused(lambda: lite.tables("main"))


def _rule_of(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> SourcePaths:
    """The rule a process whose environment is `env` gives its sources (through its
    settings and the composition root)."""
    for name in ("DAGWRIGHT_SOURCE_ROOTS", "DAGWRIGHT_DATABASE_URL", "DAGWRIGHT_SETTINGS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Composition(load_settings()).source_paths()


def test_the_environment_names_the_roots(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "lake"
    other.mkdir()
    (tmp_path / "dagwright.toml").write_text("")
    env = {"DAGWRIGHT_DATA_DIR": str(data_dir), "DAGWRIGHT_SOURCE_ROOTS": f"{other}:/srv/none"}
    rule = _rule_of(env, monkeypatch)
    assert rule.check(other / "x.csv", "s")
    refused(lambda: rule.check(data_dir / "sources" / "ok.csv", "s"))  # replaced by the env
    assert rule.check(data_dir / "demo" / "figure1.sqlite", "s")  # the demo's, always
    # Defaults: <data dir>/sources and <data dir>/billing; the server's own SQLite database
    # named by DAGWRIGHT_DATABASE_URL and the settings file are never readable.
    elsewhere = tmp_path / "elsewhere"
    env = {
        "DAGWRIGHT_DATA_DIR": str(data_dir),
        "DAGWRIGHT_SOURCE_ROOTS": str(tmp_path),
        "DAGWRIGHT_DATABASE_URL": f"sqlite:///{elsewhere}/server.db",
        "DAGWRIGHT_SETTINGS": str(tmp_path / "dagwright.toml"),
    }
    rule = _rule_of(env, monkeypatch)
    assert rule.check(tmp_path / "lake" / "x.csv", "s")
    for path in ("server.db", "server.db-wal"):
        refused(lambda path=path: rule.check(elsewhere / path, "s"))
    refused(lambda: rule.check(tmp_path / "dagwright.toml", "s"))
    default = _rule_of({"DAGWRIGHT_DATA_DIR": str(data_dir)}, monkeypatch)
    assert default.check(data_dir / "billing" / "events.parquet", "s")
    refused(lambda: default.check(other / "x.csv", "s"))


def test_create_connector_checks_paths_and_the_catalog_can_defer(data_dir: Path) -> None:
    rule = rule_for(data_dir)
    settings = {"kind": "files", "path": str(data_dir / "secret.key")}
    refused(lambda: create_connector("k", settings, NO_SECRETS, paths=rule))
    config = {"k": settings, "ok": {"kind": "files", "path": str(data_dir / "sources")}}
    refused(lambda: Catalog.from_config(config, NO_SECRETS, paths=rule))
    with Catalog.from_config(config, NO_SECRETS, paths=rule, defer_path_refusals=True) as catalog:
        assert isinstance(catalog.source("k"), RefusedSource)
        assert catalog.tables("ok", "main") == ["ok"]  # the other source goes on working
        error = refused(lambda: catalog.tables("k", "main"))
        assert error.source == "k"
        assert str(data_dir / "secret.key") in error.message
