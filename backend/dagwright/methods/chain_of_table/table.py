"""The table as the official implementation holds it (a header row and rows of strings) and
its PIPE encoding (utils/helper.py table2string)."""

from __future__ import annotations

from typing import Any

Table = list[list[str]]  # the header first, then the rows; every cell a string


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def table_from_records(records: list[dict[str, Any]]) -> Table:
    """Records (what table blocks pass) as a header and string rows; None becomes ''."""
    header = list(records[0]) if records else []
    return [header] + [[_cell(row.get(name)) for name in header] for row in records]


def table_from_rows(rows: list[list[Any]]) -> Table:
    """A header-first list of lists (FeTaQA's table_array, a CSV read) as strings."""
    if not rows:
        raise ValueError("the table has no header row")
    width = len(rows[0])
    return [[_cell(value) for value in row] + [""] * (width - len(row)) for row in rows]


def records_of(table: Table) -> list[dict[str, str]]:
    """The table as records, for the debug panel. Repeated or empty header names get a
    suffix so no cell is lost."""
    names: list[str] = []
    for index, name in enumerate(table[0]):
        unique = name or f"column_{index + 1}"
        while unique in names:
            unique += "_"
        names.append(unique)
    return [dict(zip(names, row, strict=False)) for row in table[1:]]


def table2string(table: Table, num_rows: int = 100, caption: str | None = None) -> str:
    """PIPE encoding, byte for byte as the official table2string writes it: no trailing
    newline, rows numbered from 1, at most `num_rows` rows."""
    text = ""
    if caption is not None:
        text += "table caption : " + caption + "\n"
    text += "col : " + " | ".join(table[0]) + "\n"
    rows = table[1 : num_rows + 1]
    text += "\n".join(f"row {i + 1} : " + " | ".join(row) for i, row in enumerate(rows))
    return text
