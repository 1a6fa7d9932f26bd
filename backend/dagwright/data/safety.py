"""The read-only check every SQL text passes before it runs.

The rules (each refusal is ``SqlRefusedError``, code ``sql_refused``, naming the construct
and its line):

1. One statement. A second one (after a ``;``, comments included) is refused.
2. It is a query: it starts with SELECT, WITH, FROM (DuckDB's FROM-first form) or a
   parenthesis, and parses as a SELECT or a set operation (UNION, INTERSECT, EXCEPT). So
   INSERT, UPDATE, DELETE, MERGE, CREATE, DROP, ALTER, TRUNCATE, COPY, ATTACH, DETACH,
   INSTALL, LOAD, PRAGMA, SET, RESET, CALL, EXPORT/IMPORT DATABASE, VACUUM, CHECKPOINT,
   EXPLAIN, DESCRIBE, SHOW, SUMMARIZE, transactions and the like are refused.
3. Nothing inside it writes or changes state: data-changing statements nested in CTEs
   (``WITH d AS (DELETE ... RETURNING *)``) and ``SELECT ... INTO`` are refused.
4. Table functions are limited to ``range``/``generate_series`` (and ``unnest``): everything
   that reads files, URLs, other databases or DuckDB's own catalog (read_csv, read_parquet,
   read_json_auto, read_text, read_blob, glob, parquet_scan, sqlite_scan, postgres_scan,
   query, duckdb_tables()...) is refused.
5. Scalar functions that read the environment or the engine's settings are refused
   (getenv, current_setting, getvariable, json_execute_serialized_sql, anything named
   read_*, duckdb_*, pragma_* or *_scan).

What tables a query may name is the engine's rule, not this module's: only catalog tables
(``source.schema.table``), so a file name given as a table (``FROM 'file.csv'``), DuckDB's
system views (information_schema, pg_catalog, sqlite_master) and any other name are refused
there. DuckDB itself runs with external access disabled and its configuration locked, so a
construct that slipped past these rules still could not reach files or change settings.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from dagwright.errors import SqlRefusedError

DIALECT = "duckdb"

STARTS = {TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.L_PAREN}

# Expression classes that write, change state or leave the query; looked up by name because
# sqlglot adds and renames them between versions.
_FORBIDDEN_NAMES = (
    "Insert",
    "Update",
    "Delete",
    "Merge",
    "Create",
    "Drop",
    "Alter",
    "TruncateTable",
    "Copy",
    "Attach",
    "Detach",
    "Install",
    "Pragma",
    "Set",
    "Command",
    "Use",
    "Transaction",
    "Commit",
    "Rollback",
    "Describe",
    "Show",
    "Summarize",
    "Analyze",
    "LoadData",
    "Cache",
    "Uncache",
    "Refresh",
    "Into",
    "Grant",
    "Revoke",
    "Comment",
    "Kill",
    "Export",
)
FORBIDDEN: tuple[type[exp.Expr], ...] = tuple(
    cls
    for name in _FORBIDDEN_NAMES
    if isinstance(cls := getattr(exp, name, None), type) and issubclass(cls, exp.Expr)
)

ALLOWED_TABLE_FUNCTIONS = (exp.GenerateSeries, exp.Unnest)
DENIED_FUNCTIONS = {
    "getenv",
    "current_setting",
    "getvariable",
    "json_execute_serialized_sql",
    "query",
    "query_table",
    "glob",
    "sniff_csv",
    "which_secret",
    "load_aws_credentials",
}
DENIED_PREFIXES = ("read_", "duckdb_", "pragma_", "parquet_", "sqlite_", "postgres_", "mysql_")
DENIED_SUFFIXES = ("_scan",)


def check_sql(sql: str) -> exp.Query:
    """The parsed query when ``sql`` is one read-only query (see the module's rules), else
    SqlRefusedError saying what was refused and where."""
    try:
        tokens = sqlglot.tokenize(sql, read=DIALECT)
    except TokenError as exc:
        raise SqlRefusedError(f"the SQL could not be read: {exc}") from exc
    statements = _statements(tokens)
    if not statements:
        raise SqlRefusedError("there is no SQL statement")
    if len(statements) > 1:
        second = statements[1][0]
        raise SqlRefusedError(
            f"only one statement is allowed; a second one starts at line {second.line}"
            f" ({second.text.upper()})"
        )
    first = statements[0][0]
    if first.token_type not in STARTS:
        raise SqlRefusedError(
            f"statement {first.text.upper()} at line {first.line} is refused: only read-only"
            " queries (SELECT, WITH ... SELECT, FROM ...) may run"
        )
    try:
        tree = sqlglot.parse_one(sql, dialect=DIALECT)
    except ParseError as exc:
        raise SqlRefusedError(f"the SQL could not be parsed: {_first_error(exc)}") from exc
    if not isinstance(tree, exp.Select | exp.SetOperation | exp.Subquery):
        raise SqlRefusedError(
            f"{type(tree).__name__.upper()} at line {line_of(tree)} is refused: only read-only"
            " queries may run"
        )
    for node in tree.walk():
        _check_node(node)
    return tree


def _statements(tokens: list[Token]) -> list[list[Token]]:
    """Tokens split into statements at semicolons; empty statements dropped."""
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    return [statement for statement in statements if statement]


def _check_node(node: exp.Expr) -> None:
    if isinstance(node, FORBIDDEN):
        what = "SELECT ... INTO" if isinstance(node, exp.Into) else type(node).__name__.upper()
        raise SqlRefusedError(f"{what} at line {line_of(node)} is refused: queries may only read")
    if (
        isinstance(node, exp.Table)
        and isinstance(node.this, exp.Func)
        and not isinstance(node.this, ALLOWED_TABLE_FUNCTIONS)
    ):
        raise SqlRefusedError(
            f"table function {_function_name(node.this)}() at line {line_of(node)} is refused:"
            " tables come from the catalog (source.schema.table); only range() and"
            " generate_series() may generate rows"
        )
    if isinstance(node, exp.Func):
        name = _function_name(node)
        if (
            name in DENIED_FUNCTIONS
            or name.startswith(DENIED_PREFIXES)
            or name.endswith(DENIED_SUFFIXES)
        ):
            raise SqlRefusedError(
                f"function {name}() at line {line_of(node)} is refused: it reads files, settings"
                " or the environment"
            )


def _function_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return node.sql_name().lower()


def line_of(node: exp.Expr) -> int:
    """The line where ``node`` (or the first of its parts that knows it) starts."""
    for part in node.walk():
        line = part.meta.get("line")
        if isinstance(line, int):
            return line
    return 1


def _first_error(exc: ParseError) -> str:
    if exc.errors:
        error = exc.errors[0]
        return f"{error.get('description')} (line {error.get('line')}, column {error.get('col')})"
    return str(exc)
