"""Table tools: SQL over every registered data source (one DuckDB engine fed by the
connectors), tables described for a prompt, Python on tables in a sandbox, and the
Chain-of-Table operations.

A table travels between nodes as records (a list of row dicts): plain JSON, so the debug
panel shows it and runs record it as they are.

The data layer (DuckDB, Arrow, pandas: over a second to import), the embedders (numpy) and
the model gateway are imported when a block first runs, not when the registry loads, so
servers and flows that use no table pay nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.errors import DataError
from dagwright.registry import SANDBOX, TABLES, NodeContext, block

if TYPE_CHECKING:
    import pyarrow as pa

    from dagwright.data.connector import TableInfo
    from dagwright.data.engine import QueryEngine, QueryResult
    from dagwright.data.scope import SourceScope

Records = list[dict[str, Any]]
SCOPE_HELP = (
    "Only tables of these sources ('source', or 'source.schema' for one schema of it); "
    "empty: every source. The engine refuses SQL naming any other table."
)


def _engine(ctx: NodeContext) -> QueryEngine:
    return ctx.service(TABLES).engine()


def _scope(engine: QueryEngine, *lists: list[str] | None) -> SourceScope | None:
    """The scope the lists allow together (a table must be in each non-empty one), checked
    against the catalog: a source or schema it does not have is an error naming it."""
    from dagwright.data.scope import SourceScope

    scope: SourceScope | None = None
    for index, entries in enumerate(lists):
        given = SourceScope.parse(entries, field=f"sources ({'config' if index == 0 else 'input'})")
        if given is not None:
            given.validate(engine.catalog)
            scope = given if scope is None else scope.narrowed(given)
    return scope


def _records(table: pa.Table) -> Records:
    from dagwright.data.engine import json_value

    return [{key: json_value(value) for key, value in row.items()} for row in table.to_pylist()]


def _table(records: Records, port: str) -> pa.Table:
    import pyarrow as pa

    try:
        return pa.Table.from_pylist(records)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise DataError(
            f"input {port!r} is not a table of records: {exc}", "table_invalid"
        ) from exc


# -- SQL -----------------------------------------------------------------------------------------


class QueryOutput(TypedDict):
    rows: Records
    columns: list[str]
    row_count: int
    truncated: bool
    sql: str
    error: str | None


class SqlQueryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_rows: int = Field(1000, ge=1, le=100_000, description="Return at most this many rows.")
    timeout_s: float = Field(30, gt=0, le=600, description="Stop the query after this long.")
    sources: list[str] = Field(default_factory=list, description=SCOPE_HELP)
    errors_as_output: bool = Field(
        False,
        description="On a refused or failed query, give its message on the `error` port (and "
        "no rows) instead of failing the node, so the flow can refine the SQL and retry.",
    )


def _query_output(result: QueryResult) -> QueryOutput:
    return {
        "rows": result.records(),
        "columns": [column.name for column in result.columns],
        "row_count": result.table.num_rows,
        "truncated": result.truncated,
        "sql": result.executed_sql,
        "error": None,
    }


@block(
    "sql_query",
    category="tool",
    description="Run one read-only SQL query over every registered data source.",
    example="SELECT e.name, s.bonus FROM hr.main.employee e JOIN files.main.salary s ... -> rows",
    needs=(TABLES,),
)
async def sql_query(
    config: SqlQueryConfig, ctx: NodeContext, sql: str, sources: list[str] | None = None
) -> QueryOutput:
    """Runs a single SELECT (or WITH) on the query engine, where every registered table is
    `source.schema.table`, so one query may join tables of several systems. Only read-only
    SQL is accepted; each source is asked only for the columns and rows the query needs.
    `truncated` is true when there were more rows than `max_rows` (the rows are then not the
    whole answer); `sql` is the statement as the engine ran it. The `sources` setting and
    input (e.g. a TQA dataset's) scope the query: SQL naming a table outside both is refused
    (`table_out_of_scope`) before anything is read."""
    engine = _engine(ctx)

    def run() -> QueryResult:
        scope = _scope(engine, config.sources, sources)
        return engine.query(sql, max_rows=config.max_rows, timeout_s=config.timeout_s, scope=scope)

    try:
        result = await ctx.table_work(run)
    except DataError as exc:
        if not config.errors_as_output:
            raise
        error = f"{exc.code}: {exc.message}"
        return {
            "rows": [],
            "columns": [],
            "row_count": 0,
            "truncated": False,
            "sql": sql,
            "error": error,
        }
    ctx.emit("sql", sql=result.executed_sql, reads=[vars(read) for read in result.reads])
    return _query_output(result)


@block(
    "sql_check",
    category="tool",
    description="Check that SQL is one read-only query; fail with the reason otherwise.",
    example="'DROP TABLE x' -> fails: only a single SELECT or WITH query is allowed",
    inline=True,
)
def sql_check(sql: str) -> str:
    """Parses the SQL (DuckDB's dialect) and passes it on unchanged when it is a single
    read-only SELECT or WITH query that reads no files, URLs or settings; otherwise the node
    fails with the refused construct and its line. Text around the SQL that models like to
    add (a ```sql fence) is removed first."""
    from dagwright.data.safety import check_sql

    text = sql.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0].strip()
    check_sql(text)
    return text


# -- describing tables ---------------------------------------------------------------------------


class DescribeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tables: list[str] = Field(
        default_factory=list,
        description="Tables as source.schema.table (or source.table); empty: every table.",
    )
    sample_rows: int = Field(
        20, ge=0, le=1000, description="Rows read per table for value examples (0: none)."
    )
    max_columns: int = Field(40, ge=1, le=500, description="Columns shown per table.")
    max_values: int = Field(3, ge=0, le=20, description="Value examples per column.")


def _samples(
    engine: QueryEngine, names: list[str], rows: int, scope: SourceScope | None = None
) -> dict[str, pa.Table]:
    if rows == 0:
        return {}
    return {name: engine.sample(name, rows, scope=scope).table for name in names}


def _infos(
    engine: QueryEngine, names: list[str], scope: SourceScope | None = None
) -> list[TableInfo]:
    return [engine.table_info(name, scope) for name in names]


@block(
    "describe_tables",
    category="tool",
    description="The schema of tables for a prompt, as MAC-SQL writes it (values, keys).",
    example="tables [hr.main.employee] -> '# Table: hr.main.employee\\n[\\n  (id, id. Value ...'",
    needs=(TABLES,),
)
async def describe_tables(
    config: DescribeConfig, ctx: NodeContext, sources: list[str] | None = None
) -> str:
    """Renders the tables in MAC-SQL's format: each column with its comment and a few value
    examples read from the table, then the foreign keys between the tables. Tables are named
    as the SQL must name them (source.schema.table). Wide tables are cut to `max_columns`
    with a note of how many more there are. The `sources` input scopes them: a table outside
    it is refused (`table_out_of_scope`)."""
    from dagwright.data.serialize import mac_sql_schema

    engine = _engine(ctx)

    def render() -> str:
        scope = _scope(engine, sources)
        names = config.tables or [str(ref) for ref in engine.tables(scope)]
        infos = _infos(engine, names, scope)
        qualified = [str(engine.catalog.resolve(name.split("."))) for name in names]
        samples = _samples(engine, qualified, config.sample_rows, scope)
        return mac_sql_schema(
            infos,
            samples,
            names=qualified,
            max_columns=config.max_columns,
            max_values=config.max_values,
        )

    return await ctx.table_work(render)


class SampleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    table: str = Field(description="The table, as source.schema.table (or source.table).")
    rows: int = Field(5, ge=1, le=1000, description="How many rows.")
    columns: list[str] = Field(default_factory=list, description="Only these columns.")


@block(
    "sample_rows",
    category="tool",
    description="The first rows of a table, as records.",
    example="table hr.main.employee, rows 2 -> [{id: 1, name: 'Lucy'}, {id: 2, name: 'Tom'}]",
    needs=(TABLES,),
)
async def sample_rows(
    config: SampleConfig, ctx: NodeContext, sources: list[str] | None = None
) -> Records:
    """Reads the first `rows` rows of the table (only the `columns` given, when any); a
    table outside the `sources` input's scope is refused (`table_out_of_scope`)."""
    engine = _engine(ctx)

    def read() -> QueryResult:
        scope = _scope(engine, sources)
        return engine.sample(config.table, config.rows, config.columns or None, scope)

    result = await ctx.table_work(read)
    return result.records()


class LookupOutput(TypedDict):
    schema: str
    tables: list[str]


class SchemaLookupConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    top_tables: int = Field(5, ge=1, le=50, description="Tables picked (joins may add more).")
    top_columns: int = Field(12, ge=1, le=200, description="Columns shown per picked table.")
    sources: list[str] = Field(default_factory=list, description=SCOPE_HELP)
    sample_rows: int = Field(20, ge=0, le=1000, description="Rows read per table for values.")
    embedder: str | None = Field(
        None,
        description="Also rank by embedding similarity with this embedder (e.g. minilm, "
        "hashing:256, openai:<provider>); empty: lexical ranking only.",
    )


# Candidates a question's tables are chosen from: this many per table asked for, at least
# MIN_CANDIDATES; a catalogue no larger is taken whole (as before retrieval existed).
CANDIDATES_PER_TABLE = 2
MIN_CANDIDATES = 10


def _candidates(
    ctx: NodeContext,
    engine: QueryEngine,
    question: str,
    config: SchemaLookupConfig,
    sources: list[str] | None,
) -> list[str]:
    """The tables a question's lookup describes and samples: the best matches of the stored
    catalogue's index within the question's scope (plus the tables their foreign keys
    reference, which a join needs), so a question's cost does not grow with the catalogue;
    every table of the scope when there are no more than the candidates would be."""
    from dagwright.data.catalog import TableRef

    scope = _scope(engine, config.sources, sources)
    in_sources = None if scope is None else list(scope.sources)
    catalogue = ctx.service(TABLES).catalogue()
    wanted = max(CANDIDATES_PER_TABLE * config.top_tables, MIN_CANDIDATES)
    found = catalogue.search(question, wanted, in_sources)  # reads a source never read before
    if catalogue.size(in_sources) <= wanted:
        return [str(ref) for ref in engine.tables(scope)]
    admitted = [
        entry
        for entry in found
        if scope is None or scope.admits(TableRef(entry.source, entry.schema, entry.table))
    ]
    names = [entry.name for entry in admitted]
    for entry in admitted:
        for referenced in entry.references:
            target = catalogue.entry(referenced)
            if referenced in names or target is None:
                continue
            if scope is None or scope.admits(TableRef(target.source, target.schema, target.table)):
                names.append(referenced)
    return names


@block(
    "schema_lookup",
    category="tool",
    description="Pick the tables and columns a question needs and describe them for a prompt.",
    example="'What is the year-end bonus for Tom?' -> employee and salary tables, MAC-SQL style",
    needs=(TABLES,),
)
async def schema_lookup(
    config: SchemaLookupConfig, ctx: NodeContext, question: str, sources: list[str] | None = None
) -> LookupOutput:
    """Finds the question's candidate tables in the stored catalogue's index (names,
    comments, values; docs/data.md), then ranks those tables and their columns against the
    question — by words (names split at case
    and underscores, comments, value examples; BM25) and, with an embedder, by meaning — and
    keeps the best tables, plus the tables their joins need (foreign keys). `schema` renders
    them in MAC-SQL's format with only the chosen columns; `tables` names them as the SQL
    must (source.schema.table). The `sources` input (e.g. a TQA dataset's) narrows the
    tables further than the setting: a table must be in both lists (empty: no limit)."""
    from dagwright.data.connector import TableInfo
    from dagwright.data.schema_lookup import lookup
    from dagwright.data.serialize import mac_sql_schema

    engine = _engine(ctx)

    def gather() -> tuple[list[str], list[TableInfo], dict[str, pa.Table]]:
        names = _candidates(ctx, engine, question, config, sources)
        return names, _infos(engine, names), _samples(engine, names, config.sample_rows)

    names, infos, samples = await ctx.table_work(gather)
    # The process makes the embedder (a provider's goes through its model gateway).
    embedder = ctx.service(TABLES).embedder(config.embedder) if config.embedder else None
    matches = await lookup(
        question,
        infos,
        top_tables=config.top_tables,
        top_columns=config.top_columns,
        embedder=embedder,
        samples=samples,
        names=names,
    )
    chosen_names = [names[infos.index(match.table)] for match in matches]
    trimmed = [
        TableInfo(
            match.table.schema,
            match.table.name,
            tuple(match.table.column(name) for name, _ in match.columns) or match.table.columns,
            match.table.primary_key,
            match.table.foreign_keys,
            match.table.row_estimate,
            match.table.comment,
        )
        for match in matches
    ]
    ctx.emit(
        "schema_lookup",
        tables=[
            {"table": n, "score": m.score, "via": m.via}
            for n, m in zip(chosen_names, matches, strict=True)
        ],
    )
    schema = mac_sql_schema(trimmed, samples, names=chosen_names)
    return {"schema": schema, "tables": chosen_names}


# -- Python on tables ----------------------------------------------------------------------------


class PythonOutput(TypedDict):
    result: Any
    stdout: str


class PythonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(
        description="Python (pandas as pd, numpy as np); each input table is a DataFrame named "
        "by its key; set `result` to a DataFrame, a Series or a JSON value.",
        json_schema_extra={"format": "code"},
    )
    cpu_s: int = Field(10, ge=1, le=600, description="CPU seconds allowed.")
    wall_s: float = Field(20, gt=0, le=1200, description="Wall-clock seconds allowed.")
    memory_mb: int = Field(
        1024, ge=64, le=16384, description="Memory allowed, in MB (at most the server's ceiling)."
    )

    @field_validator("memory_mb")
    @classmethod
    def _within_ceiling(cls, value: int) -> int:
        from dagwright.data.sandbox_budget import check_memory_mb

        return check_memory_mb(value)


@block(
    "python_on_tables",
    category="tool",
    description="Run Python (pandas) on tables in an isolated process with CPU, memory, "
    "time limits.",
    example="tables {sales: [...]}, code 'result = sales.groupby(\"region\").amount.sum()' -> rows",
    needs=(SANDBOX,),
)
async def python_on_tables(
    config: PythonConfig, ctx: NodeContext, tables: dict[str, Records]
) -> PythonOutput:
    """Runs the code in a fresh subprocess: each table of `tables` is a pandas DataFrame of
    that name, `result` is what the node gives (a DataFrame becomes records). The process
    has no network, sees only a scratch folder, gets none of the server's environment, and is
    stopped past its CPU, wall-clock or memory limit; an exception comes back with the
    traceback of the user's lines."""
    import pyarrow as pa

    from dagwright.data.sandbox import SandboxLimits, run_python

    limits = SandboxLimits(cpu_s=config.cpu_s, wall_s=config.wall_s, memory_mb=config.memory_mb)
    frames = {name: _table(records, f"tables.{name}") for name, records in tables.items()}
    outcome = await ctx.table_work(
        run_python, config.code, frames, limits=limits, settings=ctx.service(SANDBOX)
    )
    result = outcome.result
    return {
        "result": _records(result) if isinstance(result, pa.Table) else result,
        "stdout": outcome.stdout,
    }


# -- Chain-of-Table --------------------------------------------------------------------------------


@block(
    "table_chain",
    category="tool",
    description="Chain-of-Table operations: select rows or columns, group by, sort by, add "
    "a column.",
    example="'f_select_row(row 1, row 3) -> f_sort_by(Bonus, desc)' -> the two rows, sorted",
    inline=True,
)
def table_chain(
    table: Records,
    chain: str,
    new_columns: dict[str, list[Any]] | None = None,
) -> Records:
    """Runs a chain of the Chain-of-Table operations on the table, deterministically:
    f_add_column(X) (values from `new_columns[X]`), f_select_row(row 1, row 3),
    f_select_column(a, b), f_group_by(a) (a with a Count column), f_sort_by(a[, desc]).
    Rows are numbered from 1 as in the PIPE encoding; an unknown column or row fails the node
    naming it."""
    from dagwright.data.table_ops import apply_chain

    return _records(apply_chain(_table(table, "table"), chain, new_columns))


class PipeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    caption: str = Field("", description="A caption line above the table.")
    max_rows: int = Field(30, ge=1, le=10_000, description="Rows shown; the rest are counted.")
    max_columns: int = Field(30, ge=1, le=500, description="Columns shown.")


@block(
    "table_text",
    category="tool",
    description="A table as text for a prompt, in Chain-of-Table's PIPE encoding.",
    example="[{a: 1, b: 'x'}] -> '/*\\ncol : a | b\\nrow 1 : 1 | x\\n*/'",
    inline=True,
)
def table_text(config: PipeConfig, table: Records) -> str:
    """Writes the table as Chain-of-Table does: a header line, numbered rows, cells separated
    by `|`; long tables end with a note of how many rows (and columns) were left out."""
    from dagwright.data.serialize import pipe_table

    return pipe_table(
        _table(table, "table"),
        config.caption or None,
        max_rows=config.max_rows,
        max_columns=config.max_columns,
    )
