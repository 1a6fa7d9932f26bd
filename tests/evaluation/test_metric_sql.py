"""Spider and BIRD execution accuracy: the evaluators' result comparison by hand, and queries
run on a fixture database built from the Spider pack's DDL + CSV."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dagwright.evaluation.metrics.base import Item
from dagwright.evaluation.metrics.sql_exec import (
    BirdExecution,
    SpiderExecution,
    remove_distinct,
    result_eq,
)
from dagwright.evaluation.sql_databases import DatabaseRoot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "evaluation" / "spider"


def test_result_eq_by_hand() -> None:
    assert result_eq([], [], order_matters=True)
    assert result_eq([(1, "a")], [("a", 1)], order_matters=False)  # columns may be permuted
    assert result_eq([(1,), (2,)], [(2,), (1,)], order_matters=False)
    assert not result_eq([(1,), (2,)], [(2,), (1,)], order_matters=True)
    assert not result_eq([(1,), (1,), (2,)], [(1,), (2,), (2,)], order_matters=False)  # bags
    assert not result_eq([(1, 2)], [(1,)], order_matters=False)
    wide = [(1, 2, 3, 4, "x"), (5, 6, 7, 8, "y")]
    assert result_eq(wide, [(r[4], r[3], r[2], r[1], r[0]) for r in wide], order_matters=True)
    assert not result_eq(wide, [(1, 2, 3, 4, "y"), (5, 6, 7, 8, "x")], order_matters=False)


def test_remove_distinct_as_the_evaluator() -> None:
    assert remove_distinct("SELECT DISTINCT a FROM t WHERE b = 'distinct'") == (
        "SELECT  a FROM t WHERE b = 'distinct'"
    )
    assert remove_distinct("select count(distinct a) from t") == "select count( a) from t"
    assert remove_distinct("SELECT distinct_col FROM t") == "SELECT distinct_col FROM t"


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> DatabaseRoot:
    return DatabaseRoot(FIXTURES / "databases", tmp_path_factory.mktemp("sqlite"), "mysql")


def _spider(databases: DatabaseRoot, gold: str, predicted: str | None) -> bool | None:
    item = Item("0", {"sql": gold, "db_id": "activity_1"}, predicted)
    return SpiderExecution(databases).score([item]).examples[0].correct


def test_spider_execution_on_the_pack_database(databases: DatabaseRoot) -> None:
    gold = "SELECT COUNT(*) FROM `Faculty`"
    assert _spider(databases, gold, "select count(*) from Faculty")
    assert not _spider(databases, gold, "SELECT COUNT(*) FROM Student")
    assert not _spider(databases, gold, "SELECT nonsense FROM nowhere")  # fails: wrong
    assert not _spider(databases, gold, None)
    ordered = "SELECT `Lname` FROM `Faculty` ORDER BY `Lname` ASC"
    assert _spider(databases, ordered, "SELECT Lname FROM Faculty ORDER BY Lname")
    assert not _spider(databases, ordered, "SELECT Lname FROM Faculty ORDER BY Lname DESC")
    # without ORDER BY in the gold, row order is free
    assert _spider(databases, "SELECT `Lname` FROM `Faculty`", ordered)
    # DISTINCT is removed from both, as by default in the evaluator
    assert _spider(databases, "SELECT DISTINCT `Rank` FROM `Faculty`", "SELECT Rank FROM Faculty")
    # a source-qualified table name (a registered data source) runs on the bare database
    assert _spider(databases, gold, "SELECT COUNT(*) FROM spider_activity_1.Faculty")


def test_bird_compares_sets_and_ves(databases: DatabaseRoot) -> None:
    gold = "SELECT `Rank` FROM `Faculty`"
    items = [
        Item("0", {"sql": gold, "db_id": "activity_1"}, "SELECT DISTINCT Rank FROM Faculty"),
        Item("1", {"sql": gold, "db_id": "activity_1"}, "SELECT Sex FROM Faculty"),
    ]
    report = BirdExecution(databases, ves_iterations=5).score(items)
    assert [e.correct for e in report.examples] == [True, False]  # sets: duplicates ignored
    assert report.value == 0.5
    assert report.aggregate["ves"] > 0
    assert "time_ratio" in report.examples[0].detail
    spider = SpiderExecution(databases, keep_distinct=True).score(items)
    assert [e.correct for e in spider.examples] == [False, False]  # bags: they differ


def test_a_query_past_the_time_limit_is_interrupted_and_wrong(databases: DatabaseRoot) -> None:
    slow = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT max(i) FROM n"
    database = databases("activity_1")
    database.timeout_s = 0.2
    with pytest.raises(sqlite3.OperationalError, match="interrupted"):
        database.execute(slow)
    quick = SpiderExecution(lambda _: database)
    assert not quick.judge("SELECT COUNT(*) FROM `Faculty`", slow, "activity_1")[0]
