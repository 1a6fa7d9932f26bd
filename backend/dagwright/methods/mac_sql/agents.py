"""What the agents do with the model's answers (core/agents.py, core/utils.py): the Selector's
JSON, the Decomposer's sub-questions and SQL, the Refiner's check of an execution result."""

from __future__ import annotations

import json
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Literal, TypedDict

Dataset = Literal["spider", "bird"]
FLAGS = ("keep_all", "drop_all")
SQL_BLOCK = re.compile(r"```sql(.*?)```", re.DOTALL)
SUB_QUESTION = re.compile(r"Sub question\s*\d+\s*:\s*(.*)")
NO_SQL = "error: No SQL found in the input string"
ROWS_SHOWN = 5  # the Refiner keeps the first rows of a result


def selector_answer(text: str) -> dict[str, Any]:
    """The ```json block of the Selector's answer when every table is "keep_all", "drop_all"
    or a list of columns; {} otherwise (then the whole schema is used, as the paper does on a
    parse failure)."""
    start = text.find("```json")
    end = text.find("```", start + 7)
    if start == -1 or end == -1:
        return {}
    try:
        data = json.loads(text[start + 7 : end])
    except json.JSONDecodeError:
        return {}
    if not isinstance(data, dict):
        return {}
    for value in data.values():
        if isinstance(value, str) and value not in FLAGS:
            return {}
        if not isinstance(value, str | list):
            return {}
    return data


def sql_of(text: str) -> str:
    """The last ```sql block (the Decomposer's final SQL; the Refiner's fix); without one,
    the official error text, which stops the Refiner."""
    blocks = [match.group(1).strip() for match in SQL_BLOCK.finditer(text)]
    return blocks[-1] if blocks else NO_SQL


class Step(TypedDict):
    question: str
    sql: str


def sub_questions(text: str) -> list[Step]:
    """Each `Sub question N:` with the ```sql block that follows it."""
    steps: list[Step] = []
    parts = re.split(r"(?=Sub question\s*\d+\s*:)", text)
    for part in parts:
        match = SUB_QUESTION.match(part.strip())
        if match is None:
            continue
        blocks = SQL_BLOCK.findall(part)
        steps.append(
            {"question": match.group(1).strip(), "sql": blocks[-1].strip() if blocks else ""}
        )
    return steps


def with_select(sql: str) -> str:
    """The official add_prefix: the old SQL shown to the Refiner starts with SELECT."""
    return sql if sql.startswith(("SELECT", "select")) else "SELECT" + sql


class Execution(TypedDict):
    sql: str
    data: list[list[Any]] | None  # the first rows; None when the query failed
    error: str  # the database's message, or the Refiner's reason to repair
    exception: str
    timed_out: bool


def _no_attach(action: int, *_: str | None) -> int:
    return sqlite3.SQLITE_DENY if action == sqlite3.SQLITE_ATTACH else sqlite3.SQLITE_OK


def execute_sqlite(path: Path, sql: str, timeout_s: float) -> Execution:
    """Runs the SQL on the SQLite file, read-only, stopped after `timeout_s` seconds."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    connection.text_factory = lambda b: b.decode(errors="ignore")
    # Model-written SQL reads this database only: ATTACH would open any other file.
    connection.set_authorizer(_no_attach)
    deadline = time.monotonic() + timeout_s
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    try:
        rows = connection.execute(sql).fetchall()
        return {
            "sql": sql,
            "data": [list(r) for r in rows[:ROWS_SHOWN]],
            "error": "",
            "exception": "",
            "timed_out": False,
        }
    except sqlite3.Error as exc:
        timed_out = time.monotonic() > deadline
        message = " ".join(str(a) for a in exc.args)
        return {
            "sql": sql,
            "data": None,
            "error": message,
            "exception": str(exc.__class__),
            "timed_out": timed_out,
        }
    finally:
        connection.close()


def needs_repair(result: Execution, dataset: Dataset) -> bool:
    """Spider: only a failed query is repaired. BIRD: also an empty result or a None in it,
    with the reason the Refiner is told (the official _is_need_refine)."""
    if result["data"] is None:
        return True
    if dataset == "spider":
        return False
    if not result["data"]:
        result["error"] = "no data selected"
        return True
    if any(value is None for row in result["data"] for value in row):
        result["error"] = "exist None value, you can add `NOT NULL` in SQL"
        return True
    return False
