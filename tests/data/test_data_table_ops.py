"""Chain-of-Table's operations on Arrow tables, and the chain notation."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from dagwright.data.table_ops import (
    Operation,
    add_column,
    apply_chain,
    group_by,
    parse_chain,
    select_columns,
    select_rows,
    sort_by,
)
from dagwright.errors import DataError

# The cyclists of the paper's Figure 1 (top 10 of a race).
CYCLISTS = pa.table(
    {
        "Rank": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        "Cyclist": [
            "Alejandro Valverde (ESP)",
            "Alexandr Kolobnev (RUS)",
            "Davide Rebellin (ITA)",
            "Paolo Bettini (ITA)",
            "Franco Pellizotti (ITA)",
            "Denis Menchov (RUS)",
            "Samuel Sánchez (ESP)",
            "Stéphane Goubert (FRA)",
            "Haimar Zubeldia (ESP)",
            "David Moncoutié (FRA)",
        ],
        "Points": ["40", "30", "25", "20", "15", "11", "7", "5", "3", "1"],
    }
)
COUNTRIES = ["ESP", "RUS", "ITA", "ITA", "ITA", "RUS", "ESP", "FRA", "ESP", "FRA"]


def invalid(call: Callable[[], object]) -> str:
    with pytest.raises(DataError) as caught:
        call()
    assert caught.value.code == "table_op_invalid"
    return caught.value.message


def test_add_column() -> None:
    table = add_column(CYCLISTS, "Country", COUNTRIES)
    assert table.column_names[-1] == "Country"
    assert table.column("Country").to_pylist() == COUNTRIES
    assert "already has a column 'Rank'" in invalid(lambda: add_column(CYCLISTS, "Rank", COUNTRIES))
    assert "2 values" in invalid(lambda: add_column(CYCLISTS, "X", [1, 2]))


def test_select_rows_and_columns() -> None:
    table = select_rows(CYCLISTS, [2, 0])
    assert table.column("Rank").to_pylist() == [3, 1]
    assert "no row 10" in invalid(lambda: select_rows(CYCLISTS, [10]))
    assert select_columns(CYCLISTS, ["points", " rank "]).column_names == ["Points", "Rank"]
    message = invalid(lambda: select_columns(CYCLISTS, ["Country"]))
    assert "no column 'Country'" in message
    assert "Rank, Cyclist, Points" in message


def test_group_by_counts_most_frequent_first() -> None:
    table = group_by(add_column(CYCLISTS, "Country", COUNTRIES), "Country")
    assert table.to_pydict() == {
        "Country": ["ESP", "ITA", "RUS", "FRA"],
        "Count": [3, 3, 2, 2],  # ties in order of first appearance
    }
    assert "no column 'Nation'" in invalid(lambda: group_by(CYCLISTS, "Nation"))


def test_sort_by_numbers_in_text() -> None:
    ascending = sort_by(CYCLISTS, "Points")
    assert ascending.column("Points").to_pylist()[:3] == ["1", "3", "5"]
    descending = sort_by(CYCLISTS, "Points", descending=True)
    assert descending.column("Rank").to_pylist()[0] == 1
    mixed = pa.table({"v": ["b", None, "a", "10"]})
    assert sort_by(mixed, "v").column("v").to_pylist() == ["10", "a", "b", None]
    assert sort_by(mixed, "v", descending=True).column("v").to_pylist() == ["b", "a", "10", None]


def test_parse_chain_as_the_paper_writes_it() -> None:
    text = (
        "f_add_column(Country) -> f_select_row([row 1, row 10]) → f_select_column(Country)"
        ' -> f_group_by(Country) -> f_sort_by(Count, "Descend") -> <END> f_sort_by(Rank)'
    )
    assert parse_chain(text) == [
        Operation("f_add_column", ("Country",)),
        Operation("f_select_row", ("row 1", "row 10")),
        Operation("f_select_column", ("Country",)),
        Operation("f_group_by", ("Country",)),
        Operation("f_sort_by", ("Count", "Descend")),
    ]
    assert parse_chain("f_sel_col(Year, Actor) -> ") == [
        Operation("f_select_column", ("Year", "Actor"))
    ]
    assert "unknown operation 'f_join'" in invalid(lambda: parse_chain("f_join(a, b)"))
    assert "is not an operation" in invalid(lambda: parse_chain("select everything"))


def test_apply_chain() -> None:
    chain = (
        "f_add_column(Country) -> f_select_row(row 1, row 2, row 3, row 4) -> "
        "f_select_column(Country) -> f_group_by(Country) -> f_sort_by(Count, desc)"
    )
    table = apply_chain(CYCLISTS, chain, new_columns={"Country": COUNTRIES})
    assert table.to_pydict() == {"Country": ["ITA", "ESP", "RUS"], "Count": [2, 1, 1]}
    assert apply_chain(CYCLISTS, "f_select_row(*)").num_rows == 10
    assert "no row 11" in invalid(lambda: apply_chain(CYCLISTS, "f_select_row(row 11)"))
    assert "no values given" in invalid(lambda: apply_chain(CYCLISTS, "f_add_column(Country)"))
