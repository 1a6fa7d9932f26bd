"""Schema lookup: the tables and columns a question is about, and the tables a join needs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dagwright.data.connector import ColumnInfo, ForeignKey, TableInfo
from dagwright.data.demo import billing_table_infos, generate_billing
from dagwright.data.schema_lookup import TableMatch, lookup, lookup_lexical, words
from dagwright.embedding.embedder import Embedder
from dagwright.embedding.lexical import HashingEmbedder

EMPLOYEE = TableInfo(
    "main",
    "Employee",
    (
        ColumnInfo("ID", pa.int64(), "INTEGER"),
        ColumnInfo("Name", pa.string(), "TEXT"),
        ColumnInfo("Email", pa.string(), "TEXT"),
        ColumnInfo("Depno", pa.int64(), "INTEGER"),
    ),
    primary_key=("ID",),
    foreign_keys=(ForeignKey(("Depno",), "main", "Department", ("Depno",)),),
)
DEPARTMENT = TableInfo(
    "main",
    "Department",
    (ColumnInfo("Depno", pa.int64(), "INTEGER"), ColumnInfo("DepName", pa.string(), "TEXT")),
    primary_key=("Depno",),
)
SALARY = TableInfo(
    "main", "Salary", (ColumnInfo("ID", pa.int64(), "int64"), ColumnInfo("Bonus", pa.int64(), "x"))
)
FIGURE1 = [EMPLOYEE, DEPARTMENT, SALARY]
FIGURE1_SAMPLES = {
    "main.Employee": pa.table(
        {"ID": [1, 2], "Name": ["Lucy", "Tom"], "Email": ["lucy@com", "tom@com"], "Depno": [1, 2]}
    )
}
BILLING = billing_table_infos()
BILLING_SAMPLES = {f"billing.{k}": v.slice(0, 50) for k, v in generate_billing(1000).items()}


def names(matches: list[TableMatch]) -> list[str]:
    return [match.table.name for match in matches]


def test_words_split_identifiers() -> None:
    assert words("DepName") == ["dep", "name"]
    assert words("daily_billing usageAmount") == ["daily", "billing", "usage", "amount"]
    assert words("What is the year-end bonus for Tom?") == ["year", "end", "bonus", "tom"]
    assert words("Salaries bonuses cn-Hangzhou HTTPStatus") == [
        "salary",
        "bonus",
        "cn",
        "hangzhou",
        "http",
        "status",
    ]


def test_figure1_question_needs_employee_and_salary() -> None:
    matches = lookup_lexical(
        "What is the year-end bonus for Tom?", FIGURE1, top_tables=2, samples=FIGURE1_SAMPLES
    )
    assert names(matches) == ["Salary", "Employee", "Department"]
    salary, employee, department = matches
    assert salary.score == 1.0
    assert salary.columns[0] == ("Bonus", 1.0)
    assert employee.columns[0][0] == "Name"  # "Tom" is one of its values
    # Department comes because Employee references it, with its key column
    assert department.via == "main.Employee"
    assert ("Depno", 0.0) in department.columns


def test_without_samples_values_are_unknown() -> None:
    matches = lookup_lexical("What is the year-end bonus for Tom?", FIGURE1, top_tables=2)
    assert names(matches) == ["Salary"]


def test_columns_cut_but_keys_kept() -> None:
    (billing, *_) = lookup_lexical(
        "total cost_usd by service", BILLING, top_tables=1, top_columns=2
    )
    assert billing.table.name == "daily_billing"
    assert [name for name, _ in billing.columns[:2]] == ["cost_usd", "service"]
    assert {"billing_id", "tenant_id", "cluster_id"} <= {name for name, _ in billing.columns}


def test_bridge_tables_are_pulled_in() -> None:
    def table(name: str, columns: list[str], *references: str) -> TableInfo:
        keys = tuple(ForeignKey((f"{r}_id",), "s", r, ("id",)) for r in references)
        infos = tuple(ColumnInfo(c, pa.string(), "TEXT") for c in columns)
        return TableInfo("s", name, infos, primary_key=("id",), foreign_keys=keys)

    student = table("student", ["id", "student_name"])
    course = table("course", ["id", "title"])
    enrollment = table("enrollment", ["id", "student_id", "course_id"], "student", "course")
    tables = [student, course, enrollment]
    matches = lookup_lexical("student names and course titles", tables, top_tables=2)
    assert names(matches) == ["student", "course", "enrollment"]
    assert matches[2].via == "s.student"
    # tenants and clusters join directly: operations_events, which references both, stays out
    tables = [t for t in BILLING if t.name != "daily_billing"]
    matches = lookup_lexical("plan of the tenant and node_count", tables, top_tables=2)
    assert names(matches) == ["clusters", "tenants"]


def test_nothing_matches() -> None:
    assert lookup_lexical("zebra", BILLING) == []
    assert lookup_lexical("anything", []) == []


def test_billing_question_finds_region_in_any_case() -> None:
    matches = lookup_lexical(
        "Which clusters in CN-HANGZHOU were scaled out?", BILLING, samples=BILLING_SAMPLES
    )
    assert names(matches)[0] == "clusters"
    assert matches[0].columns[0][0] == "region"


class CountingEmbedder(Embedder):
    """The hashing embedder, counting calls (the lookup must embed in one call)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(256)
        self.spec = self.inner.spec
        self.dimension = self.inner.dimension
        self.calls = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return await self.inner.embed(texts)


async def test_embedder_adds_a_semantic_score() -> None:
    embedder = CountingEmbedder()
    question = "Analyze the billing records for user Eugene on January 10, 2024"
    matches = await lookup(question, BILLING, embedder=embedder, samples=BILLING_SAMPLES)
    assert embedder.calls == 1
    assert names(matches)[0] == "daily_billing"
    assert "tenants" in names(matches)
    lexical = lookup_lexical(question, BILLING, samples=BILLING_SAMPLES)
    assert [m.score for m in matches] != [m.score for m in lexical]
    assert all(0.0 <= m.score <= 1.0 for m in matches)


async def test_lookup_without_embedder_is_lexical() -> None:
    question = "year-end bonus for Tom"
    assert await lookup(question, FIGURE1, samples=FIGURE1_SAMPLES) == lookup_lexical(
        question, FIGURE1, samples=FIGURE1_SAMPLES
    )


def test_names_must_match_tables() -> None:
    with pytest.raises(ValueError, match="1 names given for 3 tables"):
        lookup_lexical("bonus", FIGURE1, names=["x"])
