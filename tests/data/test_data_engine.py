"""The federated query engine over real sources: a join across PostgreSQL, MariaDB and a
Parquet file with known answers; what is fetched (columns, pushed filters, rows) observed at
the connector interface; row limits, time limits, memory limits and the errors a query can
meet."""

from __future__ import annotations

import datetime
import decimal
import math
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.connectors import (
    FilesConnector,
    HttpJsonConnector,
    MemoryConnector,
    MysqlConnector,
    PostgresConnector,
)
from dagwright.data.engine import QueryEngine
from dagwright.data.limits import QueryLimits, parse_size
from dagwright.egress import EgressPolicy
from dagwright.errors import DataSourceError, QueryError, SqlRefusedError
from dagwright.secrets import MappingSecrets
from support.data_sources import (
    MysqlDatabase,
    PostgresSchema,
    RecordingConnector,
    json_server,
    mysql_database,
    postgres_schema,
)
from support.source_paths import TEMPORARY_FOLDERS

NO_SECRETS = MappingSecrets({})
# The JSON test servers listen on loopback, which the egress policy refuses by default
# (tests/security/test_egress.py): allowed explicitly, as an operator would.
LOOPBACK_ALLOWED = EgressPolicy.from_text("127.0.0.1")
BIG_ROWS = 500_000


@pytest.fixture(scope="module")
def pg_schema() -> Iterator[PostgresSchema]:
    with postgres_schema() as schema:
        columns = ", ".join(f"c{k:02d} int" for k in range(1, 20))
        values = ", ".join(f"g * {k}" for k in range(1, 20))
        schema.execute(
            "CREATE TABLE {schema}.customers (id int PRIMARY KEY, name text, region text)",
            """INSERT INTO {schema}.customers VALUES (1, 'Ann', 'north'), (2, 'Bob', 'south'),
                   (3, 'Cid', 'north'), (4, 'Dee', 'east')""",
            f"CREATE TABLE {{schema}}.wide (id int PRIMARY KEY, {columns})",
            f"INSERT INTO {{schema}}.wide SELECT g, {values} FROM generate_series(1, 1000) g",
            'CREATE TABLE {schema}."Accounts" ("AccountID" int, "Owner Name" text)',
            """INSERT INTO {schema}."Accounts" VALUES (1, 'Ann'), (2, 'Bob')""",
        )
        yield schema


@pytest.fixture(scope="module")
def my_db() -> Iterator[MysqlDatabase]:
    with mysql_database() as database:
        database.execute(
            "CREATE TABLE orders (id INT PRIMARY KEY, customer_id INT, product_id INT, qty INT)",
            """INSERT INTO orders VALUES
                   (1, 1, 10, 2), (2, 1, 11, 1), (3, 2, 10, 5), (4, 3, 12, 1), (5, 3, 10, 1),
                   (6, 4, 11, 3)""",
        )
        yield database


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lake")
    products = pa.table(
        {"id": [10, 11, 12], "title": ["pen", "book", "lamp"], "price": [1.5, 12.0, 30.0]}
    )
    pq.write_table(products, root / "products.parquet")
    return root


@pytest.fixture(scope="module")
def sources(
    pg_schema: PostgresSchema, my_db: MysqlDatabase, folder: Path
) -> dict[str, RecordingConnector]:
    memory = MemoryConnector(
        "mem",
        {
            "big": pa.table({"n": pa.array(range(BIG_ROWS), pa.int64())}),
            "misc": {
                "d": [datetime.date(2024, 1, 2), None],
                "m": [decimal.Decimal("1.25"), None],
                "f": [math.nan, 1.5],
                "b": [b"\xff\x00", b"ok"],
            },
            "scores": {"name": ["a", "b", "c"], "score": [1.0, math.nan, 3.0]},
        },
    )
    connectors = [
        PostgresConnector.from_config(
            "pg", {"url": pg_schema.url, "schemas": [pg_schema.name]}, NO_SECRETS
        ),
        MysqlConnector.from_config("my", {"url": my_db.url}, NO_SECRETS),
        FilesConnector.from_config(
            "files", {"path": str(folder)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
        ),
        memory,
    ]
    return {connector.source: RecordingConnector(connector) for connector in connectors}


@pytest.fixture
def engine(sources: dict[str, RecordingConnector]) -> Iterator[QueryEngine]:
    for recorder in sources.values():
        recorder.splits_asked.clear()
        recorder.batches.clear()
    catalog = Catalog(sources)
    engine = QueryEngine(catalog, QueryLimits(timeout_s=20))
    yield engine
    engine.close()


def test_one_query_joins_postgres_mariadb_and_parquet(
    engine: QueryEngine, pg_schema: PostgresSchema, my_db: MysqlDatabase
) -> None:
    result = engine.query(
        f"""
        SELECT c.region, sum(o.qty * p.price) AS revenue, count(*) AS lines
        FROM pg.{pg_schema.name}.customers c
        JOIN my.{my_db.name}.orders o ON o.customer_id = c.id
        JOIN files.products p ON p.id = o.product_id
        WHERE p.price < 20
        GROUP BY c.region
        ORDER BY revenue DESC
        """
    )
    assert result.records() == [
        {"region": "east", "revenue": 36.0, "lines": 1},
        {"region": "north", "revenue": 16.5, "lines": 3},
        {"region": "south", "revenue": 7.5, "lines": 1},
    ]
    assert [(column.name, column.type) for column in result.columns] == [
        ("region", "VARCHAR"),
        ("revenue", "DOUBLE"),
        ("lines", "BIGINT"),
    ]
    assert result.truncated is False
    reads = {read.source: read for read in result.reads}
    assert reads["pg"].columns == ("id", "region")
    assert reads["my"].columns == ("customer_id", "product_id", "qty")
    assert reads["files"].columns == ("id", "price")
    assert reads["files"].filters == ("price < 20.0",)
    assert reads["files"].rows == 2
    assert "_dw" in result.executed_sql
    assert "pg." not in result.executed_sql


def test_only_the_needed_columns_and_rows_are_fetched(
    engine: QueryEngine, sources: dict[str, RecordingConnector], pg_schema: PostgresSchema
) -> None:
    result = engine.query(
        f"SELECT c01 FROM pg.{pg_schema.name}.wide WHERE (c02 BETWEEN 1990 AND 5000) AND true"
    )
    assert result.table.column("c01").to_pylist() == [995, 996, 997, 998, 999, 1000]
    [read] = result.reads
    assert read.columns == ("c01", "c02")
    assert read.filters == ("c02 <= 5000", "c02 >= 1990")
    assert read.rows == 6
    pg = sources["pg"]
    assert pg.columns_read() == {("c01", "c02")}  # 2 of the table's 20 columns crossed
    assert pg.rows_read() == 6  # the filter ran in PostgreSQL


def test_names_match_ignoring_case_as_duckdb_does(
    engine: QueryEngine, pg_schema: PostgresSchema
) -> None:
    result = engine.query(
        f'SELECT accounts."owner name" FROM pg.{pg_schema.name}.accounts WHERE accountid = 2'
    )
    assert result.table.column(0).to_pylist() == ["Bob"]
    [read] = result.reads
    assert (read.table, read.columns, read.filters) == (
        "Accounts",
        ("AccountID", "Owner Name"),
        ("AccountID = 2",),
    )


def test_filters_on_the_null_side_of_an_outer_join_stay_in_duckdb(
    engine: QueryEngine, pg_schema: PostgresSchema, my_db: MysqlDatabase
) -> None:
    result = engine.query(
        f"""
        SELECT c.name FROM pg.{pg_schema.name}.customers c
        LEFT JOIN my.{my_db.name}.orders o ON o.customer_id = c.id AND o.qty > 4
        WHERE o.id IS NULL AND c.region = 'north'
        ORDER BY c.name
        """
    )
    assert result.table.column("name").to_pylist() == ["Ann", "Cid"]
    reads = {read.source: read for read in result.reads}
    assert reads["pg"].filters == ("region = 'north'",)
    assert reads["my"].filters == ()  # pushing "id IS NULL" there would change the answer


def test_a_table_read_twice_is_read_once_whole_and_answers_right(
    engine: QueryEngine, sources: dict[str, RecordingConnector], pg_schema: PostgresSchema
) -> None:
    result = engine.query(
        f"""
        WITH people AS (SELECT * FROM pg.{pg_schema.name}.customers WHERE region <> 'east')
        SELECT a.name, b.name AS other FROM people a JOIN people b
            ON a.region = b.region AND a.id < b.id
        """
    )
    assert result.records() == [{"name": "Ann", "other": "Cid"}]
    assert len(sources["pg"].splits_asked) == 1


def test_a_satisfied_limit_stops_reading_the_source(
    engine: QueryEngine, sources: dict[str, RecordingConnector]
) -> None:
    result = engine.query("SELECT n FROM mem.big LIMIT 3")
    assert result.table.num_rows == 3
    assert sources["mem"].rows_read() < BIG_ROWS


def test_row_limit_marks_the_result_truncated(engine: QueryEngine) -> None:
    result = engine.query("SELECT n FROM mem.big WHERE n < 100 ORDER BY n DESC", max_rows=10)
    assert result.truncated is True
    assert result.row_limit == 10
    assert result.table.column("n").to_pylist() == list(range(99, 89, -1))
    assert result.executed_sql.endswith("LIMIT 11")
    exact = engine.query("SELECT * FROM range(10)", max_rows=10)
    assert (exact.truncated, exact.table.num_rows) == (False, 10)
    # The query's own smaller LIMIT is kept; a non-numeric one is wrapped.
    assert engine.query("SELECT * FROM range(100) LIMIT 4", max_rows=10).table.num_rows == 4
    wrapped = engine.query("SELECT * FROM range(100) LIMIT (SELECT 50)", max_rows=10)
    assert wrapped.truncated is True
    assert "_dw_result" in wrapped.executed_sql
    percent = engine.query("SELECT * FROM range(1000) LIMIT 1 PERCENT", max_rows=20)
    assert (percent.truncated, percent.table.num_rows) == (False, 10)


def test_time_limit_interrupts_duckdb(engine: QueryEngine) -> None:
    started = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.query(
            "SELECT count(*) FROM range(100000000) a, range(100000) b WHERE a.range + b.range = 3",
            timeout_s=0.5,
        )
    assert caught.value.code == "query_timeout"
    assert time.monotonic() - started < 5


def test_time_limit_covers_a_slow_source() -> None:
    config = {"url": "", "tables": {"slow": {"columns": {"x": "int"}}}}
    with json_server({"/slow": [{"x": 1}]}, delay_s=3) as server:
        config["url"] = server.url + "/slow"
        catalog = Catalog(
            {"api": HttpJsonConnector.from_config("api", config, NO_SECRETS, LOOPBACK_ALLOWED)}
        )
        engine = QueryEngine(catalog)
        started = time.monotonic()
        with pytest.raises(QueryError) as caught:
            engine.query("SELECT x FROM api.slow", timeout_s=0.5)
        assert caught.value.code == "query_timeout"
        assert "api.main.slow" in caught.value.message
        assert time.monotonic() - started < 2
        engine.close()


def test_memory_limit_is_query_memory() -> None:
    engine = QueryEngine(Catalog(), QueryLimits(memory_limit="64MB", threads=1))
    with pytest.raises(QueryError) as caught:
        engine.query("SELECT list(range) FROM range(100000000)")
    assert caught.value.code == "query_memory"
    engine.close()


# A call DuckDB does not interrupt: edit distance between two 32,000-character strings (~2 s).
UNINTERRUPTIBLE = (
    "WITH s AS (SELECT string_agg(md5(x::VARCHAR), '') AS s FROM range(1000) t(x))"
    " SELECT levenshtein(s, s) FROM s"
)


def test_a_call_duckdb_does_not_interrupt_is_answered_on_time_and_counted() -> None:
    engine = QueryEngine(Catalog(), QueryLimits(max_overruns=1, grace_s=0.2))
    started = time.monotonic()
    with pytest.raises(QueryError) as caught:
        engine.query(UNINTERRUPTIBLE, timeout_s=0.5)
    assert caught.value.code == "query_timeout"
    assert time.monotonic() - started < 1.2  # the deadline plus the grace, not DuckDB's ~2 s
    assert engine._overruns == 1
    with pytest.raises(QueryError) as busy:  # overruns cannot pile up
        engine.query("SELECT 1")
    assert busy.value.code == "query_busy"
    deadline = time.monotonic() + 60
    while engine._overruns and time.monotonic() < deadline:
        time.sleep(0.1)
    assert engine._overruns == 0  # it ended on its own and cleaned up after itself
    assert engine.query("SELECT 1 AS one").records() == [{"one": 1}]
    engine.close()


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads /proc (Linux)")
def test_the_memory_watchdog_stops_a_query_that_grows_the_process() -> None:
    # DuckDB alone would let this grow to its 2 GB limit; the watchdog stops it at 200 MB.
    engine = QueryEngine(Catalog(), QueryLimits(memory_limit="2GB", max_memory_growth="200MB"))
    before, peak = rss(), [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        with pytest.raises(QueryError) as caught:
            engine.query("SELECT length(list(x)) FROM range(1000000000) t(x)", timeout_s=30)
    finally:
        stop.set()
        sampler.join()
    assert caught.value.code == "query_memory"
    assert "the process grew by" in caught.value.message
    assert peak[0] - before < 600 * 2**20, f"grew {(peak[0] - before) / 2**20:.0f} MiB"
    engine.close()


def test_the_result_is_bounded_in_bytes() -> None:
    engine = QueryEngine(Catalog(), QueryLimits(max_result_bytes=2**20))
    with pytest.raises(QueryError) as caught:
        engine.query("SELECT md5(x::VARCHAR) AS h FROM range(1000000) t(x)", max_rows=1_000_000)
    assert caught.value.code == "query_result_too_large"
    assert len(engine.query("SELECT x FROM range(1000) t(x)").table) == 1000
    engine.close()


def test_duckdb_spills_only_where_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # DuckDB's own default would be ./.tmp
    sql = "SELECT count(*) AS n FROM (SELECT x FROM range(3000000) t(x) ORDER BY md5(x::VARCHAR))"
    engine = QueryEngine(Catalog(), QueryLimits(memory_limit="60MB", threads=1))
    with pytest.raises(QueryError) as caught:
        engine.query(sql, timeout_s=60)
    assert caught.value.code == "query_memory"
    assert list(tmp_path.iterdir()) == []  # nothing written where the server runs
    engine.close()
    spill = tmp_path / "spill"
    spill.mkdir()
    limits = QueryLimits(
        memory_limit="60MB", threads=1, temp_directory=str(spill), max_temp_directory_size="1GB"
    )
    engine = QueryEngine(Catalog(), limits)
    assert engine.query(sql, timeout_s=120).records() == [{"n": 3_000_000}]
    engine.close()
    assert [path.name for path in tmp_path.iterdir()] == ["spill"]


def test_sizes_read_as_duckdb_writes_them() -> None:
    assert parse_size("2GB") == 2 * 10**9
    assert parse_size("512MiB") == 512 * 2**20
    assert parse_size("1.5 GB") == 1_500_000_000
    assert parse_size("1000") == 1000
    assert QueryLimits(memory_limit="2GB").memory_growth_bytes() == 2_500_000_000
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_errors_name_catalog_tables_not_registered_ones(
    engine: QueryEngine, pg_schema: PostgresSchema
) -> None:
    with pytest.raises(QueryError) as caught:
        engine.query(f"SELECT nope FROM pg.{pg_schema.name}.customers")
    assert caught.value.code == "query_failed"
    assert "nope" in caught.value.message
    assert "_dw" not in caught.value.message


def test_unknown_sources_are_refused_and_unknown_tables_not_found(
    engine: QueryEngine, pg_schema: PostgresSchema
) -> None:
    with pytest.raises(SqlRefusedError) as refused:
        engine.query("SELECT * FROM nowhere.public.t")
    assert "not in the catalog" in refused.value.message
    with pytest.raises(DataSourceError) as caught:
        engine.query(f"SELECT * FROM pg.{pg_schema.name}.customer")
    assert caught.value.code == "table_not_found"
    assert "did you mean customers" in caught.value.message


def test_a_table_dropped_after_registration_is_table_not_found(pg_schema: PostgresSchema) -> None:
    pg_schema.execute(
        "CREATE TABLE {schema}.doomed (id int)", "INSERT INTO {schema}.doomed VALUES (1)"
    )
    catalog = Catalog(
        {
            "pg": PostgresConnector.from_config(
                "pg", {"url": pg_schema.url, "schemas": [pg_schema.name]}, NO_SECRETS
            )
        }
    )
    engine = QueryEngine(catalog)
    sql = f"SELECT count(*) AS n FROM pg.{pg_schema.name}.doomed"
    assert engine.query(sql).records() == [{"n": 1}]
    pg_schema.execute("DROP TABLE {schema}.doomed")
    with pytest.raises(DataSourceError) as caught:  # metadata still cached: the read fails
        engine.query(sql)
    assert caught.value.code == "table_not_found"
    assert caught.value.source == "pg"
    catalog.refresh()
    with pytest.raises(DataSourceError) as caught:  # metadata read again: not listed
        engine.query(sql)
    assert caught.value.code == "table_not_found"
    engine.close()


def test_an_unreachable_source_fails_the_query_naming_it() -> None:
    secret = "pg-hunter2-secret"
    connector = PostgresConnector.from_config(
        "remote",
        {"url": "postgresql://postgres@127.0.0.1:5439/test", "password_secret": "PW"},
        MappingSecrets({"PW": secret}),
    )
    engine = QueryEngine(Catalog({"remote": connector}))
    with pytest.raises(DataSourceError) as caught:
        engine.query("SELECT * FROM remote.public.t")
    assert caught.value.code == "source_unreachable"
    assert "'remote'" in caught.value.message
    assert secret not in caught.value.message
    engine.close()


def test_tables_table_info_and_sample(engine: QueryEngine, pg_schema: PostgresSchema) -> None:
    names = [str(ref) for ref in engine.tables()]
    assert f"pg.{pg_schema.name}.customers" in names
    assert "files.main.products" in names
    assert "mem.main.big" in names
    assert engine.table_info("files.products").column("price").type == pa.float64()
    assert engine.table_info(f"pg.{pg_schema.name}.customers").primary_key == ("id",)
    sample = engine.sample(f"pg.{pg_schema.name}.customers", n=2, columns=["NAME"])
    assert sample.records() == [{"name": "Ann"}, {"name": "Bob"}]
    assert sample.truncated is False
    assert engine.table_info("pg.customers").name == "customers"  # pg exposes one schema
    for wrong in ("pg.nope", "a.b.c.d", "nowhere.t"):
        with pytest.raises(DataSourceError):
            engine.table_info(wrong)
    with pytest.raises(QueryError):
        engine.sample("files.products", columns=["colour"])


def test_records_are_json_ready(engine: QueryEngine) -> None:
    result = engine.query("SELECT d, m, f, b FROM mem.misc")
    assert result.records() == [
        {"d": "2024-01-02", "m": 1.25, "f": "nan", "b": "/wA="},
        {"d": None, "m": None, "f": 1.5, "b": "ok"},
    ]
    assert [column.type for column in result.columns] == ["DATE", "DECIMAL(3,2)", "DOUBLE", "BLOB"]
    extra = engine.query(
        "SELECT INTERVAL 1 DAY + INTERVAL 90 MINUTE AS i, 1 AS x, 2 AS x, [DATE '2024-01-02'] AS l"
    )
    assert extra.records() == [
        {"i": {"months": 0, "days": 1, "seconds": 5400.0}, "x": 1, "x_2": 2, "l": ["2024-01-02"]}
    ]


def test_float_ranges_keep_duckdb_nan_semantics(engine: QueryEngine) -> None:
    # DuckDB orders NaN above every number; Arrow would drop it, so this stays in DuckDB.
    result = engine.query("SELECT name FROM mem.scores WHERE score > 2 ORDER BY name")
    assert result.table.column("name").to_pylist() == ["b", "c"]
    assert result.reads[0].filters == ()


def test_concurrent_queries(engine: QueryEngine, pg_schema: PostgresSchema) -> None:
    answers: list[object] = []

    def ask(index: int) -> None:
        result = engine.query(
            f"SELECT count(*) AS n FROM pg.{pg_schema.name}.wide WHERE id <= {index}"
        )
        answers.append((index, result.records()[0]["n"]))

    threads = [threading.Thread(target=ask, args=(index,)) for index in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [(index, index) for index in range(1, 9)]  # type: ignore[type-var]
