"""Prompt renderings: MAC-SQL's schema description and Chain-of-Table's PIPE encoding."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pytest

from dagwright.data.connector import ColumnInfo, ForeignKey, TableInfo
from dagwright.data.serialize import mac_sql_schema, pipe_table

ACCOUNT = TableInfo(
    "bank",
    "account",
    (
        ColumnInfo("account_id", pa.int64(), "INTEGER", comment="the id of the account"),
        ColumnInfo("district_id", pa.int64(), "INTEGER", comment="location of branch"),
        ColumnInfo("frequency", pa.string(), "TEXT", comment="frequency of the acount"),
    ),
    primary_key=("account_id",),
    foreign_keys=(ForeignKey(("district_id",), "bank", "district", ("district_id",)),),
)
DISTRICT = TableInfo(
    "bank",
    "district",
    (
        ColumnInfo("district_id", pa.int64(), "INTEGER", comment="location of branch"),
        ColumnInfo("A11", pa.int64(), "INTEGER", comment="average salary."),
    ),
    primary_key=("district_id",),
)
LOAN = TableInfo(
    "bank",
    "loan",
    (ColumnInfo("loan_id", pa.int64(), "INTEGER"),),
    foreign_keys=(ForeignKey(("account_id",), "bank", "account", ("account_id",)),),
)


def test_mac_sql_schema_as_in_the_paper() -> None:
    samples = {
        "account": pa.table(
            {
                "account_id": [11382, 11362, 2, 1],
                "district_id": [77, 76, 77, None],
                "frequency": ["POPLATEK MESICNE", "POPLATEK TYDNE", "POPLATEK MESICNE", None],
            }
        )
    }
    text = mac_sql_schema([ACCOUNT, DISTRICT], samples, names=["account", "district"])
    assert text == (
        "# Table: account\n"
        "[\n"
        "  (account_id, the id of the account. Value examples: [11382, 11362, 2].),\n"
        "  (district_id, location of branch. Value examples: [77, 76, None].),\n"
        "  (frequency, frequency of the acount. "
        "Value examples: ['POPLATEK MESICNE', 'POPLATEK TYDNE', None].)\n"
        "]\n"
        "# Table: district\n"
        "[\n"
        "  (district_id, location of branch.),\n"
        "  (A11, average salary.)\n"
        "]\n"
        "【Foreign keys】\n"
        "account.`district_id` = district.`district_id`"
    )


def test_mac_sql_schema_cuts_and_names() -> None:
    wide = TableInfo(
        "s", "wide", tuple(ColumnInfo(f"c{i}", pa.string(), "TEXT") for i in range(50))
    )
    samples = {"s.wide": pa.table({"c0": ["x" * 100]})}
    text = mac_sql_schema([wide, LOAN], samples, max_columns=5, max_value_chars=10)
    assert "# Table: s.wide" in text
    assert "(c4, c4.)" in text
    assert "(c5," not in text
    assert "  ... 45 more columns" in text
    assert "Value examples: ['xxxxxxxxx…']" in text
    # loan references account, which is not shown: no foreign key line
    assert "Foreign keys" not in text
    with pytest.raises(ValueError, match="2 names given for 1 tables"):
        mac_sql_schema([LOAN], names=["a", "b"])


def test_foreign_keys_stay_within_their_source() -> None:
    names = ["pg.bank.account", "pg.bank.district", "my.bank.district"]
    text = mac_sql_schema([ACCOUNT, DISTRICT, DISTRICT], names=names)
    assert text.endswith(
        "【Foreign keys】\npg.bank.account.`district_id` = pg.bank.district.`district_id`"
    )


def test_pipe_table_as_in_the_paper() -> None:
    table = pa.table(
        {
            "Rank": [None, None, None],
            "Lane": [5, 6, 3],
            "Player": ["Olga Tereshkova (KAZ)", "Manjeet Kaur (IND)", "Asami Tanno (JPN)"],
            "Time": [51.86, 52.17, 53.04],
        }
    )
    assert pipe_table(table, caption="athletics") == (
        "/*\n"
        "table caption : athletics\n"
        "col : Rank | Lane | Player | Time\n"
        "row 1 : | 5 | Olga Tereshkova (KAZ) | 51.86\n"
        "row 2 : | 6 | Manjeet Kaur (IND) | 52.17\n"
        "row 3 : | 3 | Asami Tanno (JPN) | 53.04\n"
        "*/"
    )


def test_pipe_table_cuts_and_escapes() -> None:
    table = pa.table(
        {
            "note": ["a | b", "line\nbreak", "y" * 50] + ["z"] * 997,
            "day": [datetime.date(2024, 1, 10)] * 1000,
            "extra": [None] * 1000,
        }
    )
    text = pipe_table(table, max_rows=3, max_columns=2, max_cell_chars=20)
    assert text.splitlines() == [
        "/*",
        "col : note | day",
        "row 1 : a \\| b | 2024-01-10",
        "row 2 : line break | 2024-01-10",
        "row 3 : " + "y" * 19 + "… | 2024-01-10",
        "... 997 more rows",
        "... 1 more column",
        "*/",
    ]
