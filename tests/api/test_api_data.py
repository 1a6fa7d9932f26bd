"""Data sources and queries over real HTTP: the Figure 1 demo sources joined across SQLite and
a CSV file, a PostgreSQL and a MariaDB source added through the API and joined with them,
secrets for credentials, refused SQL, unreachable sources, and table tools in a debug run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.data_sources import MysqlDatabase, PostgresSchema, mysql_database, postgres_schema
from support.server import Api, error_of

TOM = (
    "SELECT e.Name, s.Bonus FROM hr.main.Employee e "
    "JOIN payroll.main.salary s ON s.ID = e.ID WHERE e.Name = 'Tom'"
)


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSchema]:
    with postgres_schema("dw_api") as schema:
        schema.execute(
            "CREATE TABLE {schema}.departments (depno int PRIMARY KEY, budget numeric(10, 2))",
            "COMMENT ON TABLE {schema}.departments IS 'Budgets per department'",
            "INSERT INTO {schema}.departments VALUES (1, 5000.50), (2, 7000)",
        )
        yield schema


@pytest.fixture(scope="module")
def maria() -> Iterator[MysqlDatabase]:
    with mysql_database("dw_api") as database:
        database.execute(
            "CREATE TABLE managers (depno INT PRIMARY KEY, manager VARCHAR(40))",
            "INSERT INTO managers VALUES (1, 'Ada'), (2, 'Grace')",
        )
        yield database


def query(api: Api, sql: str, **options: Any) -> Any:
    return api.http.post("/api/v1/query", json={"sql": sql, **options})


def test_demo_sources_answer_the_figure_1_question(api: Api) -> None:
    sources = {s["name"]: s for s in api.http.get("/api/v1/sources").json()}
    assert sources["hr"]["kind"] == "sqlite"
    assert sources["hr"]["origin"] == "demo"
    assert sources["payroll"]["kind"] == "files"
    assert not sources["payroll"]["editable"]
    tables = api.http.get("/api/v1/tables").json()
    assert {"hr.main.Employee", "hr.main.Department", "payroll.main.salary"} <= set(tables)

    answer = query(api, TOM)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["rows"] == [{"Name": "Tom", "Bonus": 1569}]
    assert body["truncated"] is False
    reads = {read["source"]: read for read in body["reads"]}
    assert set(reads) == {"hr", "payroll"}
    assert set(reads["hr"]["columns"]) == {"ID", "Name"}  # Email and Depno never left SQLite
    assert "Name = 'Tom'" in " ".join(reads["hr"]["filters"])

    described = api.http.get("/api/v1/tables/hr.main.Employee?sample=2").json()
    assert [c["name"] for c in described["columns"]] == ["ID", "Name", "Email", "Depno"]
    assert described["primary_key"] == ["ID"]
    assert described["foreign_keys"][0]["references"] == "hr.main.Department"
    assert [row["Name"] for row in described["sample"]] == ["Lucy", "Tom"]


def test_postgres_and_mariadb_sources_join_with_the_demo(
    api: Api, pg: PostgresSchema, maria: MysqlDatabase
) -> None:
    put = api.http.put(
        "/api/v1/sources/budgets",
        json={"kind": "postgres", "config": {"url": pg.url, "schemas": [pg.name]}},
    )
    assert put.status_code == 200, put.text
    assert put.json()["editable"] is True
    put = api.http.put("/api/v1/sources/org", json={"kind": "mysql", "config": {"url": maria.url}})
    assert put.status_code == 200, put.text
    checked = api.http.post("/api/v1/sources/budgets/check").json()
    assert checked["tables"] == [f"budgets.{pg.name}.departments"]

    sql = (
        f"SELECT d.DepName, b.budget, m.manager FROM hr.main.Department d "
        f"JOIN budgets.{pg.name}.departments b ON b.depno = d.Depno "
        f"JOIN org.{maria.name}.managers m ON m.depno = d.Depno ORDER BY d.Depno"
    )
    body = query(api, sql).json()
    assert body["rows"] == [
        {"DepName": "R&D", "budget": 5000.5, "manager": "Ada"},
        {"DepName": "FINANCE", "budget": 7000.0, "manager": "Grace"},
    ]
    assert {read["source"] for read in body["reads"]} == {"hr", "budgets", "org"}

    assert api.http.delete("/api/v1/sources/org").status_code == 204
    gone = query(api, f"SELECT * FROM org.{maria.name}.managers")
    assert gone.status_code in (400, 404)
    assert api.http.delete("/api/v1/sources/budgets").status_code == 204


def test_bad_sources_are_refused_and_explained(api: Api) -> None:
    unknown_kind = api.http.put("/api/v1/sources/x", json={"kind": "oracle", "config": {}})
    assert error_of(unknown_kind, 400)["code"] == "source_config"
    missing = api.http.put("/api/v1/sources/x", json={"kind": "sqlite", "config": {}})
    assert "path" in error_of(missing, 400)["message"]
    assert api.http.get("/api/v1/sources/x").status_code == 404  # nothing stored
    demo = api.http.put("/api/v1/sources/hr", json={"kind": "sqlite", "config": {"path": "x"}})
    assert error_of(demo, 409)["code"] == "source_not_editable"

    api.http.put("/api/v1/secrets/dw_api_pw", json={"value": "sw0rdf1sh-secret"})
    unreachable = api.http.put(
        "/api/v1/sources/nowhere",
        json={
            "kind": "postgres",
            "config": {"url": "postgresql://bob@127.0.0.1:1/test", "password_secret": "dw_api_pw"},
        },
    )
    assert unreachable.status_code == 200, unreachable.text
    assert "sw0rdf1sh" not in unreachable.text
    check = api.http.post("/api/v1/sources/nowhere/check")
    error = error_of(check, 502)
    assert error["code"] == "source_unreachable"
    assert "nowhere" in error["message"]
    assert "sw0rdf1sh" not in check.text
    api.http.delete("/api/v1/sources/nowhere")


@pytest.mark.parametrize(
    "sql",
    [
        "DROP TABLE hr.main.Employee",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT 1; SELECT 2",
        "COPY (SELECT 1) TO '/tmp/x.csv'",
        "PRAGMA version",
    ],
)
def test_hostile_sql_is_refused(api: Api, sql: str) -> None:
    assert error_of(query(api, sql), 400)["code"] == "sql_refused"


def test_row_limit_marks_the_answer_truncated(api: Api) -> None:
    body = query(api, "SELECT * FROM hr.main.Employee ORDER BY ID", max_rows=1).json()
    assert body["rows"] == [{"ID": 1, "Name": "Lucy", "Email": "lucy@com", "Depno": 1}]
    assert body["truncated"] is True
    assert body["row_limit"] == 1


def test_table_tools_in_a_debug_run(api: Api) -> None:
    flow = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "bonus",
        "nodes": [
            {"id": "q", "block": "text_input", "config": {"name": "question"}},
            {"id": "lookup", "block": "schema_lookup", "config": {"top_tables": 2}},
            {"id": "sql", "block": "text_input", "config": {"name": "sql"}},
            {"id": "check", "block": "sql_check", "config": {}},
            {"id": "run", "block": "sql_query", "config": {}},
            {"id": "text", "block": "table_text", "config": {}},
            {"id": "schema", "block": "output", "config": {"name": "schema"}},
            {"id": "answer", "block": "output", "config": {"name": "answer"}},
        ],
        "edges": [
            {
                "source": {"node": "q", "port": "output"},
                "target": {"node": "lookup", "port": "question"},
            },
            {
                "source": {"node": "lookup", "port": "schema"},
                "target": {"node": "schema", "port": "value"},
            },
            {
                "source": {"node": "sql", "port": "output"},
                "target": {"node": "check", "port": "sql"},
            },
            {
                "source": {"node": "check", "port": "output"},
                "target": {"node": "run", "port": "sql"},
            },
            {
                "source": {"node": "run", "port": "rows"},
                "target": {"node": "text", "port": "table"},
            },
            {
                "source": {"node": "text", "port": "output"},
                "target": {"node": "answer", "port": "value"},
            },
        ],
    }
    inputs = {"question": "What is the year-end bonus for Tom?", "sql": f"```sql\n{TOM}\n```"}
    response = api.http.post(
        "/api/v1/runs/debug", json={"flow": flow, "inputs": inputs, "stream": False}
    )
    result = response.json()
    assert result["status"] == "succeeded", result
    assert "row 1 : Tom | 1569" in result["outputs"]["answer"]
    schema = result["outputs"]["schema"]
    assert "# Table: hr.main.Employee" in schema
    assert "# Table: payroll.main.salary" in schema


def test_a_sources_catalogue_ttl_is_set_and_shown(api: Api) -> None:
    settings = {"kind": "postgres", "config": {"url": "postgresql://bob@127.0.0.1:1/test"}}
    put = api.http.put("/api/v1/sources/dw_ttl", json={**settings, "catalogue_ttl_s": 90})
    assert put.status_code == 200, put.text
    assert api.http.get("/api/v1/sources/dw_ttl").json()["catalogue_ttl_s"] == 90
    negative = api.http.put("/api/v1/sources/dw_ttl", json={**settings, "catalogue_ttl_s": -1})
    problems = error_of(negative, 422)["problems"]  # the API's validation error, as elsewhere
    assert [problem["field"] for problem in problems] == ["catalogue_ttl_s"]
    assert api.http.get("/api/v1/sources/dw_ttl").json()["catalogue_ttl_s"] == 90
    cleared = api.http.put("/api/v1/sources/dw_ttl", json=settings)
    assert cleared.json()["catalogue_ttl_s"] is None
    api.http.delete("/api/v1/sources/dw_ttl")
