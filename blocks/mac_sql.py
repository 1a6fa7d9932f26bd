"""MAC-SQL (Wang et al., 2023) as blocks, agent for agent as its official implementation
runs: `macsql_schema` describes the database (value examples, keys), `macsql_selector`
prunes a large schema, `macsql_decomposer` writes sub-questions with their SQL, and each
round of a `repeat` runs `macsql_refiner` (execute, and on an error repair). The algorithm is
in dagwright.methods.mac_sql; a database is a SQLite file (Spider, BIRD) or a source of the
data layer (PostgreSQL, MariaDB, files), whose tables the SQL names as source.schema.table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from dagwright.errors import DataError, InputError
from dagwright.registry import MODELS, SOURCE_PATHS, TABLES, NodeContext, block

if TYPE_CHECKING:
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.methods.mac_sql.agents import Execution
    from dagwright.methods.mac_sql.schema import Table

Dataset = Literal["spider", "bird"]


class ModelChoice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider: str | None = Field(None, description="A configured provider; empty: the default.")
    model: str | None = Field(None, description="Empty: the provider's default model.")
    temperature: float = Field(0.0, ge=0, le=2, description="The official runs use 0.")
    max_tokens: int | None = Field(None, ge=1)


async def _ask(ctx: NodeContext, config: ModelChoice, prompt: str) -> str:
    from dagwright.llm.gateway import ChatRequest

    request = ChatRequest(
        messages=[{"role": "user", "content": prompt}],
        model=config.model,
        temperature=config.temperature,
        max_tokens=config.max_tokens,
    )
    result = await ctx.service(MODELS).chat(config.provider, request)
    ctx.record_usage(result.usage, result.call)
    return result.choices[0]


# -- the database ----------------------------------------------------------------------------------


class SchemaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    databases: str = Field(
        "",
        description="A folder of databases (<db>/<db>.sqlite, or the Spider pack's "
        "<db>/schema.sql + CSV): `database` may then be a db id in it.",
    )
    dataset: Dataset = Field("spider", description="spider strips text values; bird does not.")


class SchemaOutput(TypedDict):
    tables: list[dict[str, Any]]
    need_prune: bool  # more than 6 columns per table on average, or 30 in all
    target: dict[str, str]  # where the SQL runs: {kind: sqlite, path} or {kind: engine}
    db_id: str


# Where databases built from a dataset's DDL are kept, under the data directory.
_BUILT_DATABASES = Path("eval-cache") / "sqlite"


def _built_databases(paths: SourcePaths) -> Path:
    if paths.data_dir is None:
        raise ValueError("MAC-SQL's SQLite databases need a data directory: the process has none")
    return paths.data_dir / _BUILT_DATABASES


def _readable_sqlite(ctx: NodeContext, path: Path) -> Path:
    """The SQLite file resolved, when a file source could read it too (the source roots of
    docs/security.md) or it is a database built here from a dataset's DDL: a flow must not
    reach the data directory's own database by naming it."""
    paths = ctx.service(SOURCE_PATHS)
    rule = paths.with_roots([_built_databases(paths)])
    return rule.check(path.absolute(), "macsql", strict=True)


def _sqlite_target(
    config: SchemaConfig, ctx: NodeContext, database: str
) -> tuple[Path, str | None] | None:
    """(file, DDL with the keys) for a SQLite database named by path or by db id."""
    path = Path(database)
    if path.suffix in (".sqlite", ".db") and path.is_file():
        return _readable_sqlite(ctx, path), None
    if not config.databases:
        return None
    from dagwright.evaluation.sql_databases import DatabaseRoot

    root = Path(config.databases)
    if not (root / database).is_dir():
        return None
    built = DatabaseRoot(root, _built_databases(ctx.service(SOURCE_PATHS))).path(database)
    ddl = root / database / "schema.sql"
    # A database built from the pack's DDL has no constraints: its keys are read from the DDL.
    return built, ddl.read_text("utf-8") if built.parent != root / database else None


@block(
    "macsql_schema",
    category="tool",
    description="MAC-SQL: describe a database (columns, value examples, keys) for its agents.",
    example="database concert_singer -> tables with value examples, need_prune false",
    needs=(SOURCE_PATHS,),  # and the tables when the database is a registered source
)
async def macsql_schema(config: SchemaConfig, ctx: NodeContext, database: str) -> SchemaOutput:
    """`database` is a SQLite file, a db id in `databases`, or a data source's name (its
    tables are read through the data layer; empty: every source's). Each column gets a
    readable name and up to six value examples (none for keys, ids, e-mails, URLs, long
    texts or many numbers), each table its primary and foreign keys, as the official
    Selector builds them."""
    from dagwright.methods.mac_sql import databases as dbs
    from dagwright.methods.mac_sql.schema import need_prune, table_to_dict

    local = _sqlite_target(config, ctx, database) if database else None
    strip = config.dataset == "spider"
    if local is not None:
        path, ddl = local
        tables = await ctx.table_work(dbs.sqlite_tables, path, ddl, strip)
        target = {"kind": "sqlite", "path": str(path)}
    else:
        engine = ctx.service(TABLES).engine()
        # No database named: every registered source (AutoTQA's text-to-SQL tool).
        names = [str(ref) for ref in engine.tables() if ref.source == database or not database]
        if not names:
            raise InputError(f"no database {database!r}: not a SQLite file, db id or source")
        tables = await ctx.table_work(dbs.engine_tables, engine, names)
        target = {"kind": "engine", "source": database}
    db_id = Path(database).stem if local is not None else database
    return {
        "tables": [table_to_dict(t) for t in tables],
        "need_prune": need_prune(tables),
        "target": target,
        "db_id": db_id,
    }


# -- Selector --------------------------------------------------------------------------------------


class SelectorOutput(TypedDict):
    desc_str: str  # the schema the other agents see
    fk_str: str
    extracted: dict[str, Any]  # the Selector's decision per table ({} : none or unreadable)
    chosen: dict[str, list[str]]  # the columns kept per table
    pruned: bool


@block(
    "macsql_selector",
    category="llm",
    description="MAC-SQL Selector: keep the tables and columns a question needs (large schemas).",
    example="a 12-table schema -> {account: keep_all, loan: drop_all, district: [A11, ...]}",
    needs=(MODELS,),
)
async def macsql_selector(
    config: ModelChoice,
    ctx: NodeContext,
    tables: list[dict[str, Any]],
    need_prune: bool,
    db_id: str,
    question: str,
    evidence: str = "",
) -> SelectorOutput:
    """Asks the model only when the schema is large. Its answer decides per table
    "keep_all", "drop_all" or a column list; primary and foreign keys are always kept; an
    answer that does not parse falls back to the full schema."""
    from dagwright.methods.mac_sql.agents import selector_answer
    from dagwright.methods.mac_sql.prompts import selector_prompt
    from dagwright.methods.mac_sql.schema import describe, table_from_dict

    described: list[Table] = [table_from_dict(t) for t in tables]
    desc, fk, chosen = describe(described)
    if not need_prune:
        return {"desc_str": desc, "fk_str": fk, "extracted": {}, "chosen": chosen, "pruned": False}
    reply = await _ask(ctx, config, selector_prompt(db_id, question, evidence, desc, fk))
    extracted = selector_answer(reply)
    desc, fk, chosen = describe(described, extracted)
    return {
        "desc_str": desc,
        "fk_str": fk,
        "extracted": extracted,
        "chosen": chosen,
        "pruned": True,
    }


# -- Decomposer ------------------------------------------------------------------------------------


class DecomposerOutput(TypedDict):
    sql: str  # the last SQL (the answer to the last sub-question)
    sub_questions: list[dict[str, str]]  # {question, sql}
    reply: str


@block(
    "macsql_decomposer",
    category="llm",
    description="MAC-SQL Decomposer: sub-questions, each with its SQL; the last SQL answers.",
    example="question -> Sub question 1 ... SQL; Sub question 2 ... SQL -> the last SQL",
    needs=(MODELS,),
)
async def macsql_decomposer(
    config: ModelChoice,
    ctx: NodeContext,
    question: str,
    desc_str: str,
    fk_str: str,
    evidence: str = "",
) -> DecomposerOutput:
    """Asks the model to decompose the question into sub-questions and write the SQL of each,
    thinking step by step; the final SQL is the last ```sql block (none: the official error
    text, which the Refiner passes on unchanged)."""
    from dagwright.methods.mac_sql.agents import sql_of, sub_questions
    from dagwright.methods.mac_sql.prompts import decomposer_prompt

    reply = (
        await _ask(ctx, config, decomposer_prompt(question, evidence, desc_str, fk_str))
    ).strip()
    steps = [{"question": step["question"], "sql": step["sql"]} for step in sub_questions(reply)]
    return {"sql": sql_of(reply), "sub_questions": steps, "reply": reply}


# -- Refiner ---------------------------------------------------------------------------------------


class RefinerConfig(ModelChoice):
    dataset: Dataset = Field(
        "spider",
        description="spider: repair failed queries; bird: also empty results and None values.",
    )
    timeout_s: float = Field(120, gt=0, le=600, description="The official limit is 120 s.")


class RefinerOutput(TypedDict):
    sql: str  # the SQL for the next round (repaired, or the same when done)
    done: bool
    execution: dict[str, Any]  # {sql, data (first rows), error, exception, timed_out}
    repaired: bool


async def _execute(
    ctx: NodeContext, target: dict[str, str], sql: str, timeout_s: float
) -> Execution:
    from dagwright.methods.mac_sql.agents import ROWS_SHOWN, execute_sqlite

    if target["kind"] == "sqlite":
        # The target comes from an edge a flow author may have written by hand: checked again.
        path = _readable_sqlite(ctx, Path(target["path"]))
        return await ctx.table_work(execute_sqlite, path, sql, timeout_s)
    engine = ctx.service(TABLES).engine()
    try:
        result = await ctx.table_work(engine.query, sql, max_rows=ROWS_SHOWN, timeout_s=timeout_s)
    except DataError as exc:
        timed_out = exc.code == "query_timeout"
        return {
            "sql": sql,
            "data": None,
            "error": exc.message,
            "exception": exc.code,
            "timed_out": timed_out,
        }
    rows = [list(row.values()) for row in result.records()]
    return {"sql": sql, "data": rows, "error": "", "exception": "", "timed_out": False}


@block(
    "macsql_refiner",
    category="llm",
    description="MAC-SQL Refiner: run the SQL (with a timeout); on an error, repair it.",
    example="SELECT nme FROM singer -> no such column: nme -> SELECT Name FROM singer",
    needs=(MODELS,),  # and the tables, or the source paths for a SQLite file, by its target
)
async def macsql_refiner(
    config: RefinerConfig,
    ctx: NodeContext,
    sql: str,
    target: dict[str, str],
    question: str,
    desc_str: str,
    fk_str: str,
    evidence: str = "",
) -> RefinerOutput:
    """One round of the official Refiner: the SQL runs; when it fails (BIRD: also when the
    result is empty or holds None), the model gets the error and the old SQL and writes a new
    one for the next round. A run that times out, succeeds, or SQL that is the Decomposer's
    error text ends the rounds."""
    from dagwright.methods.mac_sql.agents import needs_repair, sql_of, with_select
    from dagwright.methods.mac_sql.prompts import refiner_prompt

    if "error" in sql:  # the official check: the Decomposer gave no SQL
        empty = {"sql": sql, "data": None, "error": sql, "exception": "", "timed_out": False}
        return {"sql": sql, "done": True, "execution": empty, "repaired": False}
    execution = await _execute(ctx, target, sql, config.timeout_s)
    if execution["timed_out"] or not needs_repair(execution, config.dataset):
        return {"sql": sql, "done": True, "execution": dict(execution), "repaired": False}
    prompt = refiner_prompt(
        question,
        evidence,
        desc_str,
        fk_str,
        with_select(sql),
        execution["error"],
        execution["exception"],
    )
    new_sql = sql_of(await _ask(ctx, config, prompt))
    return {"sql": new_sql, "done": False, "execution": dict(execution), "repaired": True}
