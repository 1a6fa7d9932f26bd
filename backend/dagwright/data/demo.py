"""Demo data: the AutoTQA paper's Figure 1, and a generated "cloud billing" dataset in the
spirit of its industrial dataset (TiDB Cloud billing, database events, operations).

Figure 1 is built from the sources committed in data/figure1/: Employee and Department in a
SQLite file, Salary in a CSV file, so that "What is the year-end bonus for Tom?" needs a join
across two sources.

The billing dataset is deterministic for a seed. Its tables:

- ``tenants``: customer accounts (tenant 1 is "Eugene", from the paper's Figure 3 question);
- ``clusters``: database clusters of the tenants;
- ``daily_billing``: one row per cluster, day and service (the large one: its row count is
  the parameter);
- ``operations_events``: scale-outs, upgrades, backups... of the clusters.

Region names are spelt three ways on purpose, as real exports do: ``cn-hangzhou`` in tenants,
``cn-Hangzhou`` in clusters, ``CN-HANGZHOU`` in daily_billing. A filter copied from one table
finds nothing in another, the case-sensitivity trap the paper reports (section 4.4). On
2024-01-10 Eugene's first cluster was scaled out from 3 to 9 nodes and its compute cost that
day is three times the usual: "why did Eugene's bill jump on January 10?" has an answer.

`load_billing` writes the tables across PostgreSQL (COPY), MariaDB/MySQL (LOAD DATA LOCAL, or
batched inserts where the server refuses it) and Parquet files.
"""

from __future__ import annotations

import datetime
import io
import math
import shutil
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import psycopg
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pymysql
from psycopg import sql

from dagwright.data.connector import ColumnInfo, ForeignKey, TableInfo

# backend/dagwright/data/demo.py -> the repository's data/figure1 (a checkout, not a wheel).
FIGURE1_SOURCES = Path(__file__).resolve().parents[3] / "data" / "figure1"

Store = Literal["postgres", "mysql", "parquet"]
# Accounts and the large billing table in PostgreSQL, cluster metadata in MySQL (TiDB speaks
# its protocol), the event log as Parquet: most questions join across sources.
DEFAULT_PLACEMENT: Mapping[str, Store] = {
    "tenants": "postgres",
    "clusters": "mysql",
    "daily_billing": "postgres",
    "operations_events": "parquet",
}


def load_figure1(folder: str | Path) -> dict[str, Path]:
    """Builds ``figure1.sqlite`` (Employee, Department) in `folder` from data/figure1/figure1.sql
    and puts ``salary.csv`` next to it (copied unless `folder` is data/figure1 itself). An
    existing figure1.sqlite is rebuilt. Returns the paths by role: "sqlite" and "csv"."""
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    database = target / "figure1.sqlite"
    database.unlink(missing_ok=True)
    with sqlite3.connect(database) as connection:
        connection.executescript((FIGURE1_SOURCES / "figure1.sql").read_text("utf-8"))
    connection.close()  # the context manager only commits
    csv = target / "salary.csv"
    if csv.resolve() != (FIGURE1_SOURCES / "salary.csv").resolve():
        shutil.copyfile(FIGURE1_SOURCES / "salary.csv", csv)
    return {"sqlite": database, "csv": csv}


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    type: pa.DataType
    pg: str
    mysql: str
    comment: str
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class _Table:
    name: str
    comment: str
    columns: tuple[_Column, ...]
    primary_key: str
    references: tuple[tuple[str, str], ...] = ()  # (column, table): always that table's id


_ID = (pa.int64(), "BIGINT", "BIGINT")
_TIME = (pa.timestamp("us"), "TIMESTAMP", "DATETIME")  # microseconds, as PostgreSQL keeps


def _text(length: int) -> tuple[pa.DataType, str, str]:
    return pa.string(), "TEXT", f"VARCHAR({length})"


BILLING_TABLES = (
    _Table(
        "tenants",
        "Customer accounts of the cloud database service",
        (
            _Column("tenant_id", *_ID, "Tenant identifier"),
            _Column("tenant_name", *_text(100), "Name of the tenant (the customer), e.g. Eugene"),
            _Column("contact_email", *_text(200), "Billing contact e-mail address"),
            _Column("plan", *_text(20), "Subscription plan: Developer, Essential or Enterprise"),
            _Column("home_region", *_text(40), "Region the account was opened in, lower case"),
            _Column("created_at", *_TIME, "When the account was opened (UTC)"),
            _Column("status", *_text(20), "Account status: active or suspended"),
        ),
        "tenant_id",
    ),
    _Table(
        "clusters",
        "Database clusters; each belongs to one tenant",
        (
            _Column("cluster_id", *_ID, "Cluster identifier"),
            _Column("tenant_id", *_ID, "Tenant owning the cluster"),
            _Column("cluster_name", *_text(100), "Name given to the cluster by its tenant"),
            _Column("tier", *_text(20), "Serverless or Dedicated"),
            _Column("cloud_provider", *_text(20), "aws, gcp or alibaba"),
            _Column("region", *_text(40), "Cloud region of the cluster, e.g. cn-Hangzhou"),
            _Column("node_count", pa.int32(), "INTEGER", "INT", "Number of database nodes"),
            _Column("created_at", *_TIME, "When the cluster was created (UTC)"),
            _Column("labels", *_text(200), "Free-form labels set by the tenant", nullable=True),
        ),
        "cluster_id",
        (("tenant_id", "tenants"),),
    ),
    _Table(
        "daily_billing",
        "Daily cost of each cluster per billed service, in US dollars",
        (
            _Column("billing_id", *_ID, "Billing line identifier"),
            _Column("billing_date", pa.date32(), "DATE", "DATE", "Day billed (UTC)"),
            _Column("tenant_id", *_ID, "Tenant billed"),
            _Column("cluster_id", *_ID, "Cluster the cost comes from"),
            _Column("region", *_text(40), "Region of the cluster as the billing export writes it"),
            _Column("service", *_text(30), "compute, storage, data_transfer or backup"),
            _Column("usage_amount", pa.float64(), "DOUBLE PRECISION", "DOUBLE", "Quantity used"),
            _Column("usage_unit", *_text(20), "Unit of usage_amount: vCPU-hour, GiB-month, GiB"),
            _Column(
                "cost_usd", pa.decimal128(14, 4), "NUMERIC(14,4)", "DECIMAL(14,4)", "Cost in USD"
            ),
        ),
        "billing_id",
        (("tenant_id", "tenants"), ("cluster_id", "clusters")),
    ),
    _Table(
        "operations_events",
        "Operations performed on clusters by their tenants or by the platform",
        (
            _Column("event_id", *_ID, "Event identifier"),
            _Column("cluster_id", *_ID, "Cluster operated on"),
            _Column("tenant_id", *_ID, "Tenant owning the cluster"),
            _Column("event_time", *_TIME, "When the operation started (UTC)"),
            _Column("event_type", *_text(30), "scale_out, scale_in, upgrade, backup, pause..."),
            _Column("initiated_by", *_text(20), "user or system"),
            _Column("detail", *_text(200), "What changed, e.g. nodes 3 -> 9", nullable=True),
        ),
        "event_id",
        (("cluster_id", "clusters"), ("tenant_id", "tenants")),
    ),
)
_BY_NAME = {table.name: table for table in BILLING_TABLES}


def billing_table_infos(schema: str = "billing") -> list[TableInfo]:
    """The billing tables' metadata (types spelt as in PostgreSQL), with every foreign key
    declared, as if all four tables lived in one schema."""
    return [
        TableInfo(
            schema=schema,
            name=table.name,
            columns=tuple(
                ColumnInfo(c.name, c.type, c.pg, c.nullable, c.comment) for c in table.columns
            ),
            primary_key=(table.primary_key,),
            foreign_keys=tuple(
                ForeignKey((column,), schema, target, (_BY_NAME[target].primary_key,))
                for column, target in table.references
            ),
            comment=table.comment,
        )
        for table in BILLING_TABLES
    ]


# --- generation ----------------------------------------------------------------------------

END_DATE = datetime.date(2024, 1, 31)
SPIKE_DATE = datetime.date(2024, 1, 10)
MAX_DAYS = 120
REGIONS = ("cn-Hangzhou", "us-West-2", "eu-Central-1", "ap-Southeast-1", "us-East-1")
PROVIDERS = ("alibaba", "aws", "gcp", "aws", "aws")  # by region
SERVICES = ("compute", "storage", "data_transfer", "backup")
UNITS = ("vCPU-hour", "GiB-month", "GiB", "GiB")  # by service
PRICES = (0.12, 0.10, 0.09, 0.02)  # USD per unit, by service
_NAMES = (
    "Eugene", "Alice", "Bruno", "Chen Wei", "Dana", "Farid", "Grace", "Hiro", "Ines", "Jonas",
    "Kemal", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sven", "Tariq",
)  # fmt: skip
_EVENTS = ("scale_out", "scale_in", "upgrade", "backup", "restore", "pause", "resume")
_EVENT_WEIGHTS = (0.2, 0.15, 0.1, 0.35, 0.05, 0.1, 0.05)

Ints = npt.NDArray[np.int64]


def generate_billing(n_billing_rows: int, seed: int = 7) -> dict[str, pa.Table]:
    """The four billing tables, ``daily_billing`` with exactly `n_billing_rows` rows (at least
    12). The same seed gives the same tables on every machine."""
    if n_billing_rows < 12:
        raise ValueError("the billing dataset needs at least 12 billing rows")
    rng = np.random.default_rng(seed)
    n_clusters = max(3, math.ceil(n_billing_rows / (len(SERVICES) * MAX_DAYS)))
    n_days = math.ceil(n_billing_rows / (len(SERVICES) * n_clusters))
    n_tenants = max(2, math.ceil(n_clusters / 3))
    start = END_DATE - datetime.timedelta(days=n_days - 1)
    tenants = _tenants(rng, n_tenants, start)
    clusters = _clusters(rng, n_clusters, n_tenants, start)
    billing = _billing(rng, clusters, n_days, start, n_billing_rows)
    events = _events(rng, clusters, n_days, start)
    return {
        "tenants": tenants,
        "clusters": clusters,
        "daily_billing": billing,
        "operations_events": events,
    }


def _strings(values: Sequence[str], indices: npt.NDArray[Any]) -> pa.Array[Any]:
    # Dictionary-encoded then decoded: a million strings without a Python loop.
    dictionary = pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(values))
    return dictionary.cast(pa.string())


def _seconds(base: datetime.date, offsets: npt.NDArray[np.int64]) -> pa.Array[Any]:
    """Timestamps `offsets` seconds after midnight of `base`."""
    times = np.datetime64(base, "s") + offsets.astype("timedelta64[s]")
    return pa.array(times.astype("datetime64[us]"), pa.timestamp("us"))


def _schema(name: str) -> pa.Schema:
    table = _BY_NAME[name]
    return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in table.columns])


def _tenants(rng: np.random.Generator, count: int, start: datetime.date) -> pa.Table:
    names = [
        _NAMES[i % len(_NAMES)] + ("" if i < len(_NAMES) else f" {i // len(_NAMES) + 1}")
        for i in range(count)
    ]
    emails = [f"billing@{n.lower().replace(' ', '-')}.example.com" for n in names]
    regions = rng.integers(0, len(REGIONS), count)
    opened = -rng.integers(30 * 86400, 900 * 86400, count)  # before the billing window
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(1, count + 1)),
            pa.array(names),
            pa.array(emails),
            _strings(
                ("Developer", "Essential", "Enterprise"), rng.choice(3, count, p=(0.4, 0.4, 0.2))
            ),
            _strings([r.lower() for r in REGIONS], regions),
            _seconds(start, opened),
            _strings(("active", "suspended"), (rng.random(count) < 0.05).astype(np.int64)),
        ],
        schema=_schema("tenants"),
    )


def _clusters(
    rng: np.random.Generator, count: int, n_tenants: int, start: datetime.date
) -> pa.Table:
    owners = rng.integers(1, n_tenants + 1, count)
    owners[0] = 1  # Eugene's production cluster, the one of the January 10 story
    regions = rng.integers(0, len(REGIONS), count)
    regions[0] = 0
    nodes = rng.choice((1, 3, 3, 3, 6, 9, 12), count).astype(np.int32)
    nodes[0] = 3
    tiers = (nodes > 3).astype(np.int64)  # small clusters are Serverless
    tags = ("env=prod", "env=staging", "team=analytics")
    labels = [tags[i % 3] if flag else None for i, flag in enumerate(rng.random(count) < 0.6)]
    names = [f"cluster-{i}" for i in range(1, count + 1)]
    names[0] = "eugene-prod"
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(1, count + 1)),
            pa.array(owners),
            pa.array(names),
            _strings(("Serverless", "Dedicated"), tiers),
            _strings(PROVIDERS, regions),
            _strings(REGIONS, regions),
            pa.array(nodes),
            _seconds(start, -rng.integers(86400, 400 * 86400, count)),
            pa.array(labels, pa.string()),
        ],
        schema=_schema("clusters"),
    )


def _billing(
    rng: np.random.Generator, clusters: pa.Table, n_days: int, start: datetime.date, rows: int
) -> pa.Table:
    n_clusters, n_services = clusters.num_rows, len(SERVICES)
    # Rows ordered by day, cluster, service; the last day is cut short to give exactly `rows`.
    day = np.repeat(np.arange(n_days), n_clusters * n_services)[:rows]
    cluster = np.tile(np.repeat(np.arange(n_clusters), n_services), n_days)[:rows]
    service = np.tile(np.arange(n_services), n_days * n_clusters)[:rows]
    nodes = clusters.column("node_count").to_numpy()
    base = rng.lognormal(0.0, 0.5, (n_clusters, n_services)) * nodes[:, None] * (8, 3, 1, 0.5)
    cost = base[cluster, service] * (1 + 0.1 * rng.standard_normal(rows)).clip(0.5)
    spike = (SPIKE_DATE - start).days
    cost[(day == spike) & (cluster == 0) & (service == 0)] *= 3  # Eugene's 9-node day
    cents = np.round(cost * 10_000).astype(np.int64)  # cost in 1/10,000 USD, exact from here
    usage = np.round(cents / 10_000 / np.asarray(PRICES)[service], 3)
    regions = np.asarray(
        [REGIONS.index(r) for r in clusters.column("region").to_pylist()], dtype=np.int64
    )
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(1, rows + 1)),
            pa.array(np.datetime64(start, "D") + day.astype("timedelta64[D]"), pa.date32()),
            pa.array(clusters.column("tenant_id").to_numpy()[cluster]),
            pa.array(cluster + 1),
            _strings([r.upper() for r in REGIONS], regions[cluster]),
            _strings(SERVICES, service),
            pa.array(usage),
            _strings(UNITS, service),
            _decimal(cents, pa.decimal128(14, 4)),
        ],
        schema=_schema("daily_billing"),
    )


def _decimal(unscaled: Ints, type_: pa.Decimal128Type) -> pa.Array[Any]:
    """A decimal array from its unscaled integers. Arrow stores a decimal128 as a 16-byte
    little-endian two's complement integer; casting floats would round some values wrongly."""
    words = np.empty((len(unscaled), 2), dtype=np.int64)
    words[:, 0] = unscaled
    words[:, 1] = unscaled >> 63  # the sign, extended into the high word
    return pa.Array.from_buffers(type_, len(unscaled), [None, pa.py_buffer(words.tobytes())])


def _events(
    rng: np.random.Generator, clusters: pa.Table, n_days: int, start: datetime.date
) -> pa.Table:
    n_clusters = clusters.num_rows
    per_cluster = rng.poisson(n_days / 15, n_clusters)
    cluster = np.repeat(np.arange(n_clusters), per_cluster)
    seconds = rng.integers(0, n_days * 86400, len(cluster))
    kinds = rng.choice(len(_EVENTS), len(cluster), p=_EVENT_WEIGHTS)
    # Eugene's cluster gets only backups and upgrades at random: its one scale-out is the story.
    kinds[(cluster == 0) & (kinds != _EVENTS.index("upgrade"))] = _EVENTS.index("backup")
    by_system = rng.random(len(cluster)) < 0.3
    nodes = clusters.column("node_count").to_numpy()
    details = [_detail(_EVENTS[k], int(nodes[c])) for k, c in zip(kinds, cluster, strict=True)]
    spike = (SPIKE_DATE - start).days * 86400
    if spike >= 0:  # the story: scaled out in the night of January 10, back in the next night
        cluster = np.append(cluster, [0, 0])
        seconds = np.append(seconds, [spike + 2 * 3600 + 15 * 60, spike + 86400 + 3600])
        kinds = np.append(kinds, [_EVENTS.index("scale_out"), _EVENTS.index("scale_in")])
        by_system = np.append(by_system, [False, False])
        details += ["nodes 3 -> 9", "nodes 9 -> 3"]
    order = np.argsort(seconds, kind="stable")
    owners = clusters.column("tenant_id").to_numpy()
    return pa.Table.from_arrays(
        [
            pa.array(np.arange(1, len(order) + 1)),
            pa.array(cluster[order] + 1),
            pa.array(owners[cluster[order]]),
            _seconds(start, seconds[order]),
            _strings(_EVENTS, kinds[order]),
            _strings(("user", "system"), by_system[order].astype(np.int64)),
            pa.array([details[i] for i in order], pa.string()),
        ],
        schema=_schema("operations_events"),
    )


def _detail(kind: str, nodes: int) -> str | None:
    """What an event changed; a scaling ends at the cluster's current node count or leaves it
    doubled for a while."""
    if kind == "scale_out":
        return f"nodes {nodes} -> {nodes * 2}"
    if kind == "scale_in":
        return f"nodes {nodes * 2} -> {nodes}"
    if kind == "upgrade":
        return "version v7.1.0 -> v7.5.0"
    return None


# --- loading -------------------------------------------------------------------------------

_CSV_BATCH = 100_000  # rows per CSV chunk sent to COPY / LOAD DATA: bounded memory


def load_billing(
    tables: Mapping[str, pa.Table],
    pg_url: str | None,
    pg_schema: str,
    mysql_params: Mapping[str, Any] | None,
    mysql_database: str,
    parquet_folder: str | Path | None,
    placement: Mapping[str, Store] = DEFAULT_PLACEMENT,
) -> dict[str, str]:
    """Writes each table to the store `placement` gives it: PostgreSQL schema `pg_schema`
    (created if missing) at `pg_url`, MySQL/MariaDB database `mysql_database` (created if
    missing) reached with `mysql_params` (pymysql.connect arguments: host, port, user,
    password; local_infile=False forces batched inserts), or `parquet_folder`/<table>.parquet.
    Existing tables of the same names are replaced. Primary keys, comments, and the foreign
    keys between tables of the same store are declared. Returns where each table went, e.g.
    {"tenants": "postgres:billing.tenants"}."""
    by_store: dict[Store, list[str]] = {"postgres": [], "mysql": [], "parquet": []}
    for name in tables:
        if name not in _BY_NAME:
            raise ValueError(f"{name!r} is not a billing table; known: {', '.join(_BY_NAME)}")
        by_store[placement[name]].append(name)
    places: dict[str, str] = {}
    if by_store["postgres"]:
        if pg_url is None:
            raise ValueError(f"no PostgreSQL URL given for {', '.join(by_store['postgres'])}")
        _load_postgres(tables, by_store["postgres"], pg_url, pg_schema)
        places.update({n: f"postgres:{pg_schema}.{n}" for n in by_store["postgres"]})
    if by_store["mysql"]:
        if mysql_params is None:
            raise ValueError(f"no MySQL connection given for {', '.join(by_store['mysql'])}")
        _load_mysql(tables, by_store["mysql"], mysql_params, mysql_database)
        places.update({n: f"mysql:{mysql_database}.{n}" for n in by_store["mysql"]})
    if by_store["parquet"]:
        if parquet_folder is None:
            raise ValueError(f"no Parquet folder given for {', '.join(by_store['parquet'])}")
        folder = Path(parquet_folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name in by_store["parquet"]:
            pq.write_table(tables[name], folder / f"{name}.parquet")
            places[name] = f"parquet:{folder / f'{name}.parquet'}"
    return places


def _in_order(names: Sequence[str]) -> list[str]:
    """Referenced tables first (BILLING_TABLES is in that order)."""
    return [table.name for table in BILLING_TABLES if table.name in names]


def _csv_chunks(table: pa.Table) -> list[bytes]:
    chunks = []
    for offset in range(0, max(table.num_rows, 1), _CSV_BATCH):
        buffer = io.BytesIO()
        options = pacsv.WriteOptions(include_header=False)
        pacsv.write_csv(table.slice(offset, _CSV_BATCH), buffer, write_options=options)
        chunks.append(buffer.getvalue())
    return chunks


def _load_postgres(
    tables: Mapping[str, pa.Table], names: Sequence[str], url: str, schema: str
) -> None:
    ordered = _in_order(names)
    with psycopg.connect(url) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        for name in reversed(ordered):
            connection.execute(
                sql.SQL("DROP TABLE IF EXISTS {} CASCADE").format(sql.Identifier(schema, name))
            )
        for name in ordered:
            spec, target = _BY_NAME[name], sql.Identifier(schema, name)
            columns = [
                sql.SQL("{} {}{}").format(
                    sql.Identifier(c.name),
                    sql.SQL(c.pg),
                    sql.SQL("" if c.nullable else " NOT NULL"),
                )
                for c in spec.columns
            ]
            columns.append(sql.SQL("PRIMARY KEY ({})").format(sql.Identifier(spec.primary_key)))
            connection.execute(
                sql.SQL("CREATE TABLE {} ({})").format(target, sql.SQL(", ").join(columns))
            )
            connection.execute(
                sql.SQL("COMMENT ON TABLE {} IS {}").format(target, sql.Literal(spec.comment))
            )
            for column in spec.columns:
                connection.execute(
                    sql.SQL("COMMENT ON COLUMN {} IS {}").format(
                        sql.Identifier(schema, name, column.name), sql.Literal(column.comment)
                    )
                )
            # COPY in CSV: an unquoted empty field is NULL, text is always quoted by Arrow.
            copy = sql.SQL("COPY {} FROM STDIN (FORMAT csv)").format(target)
            with connection.cursor() as cursor, cursor.copy(copy) as stream:
                for chunk in _csv_chunks(tables[name]):
                    stream.write(chunk)
        # Foreign keys after the rows: one check of the whole table instead of one per row.
        for name in ordered:
            for key, referenced in _BY_NAME[name].references:
                if referenced in ordered:
                    connection.execute(
                        sql.SQL("ALTER TABLE {} ADD FOREIGN KEY ({}) REFERENCES {} ({})").format(
                            sql.Identifier(schema, name),
                            sql.Identifier(key),
                            sql.Identifier(schema, referenced),
                            sql.Identifier(_BY_NAME[referenced].primary_key),
                        )
                    )


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _load_mysql(
    tables: Mapping[str, pa.Table], names: Sequence[str], params: Mapping[str, Any], database: str
) -> None:
    ordered = _in_order(names)
    settings = {"local_infile": True, "autocommit": True, "charset": "utf8mb4", **params}
    connection = pymysql.connect(**settings)
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                f"CREATE DATABASE IF NOT EXISTS {_quote(database)} CHARACTER SET utf8mb4"
            )
            cursor.execute(f"USE {_quote(database)}")
            cursor.execute("SET FOREIGN_KEY_CHECKS = 0")  # rows arrive before what they reference
            for name in reversed(ordered):
                cursor.execute(f"DROP TABLE IF EXISTS {_quote(name)}")
            for name in ordered:
                cursor.execute(_mysql_create(_BY_NAME[name], ordered))
                _mysql_rows(cursor, name, tables[name])
            cursor.execute("SET FOREIGN_KEY_CHECKS = 1")
    finally:
        connection.close()


def _mysql_create(spec: _Table, present: Sequence[str]) -> str:
    parts = [
        f"{_quote(c.name)} {c.mysql}{'' if c.nullable else ' NOT NULL'} "
        f"COMMENT {_literal(c.comment)}"
        for c in spec.columns
    ]
    parts.append(f"PRIMARY KEY ({_quote(spec.primary_key)})")
    for column, referenced in spec.references:
        if referenced in present:
            target = f"{_quote(referenced)} ({_quote(_BY_NAME[referenced].primary_key)})"
            parts.append(f"FOREIGN KEY ({_quote(column)}) REFERENCES {target}")
    return (
        f"CREATE TABLE {_quote(spec.name)} ({', '.join(parts)}) "
        f"ENGINE=InnoDB COMMENT={_literal(spec.comment)}"
    )


def _mysql_rows(cursor: Any, name: str, table: pa.Table) -> None:
    """LOAD DATA LOCAL from a CSV file when the server allows it (tens of times faster than
    inserts); batched INSERTs when it does not."""
    columns = table.column_names
    with tempfile.NamedTemporaryFile(suffix=".csv") as handle:
        for chunk in _csv_chunks(table):
            handle.write(chunk)
        handle.flush()
        # Arrow writes NULL as an empty unquoted field; MySQL would read it as '' or 0.
        variables = ", ".join(f"@v{i}" for i in range(len(columns)))
        assignments = ", ".join(f"{_quote(c)} = NULLIF(@v{i}, '')" for i, c in enumerate(columns))
        statement = (
            f"LOAD DATA LOCAL INFILE {_literal(handle.name)} INTO TABLE {_quote(name)} "
            "CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' "
            f"ESCAPED BY '' LINES TERMINATED BY '\\n' ({variables}) SET {assignments}"
        )
        try:
            cursor.execute(statement)
            return
        except (pymysql.err.OperationalError, pymysql.err.InternalError) as error:
            if error.args[0] not in _LOCAL_INFILE_REFUSED:
                raise
    insert = (
        f"INSERT INTO {_quote(name)} ({', '.join(_quote(c) for c in columns)}) "
        f"VALUES ({', '.join(['%s'] * len(columns))})"
    )
    for batch in table.to_batches(max_chunksize=5_000):
        rows = list(zip(*(column.to_pylist() for column in batch.columns), strict=True))
        cursor.executemany(insert, rows)


# The server or the client refuses LOAD DATA LOCAL: MySQL 1148, 2068, 3948; MariaDB 4166.
_LOCAL_INFILE_REFUSED = (1148, 2068, 3948, 4166)
