"""MAC-SQL over tables of the data layer: Spider's activity_1 tables (a few of their rows, from
the shared pack) in PostgreSQL and in MariaDB, read through the connectors and run on the
query engine (the real servers, no mocks). The scripted model (SCRIPTED outputs) writes a
query with a wrong column first; the Refiner gets the engine's error and repairs it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.connectors import MysqlConnector, PostgresConnector
from dagwright.data.connectors.common import NO_LOCAL_PATHS
from dagwright.data.engine import QueryEngine
from dagwright.data.limits import QueryLimits
from dagwright.registry import MODELS, SOURCE_PATHS, TABLES, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, NodeFinished, compile_flow, parse_flow
from dagwright.secrets import MappingSecrets
from dagwright.tabular import TableAccess
from support.data_sources import MysqlDatabase, PostgresSchema, mysql_database, postgres_schema
from support.models import gateway_for, scripted_server

FLOW = Path(__file__).resolve().parents[2] / "flows" / "methods" / "mac_sql" / "spider.json"
# Rows of activity_1 (shared Spider pack, CC BY-SA 4.0): Faculty and who takes part where.
CREATE = (
    "CREATE TABLE {schema}faculty (facid INT PRIMARY KEY, lname VARCHAR(15), "
    "fname VARCHAR(15), sex VARCHAR(1), building VARCHAR(13))",
    "CREATE TABLE {schema}activity (actid INT PRIMARY KEY, activity_name VARCHAR(25))",
    "CREATE TABLE {schema}faculty_participates_in (facid INT REFERENCES {schema}faculty "
    "(facid), actid INT REFERENCES {schema}activity (actid))",
    "INSERT INTO {schema}faculty VALUES (1082, 'Giuliano', 'Mark', 'M', 'NEB'), "
    "(1121, 'Goodrich', 'Michael', 'M', 'NEB'), (1148, 'Masson', 'Gerald', 'M', 'NEB'), "
    "(1193, 'Jones', 'Stacey', 'F', 'Barton')",
    "INSERT INTO {schema}activity VALUES (770, 'Mountain Climbing'), (771, 'Canoeing')",
    "INSERT INTO {schema}faculty_participates_in VALUES (1082, 770), (1121, 771), (1193, 770)",
)
QUESTION = "What are the last names of the female faculty members?"


@pytest.fixture(scope="module")
def pg() -> Iterator[PostgresSchema]:
    with postgres_schema("dw_macsql") as schema:
        schema.execute(*(s.replace("{schema}", "{schema}.") for s in CREATE))
        yield schema


@pytest.fixture(scope="module")
def my() -> Iterator[MysqlDatabase]:
    with mysql_database("dw_macsql") as database:
        # MariaDB takes foreign keys as table constraints.
        statements = [s.replace("{schema}", "") for s in CREATE]
        statements[2] = (
            "CREATE TABLE faculty_participates_in (facid INT, actid INT, "
            "FOREIGN KEY (facid) REFERENCES faculty (facid), "
            "FOREIGN KEY (actid) REFERENCES activity (actid))"
        )
        database.execute(*statements)
        yield database


def _engine(source: str, pg: PostgresSchema, my: MysqlDatabase) -> QueryEngine:
    secrets = MappingSecrets({})
    if source == "pg":
        config = {"url": pg.url, "schemas": [pg.name]}
        connector: Any = PostgresConnector.from_config("pg", config, secrets)
    else:
        connector = MysqlConnector.from_config("my", {"url": my.url}, secrets)
    return QueryEngine(Catalog({source: connector}), QueryLimits(timeout_s=20))


@pytest.mark.parametrize("source", ["pg", "my"])
async def test_mac_sql_on_postgres_and_mariadb_tables(
    registry: Registry, source: str, pg: PostgresSchema, my: MysqlDatabase
) -> None:
    engine = _engine(source, pg, my)
    try:
        faculty = next(str(ref) for ref in engine.tables() if ref.table == "faculty")
        wrong = f"SELECT last_name FROM {faculty} WHERE sex = 'F'"
        right = f"SELECT lname FROM {faculty} WHERE sex = 'F'"
        script = {
            "rules": [
                {
                    "name": "decomposer",
                    "match": r"^Given a",
                    "reply": f"Sub question 1: {QUESTION}\nSQL\n```sql\n{wrong}\n```",
                },
                {"name": "refiner", "match": r"^【Instruction】", "reply": f"```sql\n{right}\n```"},
            ]
        }
        plan = compile_flow(parse_flow(json.loads(FLOW.read_text("utf-8"))), registry)
        with scripted_server(script) as server:
            gateway = gateway_for(server)
            services = BlockServices(
                {
                    MODELS: gateway,
                    TABLES: TableAccess(lambda: engine),
                    SOURCE_PATHS: NO_LOCAL_PATHS,
                }
            )
            try:
                executor = Executor(ExecutorOptions(services=services))
                result = await executor.run(plan, {"question": QUESTION, "database": source})
            finally:
                await gateway.aclose()
    finally:
        engine.close()
    assert result.status == "succeeded", result.error
    outputs = result.outputs
    assert outputs["sql"] == right
    assert outputs["refiner_rounds"] == 2  # the error repaired, then the SQL ran
    assert outputs["last_round"]["execution"]["data"] == [["Jones"]]
    assert result.usage.calls == 2  # 3 tables, 9 columns: no Selector call
    assert outputs["selected"] == {}
    # The schema the agents saw: keys from the source's metadata, values read through it.
    selector = next(
        e.output for e in result.events if isinstance(e, NodeFinished) and e.node == "selector"
    )
    assert f"faculty_participates_in.`facid` = {faculty}.`facid`" in selector["fk_str"]
    # Four names, each once: the order among equal counts is the database's.
    assert "(lname, lname. Value examples: [" in selector["desc_str"]
    assert "(facid, facid.)" in selector["desc_str"]  # a key: no value examples
