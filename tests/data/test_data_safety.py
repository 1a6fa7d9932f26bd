"""The read-only rule: a catalogue of hostile statements, each refused with ``sql_refused``
and each shown not to have run (no file written, no source changed, nothing created or
changed in DuckDB); a catalogue of SQL bombs (too big, too deep, built to blow up the parser,
the planner or memory), each refused with its code before it costs anything; legitimate
queries of every common shape pass and answer right; and DuckDB's own settings refuse what
would slip past the check."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.connectors import MemoryConnector, SqliteConnector
from dagwright.data.engine import QueryEngine
from dagwright.data.safety import MAX_SQL_BYTES, MAX_SQL_DEPTH, check_sql
from dagwright.errors import SqlRefusedError
from support.source_paths import TEMPORARY_FOLDERS

HOSTILE = [
    # More than one statement, however hidden.
    "SELECT 1; DROP TABLE mem.main.t",
    "SELECT * FROM mem.main.t -- a comment\n; DELETE FROM lite.main.items",
    "SELECT 1 /* a comment */; INSERT INTO lite.main.items VALUES (9, 9.0)",
    "SELECT 1 FROM mem.main.t;\n\n;ATTACH '{tmp}/evil.db' AS evil",
    # Statements that write or change state.
    "INSERT INTO lite.main.items VALUES (9, 9.0)",
    "UPDATE lite.main.items SET price = 0",
    "DELETE FROM lite.main.items",
    "MERGE INTO lite.main.items AS i USING mem.main.t AS t ON i.id = t.id WHEN MATCHED THEN DELETE",
    "CREATE TABLE evil (a INT)",
    "CREATE TEMP TABLE evil AS SELECT 1 AS a",
    "CREATE VIEW evil AS SELECT 1 AS a",
    "CREATE MACRO evil(a) AS a",
    "CREATE SECRET evil (TYPE s3, KEY_ID 'k', SECRET 's')",
    "DROP TABLE lite.main.items",
    "ALTER TABLE lite.main.items ADD COLUMN b INT",
    "TRUNCATE lite.main.items",
    "COPY (SELECT 1) TO '{tmp}/out.csv'",
    "COPY lite.main.items TO '{tmp}/out.parquet' (FORMAT parquet)",
    "ATTACH '{tmp}/evil.db' AS evil",
    "DETACH DATABASE lite",
    "INSTALL httpfs",
    "LOAD httpfs",
    "PRAGMA enable_profiling",
    "SET threads = 64",
    "SET VARIABLE x = 1",
    "RESET memory_limit",
    "CALL pragma_version()",
    "EXPORT DATABASE '{tmp}/export'",
    "IMPORT DATABASE '{tmp}/export'",
    "SELECT * INTO evil FROM mem.main.t",
    "WITH gone AS (DELETE FROM lite.main.items RETURNING *) SELECT * FROM gone",
    "VACUUM",
    "CHECKPOINT",
    "BEGIN TRANSACTION",
    "USE lite",
    "PREPARE p AS SELECT 1",
    "EXPLAIN ANALYZE SELECT 1",
    "DESCRIBE mem.main.t",
    "SHOW TABLES",
    "SUMMARIZE mem.main.t",
    # Reading files, URLs, other databases, settings or the environment.
    "SELECT * FROM read_csv('/etc/passwd')",
    "FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM read_parquet('{tmp}/x.parquet')",
    "SELECT * FROM read_json_auto('/etc/hostname')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM glob('/etc/*')",
    "SELECT * FROM parquet_scan('{tmp}/x.parquet')",
    "SELECT * FROM sqlite_scan('{tmp}/lite.db', 'items')",
    "SELECT * FROM postgres_scan('host=127.0.0.1 user=postgres dbname=test', 'public', 't')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM 'data.csv'",
    "SELECT * FROM mem.main.t WHERE id IN (SELECT * FROM read_csv('/etc/passwd'))",
    "SELECT * FROM mem.main.t, LATERAL (SELECT * FROM glob('/etc/*'))",
    "(SELECT 1) UNION (SELECT * FROM read_csv('/etc/passwd'))",
    "SELECT getenv('HOME')",
    "SELECT current_setting('memory_limit')",
    "SELECT getvariable('x')",
    "SELECT * FROM duckdb_settings()",
    "SELECT * FROM duckdb_tables()",
    "SELECT * FROM pragma_database_list()",
    # What DuckDB itself would let through (it runs them): refused by the check.
    "ATTACH ':memory:' AS scratch",
    "SELECT * FROM query_table('mem.main.t')",
    "PRAGMA database_list",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "SELECT * FROM parquet_metadata('{tmp}/x.parquet')",
    "COPY lite.main.items FROM '/etc/passwd'",
    "LOAD '{tmp}/evil.duckdb_extension'",
    "FROM 'https://example.com/data.csv'",
    "SELECT * FROM read_csv('http://127.0.0.1:1/x.csv')",
    "SELECT which_secret('s3://bucket/x', 's3')",
    # Tables outside the catalog: system catalogs, bare names, the registered names.
    "SELECT * FROM information_schema.tables",
    "SELECT * FROM pg_catalog.pg_class",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM t",
    "SELECT * FROM _dw_1",
    "SELECT * FROM nowhere.main.t",
]

LEGITIMATE: list[tuple[str, list[tuple[Any, ...]]]] = [
    ("SELECT id, name FROM mem.main.t ORDER BY id", [(1, "a"), (2, "b"), (3, "c")]),
    ("FROM mem.t SELECT name WHERE id = 2", [("b",)]),
    ("WITH x AS (SELECT id FROM mem.t WHERE id > 1) SELECT count(*) FROM x", [(2,)]),
    (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 4)"
        " SELECT sum(n) FROM r",
        [(10,)],
    ),
    (
        "SELECT id, row_number() OVER (ORDER BY id DESC) AS r FROM mem.t ORDER BY id",
        [(1, 3), (2, 2), (3, 1)],
    ),
    (
        "SELECT name, sum(price) OVER (PARTITION BY t.id > 1) AS s FROM mem.t"
        " JOIN lite.items i ON i.id = t.id ORDER BY name",
        [("a", 1.5), ("b", 6.0), ("c", 6.0)],
    ),
    (
        "SELECT t.name, i.price FROM mem.t JOIN lite.items i USING (id) ORDER BY 1",
        [("a", 1.5), ("b", 2.5), ("c", 3.5)],
    ),
    (
        "SELECT name FROM mem.t WHERE id IN (SELECT id FROM lite.items WHERE price > 2)"
        " ORDER BY name",
        [("b",), ("c",)],
    ),
    (
        "SELECT name FROM mem.t WHERE EXISTS (SELECT 1 FROM lite.items i WHERE i.id = t.id"
        " AND i.price < 3) ORDER BY name",
        [("a",), ("b",)],
    ),
    ("SELECT (SELECT max(price) FROM lite.items) AS top", [(3.5,)]),
    ("SELECT id FROM mem.t UNION SELECT id + 10 FROM lite.items ORDER BY id DESC LIMIT 2", None),
    ("SELECT id FROM mem.t INTERSECT SELECT id FROM lite.items ORDER BY id", [(1,), (2,), (3,)]),
    ("SELECT id FROM mem.t EXCEPT SELECT id FROM lite.items WHERE price > 2", None),
    ("SELECT name, count(*) FROM mem.t GROUP BY ALL HAVING count(*) = 1 ORDER BY 1 LIMIT 1", None),
    ("SELECT * EXCLUDE (name) FROM mem.t ORDER BY id OFFSET 2", [(3,)]),
    ("SELECT name FROM mem.t QUALIFY row_number() OVER (ORDER BY id DESC) = 1", [("c",)]),
    ("SELECT count(*) FILTER (WHERE id > 1) FROM mem.t", [(2,)]),
    ("SELECT CASE WHEN id = 1 THEN 'one' ELSE upper(name) END FROM mem.t ORDER BY id", None),
    ("SELECT sum(range) FROM range(5)", [(10,)]),
    ("SELECT * FROM generate_series(1, 3)", [(1,), (2,), (3,)]),
    ("SELECT unnest([1, 2]) AS u", [(1,), (2,)]),
    ("SELECT list_transform([1, 2], x -> x * 2) AS l", [([2, 4],)]),
    ("SELECT date_trunc('month', DATE '2024-05-17') AS m", None),
    ("SELECT 'a;b' AS s -- a trailing comment", [("a;b",)]),
    ("/* a leading comment */ SELECT 'DROP TABLE x' AS s;", [("DROP TABLE x",)]),
    ("SELECT regexp_matches(name, '^[ab]$') FROM mem.t ORDER BY id", [(True,), (True,), (False,)]),
]


@dataclass
class Sandbox:
    engine: QueryEngine
    folder: Path
    database: Path

    def fingerprint(self) -> dict[str, Any]:
        """Everything a hostile statement could have changed."""
        cursor = self.engine._connection.cursor()  # white-box: DuckDB's own catalogue
        try:
            duck = {
                name: cursor.execute(sql).fetchall()
                for name, sql in {
                    "tables": "SELECT count(*) FROM duckdb_tables()",
                    "views": "SELECT count(*) FROM duckdb_views() WHERE NOT internal",
                    "macros": "SELECT count(*) FROM duckdb_functions() WHERE NOT internal",
                    "databases": "SELECT database_name FROM duckdb_databases() ORDER BY 1",
                    "settings": "SELECT current_setting('threads'), current_setting('memory_limit')"
                    ", current_setting('enable_external_access')",
                }.items()
            }
        finally:
            cursor.close()
        rows = self.engine.query("SELECT * FROM mem.t ORDER BY id").records()
        return {
            "files": sorted(path.name for path in self.folder.rglob("*")),
            "sqlite": hashlib.sha256(self.database.read_bytes()).hexdigest(),
            "memory": rows,
            "duckdb": duck,
        }


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    folder = tmp_path_factory.mktemp("hostile")
    database = folder / "lite.db"
    with sqlite3.connect(database) as connection:
        connection.executescript(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, price REAL);"
            "INSERT INTO items VALUES (1, 1.5), (2, 2.5), (3, 3.5);"
        )
    catalog = Catalog(
        {
            "mem": MemoryConnector("mem", {"t": {"id": [1, 2, 3], "name": ["a", "b", "c"]}}),
            "lite": SqliteConnector("lite", database, TEMPORARY_FOLDERS),
        }
    )
    engine = QueryEngine(catalog)
    yield Sandbox(engine, folder, database)
    engine.close()


# SQL built to cost: each refused with its code before the parser, the planner or DuckDB can
# spend seconds or gigabytes on it.
BOMBS: list[tuple[str, str]] = [
    ("SELECT 1 + " + "+".join(["1"] * (MAX_SQL_BYTES // 2)), "sql_too_large"),
    ("SELECT '" + "x" * 1_500_000 + "'", "sql_too_large"),
    ("SELECT " + "(" * 5000 + "1" + ")" * 5000, "sql_too_deep"),
    ("SELECT " + "(" * (MAX_SQL_DEPTH + 1) + "1" + ")" * (MAX_SQL_DEPTH + 1), "sql_too_deep"),
    ("SELECT * FROM " + "(SELECT * FROM " * 5000 + "mem.t" + ") x" * 5000, "sql_too_large"),
    ("SELECT * FROM " + "(SELECT * FROM " * 40 + "mem.t" + ") x" * 40, "sql_too_deep"),
    ("SELECT " + "[" * 40 + "1" + "]" * 40, "sql_too_deep"),
    ("SELECT " + "CASE WHEN true THEN " * 40 + "1" + " END" * 40, "sql_too_deep"),
    # No brackets, still recursive in the parser: chains of unary operators.
    ("SELECT " + "NOT " * 3000 + "true", "sql_too_deep"),
    ("SELECT " + "- " * 3000 + "1", "sql_too_deep"),
    # Quadratic in sqlglot's planner: many SELECTs, tables or select items.
    (" UNION ALL ".join(["SELECT 1"] * 100), "sql_too_large"),
    ("SELECT 1 FROM " + ", ".join(f"mem.t t{i}" for i in range(80)), "sql_too_large"),
    ("SELECT " + ",".join(["id"] * 3000) + " FROM mem.t", "sql_too_large"),
    # Worse than quadratic in DuckDB's optimizer, which no interruption stops.
    ("SELECT " + "+".join(["id"] * 900) + " FROM mem.t", "sql_too_deep"),
    ("SELECT " + "list_transform([1], x -> " * 20 + "x" + ")" * 20, "sql_refused"),
    (
        "WITH c0 AS (SELECT id AS x FROM mem.t), "
        + ", ".join(f"c{i} AS (SELECT a.x FROM c{i - 1} a, c{i - 1} b)" for i in range(1, 20))
        + " SELECT count(*) FROM c19",
        "sql_refused",
    ),
    # Values built far larger than their input, in one call DuckDB neither interrupts nor
    # counts against its memory limit.
    ("SELECT length(repeat('ab', 1000000000))", "sql_refused"),
    ("SELECT length(repeat(name, 1000)) FROM mem.t", "sql_refused"),
    ("SELECT lpad('x', 2000000000, 'y')", "sql_refused"),
    ("SELECT printf('%2000000000d', 1)", "sql_refused"),
    ("SELECT printf('%*d', 2000000000, 1)", "sql_refused"),
    ("SELECT format('{:>2000000000}', 1)", "sql_refused"),
    ("SELECT format('{:>{}}', 1, 2000000000)", "sql_refused"),
    ("SELECT bar(1, 0, 1, 2000000000)", "sql_refused"),
    ("SELECT to_base(1, 2, 2000000000)", "sql_refused"),
    ("SELECT list_resize([1], 2000000000)", "sql_refused"),
    ("SELECT list_sort(range(300000000))[1]", "sql_refused"),
    ("SELECT unnest(generate_series(1, id * 100000000)) FROM mem.t", "sql_refused"),
]


@pytest.mark.parametrize(
    ("sql", "code"), BOMBS, ids=[f"{i}-{code}" for i, (_, code) in enumerate(BOMBS)]
)
def test_sql_bomb_is_refused_before_it_costs(sandbox: Sandbox, sql: str, code: str) -> None:
    # The cost is CPU time (this process's threads, the engine's worker too): on a loaded
    # machine the wall clock also counts the time other processes had the cores.
    started = time.process_time()
    with pytest.raises(SqlRefusedError) as caught:
        sandbox.engine.query(sql, timeout_s=10)
    assert caught.value.code == code, caught.value.message
    assert time.process_time() - started < 3, "refused, but only after it cost seconds"


def test_amplifying_functions_with_small_literal_sizes_pass(sandbox: Sandbox) -> None:
    sql = (
        "SELECT repeat('-', 3) AS r, lpad(id::VARCHAR, 3, '0') AS p, printf('%5.1f', 2.25) AS f,"
        " format('{:>4}', 7) AS g, len(range(5)) AS n, len(list_resize([1], 3)) AS z"
        " FROM mem.t WHERE id = 1"
    )
    assert sandbox.engine.query(sql).records() == [
        {"r": "---", "p": "001", "f": "  2.2", "g": "   7", "n": 5, "z": 3}
    ]
    depth = "SELECT " + "(" * MAX_SQL_DEPTH + "1" + ")" * MAX_SQL_DEPTH + " AS one"
    assert sandbox.engine.query(depth).records() == [{"one": 1}]


def test_the_catalogue_is_large_enough() -> None:
    assert len(HOSTILE) >= 35
    assert len(set(HOSTILE)) == len(HOSTILE)


@pytest.mark.parametrize("statement", HOSTILE)
def test_hostile_statement_is_refused_and_does_not_run(sandbox: Sandbox, statement: str) -> None:
    sql = statement.replace("{tmp}", str(sandbox.folder))
    before = sandbox.fingerprint()
    with pytest.raises(SqlRefusedError) as caught:
        sandbox.engine.query(sql)
    assert caught.value.code == "sql_refused"
    assert "line" in caught.value.message or "catalog" in caught.value.message
    assert sandbox.fingerprint() == before


@pytest.mark.parametrize(("sql", "expected"), LEGITIMATE)
def test_legitimate_query_passes(
    sandbox: Sandbox, sql: str, expected: list[tuple[Any, ...]] | None
) -> None:
    check_sql(sql)
    result = sandbox.engine.query(sql)
    rows = [tuple(row.values()) for row in result.table.to_pylist()]
    if expected:
        assert rows == expected
    else:
        assert rows  # answered, with rows


def test_refusals_say_what_and_where(sandbox: Sandbox) -> None:
    with pytest.raises(SqlRefusedError, match=r"second one starts at line 3 \(DROP\)"):
        check_sql("SELECT 1\n-- fine so far\n; DROP TABLE x")
    with pytest.raises(SqlRefusedError, match=r"read_csv\(\) at line 2"):
        check_sql("SELECT *\nFROM read_csv('/etc/passwd')")
    with pytest.raises(SqlRefusedError, match=r"DELETE at line 1"):
        check_sql("WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d")
    with pytest.raises(SqlRefusedError, match=r"table data\.csv at line 1 is not in the catalog"):
        sandbox.engine.query("SELECT * FROM 'data.csv'")
    with pytest.raises(SqlRefusedError, match="could not be parsed"):
        check_sql("SELECT FROM WHERE")


def test_duckdb_refuses_what_would_slip_past_the_check(sandbox: Sandbox) -> None:
    # Defence in depth, bypassing check_sql: DuckDB itself has no file access and a locked
    # configuration.
    cursor = sandbox.engine._connection.cursor()
    try:
        for sql in (
            "SELECT * FROM read_csv('/etc/passwd')",
            "SELECT * FROM read_text('/etc/passwd')",
            "SELECT * FROM read_blob('/etc/passwd')",
            "SELECT * FROM glob('/etc/*')",
            "SELECT * FROM sniff_csv('/etc/passwd')",
            f"SELECT * FROM parquet_metadata('{sandbox.folder}/x.parquet')",
            "SELECT * FROM '/etc/passwd'",
            "FROM 'https://example.com/data.csv'",
            f"COPY (SELECT 1) TO '{sandbox.folder}/x.csv'",
            f"EXPORT DATABASE '{sandbox.folder}/export'",
            f"ATTACH '{sandbox.folder}/x.db'",
            "INSTALL httpfs",
            "LOAD httpfs",
            f"LOAD '{sandbox.folder}/evil.duckdb_extension'",
            "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
            "SET threads = 64",
            "SET enable_external_access = true",
            "SET lock_configuration = false",
            "SET memory_limit = '100GB'",
            "RESET memory_limit",
            f"SET temp_directory = '{sandbox.folder}'",
            "SET max_temp_directory_size = '100GB'",
            "SET max_expression_depth = 100000",
            "SET allow_unsigned_extensions = true",
            "SET python_enable_replacements = true",
        ):
            with pytest.raises(duckdb.Error):
                cursor.execute(sql)
        settings = cursor.execute(
            "SELECT current_setting('enable_external_access'),"
            " current_setting('lock_configuration'), current_setting('temp_directory'),"
            " current_setting('max_expression_depth')"
        ).fetchall()
    finally:
        cursor.close()
    assert settings == [(False, True, "", 200)]  # no files, locked, never spills, bounded depth
    assert not (sandbox.folder / "x.csv").exists()
    assert not (sandbox.folder / "x.db").exists()
    assert not (sandbox.folder / "export").exists()
