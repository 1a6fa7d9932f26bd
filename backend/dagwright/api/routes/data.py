"""Data sources and the query engine: register sources, browse their tables, run read-only
SQL across them."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from dagwright.api.routes.access import Admin
from dagwright.api.state import Services, services
from dagwright.errors import InputError, NotFoundError

if TYPE_CHECKING:
    from dagwright.data.connector import TableInfo

router = APIRouter(prefix="/api/v1", tags=["data"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


class SourceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="sqlite, files, postgres, mysql, http_json or memory")
    config: dict[str, Any] = Field(
        default_factory=dict,
        description="The kind's settings; credentials by secret name (password_secret...)",
    )
    description: str = ""
    catalogue_ttl_s: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="Seconds before the stored catalogue reads this source's tables again "
        "(those without a change stamp: databases); empty: DAGWRIGHT_CATALOGUE_TTL_S.",
    )


class QueryIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1, description="One read-only SELECT or WITH query.")
    max_rows: int = Field(1000, ge=0, le=100_000)
    timeout_s: float = Field(30, gt=0, le=600)


def _table_dict(name: str, info: TableInfo) -> dict[str, Any]:
    return {
        "table": name,
        "comment": info.comment,
        "row_estimate": info.row_estimate,
        "primary_key": list(info.primary_key),
        "foreign_keys": [
            {
                "columns": list(fk.columns),
                "references": f"{name.split('.')[0]}.{fk.ref_schema}.{fk.ref_table}",
                "ref_columns": list(fk.ref_columns),
            }
            for fk in info.foreign_keys
        ],
        "columns": [
            {
                "name": column.name,
                "type": str(column.type),
                "source_type": column.source_type,
                "nullable": column.nullable,
                "comment": column.comment,
            }
            for column in info.columns
        ],
    }


@router.get("/sources")
async def list_sources(s: Deps) -> list[dict[str, Any]]:
    """Every source: from the settings file, the demo, and this API (only those editable)."""
    return [entry.to_dict() for entry in await asyncio.to_thread(s.data.list)]


@router.get("/sources/{name}")
async def get_source(name: str, s: Deps) -> dict[str, Any]:
    return (await asyncio.to_thread(s.data.get, name)).to_dict()


@router.put("/sources/{name}")
async def put_source(name: str, body: SourceIn, s: Deps) -> dict[str, Any]:
    """Add or replace a source. A bad configuration is 400 `source_config` and nothing is
    stored; whether the source answers is what `POST .../check` tells."""
    from dagwright.data.catalog import check_source_name  # the data layer loads on first use

    try:
        check_source_name(name)
    except ValueError as exc:
        raise InputError(f"name: {exc}") from None
    entry = await asyncio.to_thread(
        s.data.put, name, body.kind, body.config, body.description, body.catalogue_ttl_s
    )
    return entry.to_dict()


@router.delete("/sources/{name}", status_code=204)
async def delete_source(name: str, s: Deps) -> Response:
    await asyncio.to_thread(s.data.delete, name)
    return Response(status_code=204)


@router.post("/sources/{name}/check")
async def check_source(name: str, s: Deps) -> dict[str, Any]:
    """Connect to the source and list its tables (502 `source_unreachable`/`source_auth`
    with the driver's message when it does not answer)."""
    return await s.pools.data.run(s.data.check, name)


@router.post("/sources/{name}/refresh", status_code=202)
async def refresh_source(
    name: str, s: Deps, force: Annotated[bool, Query()] = False
) -> dict[str, Any]:
    """Start reading the source's tables into the stored catalogue (new and changed ones;
    `force`: all) in the background; the answer, and `GET` on this path, say how far it
    is (`state`, `done` of `tables`, `read`, `kept`, `dropped`, `failed`)."""
    status = await asyncio.to_thread(s.data.start_refresh, name, force=force)
    return status.to_dict()


@router.get("/sources/{name}/refresh")
async def refresh_status(name: str, s: Deps) -> dict[str, Any]:
    """The source's latest catalogue refresh in this server (404 when none ran)."""
    status = await asyncio.to_thread(s.data.refresh_status, name)
    if status is None:
        raise NotFoundError(f"no refresh of source {name!r} ran in this server", "not_found")
    return status.to_dict()


@router.get("/tables")
async def list_tables(s: Deps) -> list[str]:
    """Every table of every source, as SQL names it: source.schema.table."""
    refs = await s.pools.data.run(lambda: s.data.engine().tables())
    return [str(ref) for ref in refs]


@router.get("/tables/{table}")
async def describe_table(
    table: str, s: Deps, sample: Annotated[int, Query(ge=0, le=1000)] = 0
) -> dict[str, Any]:
    """A table's columns (Arrow and source types), keys, row estimate, comments; with
    `sample=n`, its first n rows."""

    def describe() -> dict[str, Any]:
        engine = s.data.engine()
        info = engine.table_info(table)
        name = str(engine.catalog.resolve(table.split(".")))
        described = _table_dict(name, info)
        if sample:
            described["sample"] = engine.sample(name, sample).records()
        return described

    return await s.pools.data.run(describe)


@router.post("/query")
async def run_query(body: QueryIn, s: Deps) -> dict[str, Any]:
    """Run one read-only query across the sources. `truncated: true` means more rows exist
    than `max_rows`: the rows are not the whole answer. `executed_sql` is what the engine
    ran; `reads` what each source was asked for (columns, filters pushed down, rows)."""

    def run() -> dict[str, Any]:
        result = s.data.engine().query(body.sql, max_rows=body.max_rows, timeout_s=body.timeout_s)
        return {
            "columns": [{"name": c.name, "type": c.type} for c in result.columns],
            "rows": result.records(),
            "row_count": result.table.num_rows,
            "truncated": result.truncated,
            "row_limit": result.row_limit,
            "sql": result.sql,
            "executed_sql": result.executed_sql,
            "duration_s": result.duration_s,
            "reads": [vars(read) for read in result.reads],
        }

    return await s.pools.data.run(run)
