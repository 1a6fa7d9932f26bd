"""The read-only check every SQL text passes before it runs.

The rules (each refusal is ``SqlRefusedError``, code ``sql_refused`` unless said, naming the
construct and its line):

0. Before anything is parsed: at most ``MAX_SQL_BYTES`` bytes of UTF-8 (``sql_too_large``)
   and brackets — ``(``, ``[``, ``{`` and ``CASE ... END`` — nested at most ``MAX_SQL_DEPTH``
   deep (``sql_too_deep``), counted on the tokens in one pass. sqlglot is a recursive-descent
   parser in pure Python (about 25 frames per nesting level, 15-40 us of CPU per byte from
   tokens to the plan): a bigger or deeper text costs seconds of CPU or Python's recursion
   limit. Text that still recurses too deep (long chains of unary operators) is refused
   with ``sql_too_deep`` too; any other failure of the parser is ``sql_refused``. Once
   parsed, at most ``MAX_SQL_NODES`` syntax nodes, ``MAX_SQL_SELECTS`` SELECTs and
   ``MAX_SQL_TABLES`` table references (``sql_too_large``): planning is quadratic in them.
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
7. Lambdas nest at most ``MAX_LAMBDA_DEPTH`` deep, and the query with every CTE written out
   where it is used is at most ``MAX_CTE_EXPANSION`` times the size of its CTEs: DuckDB
   plans both in exponential time, in a phase it does not interrupt.
6. Functions that build a value far larger than their input from a number — repeat, lpad,
   rpad, printf/format widths, bar, to_base, list_resize/array_resize and range /
   generate_series used as a list (not as a table) — take only literal sizes of at most
   ``MAX_BUILT_SIZE`` (repeat: a literal value and count, ``MAX_BUILT_BYTES`` in all). DuckDB
   evaluates one such call without checking for interruption and outside its memory limit:
   ``repeat('ab', 1000000000)`` ran 27 s past a 1 s limit and took 4 GB.

What tables a query may name is the engine's rule, not this module's: only catalog tables
(``source.schema.table``), so a file name given as a table (``FROM 'file.csv'``), DuckDB's
system views (information_schema, pg_catalog, sqlite_master) and any other name are refused
there. DuckDB itself runs with external access disabled and its configuration locked, so a
construct that slipped past these rules still could not reach files or change settings.
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokenizer_core import Token, TokenType

from dagwright.data.limits import MAX_SQL_BYTES, MAX_SQL_DEPTH
from dagwright.errors import SqlRefusedError

DIALECT = "duckdb"

STARTS = {TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.L_PAREN}

# And after parsing, before planning: sqlglot's planning (scopes, column qualification) is
# quadratic in the number of SELECTs, tables and columns (800 UNION arms: 18 s; 10,000 select
# items: 17 s). These caps keep it near a second at worst.
MAX_SQL_NODES = 5_000
MAX_SQL_SELECTS = 64
MAX_SQL_TABLES = 64
# Rule 7: DuckDB binds nested lambdas in time exponential in their depth (14 levels: 0.1 s,
# each more doubles it) and expands CTEs where they are used (a chain of CTEs each reading
# the previous one twice: 15 levels ran past 5 s), in its planner, which no interruption
# stops. Bounded here by the nesting of lambdas and by the size of the query with every CTE
# written out where it is used.
MAX_LAMBDA_DEPTH = 6
MAX_CTE_EXPANSION = 256
OPENING = {TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE}
CLOSING = {TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END}

# Rule 6: the largest literal size (count, width, length) an amplifying function may take,
# and the largest value repeat() may build.
MAX_BUILT_SIZE = 10_000
MAX_BUILT_BYTES = 1_048_576

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


def check_sql(  # noqa: C901
    sql: str, *, max_bytes: int = MAX_SQL_BYTES, max_depth: int = MAX_SQL_DEPTH
) -> exp.Query:
    """The parsed query when ``sql`` is one read-only query (see the module's rules), else
    SqlRefusedError saying what was refused and where."""
    size = len(sql.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise SqlRefusedError(
            f"the SQL is {size:,} bytes; at most {max_bytes:,} are accepted",
            code="sql_too_large",
        )
    dialect = Dialect.get_or_raise(DIALECT)
    try:
        tokens = dialect.tokenize(sql)
    except TokenError as exc:
        raise SqlRefusedError(f"the SQL could not be read: {exc}") from exc
    except RecursionError as exc:
        raise _too_deep(max_depth) from exc
    _check_depth(tokens, max_depth)
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
        # The tokens already read: the parser would otherwise read the text again.
        trees = dialect.parser().parse(tokens, sql)
    except ParseError as exc:
        raise SqlRefusedError(f"the SQL could not be parsed: {_first_error(exc)}") from exc
    except RecursionError as exc:
        raise _too_deep(max_depth) from exc
    except Exception as exc:  # sqlglot's own bugs on odd input: still the caller's 400
        raise SqlRefusedError(f"the SQL could not be parsed: {type(exc).__name__}: {exc}") from exc
    tree = trees[0] if len(trees) == 1 else None
    if tree is None:
        raise SqlRefusedError("the SQL could not be parsed into one statement")
    if not isinstance(tree, exp.Select | exp.SetOperation | exp.Subquery):
        raise SqlRefusedError(
            f"{type(tree).__name__.upper()} at line {line_of(tree)} is refused: only read-only"
            " queries may run"
        )
    _check_size(tree)
    for node in tree.walk():
        _check_node(node)
    _check_expansion(tree)
    return tree


def _check_size(tree: exp.Expr) -> None:
    """Rule 0, once parsed: what the planner's cost grows with."""
    nodes = selects = tables = 0
    for node in tree.walk():
        nodes += 1
        selects += isinstance(node, exp.Select)
        tables += isinstance(node, exp.Table)
    for count, limit, what in (
        (nodes, MAX_SQL_NODES, "syntax elements"),
        (selects, MAX_SQL_SELECTS, "SELECTs"),
        (tables, MAX_SQL_TABLES, "table references"),
    ):
        if count > limit:
            raise SqlRefusedError(
                f"the SQL has {count:,} {what}; at most {limit:,} are accepted",
                code="sql_too_large",
            )


def _check_expansion(tree: exp.Expr) -> None:
    """Rule 7: lambdas nested too deep, CTEs that multiply when written out."""
    for lam in tree.find_all(exp.Lambda):
        depth, parent = 1, lam.parent
        while parent is not None:
            depth += isinstance(parent, exp.Lambda)
            parent = parent.parent
        if depth > MAX_LAMBDA_DEPTH:
            raise SqlRefusedError(
                f"lambdas nested {depth} deep at line {line_of(lam)} are refused (at most"
                f" {MAX_LAMBDA_DEPTH}): DuckDB plans them in exponential time"
            )
    for with_ in tree.find_all(exp.With):
        weights: dict[str, int] = {}
        for cte in with_.expressions:
            name = cte.alias_or_name.lower()
            weight = 1 + _cte_uses(cte.this, weights, exclude=name)
            if weight > MAX_CTE_EXPANSION:
                raise _expands(name, weight, cte)
            weights[name] = weight
        owner = with_.parent
        if owner is not None:
            body = owner.copy()
            body.set("with_" if "with_" in body.args else "with", None)
            total = 1 + _cte_uses(body, weights, exclude=None)
            if total > MAX_CTE_EXPANSION:
                raise _expands("the query", total, owner)


def _cte_uses(node: exp.Expr, weights: dict[str, int], exclude: str | None) -> int:
    """How many CTE bodies ``node`` holds when every CTE it reads is written out."""
    total = 0
    for table in node.find_all(exp.Table):
        if table.args.get("db") or table.args.get("catalog"):
            continue
        name = table.name.lower()
        if name != exclude and name in weights:
            total += weights[name]
    return total


def _expands(name: str, weight: int, node: exp.Expr) -> SqlRefusedError:
    what = name if name == "the query" else f"CTE {name}"
    return SqlRefusedError(
        f"{what} at line {line_of(node)} is refused: with every CTE written out where it is"
        f" used it would be {weight:,} copies of them (at most {MAX_CTE_EXPANSION}), which"
        " DuckDB plans in exponential time; read a CTE once and join its result instead"
    )


def _check_depth(tokens: list[Token], max_depth: int) -> None:
    """Refuses brackets (and CASE ... END) nested deeper than ``max_depth``: one pass over
    the tokens, before the recursive parser sees them."""
    depth = 0
    for token in tokens:
        if token.token_type in OPENING:
            depth += 1
            if depth > max_depth:
                raise SqlRefusedError(
                    f"the SQL nests brackets, subqueries or CASE more than {max_depth} deep"
                    f" (line {token.line}); flatten it, with WITH for instance",
                    code="sql_too_deep",
                )
        elif token.token_type in CLOSING:
            depth = max(0, depth - 1)


def _too_deep(max_depth: int) -> SqlRefusedError:
    return SqlRefusedError(
        "the SQL is nested too deeply to be parsed (chains of operators or brackets);"
        f" at most {max_depth} levels of brackets are accepted: flatten it, with WITH for"
        " instance",
        code="sql_too_deep",
    )


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
        _check_amplifier(node, name)


def _check_amplifier(node: exp.Func, name: str) -> None:  # noqa: C901, PLR0912
    """Rule 6: a function that builds a large value from a number takes a literal, bounded
    size."""
    where = f"{name}() at line {line_of(node)}"
    if isinstance(node, exp.Repeat):
        value, times = node.this, _integer(node.args.get("times"))
        if not isinstance(value, exp.Literal | exp.Array) or times is None:
            raise _amplifies(where, "takes a literal value and a literal count here")
        if times * max(1, len(value.sql(DIALECT))) > MAX_BUILT_BYTES:
            raise _amplifies(where, f"may build at most {MAX_BUILT_BYTES:,} bytes")
        return
    sizes: list[exp.Expr | None] = []
    if isinstance(node, exp.Pad | exp.Space):
        sizes = [node.args.get("expression") if isinstance(node, exp.Pad) else node.this]
    elif isinstance(node, exp.GenerateSeries) and not isinstance(node.parent, exp.Table):
        start, end = _integer(node.args.get("start")), _integer(node.args.get("end"))
        step = node.args.get("step")
        step_value = 1 if step is None else _integer(step)
        if start is None or end is None or step_value is None:
            raise _amplifies(
                where,
                "builds a list here: give it literal bounds, or use FROM range(...) to make rows",
            )
        count = abs(end - start) // max(1, abs(step_value))
        if count > MAX_BUILT_SIZE:
            raise _amplifies(
                where,
                f"would build a list of {count:,} items (at most {MAX_BUILT_SIZE:,}); use"
                " FROM range(...) to make rows",
            )
        return
    elif isinstance(node, exp.Format) or name == "printf":
        spec = node.this if isinstance(node, exp.Format) else _argument(node, 0)
        if not (isinstance(spec, exp.Literal) and spec.is_string):
            raise _amplifies(where, "takes a literal format string")
        widths = _format_widths(str(spec.this), fmt=isinstance(node, exp.Format))
        if widths is None or any(width > MAX_BUILT_SIZE for width in widths):
            raise _amplifies(
                where, f"takes literal widths and precisions of at most {MAX_BUILT_SIZE:,}"
            )
        return
    elif name == "bar":
        sizes = [_argument(node, 3)] if _argument(node, 3) is not None else []
    elif name == "to_base":
        sizes = [_argument(node, 2)] if _argument(node, 2) is not None else []
    elif name in ("list_resize", "array_resize"):
        sizes = [_argument(node, 1)]
    for size in sizes:
        value = _integer(size)
        if value is None or value > MAX_BUILT_SIZE:
            raise _amplifies(where, f"takes a literal size of at most {MAX_BUILT_SIZE:,}")


def _amplifies(where: str, rule: str) -> SqlRefusedError:
    return SqlRefusedError(
        f"{where} is refused: it {rule} (it builds values larger than its input, which the"
        " engine cannot stop or bound once it runs)"
    )


def _argument(node: exp.Func, index: int) -> exp.Expr | None:
    """The index-th argument of a function sqlglot does not know (exp.Anonymous)."""
    expressions = node.expressions
    return expressions[index] if index < len(expressions) else None


def _integer(node: exp.Expr | None) -> int | None:
    """The value of an integer literal (a leading minus allowed), else None."""
    negative = False
    if isinstance(node, exp.Neg):
        node, negative = node.this, True
    if isinstance(node, exp.Paren):
        return _integer(node.this)
    if isinstance(node, exp.Literal) and not node.is_string and str(node.this).isdigit():
        value = int(str(node.this))
        return -value if negative else value
    return None


_PRINTF_SPEC = re.compile(r"%(?:%|[^a-zA-Z%]*[a-zA-Z])")
_FMT_SPEC = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def _format_widths(spec: str, *, fmt: bool) -> list[int] | None:
    """The numbers inside the conversion specifications of a printf (``%08.3f``) or fmt
    (``{:>8}``) format string; None when a width comes from an argument (``%*d``,
    ``{:{}}``)."""
    if fmt:
        if re.search(r"\{[^{}]*\{(?!\{)", spec.replace("{{", "").replace("}}", "")):
            return None  # a nested replacement field: the width is an argument
        parts = [m for m in _FMT_SPEC.findall(spec) if m not in ("{{", "}}")]
    else:
        parts = _PRINTF_SPEC.findall(spec)
        if any("*" in part for part in parts):
            return None
    return [int(number) for part in parts for number in re.findall(r"\d+", part)]


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
