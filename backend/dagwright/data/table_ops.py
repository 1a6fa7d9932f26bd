"""Chain-of-Table's atomic operations as deterministic functions on Arrow tables.

The paper lets an LLM pick operations (f_add_column, f_select_row, f_select_column,
f_group_by, f_sort_by) and their arguments; carrying them out needs no model. Each function
returns a new table and raises DataError `table_op_invalid` naming what is missing.

Column names are matched exactly first; a name that differs only in case or surrounding spaces
is accepted when it fits one column alone, because models copy names from a prompt loosely.
`parse_chain` and `apply_chain` read and run the paper's chain notation, e.g.
``f_select_row(row 1, row 3) -> f_select_column(Year, League) -> f_sort_by(Year) -> <END>``.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from dagwright.errors import DataError

COUNT_COLUMN = "Count"  # the name the paper gives the counts of f_group_by


def _invalid(message: str) -> DataError:
    return DataError(message, code="table_op_invalid")


def resolve_column(table: pa.Table, name: str, operation: str) -> str:
    """The table's column that `name` means: the exact name, else the one column equal to it
    ignoring case and surrounding spaces."""
    if name in table.column_names:
        return name
    wanted = name.strip().casefold()
    matches = [c for c in table.column_names if c.strip().casefold() == wanted]
    if len(matches) == 1:
        return matches[0]
    listed = ", ".join(table.column_names) or "none"
    raise _invalid(f"{operation}: no column {name!r}; the columns are: {listed}")


def add_column(table: pa.Table, name: str, values: Sequence[object] | pa.Array[Any]) -> pa.Table:
    """The table with a new last column `name` holding `values`, one per row."""
    if name in table.column_names:
        raise _invalid(f"add_column: the table already has a column {name!r}")
    if len(values) != table.num_rows:
        raise _invalid(
            f"add_column: {len(values)} values given for column {name!r}, "
            f"but the table has {table.num_rows} rows"
        )
    column = values if isinstance(values, pa.Array) else pa.array(list(values))  # type: ignore[arg-type]
    return table.append_column(name, column)


def select_rows(table: pa.Table, indices: Sequence[int]) -> pa.Table:
    """The rows at `indices` (0-based), in the order given."""
    for index in indices:
        if not 0 <= index < table.num_rows:
            raise _invalid(
                f"select_rows: no row {index} (0-based); the table has {table.num_rows} rows"
            )
    return table.take(pa.array(list(indices), type=pa.int64()))


def select_columns(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """The columns `names`, in the order given."""
    if not names:
        raise _invalid("select_columns: no column named")
    return table.select([resolve_column(table, name, "select_columns") for name in names])


def group_by(table: pa.Table, column: str) -> pa.Table:
    """Each distinct value of `column` with the number of rows holding it (a column `Count`),
    most frequent first; ties keep the order in which the values first appear."""
    key = resolve_column(table, column, "group_by")
    count_name = COUNT_COLUMN if key != COUNT_COLUMN else f"{COUNT_COLUMN}_rows"
    # Single-threaded grouping keeps the groups in order of first appearance.
    grouped = table.select([key]).group_by(key, use_threads=False).aggregate([([], "count_all")])
    grouped = grouped.rename_columns(
        [key if c == key else count_name for c in grouped.column_names]
    )
    grouped = grouped.select([key, count_name])
    return grouped.take(pc.sort_indices(grouped, sort_keys=[(count_name, "descending")]))


def sort_by(table: pa.Table, column: str, descending: bool = False) -> pa.Table:
    """The rows sorted by `column` (stable, nulls last). Text that is all numbers ("12",
    "3.5") sorts as numbers, as the paper's f_sort_by treats numerical strings."""
    key = resolve_column(table, column, "sort_by")
    values = table.column(key)
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        with contextlib.suppress(pa.ArrowInvalid):  # not all numbers: sort as text
            values = pc.cast(pc.utf8_trim_whitespace(values), pa.float64())
    order: Literal["ascending", "descending"] = "descending" if descending else "ascending"
    keys = pa.Table.from_arrays([values], names=["key"])
    indices = pc.sort_indices(keys, sort_keys=[("key", order)])  # nulls go last by default
    return table.take(indices)


@dataclass(frozen=True, slots=True)
class Operation:
    """One step of a chain: the paper's function name (f_select_row...) and its arguments."""

    name: str
    args: tuple[str, ...]


_OPERATIONS = ("f_add_column", "f_select_row", "f_select_column", "f_group_by", "f_sort_by")
# Spellings that occur in the paper's own figures.
_ALIASES = {"f_sel_col": "f_select_column", "f_sort_column": "f_sort_by"}
_ARROW = re.compile(r"->|→")
_CALL = re.compile(r"^\s*(f_\w+)\s*\((.*)\)\s*[.,]?\s*$", re.DOTALL)
_END = re.compile(r"<END>|\[E\]")
_DESCENDING = ("desc", "descend", "descending", "large to small", "from-large-to-small")


def parse_chain(text: str) -> list[Operation]:
    """The operations of a chain like ``f_select_row(row 1, row 3) -> f_sort_by(Count, desc)``
    (``→`` also separates steps; ``<END>`` or ``[E]`` ends the chain). Arguments are split on
    commas, with the brackets of ``f_select_row([row 1, row 3])`` removed."""
    operations = []
    for part in _ARROW.split(_END.split(text, maxsplit=1)[0]):  # what follows the end is noise
        step = part.strip()
        if not step:
            continue  # an arrow left open at the end
        match = _CALL.match(step)
        if match is None:
            raise _invalid(f"chain: {step!r} is not an operation like f_group_by(Country)")
        name = _ALIASES.get(match.group(1), match.group(1))
        if name not in _OPERATIONS:
            raise _invalid(f"chain: unknown operation {name!r}; known: {', '.join(_OPERATIONS)}")
        inner = match.group(2).strip().removeprefix("[").removesuffix("]")
        args = tuple(arg.strip().strip("\"'`") for arg in inner.split(",") if arg.strip())
        operations.append(Operation(name, args))
    return operations


def apply_chain(
    table: pa.Table,
    chain: str | Sequence[Operation],
    new_columns: Mapping[str, Sequence[object]] | None = None,
) -> pa.Table:
    """Runs the chain on the table. `f_select_row` takes rows as the PIPE encoding numbers
    them ("row 1" is the first; "*" means all); `f_add_column(X)` takes its values from
    `new_columns[X]` (the paper has the model generate them separately)."""
    operations = parse_chain(chain) if isinstance(chain, str) else chain
    for operation in operations:
        table = _apply(table, operation, new_columns or {})
    return table


def _apply(
    table: pa.Table, operation: Operation, new_columns: Mapping[str, Sequence[object]]
) -> pa.Table:
    name, args = operation.name, operation.args
    if name == "f_select_column":
        return select_columns(table, args)
    if name == "f_select_row":
        if args == ("*",):
            return table
        numbers = [_row_number(arg) for arg in args]
        for number in numbers:
            if number > table.num_rows:
                raise _invalid(
                    f"f_select_row: no row {number}; the table has {table.num_rows} rows"
                )
        return select_rows(table, [number - 1 for number in numbers])
    if not args:
        raise _invalid(f"{name}: a column is needed")
    if name == "f_add_column":
        if args[0] not in new_columns:
            raise _invalid(f"f_add_column: no values given for the new column {args[0]!r}")
        return add_column(table, args[0], new_columns[args[0]])
    if name == "f_group_by":
        return group_by(table, args[0])
    descending = len(args) > 1 and args[1].strip("\"' ").casefold() in _DESCENDING
    return sort_by(table, args[0], descending=descending)


def _row_number(arg: str) -> int:
    match = re.fullmatch(r"(?:row\s*)?(\d+)", arg.strip(), re.IGNORECASE)
    if match is None or int(match.group(1)) < 1:
        raise _invalid(f"f_select_row: {arg!r} is not a row like 'row 3'")
    return int(match.group(1))
