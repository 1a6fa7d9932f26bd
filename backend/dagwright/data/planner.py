"""From a checked query to what the engine runs: the catalog tables it reads, the columns and
filters each needs, and the query with those tables replaced by the names they are
registered under in DuckDB.

- Tables are named ``source.schema.table`` (or ``source.table`` when the source has one
  schema). Any other table name (a bare name, a file name, DuckDB's system views) is refused;
  names bound to a CTE are left alone.
- Columns: the query is qualified by sqlglot against the tables' columns (on a copy: the SQL
  that runs keeps the user's spelling and output names) and each table gets exactly the
  columns some scope reads from it. When sqlglot cannot tell (``COLUMNS(...)``, a column it
  cannot place), every table is read whole: slower, never wrong.
- Filters: conjuncts of a SELECT's WHERE of the form ``column op literal``, ``column IN
  (literals)`` and ``column IS [NOT] NULL``, on a table read directly by that SELECT and not
  on the null-filled side of an outer join, with the literal converted losslessly to the
  column's type. A table referenced several times gets the filters common to all references.
  The engine keeps every filter in the SQL, so pushing one only saves reading.
- Streaming: a table referenced once, outside CTEs, is streamed to DuckDB as it is read;
  otherwise (self-joins, CTEs, recursion) it is read completely first, because DuckDB may
  scan it more than once and a stream can be read only once.
"""

from __future__ import annotations

import datetime
import decimal
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, cast

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope

from dagwright.data.catalog import Catalog, TableRef
from dagwright.data.connector import Filter, FilterOp, TableInfo
from dagwright.data.safety import DIALECT, line_of
from dagwright.data.scope import SourceScope
from dagwright.errors import SqlRefusedError

COMPARISONS: dict[type[exp.Expr], FilterOp] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
}
FLIPPED: dict[FilterOp, FilterOp] = {
    ">": "<",
    ">=": "<=",
    "<": ">",
    "<=": ">=",
    "=": "=",
    "!=": "!=",
}
# Join kinds after which a WHERE on either side may be applied to the table first.
PLAIN_JOIN_KINDS = {"", "INNER", "CROSS", "OUTER", "SEMI", "ANTI"}


class _NotALiteral(Exception):
    """An expression that is no literal, or one that does not fit the column's type."""


@dataclass
class Scan:
    """One catalog table a query reads: what to fetch and under which name DuckDB sees it."""

    ref: TableRef
    info: TableInfo
    name: str
    columns: tuple[str, ...]
    filters: tuple[Filter, ...]
    stream: bool


@dataclass
class Plan:
    tree: exp.Query  # the query with catalog tables replaced by registered names
    scans: list[Scan]


def plan_query(
    tree: exp.Query, catalog: Catalog, prefix: str, scope: SourceScope | None = None
) -> Plan:
    """The plan of a query that passed ``check_sql``. ``tree`` is rewritten in place; scans
    are registered as ``prefix`` + a number. SqlRefusedError for tables outside the catalog
    or outside the ``scope`` (``table_out_of_scope``), DataSourceError for missing tables."""
    nodes = _catalog_tables(tree)
    if scope is not None:
        # Every name first, before the catalog resolves any: a missing table of the scope
        # must not be reported (with what its source has) ahead of the refusal of another.
        for node in nodes:
            scope.check_name([part.name for part in node.parts], catalog, line_of(node))
    refs: dict[TableRef, list[exp.Table]] = {}
    for node in nodes:
        refs.setdefault(_resolve(node, catalog, scope), []).append(node)
    recursive = any(with_.args.get("recursive") for with_ in tree.find_all(exp.With))
    names = {ref: f"{prefix}{index}" for index, ref in enumerate(refs, 1)}
    infos = {ref: catalog.table_info(ref) for ref in refs}
    for ref, ref_nodes in refs.items():
        for node in ref_nodes:
            _rename(tree, node, names[ref])

    by_name = {names[ref]: infos[ref] for ref in refs}
    needed, filters = _analyse(tree, by_name)
    # Columns a star's EXCLUDE/REPLACE/RENAME names must exist in the registered table
    # even when no other part of the query reads them.
    starred = _star_modifier_names(tree)
    scans = []
    for ref, ref_nodes in refs.items():
        info, name = infos[ref], names[ref]
        columns = needed.get(name)
        if columns is None:  # analysis gave up: the whole table
            columns = [column.name for column in info.columns]
        elif starred:
            columns = [
                c.name for c in info.columns if c.name in columns or c.name.lower() in starred
            ]
        if not columns:  # count(*) and the like: any one column gives the rows
            columns = [info.columns[0].name]
        streamed = (
            len(ref_nodes) == 1 and not recursive and ref_nodes[0].find_ancestor(exp.CTE) is None
        )
        scans.append(Scan(ref, info, name, tuple(columns), tuple(filters.get(name, ())), streamed))
    return Plan(tree, scans)


def _star_modifier_names(tree: exp.Query) -> set[str]:
    """The (lower-cased) column names in the modifiers of stars (``* EXCLUDE (a)``)."""
    names: set[str] = set()
    for star in tree.find_all(exp.Star):
        for value in star.args.values():
            for item in value if isinstance(value, list) else []:
                names.update(column.name.lower() for column in item.find_all(exp.Column))
                if isinstance(item, exp.Alias):
                    names.add(item.alias.lower())
    return names


def _catalog_tables(tree: exp.Query) -> list[exp.Table]:
    """The table references that must name catalog tables: every table that is neither a
    CTE's name in scope nor a (checked) table function."""
    found: list[exp.Table] = []
    seen: set[int] = set()
    try:
        scopes = traverse_scope(tree)
    except SqlglotError as exc:
        raise SqlRefusedError(f"the query's tables could not be analysed: {exc}") from exc
    for scope in scopes:
        for table in scope.tables:
            seen.add(id(table))
            if isinstance(table.this, exp.Func):
                continue
            single = not table.args.get("db") and not table.args.get("catalog")
            if single and table.name in scope.cte_sources:
                continue
            found.append(table)
    for table in tree.find_all(exp.Table):
        if id(table) not in seen and not isinstance(table.this, exp.Func):
            # A table in a place scope analysis does not reach: refused rather than unchecked.
            raise SqlRefusedError(
                f"table {table.sql(dialect=DIALECT)} at line {line_of(table)} could not be"
                " checked against the catalog"
            )
    return found


def _resolve(node: exp.Table, catalog: Catalog, scope: SourceScope | None) -> TableRef:
    parts = [part.name for part in node.parts]
    if scope is not None:
        # Checked on the name as written, before the catalog is asked: a refused table is
        # never looked up, so the refusal cannot tell whether it exists.
        scope.check_name(parts, catalog, line_of(node))
    try:
        ref = catalog.resolve(parts)
    except ValueError as exc:
        shown = ".".join(parts)
        hint = (
            " (files and URLs are read through a source of the catalog)"
            if any(mark in shown for mark in ("/", "\\", ".csv", ".parquet", ".json"))
            else ""
        )
        raise SqlRefusedError(
            f"table {shown} at line {line_of(node)} is not in the catalog{hint}: {exc}"
        ) from exc
    if scope is not None:
        scope.check(ref, line_of(node))
    return ref


def _rename(tree: exp.Query, node: exp.Table, name: str) -> None:
    """Points a table reference at its registered name, keeping the name the query uses for
    it (its alias, else its table name) so qualified columns still bind."""
    original = [part.name.lower() for part in node.parts]
    if node.args.get("alias") is None:
        node.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
    node.set("this", exp.to_identifier(name))
    node.set("db", None)
    node.set("catalog", None)
    # Columns qualified by the full name (source.schema.table.column) keep only the table.
    for column in tree.find_all(exp.Column):
        if column.args.get("db") is None:
            continue
        qualifier = [part.name.lower() for part in column.parts[:-1]]
        if qualifier and qualifier == original[-len(qualifier) :]:
            column.set("catalog", None)
            column.set("db", None)


def _analyse(
    tree: exp.Query, infos: dict[str, TableInfo]
) -> tuple[dict[str, list[str] | None], dict[str, list[Filter]]]:
    """Per registered name: the columns read (None: could not tell) and the pushable
    filters."""
    schema = {name: {c.name: "UNKNOWN" for c in info.columns} for name, info in infos.items()}
    give_up: dict[str, list[str] | None] = dict.fromkeys(infos)
    try:
        analysed = qualify(
            tree.copy(),
            schema=cast(dict[str, object], schema),
            dialect=DIALECT,
            validate_qualify_columns=False,
            quote_identifiers=False,
            identify=False,
        )
        scopes = traverse_scope(analysed)
    except SqlglotError:
        return give_up, {}
    if analysed.find(exp.Columns) is not None:  # DuckDB's COLUMNS(regex): unknowable
        return give_up, {}

    needed: dict[str, set[str]] = defaultdict(set)
    occurrences: dict[str, list[set[Filter]]] = defaultdict(list)
    for scope in scopes:
        direct = {
            alias: source.name
            for alias, source in scope.sources.items()
            if isinstance(source, exp.Table) and source.name in infos
        }
        for column in scope.columns:
            table = _table_of(scope, column.table)
            if table is None:
                if direct and not isinstance(scope.expression, exp.SetOperation):
                    return give_up, {}  # a column sqlglot cannot place (a struct field...)
                continue
            if isinstance(table, exp.Table) and table.name in infos:
                try:
                    needed[table.name].add(infos[table.name].column(column.name).name)
                except KeyError:
                    continue  # no such column: DuckDB will say so
        pushable = _pushable(scope, direct, infos)
        for alias, name in direct.items():
            occurrences[name].append(pushable.get(alias, set()))

    filters: dict[str, list[Filter]] = {}
    for name, sets in occurrences.items():
        common = set.intersection(*sets) if sets else set()
        filters[name] = sorted(common, key=str)
    columns: dict[str, list[str] | None] = {
        name: [c.name for c in infos[name].columns if c.name in needed[name]] for name in infos
    }
    return columns, filters


def _table_of(scope: Scope, alias: str) -> exp.Table | Scope | None:
    """What a column qualifier names, looking outwards (correlated subqueries)."""
    current: Scope | None = scope
    while current is not None:
        source = current.sources.get(alias)
        if source is not None:
            return source
        current = current.parent
    return None


def _pushable(
    scope: Scope, direct: dict[str, str], infos: dict[str, TableInfo]
) -> dict[str, set[Filter]]:
    """The filters of a SELECT's WHERE that may run at the source, by table alias."""
    select = scope.expression
    if not isinstance(select, exp.Select) or not direct:
        return {}
    where = select.args.get("where")
    if not isinstance(where, exp.Where):
        return {}
    nullable = _nullable(select)
    if nullable is None:
        return {}
    found: dict[str, set[Filter]] = defaultdict(set)
    for term in _conjuncts(where.this):
        column, made = _filter(term, direct, infos)
        if column is None or made is None:
            continue
        table = scope.sources[column.table]
        if column.table in nullable or (isinstance(table, exp.Table) and table.args.get("sample")):
            continue
        found[column.table].add(made)
    return found


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    """The terms ANDed together in a condition, parentheses removed and ``x BETWEEN a AND b``
    split into ``x >= a`` and ``x <= b``."""
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return [
            term for part in (condition.this, condition.expression) for term in _conjuncts(part)
        ]
    if isinstance(condition, exp.Between) and not condition.args.get("symmetric"):
        low, high = condition.args["low"], condition.args["high"]
        return [
            exp.GTE(this=condition.this.copy(), expression=low.copy()),
            exp.LTE(this=condition.this.copy(), expression=high.copy()),
        ]
    return [condition]


def _nullable(select: exp.Select) -> set[str] | None:
    """The aliases an outer join may fill with nulls; None when a join (ASOF, POSITIONAL...)
    makes any early filtering unsafe."""
    seen = [select.args["from_"].this.alias_or_name] if select.args.get("from_") else []
    nullable: set[str] = set()
    for join in select.args.get("joins") or []:
        name = join.this.alias_or_name
        if join.args.get("method") or (join.kind or "").upper() not in PLAIN_JOIN_KINDS:
            return None
        side = (join.side or "").upper()
        if side in ("LEFT", "FULL"):
            nullable.add(name)
        if side in ("RIGHT", "FULL"):
            nullable.update(seen)
        seen.append(name)
    return nullable


def _filter(
    term: exp.Expr, direct: dict[str, str], infos: dict[str, TableInfo]
) -> tuple[exp.Column | None, Filter | None]:
    """A WHERE conjunct as (its column, a Filter), or (None, None) when it is no simple
    predicate on a table of ``direct``."""
    op: FilterOp | None = None
    value: Any = None
    column: exp.Expr | None = None
    if type(term) in COMPARISONS:
        op = COMPARISONS[type(term)]
        column, other = term.this, term.expression
        if not isinstance(column, exp.Column) and isinstance(other, exp.Column):
            column, other, op = other, column, FLIPPED[op]
        value = other
    elif isinstance(term, exp.In) and not term.args.get("query") and not term.args.get("unnest"):
        column, op, value = term.this, "in", term.expressions
    elif isinstance(term, exp.Is) and isinstance(term.expression, exp.Null):
        column, op = term.this, "is_null"
    elif (
        isinstance(term, exp.Not)
        and isinstance(term.this, exp.Is)
        and isinstance(term.this.expression, exp.Null)
    ):
        column, op = term.this.this, "not_null"
    if op is None or not isinstance(column, exp.Column) or column.table not in direct:
        return None, None
    info = infos[direct[column.table]]
    try:
        target = info.column(column.name)
        if op == "in":
            values = tuple(dict.fromkeys(_value(item, target.type) for item in value))
            return column, Filter(target.name, op, values)
        if op in ("is_null", "not_null"):
            return column, Filter(target.name, op)
        return column, Filter(target.name, op, _value(value, target.type))
    except (KeyError, _NotALiteral):
        return None, None


def _value(node: exp.Expr, type_: pa.DataType) -> Any:
    """A SQL literal as a Python value of the column's type, or _NotALiteral when it is no
    literal or would not convert exactly (2.5 for an integer column)."""
    return _coerce(_literal(node), type_)


def _literal(node: exp.Expr) -> Any:
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -_literal(node.this)
    if (
        isinstance(node, exp.Cast)
        and isinstance(node.this, exp.Literal)
        and node.this.is_string
        and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
    ):
        return str(node.this.this)
    if isinstance(node, exp.Literal):
        text = str(node.this)
        if node.is_string:
            return text
        try:
            return int(text)
        except ValueError:
            try:
                return decimal.Decimal(text)
            except decimal.InvalidOperation as exc:
                raise _NotALiteral from exc
    raise _NotALiteral


def _coerce(value: Any, type_: pa.DataType) -> Any:  # noqa: C901, PLR0912
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        if isinstance(value, str):
            return value
    elif pa.types.is_boolean(type_):
        if isinstance(value, bool):
            return value
    elif pa.types.is_integer(type_) or pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        if isinstance(value, int | decimal.Decimal) and not isinstance(value, bool):
            try:
                converted: Any = pa.scalar(value).cast(type_, safe=True).as_py()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError) as exc:
                raise _NotALiteral from exc
            if decimal.Decimal(converted) == decimal.Decimal(value):  # exact, or not pushed
                return converted
    elif pa.types.is_date32(type_):
        if isinstance(value, str):
            try:
                return datetime.date.fromisoformat(value)
            except ValueError as exc:
                raise _NotALiteral from exc
    elif pa.types.is_timestamp(type_) and type_.tz is None and isinstance(value, str):
        # Zone-aware columns stay in DuckDB: it reads a literal in its own time zone.
        try:
            return datetime.datetime.fromisoformat(value)
        except ValueError as exc:
            raise _NotALiteral from exc
    raise _NotALiteral
