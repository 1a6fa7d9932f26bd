"""The databases SQL metrics run queries on: SQLite files, as the official Spider and BIRD
evaluators use, found under a root as `<db_id>/<db_id>.sqlite`; or, for the shared Spider pack
(MySQL DDL + CSV per database), a SQLite file built once from `<db_id>/schema.sql` and
`<db_id>/data/<table>.csv` and kept in a cache folder.

Queries written in another dialect (the pack's gold SQL is MySQL's) are translated to SQLite
with sqlglot, and table names lose any source qualifier (`spider_bike_1.station` -> `station`)
so a query written against the registered data source runs on the bare database.
"""

from __future__ import annotations

import csv
import hashlib
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagwright.errors import NotFoundError

# The pack's CSVs write a missing value as an empty field or as the word NULL.
NULL_MARKERS = ("", "NULL")


def to_sqlite(sql: str, dialect: str) -> str:
    """`sql` in SQLite's dialect, table names unqualified."""
    import sqlglot
    from sqlglot import exp

    statements = []
    for tree in sqlglot.parse(sql, read=dialect):
        if tree is None:
            continue
        for table in tree.find_all(exp.Table):
            table.set("db", None)
            table.set("catalog", None)
        statements.append(tree.sql(dialect="sqlite"))
    return "; ".join(statements)


def build_from_ddl(
    database_dir: Path, target: Path, data_file: Callable[[str], Path] | None = None
) -> None:
    """A SQLite file from the pack's `schema.sql` (MySQL) and `data/*.csv`. Keys and
    constraints are left out: the rows are loaded as released, whatever they violate.
    ``data_file``: where a table's CSV is (default `data/<table>.csv`); an import from a
    user's file passes one that checks the name the DDL gives against the path policy."""
    import sqlglot
    from sqlglot import exp

    tmp = target.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    connection = sqlite3.connect(tmp)
    try:
        ddl = (database_dir / "schema.sql").read_text(encoding="utf-8")
        for create in sqlglot.parse(ddl, read="mysql"):
            if not isinstance(create, exp.Create):
                continue
            schema = create.this
            table = schema.this if isinstance(schema, exp.Schema) else schema
            table.set("db", None)
            table.set("catalog", None)
            if isinstance(schema, exp.Schema):
                schema.set(
                    "expressions", [e for e in schema.expressions if isinstance(e, exp.ColumnDef)]
                )
                for column in schema.expressions:
                    column.set("constraints", [])
            connection.execute(create.sql(dialect="sqlite"))
            rows = (
                data_file(table.name)
                if data_file is not None
                else database_dir / "data" / f"{table.name}.csv"
            )
            _load_csv(connection, table.name, rows)
        connection.commit()
    finally:
        connection.close()
    tmp.replace(target)


def _load_csv(connection: sqlite3.Connection, table: str, path: Path) -> None:
    if not path.is_file():
        return
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header:
            return
        columns = ", ".join(f'"{c}"' for c in header)
        marks = ", ".join("?" for _ in header)
        values = (
            [None if v in NULL_MARKERS else v for v in row]
            for row in reader
            if len(row) == len(header)
        )
        connection.executemany(f'INSERT INTO "{table}" ({columns}) VALUES ({marks})', values)


# The evaluators' limits on one query (Spider's TIMEOUT, BIRD's 30 s meta_time_out are of
# the same order): a query still running then is interrupted, which makes a prediction wrong.
QUERY_TIMEOUT_S = 60.0


@dataclass(slots=True)
class SqliteDatabase:
    """One database file, opened read-only per query (queries may come from many threads)."""

    path: Path
    dialect: str = "sqlite"
    timeout_s: float = QUERY_TIMEOUT_S

    def execute(self, sql: str) -> list[tuple[Any, ...]]:
        if self.dialect != "sqlite":
            sql = to_sqlite(sql, self.dialect)
        connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        # As the Spider evaluator: bytes that are not UTF-8 are dropped, not an error.
        connection.text_factory = lambda b: b.decode(errors="ignore")
        deadline = time.monotonic() + self.timeout_s
        # Asked every 10,000 SQLite instructions; a true answer interrupts the query.
        connection.set_progress_handler(lambda: time.monotonic() > deadline, 10_000)
        try:
            return connection.execute(sql).fetchall()
        finally:
            connection.close()


@dataclass(slots=True)
class DatabaseRoot:
    """db_id -> its database under `root`; `cache` holds the files built from DDL + CSV."""

    root: Path
    cache: Path
    dialect: str = "sqlite"
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def path(self, db_id: str) -> Path:
        folder = self.root / db_id
        official = folder / f"{db_id}.sqlite"
        if official.is_file():
            return official
        if not (folder / "schema.sql").is_file():
            raise NotFoundError(f"no database {db_id!r} under {self.root}", "database_not_found")
        stamp = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
        built = self.cache / f"{db_id}-{stamp}.sqlite"
        with self._lock:
            if not built.is_file():
                self.cache.mkdir(parents=True, exist_ok=True)
                build_from_ddl(folder, built)
        return built

    def __call__(self, db_id: str) -> SqliteDatabase:
        return SqliteDatabase(self.path(db_id), self.dialect)


@dataclass(slots=True)
class FolderDatabases:
    """db_id -> `<folder>/<db_id>.sqlite`: the databases an imported dataset built."""

    folder: Path
    dialect: str = "sqlite"

    def __call__(self, db_id: str) -> SqliteDatabase:
        path = self.folder / f"{db_id}.sqlite"
        if not path.is_file():
            raise NotFoundError(f"no database {db_id!r} in {self.folder}", "database_not_found")
        return SqliteDatabase(path, self.dialect)
