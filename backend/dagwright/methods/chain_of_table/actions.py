"""Applying an operation's top-voted arguments to the table (operations/*.py, the `*_act`
functions). An argument that fails a check leaves the table as it was and records
`skip f_<op>()` in the chain, with the reason; DynamicPlan then does not offer it again."""

from __future__ import annotations

import copy
from typing import Any, TypedDict

from dagwright.methods.chain_of_table.table import Table

UNION_TOP = 2  # rows / columns: the union of the two best-voted selections


class State(TypedDict):
    """What travels from round to round: the table, the chain of operations (as the official
    act_chain), the group and sort notes the final query shows, and each step's table."""

    table: Table
    caption: str | None
    act_chain: list[str]
    group_sub_table: list[Any] | None  # [column, [[value, count], ...]]
    sort_sub_table: list[Any] | None  # [column, max, min]
    steps: list[dict[str, Any]]  # {operation, act, reason, table}


def initial_state(table: Table, caption: str | None = None) -> State:
    return {
        "table": table,
        "caption": caption,
        "act_chain": [],
        "group_sub_table": None,
        "sort_sub_table": None,
        "steps": [],
    }


def _record(state: State, operation: str, act: str, reason: str | None) -> State:
    new = copy.deepcopy(state)
    new["act_chain"].append(act)
    new["steps"].append(
        {"operation": operation, "act": act, "reason": reason, "table": copy.deepcopy(new["table"])}
    )
    return new


def _skip(state: State, operation: str, reason: str) -> State:
    return _record(state, operation, f"skip f_{operation}()", reason)


def _union(ranked: list[list[Any]]) -> set[str]:
    chosen: set[str] = set()
    for argument, _ in sorted(ranked, key=lambda item: item[1], reverse=True)[:UNION_TOP]:
        chosen.update(argument)
    return chosen


def select_row(state: State, ranked: list[list[Any]]) -> State:
    selected = _union(ranked)
    table = state["table"]
    if "*" in selected:
        return _record(state, "select_row", "f_select_row(*)", "all rows (*)")
    # Row numbers count from 1 as the PIPE encoding shows them; index 0 is the header.
    kept = [row for number, row in enumerate(table) if str(number) in selected]
    if not kept:
        return _record(state, "select_row", "f_select_row(*)", "no row named: all rows kept")
    new = copy.deepcopy(state)
    new["table"] = [list(table[0])] + [list(row) for row in kept]
    names = ", ".join(f"row {i + 1}" for i in range(len(kept)))
    return _record(new, "select_row", f"f_select_row({names})", None)


def select_column(state: State, ranked: list[list[Any]]) -> State:
    selected = _union(ranked)
    table = state["table"]
    indices = [j for j, name in enumerate(table[0]) if name.lower() in selected]
    new = copy.deepcopy(state)
    if not indices:
        return _record(state, "select_column", "f_select_column(*)", "no column named: all kept")
    new["table"] = [[row[j] for j in indices] for row in table]
    names = ", ".join(table[0][j] for j in indices)
    return _record(new, "select_column", f"f_select_column({names})", None)


def group_column(state: State, ranked: list[list[Any]]) -> State:
    if not ranked:
        return _skip(state, "group_column", "no answer named a column that can be grouped")
    column, groups = ranked[0][0]
    new = copy.deepcopy(state)
    new["group_sub_table"] = [column, groups]
    return _record(new, "group_column", f"f_group_column({column})", None)


def sort_column(state: State, candidates: list[list[Any]]) -> State:
    if not candidates:
        return _skip(state, "sort_column", "no valid sort (unknown column or already in order)")
    column, _order, datatype, order_rows, max_v, min_v = candidates[0][:-1]
    if datatype != "Numerical":  # the official filter "Only Numerical"
        return _skip(state, "sort_column", f"datatype {datatype}: only Numerical is sorted")
    table = state["table"]
    new = copy.deepcopy(state)
    new["table"] = [list(table[0])] + [list(table[1:][i]) for i in order_rows]
    new["sort_sub_table"] = [column, max_v, min_v]
    return _record(new, "sort_column", f"f_sort_column({column})", None)


def add_column(state: State, column: str | None, values: list[str] | None) -> State:
    """The official checks, in order; any failing one skips the operation."""
    if column is None or values is None:
        return _skip(state, "add_column", "the answer gave no column and three values")
    table = state["table"]
    headers, rows = table[0], table[1:]
    contents = {h: [row[i] for row in rows] for i, h in enumerate(headers)}
    reason = None
    if column.startswith("number of"):
        reason = "a 'number of' column is a count, not a column"
    elif len(set(values)) == 1:
        reason = "every value is the same"
    elif any(v.strip() == "" for v in values):
        reason = "a value is empty"
    elif column in headers:
        reason = f"the table already has a column {column!r}"
    elif any(values == existing for existing in contents.values()):
        reason = "the values repeat an existing column"
    elif not any(
        all(values[i] in cells[i] for i in range(len(cells))) for cells in contents.values()
    ):
        reason = "the values are not taken from any one column"
    if reason is not None:
        return _skip(state, "add_column", reason)
    new = copy.deepcopy(state)
    new["table"] = [[*headers, column]] + [[*row, values[i]] for i, row in enumerate(rows)]
    return _record(new, "add_column", f"f_add_column({column})", None)
