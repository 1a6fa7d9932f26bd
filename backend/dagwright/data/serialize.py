"""Tables rendered for prompts, in the two formats the papers measured.

- `mac_sql_schema`: MAC-SQL's schema description, one block per table with each column's
  description and a few value examples, then the foreign keys::

      # Table: employee
      [
        (id, employee number. Value examples: [1, 2].),
        (name, name. Value examples: ['Lucy', 'Tom'].)
      ]
      【Foreign keys】
      salary.`id` = employee.`id`

- `pipe_table`: Chain-of-Table's PIPE encoding (the best of four encodings in its Table 10)::

      /*
      table caption : employees
      col : id | name
      row 1 : 1 | Lucy
      */

Both cut what is too long and say what they cut ("... 980 more rows"), so a prompt never
grows with the data and the model knows it has not seen everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from dagwright.data.connector import TableInfo


def table_name(table: TableInfo) -> str:
    """The name a table is shown under when no other is given: ``schema.name``."""
    return f"{table.schema}.{table.name}" if table.schema else table.name


def mac_sql_schema(
    tables: Sequence[TableInfo],
    samples: Mapping[str, pa.Table] | None = None,
    *,
    names: Sequence[str] | None = None,
    max_columns: int = 40,
    max_values: int = 3,
    max_value_chars: int = 40,
) -> str:
    """The tables in MAC-SQL's format. `names` are the names to show (and to look samples up
    by), one per table, by default `table_name`; give the engine's qualified names when the SQL
    must use them. A column's description is its comment, or its name when it has none (as
    MAC-SQL does); value examples are the first distinct values of the column in `samples`,
    None included (MAC-SQL's decomposer reads a None example as "filter the nulls").
    Foreign keys are listed when both tables are among `tables`."""
    shown = list(names) if names is not None else [table_name(t) for t in tables]
    if len(shown) != len(tables):
        raise ValueError(f"{len(shown)} names given for {len(tables)} tables")
    blocks = []
    for table, name in zip(tables, shown, strict=True):
        sample = samples.get(name) if samples else None
        lines = [f"# Table: {name}", "["]
        entries = []
        for column in table.columns[:max_columns]:
            description = column.comment or column.name
            examples = ""
            if sample is not None and column.name in sample.column_names:
                values = _examples(sample.column(column.name), max_values, max_value_chars)
                examples = f" Value examples: [{', '.join(values)}]." if values else ""
            entries.append(f"  ({column.name}, {description.rstrip('.')}.{examples})")
        if len(table.columns) > max_columns:
            entries.append(f"  ... {_more(len(table.columns) - max_columns, 'column')}")
        lines.append(",\n".join(entries))
        lines.append("]")
        blocks.append("\n".join(lines))
    foreign_keys = _foreign_keys(tables, shown)
    if foreign_keys:
        blocks.append("【Foreign keys】\n" + "\n".join(foreign_keys))
    return "\n".join(blocks)


def _examples(values: pa.ChunkedArray[Any], limit: int, max_chars: int) -> list[str]:
    seen: list[object] = []
    for value in values.to_pylist():
        if value not in seen:
            seen.append(value)
            if len(seen) == limit:
                break
    return [_literal(value, max_chars) for value in seen]


def _literal(value: object, max_chars: int) -> str:
    """A value as MAC-SQL writes it: text quoted, numbers bare, None as None."""
    if value is None or isinstance(value, bool | int | float):
        return str(value)
    text = _cut(_text(value), max_chars)
    return "'" + text.replace("'", "\\'") + "'"


def _foreign_keys(tables: Sequence[TableInfo], shown: Sequence[str]) -> list[str]:
    by_key: dict[tuple[str, str], list[str]] = {}
    for table, name in zip(tables, shown, strict=True):
        by_key.setdefault((table.schema, table.name), []).append(name)
    lines = []
    for table, name in zip(tables, shown, strict=True):
        for key in table.foreign_keys:
            target = _same_source(by_key.get((key.ref_schema, key.ref_table), []), name)
            if target is None:
                continue
            for column, ref_column in zip(key.columns, key.ref_columns, strict=True):
                lines.append(f"{name}.`{column}` = {target}.`{ref_column}`")
    return lines


def _same_source(candidates: list[str], name: str) -> str | None:
    """The referenced table's shown name: a foreign key stays within its source, so with the
    same schema.table in several sources the one sharing the first name part is meant."""
    if len(candidates) <= 1:
        return candidates[0] if candidates else None
    prefix = name.split(".", 1)[0]
    return next((c for c in candidates if c.split(".", 1)[0] == prefix), candidates[0])


def pipe_table(
    table: pa.Table,
    caption: str | None = None,
    *,
    max_rows: int = 30,
    max_columns: int = 30,
    max_cell_chars: int = 60,
) -> str:
    """The table in PIPE encoding: rows numbered from 1, nulls as empty cells, newlines in
    cells as spaces and a `|` in a cell escaped as `\\|`, so every row splits into its cells."""
    columns = table.column_names[:max_columns]
    shown = table.slice(0, max_rows).select(columns).to_pylist()
    lines = ["/*"]
    if caption:
        lines.append(f"table caption : {_cell(caption, max_cell_chars)}")
    lines.append("col : " + " | ".join(_cell(c, max_cell_chars) for c in columns))
    for number, row in enumerate(shown, start=1):
        cells = " | ".join(_cell(row[c], max_cell_chars) for c in columns)
        # Cells hold no double spaces, so any are around empty cells: "a | | b" as in the paper.
        lines.append(re.sub(" {2,}", " ", f"row {number} : {cells}").rstrip())
    if table.num_rows > max_rows:
        lines.append(f"... {_more(table.num_rows - max_rows, 'row')}")
    if table.num_columns > max_columns:
        lines.append(f"... {_more(table.num_columns - max_columns, 'column')}")
    lines.append("*/")
    return "\n".join(lines)


def _more(count: int, noun: str) -> str:
    return f"{count} more {noun}{'' if count == 1 else 's'}"


def _cell(value: object, max_chars: int) -> str:
    if value is None:
        return ""
    text = " ".join(_text(value).split())  # newlines and runs of spaces become one space
    return _cut(text, max_chars).replace("|", "\\|")


def _text(value: object) -> str:
    # str() gives dates and times as SQL writes them ("2024-01-10 08:00:00"), unlike isoformat.
    return value.hex() if isinstance(value, bytes) else str(value)


def _cut(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
