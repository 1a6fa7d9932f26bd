"""Exception handling and retry (AutoTQA section 4.4): when the Executor returns an error or
an empty result, the Engineer gets "common knowledge" — hints stored per dataset (written by
hand, or learned from earlier retries: tqa/learning.py; kept by store/tqa/hints.py, editable
through the API, the CLI and the editor) and hints checked against the data for this very
query:

- an empty result: each `column = 'text'` filter of the SQL is looked up case-insensitively;
  values that exist with another spelling become a concrete hint ("Name has 'Tom', not
  'tom'");
- an unknown column or table: the columns of the tables the SQL names are listed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.data.engine import QueryEngine

GENERAL_HINTS = (
    "String values are case-sensitive: compare with the spelling stored in the table (or use "
    "lower() on both sides).",
    "An empty result may mean a wrong filter value, not an empty answer.",
)


def _tables_and_filters(sql: str) -> tuple[dict[str, str], list[tuple[str | None, str, str]]]:
    """The tables of the query (alias or name -> qualified name) and its `column = 'text'`
    filters as (table alias or None, column, value)."""
    from sqlglot import exp

    from dagwright.data.safety import check_sql

    # The data layer's parse: its size and depth guards bound what a caller's SQL can cost.
    tree = check_sql(sql)
    tables: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        qualified = ".".join(part for part in (table.catalog, table.db, table.name) if part)
        tables[(table.alias_or_name or table.name).lower()] = qualified
    filters: list[tuple[str | None, str, str]] = []
    for comparison in tree.find_all(exp.EQ):
        left, right = comparison.this, comparison.expression
        if isinstance(right, exp.Column) and isinstance(left, exp.Literal):
            left, right = right, left
        if isinstance(left, exp.Column) and isinstance(right, exp.Literal) and right.is_string:
            filters.append((left.table or None, left.name, str(right.this)))
    return tables, filters


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def empty_result_hints(engine: QueryEngine, sql: str, limit: int = 5) -> list[str]:
    """For each text filter of `sql`, the values that match it case-insensitively but not
    exactly: what the query probably meant."""
    try:
        tables, filters = _tables_and_filters(sql)
    except Exception:  # sqlglot's errors: no hint rather than a failure
        return []
    hints: list[str] = []
    for alias, column, value in filters:
        candidates = [tables[alias.lower()]] if alias and alias.lower() in tables else []
        if not candidates:
            candidates = list(dict.fromkeys(tables.values()))
        for table in candidates:
            probe = (
                f"SELECT DISTINCT CAST({_quote(column)} AS VARCHAR) AS v FROM {table} "
                f"WHERE lower(CAST({_quote(column)} AS VARCHAR)) = lower({_literal(value)}) "
                f"OR CAST({_quote(column)} AS VARCHAR) ILIKE {_literal('%' + value.strip() + '%')}"
            )
            try:
                found = [
                    str(row["v"])
                    for row in engine.query(probe, max_rows=limit, timeout_s=10).records()
                ]
            except DagwrightError:
                continue  # the column is not in this table
            others = [v for v in found if v != value]
            if others:
                spelled = ", ".join(repr(v) for v in others)
                hints.append(
                    f"values are case-sensitive: {column} in {table} has {spelled}, not {value!r}"
                )
                break
            if not found:
                hints.append(f"{column} in {table} has no value like {value!r}")
                break
    return hints


_MISSING = re.compile(
    r"(?i)(not found|does not exist|does not have|no such|unknown|not in the catalog|"
    r"binder error|catalog error)"
)


def error_hints(engine: QueryEngine, sql: str | None, message: str) -> list[str]:
    """For an unknown column or table, the columns of the tables the SQL names."""
    if not sql or not _MISSING.search(message):
        return []
    try:
        tables, _ = _tables_and_filters(sql)
    except Exception:
        return []
    hints: list[str] = []
    for table in dict.fromkeys(tables.values()):
        try:
            info = engine.table_info(table)
        except DagwrightError:
            known = ", ".join([str(t) for t in engine.tables()][:40])
            hints.append(f"there is no table {table}; the tables are: {known}")
            continue
        columns = ", ".join(column.name for column in info.columns)
        hints.append(f"{table} has the columns: {columns}")
    return hints
