"""The database description the Selector builds (agents.py Selector): per table its columns
with a readable name and value examples, its primary and foreign keys; the schema string
(`# Table: t` then `(column, full name. Value examples: [...].)` lines) and the foreign-key
lines, for the whole database or for the tables and columns the Selector kept."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

NUMERIC_TYPES = ("INTEGER", "REAL", "NUMERIC", "FLOAT", "INT")
TEXT_TYPES = ("TEXT", "VARCHAR")
PRUNE_AVG_COLUMNS = 6  # the Selector prunes when tables average more columns than this...
PRUNE_TOTAL_COLUMNS = 30  # ...or the database has more than this many in all
KEEP_COLUMNS = 6  # a pruned table keeps at least this many columns (when it has more)


@dataclass(slots=True)
class Column:
    name: str
    full_name: str  # the readable name: Spider's natural name, else the name with '_' as ' '
    values: str  # value examples as the official code writes them ('' when none)
    description: str = ""  # BIRD's column description


@dataclass(slots=True)
class Table:
    name: str
    columns: list[Column]
    primary_key: list[str] = field(default_factory=list)
    foreign_keys: list[tuple[str, str, str]] = field(default_factory=list)  # col, table, col


def base_type(declared: str) -> str:
    """`varchar(25)` -> `VARCHAR`: the type family the value rules look at."""
    return re.split(r"[\s(]", declared.strip(), maxsplit=1)[0].upper()


def _is_email(text: str) -> bool:
    return re.match(r"^[\w\.-]+@[\w\.-]+\.\w+$", text) is not None


def _is_date(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    text = value.split()[0] if value.split() else ""
    if len(text) != 10 or not re.match(r"^\d{4}-\d{2}-\d{2}$", text):
        return False
    year, month, day = map(int, text.split("-"))
    return year >= 1 and 1 <= month <= 12 and 1 <= day <= 31


def value_examples(values: list[Any], column_type: str, strip_text: bool = True) -> str:
    """The official _get_value_examples_str: `values` are the column's distinct values, most
    frequent first. No examples for a numeric column with more than 10 values, for URLs,
    e-mails or long texts; at most 6 (1 for dates); None first when the column has nulls."""
    if not values:
        return ""
    if len(values) > 10 and column_type in NUMERIC_TYPES:
        return ""
    has_null = any(v is None for v in values)
    kept = [v for v in values if v is not None and str(v).strip() != ""]
    if not kept:
        return ""
    if column_type in TEXT_TYPES:
        texts: list[Any] = []
        for v in kept:
            if not isinstance(v, str):
                texts.append(v)
                continue
            v = v.strip() if strip_text else v
            if v == "":
                continue
            if "https://" in v or "http://" in v or _is_email(v):
                return ""
            texts.append(v)
        if not texts or max(len(str(v)) for v in texts) > 50:
            return ""
        kept = texts
    kept = kept[:6]
    if all(_is_date(v) for v in kept):
        kept = kept[:1]
    if has_null:
        kept.insert(0, None)
    return str(kept)


def skips_values(name: str) -> bool:
    """Columns named like ids, e-mails or URLs get no value examples."""
    lowered = name.lower()
    return lowered.endswith(("id", "email", "url"))


def need_prune(tables: list[Table]) -> bool:
    """The Selector prunes only a large schema: more than 6 columns per table on average
    (integer division, as the official count) or more than 30 in all."""
    counts = [len(t.columns) for t in tables]
    total = sum(counts)
    average = total // len(counts) if counts else 0
    return not (average <= PRUNE_AVG_COLUMNS and total <= PRUNE_TOTAL_COLUMNS)


def _table_text(table: str, columns: list[Column]) -> str:
    lines = []
    for column in columns:
        line = f"  ({column.name},"
        if column.full_name != "":
            line += f" {column.full_name.strip()}."
        if column.values != "":
            line += f" Value examples: {column.values}."
        description = f"And {column.description}"[:100] if column.description else ""
        if description:
            line += f" {description}"
        lines.append(line + "),")
    return f"# Table: {table}\n" + "[\n" + "\n".join(lines).strip(",") + "\n]" + "\n"


def describe(
    tables: list[Table], extracted: dict[str, Any] | None = None
) -> tuple[str, str, dict[str, list[str]]]:
    """(schema text, foreign-key lines, chosen columns per table) for the Selector's decision
    per table: "keep_all" (or none), "drop_all" (the first 6 columns stay, as the official
    code does), or a column list (kept with every primary and foreign key, and filled up to
    6 columns in table order when the table has more)."""
    extracted = extracted or {}
    text = ""
    links: list[str] = []
    chosen: dict[str, list[str]] = {}
    for table in tables:
        decision = extracted.get(table.name, "")
        names = [c.name for c in table.columns]
        keys = table.primary_key + [fk[0] for fk in table.foreign_keys]
        if decision == "drop_all":
            columns = table.columns[:KEEP_COLUMNS]
        elif decision in ("keep_all", ""):
            columns = list(table.columns)
        else:
            columns = [c for c in table.columns if c.name in keys or c.name in decision]
            if len(names) > KEEP_COLUMNS and len(columns) < KEEP_COLUMNS:
                for column in table.columns:
                    if len(columns) >= KEEP_COLUMNS:
                        break
                    if column not in columns:
                        columns.append(column)
        chosen[table.name] = [c.name for c in columns]
        text += _table_text(table.name, columns)
        for column_name, to_table, to_column in table.foreign_keys:
            left = column_name if "`" in column_name else f"`{column_name}`"
            right = to_column if "`" in to_column else f"`{to_column}`"
            link = f"{table.name}.{left} = {to_table}.{right}"
            if link not in links:
                links.append(link)
    return text.strip(), "\n".join(links).strip(), chosen


def table_to_dict(table: Table) -> dict[str, Any]:
    return {
        "name": table.name,
        "columns": [
            {
                "name": c.name,
                "full_name": c.full_name,
                "values": c.values,
                "description": c.description,
            }
            for c in table.columns
        ],
        "primary_key": list(table.primary_key),
        "foreign_keys": [list(fk) for fk in table.foreign_keys],
    }


def table_from_dict(data: dict[str, Any]) -> Table:
    return Table(
        data["name"],
        [
            Column(c["name"], c["full_name"], c["values"], c.get("description", ""))
            for c in data["columns"]
        ],
        list(data["primary_key"]),
        [(fk[0], fk[1], fk[2]) for fk in data["foreign_keys"]],
    )
