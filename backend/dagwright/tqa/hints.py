"""Exception handling and retry (AutoTQA section 4.4): when the Executor returns an error or
an empty result, the Engineer gets "common knowledge" — hints stored per dataset (written by
hand, or learned from earlier retries: tqa/learning.py; kept by store/tqa_hints.py, editable
through the API, the CLI and the editor) and hints checked against the data for this very
query:

- an empty result: each `column = 'text'` filter of the SQL is looked up case-insensitively;
  values that exist with another spelling become a concrete hint ("Name has 'Tom', not
  'tom'");
- an unknown column or table: the columns of the tables the SQL names are listed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from dagwright.errors import DagwrightError, InputError
from dagwright.store.db import session
from dagwright.store.models import TqaHint, utcnow
from dagwright.store.tqa_hints import HintRepository

if TYPE_CHECKING:
    from dagwright.data.engine import QueryEngine
    from dagwright.data.scope import SourceScope

GENERAL_HINTS = (
    "String values are case-sensitive: compare with the spelling stored in the table (or use "
    "lower() on both sides).",
    "An empty result may mean a wrong filter value, not an empty answer.",
)


class HintError(InputError):
    code = "invalid_hint"


STATUSES = ("confirmed", "candidate", "dropped")


@dataclass(slots=True)
class Hint:
    id: str
    dataset: str
    text: str
    status: str  # confirmed | candidate (learned, unreviewed) | dropped
    source: str  # manual | learned
    question: str | None
    conversation_id: str | None
    details: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.dataset,
            "text": self.text,
            "status": self.status,
            "source": self.source,
            "question": self.question,
            "conversation_id": self.conversation_id,
            "details": self.details,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def _hint(row: TqaHint) -> Hint:
    return Hint(
        row.id,
        row.dataset,
        row.text,
        row.status,
        row.source,
        row.question,
        row.conversation_id,
        row.details,
        row.created_at,
        row.updated_at,
    )


def _check(dataset: str, text: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", dataset):
        raise HintError(f"dataset {dataset!r}: 1-64 letters, digits, '_', '.' or '-'")
    if not text.strip() or len(text) > 4000:
        raise HintError("a hint is 1 to 4000 characters")


class HintStore:
    """Hints per dataset, kept by store/tqa_hints.py: written by hand (confirmed at once) or
    learned from a conversation's successful retry (candidates until an operator confirms
    them)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list(self, dataset: str | None = None, status: str | None = None) -> list[Hint]:
        with session(self._engine) as db:
            return [_hint(row) for row in HintRepository(db).all(dataset, status)]

    def add(self, dataset: str, text: str) -> Hint:
        _check(dataset, text)
        row = TqaHint(dataset=dataset, text=text.strip())
        with session(self._engine) as db:
            HintRepository(db).add(row)
            db.commit()
            return _hint(row)

    def learn(
        self,
        dataset: str,
        text: str,
        *,
        question: str,
        conversation_id: str,
        details: dict[str, Any],
    ) -> Hint | None:
        """Records a candidate hint; None when the dataset already has this text (in any
        status: a dropped lesson is not learned again)."""
        text = text[:4000]
        _check(dataset, text)
        with session(self._engine) as db:
            hints = HintRepository(db)
            if hints.with_text(dataset, text) is not None:
                return None
            row = TqaHint(
                dataset=dataset,
                text=text,
                status="candidate",
                source="learned",
                question=question,
                conversation_id=conversation_id,
                details=details,
            )
            hints.add(row)
            db.commit()
            return _hint(row)

    def update(self, hint_id: str, text: str | None = None, status: str | None = None) -> Hint:
        """Edits the text and/or the status (confirm a candidate, drop it, restore it)."""
        if status is not None and status not in STATUSES:
            raise HintError(f"a hint's status is one of {', '.join(STATUSES)}, not {status!r}")
        with session(self._engine) as db:
            row = HintRepository(db).find(hint_id)
            if text is not None:
                _check(row.dataset, text)
                row.text = text.strip()
            if status is not None:
                row.status = status
            row.updated_at = utcnow()
            db.add(row)
            db.commit()
            return _hint(row)

    def delete(self, hint_id: str) -> None:
        with session(self._engine) as db:
            hints = HintRepository(db)
            hints.delete(hints.find(hint_id))
            db.commit()


# -- hints checked against the data ------------------------------------------------------------


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


def empty_result_hints(
    engine: QueryEngine, sql: str, limit: int = 5, scope: SourceScope | None = None
) -> list[str]:
    """For each text filter of `sql`, the values that match it case-insensitively but not
    exactly: what the query probably meant (read within the question's `scope`)."""
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
                    for row in engine.query(
                        probe, max_rows=limit, timeout_s=10, scope=scope
                    ).records()
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


def error_hints(
    engine: QueryEngine, sql: str | None, message: str, scope: SourceScope | None = None
) -> list[str]:
    """For an unknown column or table, the columns of the tables the SQL names (those of
    the question's `scope`; a table outside it gets no hint)."""
    if not sql or not _MISSING.search(message):
        return []
    try:
        tables, _ = _tables_and_filters(sql)
    except Exception:
        return []
    hints: list[str] = []
    for table in dict.fromkeys(tables.values()):
        try:
            info = engine.table_info(table, scope)
        except DagwrightError as exc:
            if exc.code == "table_out_of_scope":
                continue
            known = ", ".join([str(t) for t in engine.tables(scope)][:40])
            hints.append(f"there is no table {table}; the tables are: {known}")
            continue
        columns = ", ".join(column.name for column in info.columns)
        hints.append(f"{table} has the columns: {columns}")
    return hints
