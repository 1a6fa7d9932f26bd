"""Execution accuracy of SQL: Spider's (taoyds/test-suite-sql-eval, exec_eval.py) and BIRD's
(bird/llm/src/evaluation.py and evaluation_ves.py), ported behaviour for behaviour.

Spider: both queries are post-processed (`> =` -> `>=` ...), DISTINCT is removed from both
(the evaluator's default, `--keep_distinct` off), the gold query runs and must succeed, a
predicted query that fails is wrong; the results are equal when some column permutation of
the predicted rows gives the same bag of rows as the gold's — in the same order when the gold
query has `order by`. The test-suite's distilled databases are not part of the packs: a
query runs on the example's one database (classical execution accuracy).

BIRD: the results are equal when their sets of rows are (order, duplicates and column order
ignored... except that column order inside a row is kept, as there). VES: for a correct
prediction, both queries run `iterations` times; the ratios gold_time / predicted_time beyond
3 standard deviations of their mean are dropped, their mean is the example's time ratio;
VES = mean over all examples of sqrt(ratio) * 100 (0 for a wrong or failed prediction).
"""

from __future__ import annotations

import math
import random
import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import product
from typing import Any, Protocol

from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport, accuracy_report

Row = tuple[Any, ...]

# A single-quoted, double-quoted or backquoted token, or the word DISTINCT: quoted text is
# one token to sqlparse too, so a DISTINCT inside a string literal is kept.
_DISTINCT_TOKENS = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\b[dD][iI][sS][tT][iI][nN][cC][tT]\b"
)


class Database(Protocol):
    """Runs a query on one example's database and returns all its rows."""

    def execute(self, sql: str) -> list[Row]: ...


def postprocess(query: str) -> str:
    """The evaluator's repair of spaced comparison operators."""
    return query.replace("> =", ">=").replace("< =", "<=").replace("! =", "!=")


def remove_distinct(query: str) -> str:
    """Every DISTINCT keyword removed (also inside COUNT(DISTINCT x), as the evaluator does)."""
    return _DISTINCT_TOKENS.sub(
        lambda m: "" if m.group(0).lower() == "distinct" else m.group(0), query
    )


def _unorder_row(row: Row) -> Row:
    return tuple(sorted(row, key=lambda x: str(x) + str(type(x))))


def _quick_rej(result1: list[Row], result2: list[Row], order_matters: bool) -> bool:
    s1 = [_unorder_row(row) for row in result1]
    s2 = [_unorder_row(row) for row in result2]
    if order_matters:
        return s1 == s2
    return set(s1) == set(s2)


def _multiset_eq(l1: list[Row], l2: list[Row]) -> bool:
    if len(l1) != len(l2):
        return False
    counts: dict[Row, int] = defaultdict(int)
    for e in l1:
        counts[e] += 1
    for e in l2:
        counts[e] -= 1
        if counts[e] < 0:
            return False
    return True


def _constraint_permutations(
    tab1_sets_by_columns: list[set[Any]], result2: list[Row]
) -> Iterator[tuple[int, ...]]:
    num_cols = len(result2[0])
    perm_constraints = [set(range(num_cols)) for _ in range(num_cols)]
    if num_cols <= 3:
        return product(*perm_constraints)
    # Sampling 20 rows only prunes impossible column pairings, so the answer does not
    # depend on the sample; a fixed seed keeps the work repeatable.
    sampler = random.Random(0)
    for _ in range(20):
        random_tab2_row = sampler.choice(result2)
        for tab1_col in range(num_cols):
            for tab2_col in set(perm_constraints[tab1_col]):
                if random_tab2_row[tab2_col] not in tab1_sets_by_columns[tab1_col]:
                    perm_constraints[tab1_col].remove(tab2_col)
    return product(*perm_constraints)


def result_eq(result1: list[Row], result2: list[Row], order_matters: bool) -> bool:
    """Spider's denotation equality (gold rows first)."""
    if len(result1) == 0 and len(result2) == 0:
        return True
    if len(result1) != len(result2):
        return False
    num_cols = len(result1[0])
    if len(result2[0]) != num_cols:
        return False
    if not _quick_rej(result1, result2, order_matters):
        return False
    tab1_sets_by_columns = [{row[i] for row in result1} for i in range(num_cols)]
    for perm in _constraint_permutations(tab1_sets_by_columns, result2):
        if len(perm) != len(set(perm)):
            continue
        if num_cols == 1:
            result2_perm = result2
        else:
            result2_perm = [tuple(row[i] for i in perm) for row in result2]
        if order_matters:
            if result1 == result2_perm:
                return True
        elif set(result1) == set(result2_perm) and _multiset_eq(result1, result2_perm):
            return True
    return False


def _prediction_sql(prediction: Any) -> str | None:
    if isinstance(prediction, list) and len(prediction) == 1:
        prediction = prediction[0]
    if isinstance(prediction, str) and prediction.strip():
        return prediction
    return None


DatabaseFor = Callable[[str], Database]  # db_id -> its database


@dataclass(frozen=True, slots=True)
class SpiderExecution:
    """Spider execution accuracy; `keep_distinct` is the evaluator's `--keep_distinct`."""

    databases: DatabaseFor
    keep_distinct: bool = False
    # Where the gold queries run when they are in another dialect than the predictions.
    gold_databases: DatabaseFor | None = None

    def judge(self, gold_sql: str, predicted_sql: str | None, db_id: str) -> tuple[bool, str]:
        database = self.databases(db_id)
        g_str = postprocess(gold_sql)
        if not self.keep_distinct:
            g_str = remove_distinct(g_str)
        gold = (self.gold_databases or self.databases)(db_id).execute(
            g_str
        )  # the gold must run: an error here is the dataset's
        if predicted_sql is None:
            return False, "no prediction"
        p_str = postprocess(predicted_sql)
        if not self.keep_distinct:
            p_str = remove_distinct(p_str)
        try:
            predicted = database.execute(p_str)
        except Exception as exc:  # any failure of the predicted query makes it wrong
            return False, f"prediction failed: {exc}"
        order_matters = "order by" in g_str.lower()
        ok = result_eq(gold, predicted, order_matters=order_matters)
        return ok, "" if ok else "different results"

    def score(self, items: list[Item]) -> ScoreReport:
        examples = []
        for item in items:
            ok, why = self.judge(
                item.gold["sql"], _prediction_sql(item.prediction), item.gold["db_id"]
            )
            examples.append(ExampleScore(item.id, float(ok), ok, {"why": why} if why else {}))
        return accuracy_report("spider", examples, [])


def _clean_abnormal(values: Sequence[float]) -> list[float]:
    mean = statistics.fmean(values)
    std = statistics.pstdev(values)  # numpy's std: the population deviation
    return [x for x in values if mean - 3 * std < x < mean + 3 * std]


def _timed(database: Database, sql: str) -> float:
    start = time.perf_counter()
    database.execute(sql)
    return time.perf_counter() - start


@dataclass(frozen=True, slots=True)
class BirdExecution:
    """BIRD execution accuracy and, with `ves_iterations` > 0, VES."""

    databases: DatabaseFor
    ves_iterations: int = 0
    gold_databases: DatabaseFor | None = None

    def time_ratio(self, database: Database, predicted_sql: str, gold_sql: str) -> float:
        ratios = []
        for _ in range(self.ves_iterations):
            predicted_time = _timed(database, predicted_sql)
            gold_time = _timed(database, gold_sql)
            if predicted_time <= 0:
                return 0.0  # BIRD's division by zero, caught: ratio 0
            ratios.append(gold_time / predicted_time)
        kept = _clean_abnormal(ratios)
        # Identical ratios have a deviation of 0 and none is kept: BIRD then divides by zero,
        # catches it and scores the example 0; so does this port.
        return sum(kept) / len(kept) if kept else 0.0

    def score(self, items: list[Item]) -> ScoreReport:
        examples = []
        ves_total = 0.0
        for item in items:
            database = self.databases(item.gold["db_id"])
            predicted_sql = _prediction_sql(item.prediction)
            gold = (self.gold_databases or self.databases)(item.gold["db_id"]).execute(
                item.gold["sql"]
            )
            detail: dict[str, Any] = {}
            ok = False
            if predicted_sql is None:
                detail["why"] = "no prediction"
            else:
                try:
                    predicted = database.execute(predicted_sql)
                except Exception as exc:  # a failing prediction is wrong, as in BIRD
                    detail["why"] = f"prediction failed: {exc}"
                else:
                    ok = set(predicted) == set(gold)
            if ok and self.ves_iterations > 0 and predicted_sql is not None:
                ratio = self.time_ratio(database, predicted_sql, item.gold["sql"])
                detail["time_ratio"] = ratio
                ves_total += math.sqrt(ratio) * 100
            examples.append(ExampleScore(item.id, float(ok), ok, detail))
        report = accuracy_report("bird", examples, [])
        if self.ves_iterations > 0:
            report.aggregate["ves"] = ves_total / len(items) if items else 0.0
        return report
