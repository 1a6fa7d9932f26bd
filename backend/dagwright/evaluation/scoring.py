"""Scoring items with a metric by name: what a finished evaluation calls."""

from __future__ import annotations

from dagwright.evaluation.metrics.base import Item, ScoreReport
from dagwright.evaluation.metrics.sql_exec import DatabaseFor


def score_items(
    metric: str,
    items: list[Item],
    databases: DatabaseFor | None = None,
    gold_databases: DatabaseFor | None = None,
) -> ScoreReport:
    """`databases` (db_id -> database) is needed by spider and bird; `gold_databases` when
    the gold SQL is in another dialect than the predictions."""
    if metric in ("spider", "bird"):
        from dagwright.evaluation.metrics.sql_exec import BirdExecution, SpiderExecution

        if databases is None:
            raise ValueError(f"the {metric} metric runs queries: it needs the databases")
        if metric == "spider":
            return SpiderExecution(databases, gold_databases=gold_databases).score(items)
        return BirdExecution(databases, gold_databases=gold_databases).score(items)
    if metric == "wikitq":
        from dagwright.evaluation.metrics import wikitq

        return wikitq.score(items)
    if metric == "tabfact":
        from dagwright.evaluation.metrics import tabfact

        return tabfact.score(items)
    if metric == "fetaqa":
        from dagwright.evaluation.metrics import fetaqa

        return fetaqa.score(items)
    if metric == "numeric":
        from dagwright.evaluation.metrics import numeric

        return numeric.score(items)
    if metric in ("finqa", "finqa_gold_gated"):
        from dagwright.evaluation.metrics import finqa

        return finqa.score(items) if metric == "finqa" else finqa.score_gold_gated(items)
    raise ValueError(f"unknown metric {metric!r}")
