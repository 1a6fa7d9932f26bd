"""`dagwright data`: the data sources the server sees (settings file, demo, added through the
API), their tables, read-only SQL across them, and loading the demo datasets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.services.data_sources import DataSourceService

data_app = typer.Typer(help="Data sources, tables and SQL across them.", no_args_is_help=True)


def _service() -> DataSourceService:
    """The registry as the server has it: same database, same secret store."""
    from dagwright.composition import Composition
    from dagwright.settings import load_settings

    return Composition(load_settings()).data_sources()


def _fail(exc: DagwrightError) -> typer.Exit:
    typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
    return typer.Exit(2)


@contextmanager
def _opened() -> Iterator[DataSourceService]:
    """The registry for one command: its errors printed with their code (exit 2), its
    connections closed."""
    try:
        service = _service()  # the settings file's sources are read here: errors too
    except DagwrightError as exc:
        raise _fail(exc) from None
    try:
        yield service
    except DagwrightError as exc:
        raise _fail(exc) from None
    finally:
        service.close()


@data_app.command("sources")
def sources() -> None:
    """List the data sources (name, kind, where it is defined)."""
    with _opened() as service:
        for entry in service.list():
            described = f"  {entry.description}" if entry.description else ""
            if entry.catalogue_ttl_s is not None:  # its own; else the global setting's
                described += f"  (catalogue TTL {entry.catalogue_ttl_s:g} s)"
            typer.echo(f"{entry.name:<16} {entry.kind:<10} {entry.origin:<5}{described}")


@data_app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The source's name in SQL (source.schema.table).")],
    kind: Annotated[str, typer.Argument(help="sqlite, files, postgres, mysql, http_json...")],
    config: Annotated[
        str, typer.Option(help='The settings as JSON, e.g. \'{"url": "postgresql://..."}\'')
    ] = "{}",
    description: Annotated[str, typer.Option(help="What the source holds.")] = "",
    catalogue_ttl: Annotated[
        float | None,
        typer.Option(
            min=0,
            help="Seconds before the catalogue reads its tables again (default: "
            "DAGWRIGHT_CATALOGUE_TTL_S).",
        ),
    ] = None,
) -> None:
    """Add (or replace) a source, then connect to it and list its tables."""
    try:
        settings = json.loads(config)
    except json.JSONDecodeError as exc:
        typer.echo(f"error: --config is not JSON: {exc}", err=True)
        raise typer.Exit(2) from None
    with _opened() as service:
        service.put(name, kind, settings, description, catalogue_ttl)
        for table in service.check(name)["tables"]:
            typer.echo(table)


@data_app.command("remove")
def remove(name: Annotated[str, typer.Argument(help="The source to remove.")]) -> None:
    """Remove a source added through the API or `data add`."""
    with _opened() as service:
        service.delete(name)
    typer.echo(f"removed {name}")


@data_app.command("tables")
def tables() -> None:
    """Every table of every source, as SQL names it."""
    with _opened() as service:
        for ref in service.engine().tables():
            typer.echo(str(ref))


@data_app.command("describe")
def describe(
    table: Annotated[str, typer.Argument(help="source.schema.table (or source.table)")],
    sample: Annotated[int, typer.Option(help="Rows read for value examples.")] = 20,
) -> None:
    """A table in MAC-SQL's format: columns, comments, value examples, foreign keys."""
    from dagwright.data.serialize import mac_sql_schema

    with _opened() as service:
        engine = service.engine()
        name = str(engine.catalog.resolve(table.split(".")))
        samples = {name: engine.sample(name, sample).table} if sample else None
        typer.echo(mac_sql_schema([engine.table_info(name)], samples, names=[name]))


@data_app.command("refresh")
def refresh(
    source: Annotated[
        str | None, typer.Argument(help="The source to refresh (default: every source).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Read every table again, changed or not.")
    ] = False,
) -> None:
    """Read the sources' tables into the stored catalogue the schema lookup searches: new
    and changed tables (file stamps; databases past the TTL), or all with --force."""
    from dagwright.data.table_catalogue import RefreshStatus

    def progress(status: RefreshStatus) -> None:
        typer.echo(f"  {status.source}: {status.done}/{status.tables} tables", err=True)

    with _opened() as service:
        names = [source] if source else [entry.name for entry in service.list()]
        catalogue = service.catalogue()
        for name in names:
            service.get(name)
            status = catalogue.refresh(name, force=force, progress=progress)
            typer.echo(
                f"{name}: {status.tables} tables, {status.read} read, {status.kept} unchanged,"
                f" {status.dropped} gone, {len(status.failed)} failed"
            )
            for table, why in status.failed.items():
                typer.echo(f"  {table}: {why}", err=True)


@data_app.command("query")
def query(
    sql: Annotated[str, typer.Argument(help="One read-only SELECT or WITH query.")],
    max_rows: Annotated[int, typer.Option(help="Rows shown at most.")] = 100,
    timeout: Annotated[float, typer.Option(help="Seconds before the query is stopped.")] = 30,
    as_json: Annotated[bool, typer.Option("--json", help="Print the rows as JSON.")] = False,
) -> None:
    """Run SQL across the sources; prints the rows (a table, or JSON) and what was read."""
    from dagwright.data.serialize import pipe_table

    with _opened() as service:
        result = service.engine().query(sql, max_rows=max_rows, timeout_s=timeout)
    if as_json:
        typer.echo(json.dumps(result.records(), ensure_ascii=False, indent=2))
    else:
        typer.echo(pipe_table(result.table, max_rows=max_rows))
    more = " (truncated: more rows exist)" if result.truncated else ""
    typer.echo(f"{result.table.num_rows} rows in {result.duration_s * 1e3:.0f} ms{more}", err=True)
    for read in result.reads:
        pushed = f" where {' and '.join(read.filters)}" if read.filters else ""
        typer.echo(
            f"  read {read.source}.{read.schema}.{read.table}: {', '.join(read.columns)}"
            f"{pushed} -> {read.rows} rows",
            err=True,
        )


@data_app.command("demo-load")
def demo_load(
    pg_url: Annotated[str, typer.Option(help="PostgreSQL for tenants and daily_billing.")] = (
        "postgresql://postgres@127.0.0.1:5432/test"
    ),
    pg_schema: Annotated[str, typer.Option(help="Schema created for them.")] = "billing",
    mysql_url: Annotated[str, typer.Option(help="MySQL/MariaDB for clusters.")] = (
        "mysql://root@127.0.0.1:3306"
    ),
    mysql_database: Annotated[str, typer.Option(help="Database created for it.")] = "billing",
    parquet: Annotated[Path, typer.Option(help="Folder for operations_events.parquet.")] = Path(
        "data/billing"
    ),
    rows: Annotated[int, typer.Option(help="Rows of daily_billing.")] = 100_000,
    register: Annotated[bool, typer.Option(help="Register the three as sources.")] = True,
) -> None:
    """Generate the cloud-billing demo (tenants, clusters, daily billing, operations events)
    across PostgreSQL, MariaDB and Parquet, and register them as sources billing_pg,
    billing_my and billing_files."""
    from urllib.parse import urlsplit

    from dagwright.data.demo import generate_billing, load_billing

    parts = urlsplit(mysql_url)
    mysql_params: dict[str, Any] = {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": parts.username or "root",
        "password": parts.password or "",
    }
    try:
        tables = generate_billing(rows)
        placed = load_billing(
            tables, pg_url, pg_schema, mysql_params, mysql_database, parquet.resolve()
        )
    except DagwrightError as exc:
        raise _fail(exc) from None
    for table, where in placed.items():
        typer.echo(f"{table:<18} -> {where}")
    if not register:
        return
    host = f"{parts.hostname or '127.0.0.1'}:{parts.port or 3306}"
    with _opened() as service:
        service.put("billing_pg", "postgres", {"url": pg_url, "schemas": [pg_schema]})
        user = parts.username or "root"
        service.put("billing_my", "mysql", {"url": f"mysql://{user}@{host}/{mysql_database}"})
        service.put("billing_files", "files", {"path": str(parquet.resolve())})
    typer.echo("registered billing_pg, billing_my, billing_files")
