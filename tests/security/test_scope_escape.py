"""Hostile SQL trying to leave a question's scope (issue 30, item 3).

A scope (data/scope.py) names the sources, or schemas of a source, a question may read. The
engine enforces it: every table reference the planner finds (CTE bodies, subqueries, joins,
set operations, scalar subqueries) is checked as written, before the catalog resolves it,
so a refused table is never looked up, read or even described, and the refusal
(``table_out_of_scope``) reads the same whether the table exists or not.

The sources are real: PostgreSQL with an admitted and a closed schema, and a MariaDB
database outside the scope, behind a connector that records every call that reaches it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.connector import Connector, Filter, Split, TableInfo
from dagwright.data.connectors import MysqlConnector, PostgresConnector
from dagwright.data.engine import QueryEngine
from dagwright.data.limits import QueryLimits
from dagwright.data.scope import OUT_OF_SCOPE, ScopeError, SourceScope
from dagwright.errors import DataError, SqlRefusedError
from dagwright.secrets import MappingSecrets
from support.data_sources import (
    MysqlDatabase,
    PostgresSchema,
    RecordingConnector,
    mysql_database,
    postgres_schema,
)

NO_SECRETS = MappingSecrets({})


class WatchedConnector(RecordingConnector):
    """Records metadata calls as well: a refused name must not even be looked up."""

    def __init__(self, inner: Connector) -> None:
        super().__init__(inner)
        self.looked_up: list[str] = []

    def tables(self, schema: str) -> list[str]:
        self.looked_up.append(f"tables {schema}")
        return super().tables(schema)

    def table_info(self, schema: str, table: str) -> TableInfo:
        self.looked_up.append(f"table_info {schema}.{table}")
        return super().table_info(schema, table)

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        return super().splits(schema, table, columns, filters)

    def forget(self) -> None:
        self.looked_up.clear()
        self.splits_asked.clear()
        self.batches.clear()


@dataclass
class World:
    engine: QueryEngine
    pg: WatchedConnector
    secret: WatchedConnector
    open: str  # the admitted PostgreSQL schema
    closed: str  # the other PostgreSQL schema
    db: str  # the MariaDB database (the schema of source `secret`)

    @property
    def scope(self) -> SourceScope:
        scope = SourceScope.parse([f"pg.{self.open}"])
        assert scope is not None
        return scope

    def refused(self, sql: str, scope: SourceScope | None = None) -> SqlRefusedError:
        self.pg.forget()
        self.secret.forget()
        with pytest.raises(SqlRefusedError) as caught:
            self.engine.query(sql, scope=scope or self.scope)
        # Nothing of the other source was looked up, planned or read.
        assert self.secret.looked_up == []
        assert self.secret.splits_asked == []
        assert self.secret.rows_read() == 0
        # ...nor of the closed schema.
        assert not [call for call in self.pg.looked_up if self.closed in call]
        assert not [table for table, *_ in self.pg.splits_asked if table == "payroll"]
        return caught.value


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    with (
        postgres_schema("dw_scope_open") as open_,
        postgres_schema("dw_scope_closed") as closed,
        mysql_database("dw_scope") as secret_db,
    ):
        open_.execute(
            "CREATE TABLE {schema}.employee (id int PRIMARY KEY, name text)",
            "INSERT INTO {schema}.employee VALUES (1, 'Tom'), (2, 'Lucy')",
        )
        closed.execute(
            "CREATE TABLE {schema}.payroll (id int PRIMARY KEY, pay int)",
            "INSERT INTO {schema}.payroll VALUES (1, 1000), (2, 2000)",
        )
        secret_db.execute(
            "CREATE TABLE salaries (id INT PRIMARY KEY, bonus INT)",
            "INSERT INTO salaries VALUES (1, 1569), (2, 2100)",
        )
        yield from _world(open_, closed, secret_db)


def _world(
    open_: PostgresSchema, closed: PostgresSchema, secret_db: MysqlDatabase
) -> Iterator[World]:
    pg = WatchedConnector(
        PostgresConnector.from_config(
            "pg", {"url": open_.url, "schemas": [open_.name, closed.name]}, NO_SECRETS
        )
    )
    secret = WatchedConnector(
        MysqlConnector.from_config("secret", {"url": secret_db.url}, NO_SECRETS)
    )
    engine = QueryEngine(Catalog({"pg": pg, "secret": secret}), QueryLimits(timeout_s=20))
    try:
        yield World(engine, pg, secret, open_.name, closed.name, secret_db.name)
    finally:
        engine.catalog.close()
        engine.close()


def test_a_query_inside_its_scope_runs(world: World) -> None:
    result = world.engine.query(
        f"SELECT name FROM pg.{world.open}.employee ORDER BY id", scope=world.scope
    )
    assert [row["name"] for row in result.records()] == ["Tom", "Lucy"]
    # the same query in a scope of the whole source, and with no scope at all
    whole = SourceScope.parse(["pg"])
    assert world.engine.query(f"SELECT count(*) AS n FROM pg.{world.open}.employee", scope=whole)
    unscoped = world.engine.query(f"SELECT bonus FROM secret.{world.db}.salaries WHERE id = 1")
    assert unscoped.records() == [{"bonus": 1569}]


ESCAPES = {
    "qualified": "SELECT * FROM secret.{db}.salaries",
    "source.table": "SELECT * FROM secret.salaries",
    "join": (
        "SELECT e.name, s.bonus FROM pg.{open}.employee e JOIN secret.{db}.salaries s "
        "ON s.id = e.id"
    ),
    "subquery in WHERE": (
        "SELECT name FROM pg.{open}.employee WHERE id IN (SELECT id FROM secret.{db}.salaries)"
    ),
    "scalar subquery": "SELECT (SELECT max(bonus) FROM secret.{db}.salaries) AS b",
    "derived table": "SELECT * FROM (SELECT * FROM (SELECT bonus FROM secret.{db}.salaries) a) b",
    "lateral": (
        "SELECT * FROM pg.{open}.employee e, LATERAL (SELECT bonus FROM "
        "secret.{db}.salaries s WHERE s.id = e.id) x"
    ),
    "EXISTS": "SELECT 1 WHERE EXISTS (SELECT 1 FROM secret.{db}.salaries)",
    "UNION": (
        "SELECT name FROM pg.{open}.employee UNION ALL SELECT CAST(bonus AS TEXT) FROM "
        "secret.{db}.salaries"
    ),
    "EXCEPT": "SELECT id FROM pg.{open}.employee EXCEPT SELECT id FROM secret.{db}.salaries",
    "CTE body": "WITH x AS (SELECT * FROM secret.{db}.salaries) SELECT * FROM x",
    "CTE named like the table": (
        "WITH salaries AS (SELECT 1 AS id) SELECT * FROM secret.{db}.salaries"
    ),
    "CTE named like the source": (
        "WITH secret AS (SELECT 1 AS id) SELECT * FROM secret.{db}.salaries"
    ),
    "CTE named like an admitted table": (
        "WITH employee AS (SELECT * FROM secret.{db}.salaries) SELECT * FROM employee"
    ),
    "recursive CTE": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r, "
        "secret.{db}.salaries WHERE n < 3) SELECT * FROM r"
    ),
    "nested CTE": (
        "WITH a AS (WITH b AS (SELECT * FROM secret.{db}.salaries) SELECT * FROM b) SELECT * FROM a"
    ),
    "quoted": 'SELECT * FROM "secret"."{db}"."salaries"',
    "upper case": "SELECT * FROM SECRET.{db}.SALARIES",
    "quoted upper case": 'SELECT * FROM "SECRET"."{db}".salaries',
    "FROM-first": "FROM secret.{db}.salaries",
    "other schema of the source": "SELECT * FROM pg.{closed}.payroll",
    "other schema, quoted upper case": 'SELECT * FROM pg."{closed_upper}".payroll',
    "other schema in a join": (
        "SELECT * FROM pg.{open}.employee e JOIN pg.{closed}.payroll p USING (id)"
    ),
    "a table that does not exist": "SELECT * FROM secret.{db}.no_such_table",
    "after a missing table of the scope": (
        "SELECT * FROM pg.{open}.no_such_table n JOIN secret.{db}.salaries s ON s.id = n.id"
    ),
    "a source that does not exist": "SELECT * FROM nowhere.main.t",
}


@pytest.mark.parametrize("case", sorted(ESCAPES))
def test_a_table_outside_the_scope_is_refused_before_anything_is_read(
    world: World, case: str
) -> None:
    sql = ESCAPES[case].format(
        db=world.db, open=world.open, closed=world.closed, closed_upper=world.closed.upper()
    )
    error = world.refused(sql)
    assert error.code == OUT_OF_SCOPE, error.message
    assert "outside this question's scope" in error.message
    assert f"pg.{world.open}" in error.message  # what it may read
    # It names the table as written, and nothing else of the catalog.
    assert ("payroll" in error.message) == ("payroll" in sql)
    assert "salaries" not in error.message or "salaries" in sql.lower()


def test_the_refusal_does_not_tell_whether_a_table_exists(world: World) -> None:
    present = world.refused(f"SELECT * FROM secret.{world.db}.salaries").message
    absent = world.refused(f"SELECT * FROM secret.{world.db}.salaries_x").message
    assert absent == present.replace("salaries", "salaries_x")


CATALOGUE_READS = [
    "SELECT * FROM information_schema.tables",
    "SELECT table_name FROM information_schema.columns",
    "SELECT * FROM duckdb_tables()",
    "SELECT * FROM duckdb_columns()",
    "SELECT * FROM duckdb_databases()",
    "SELECT * FROM pg_catalog.pg_tables",
    "SELECT * FROM sqlite_master",
    "SELECT * FROM query_table('secret.{db}.salaries')",
    "SELECT * FROM query('SELECT * FROM secret.{db}.salaries')",
    "SELECT * FROM mysql_scan('{db}', 'salaries')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM 'salaries.csv'",
    "SELECT * FROM salaries",
    "SELECT * FROM employee",
    "SELECT * FROM pg.employee",
    "SELECT * FROM pg.payroll",
    "SHOW TABLES",
    "DESCRIBE secret.{db}.salaries",
    "ATTACH 'host=127.0.0.1 dbname=test' AS other (TYPE postgres)",
    "ATTACH ':memory:' AS other",
    "SELECT 1; ATTACH ':memory:' AS other",
    "USE secret",
    "SELECT getvariable('x')",
]


@pytest.mark.parametrize("sql", CATALOGUE_READS)
def test_catalogue_reads_table_functions_and_attach_are_refused_and_name_no_other_table(
    world: World, sql: str
) -> None:
    error = world.refused(sql.format(db=world.db))
    text = error.message.lower()
    if "payroll" not in sql:  # the closed schema's table is never named unless written
        assert "payroll" not in text
    assert world.closed not in text
    # A source the scope leaves out is never listed as a suggestion.
    if "secret" not in sql.lower():
        assert "secret" not in text, error.message


def test_the_tools_see_only_the_scope(world: World) -> None:
    engine, scope = world.engine, world.scope
    assert [str(ref) for ref in engine.tables(scope)] == [f"pg.{world.open}.employee"]
    assert engine.table_info(f"pg.{world.open}.employee", scope).name == "employee"
    sample = engine.sample(f"pg.{world.open}.employee", 1, scope=scope)
    assert sample.records() == [{"id": 1, "name": "Tom"}]
    world.secret.forget()
    for describe in (
        lambda: engine.table_info(f"secret.{world.db}.salaries", scope),
        lambda: engine.sample(f"secret.{world.db}.salaries", 1, scope=scope),
        lambda: engine.table_info(f"pg.{world.closed}.payroll", scope),
    ):
        with pytest.raises(SqlRefusedError) as caught:
            describe()
        assert caught.value.code == OUT_OF_SCOPE
    assert world.secret.looked_up == []
    assert world.secret.rows_read() == 0


def test_scopes_that_do_not_overlap_admit_nothing_not_everything(world: World) -> None:
    hr_only = SourceScope.parse(["pg"])
    secret_only = SourceScope.parse(["secret"])
    assert hr_only is not None
    assert secret_only is not None
    nothing = hr_only.narrowed(secret_only)
    assert nothing.sources == {}
    assert world.engine.tables(nothing) == []
    error = world.refused(f"SELECT * FROM pg.{world.open}.employee", scope=nothing)
    assert error.code == OUT_OF_SCOPE
    # A schema-limited entry narrows a whole-source one, and keeps the schema.
    narrowed = hr_only.narrowed(world.scope)
    assert narrowed.entries == [f"pg.{world.open}"]


def test_unknown_or_malformed_scopes_are_refused_naming_them(world: World) -> None:
    catalog = world.engine.catalog
    unknown = SourceScope.parse(["pg", "nowhere", "elsewhere.x"])
    assert unknown is not None
    with pytest.raises(ScopeError) as caught:
        unknown.validate(catalog)
    assert "'nowhere'" in caught.value.message
    assert "'elsewhere'" in caught.value.message
    missing_schema = SourceScope.parse(["pg.no_such_schema"])
    assert missing_schema is not None
    with pytest.raises(ScopeError, match=r"pg\.no_such_schema"):
        missing_schema.validate(catalog)
    for bad in ([""], ["pg."], [".x"], ["x"] * 300):
        with pytest.raises(ScopeError):
            SourceScope.parse(bad)
    assert SourceScope.parse([]) is None  # no entries: no limit
    assert isinstance(caught.value, DataError) is False  # a 422, the caller's to fix
