"""Spider's hardness levels (easy, medium, hard, extra), from the counts the official
evaluator's `eval_hardness` uses, computed on a sqlglot parse instead of Spider's own SQL
parser (so on the MySQL-dialect queries of the pack too):

- component 1: WHERE, GROUP BY, ORDER BY, LIMIT, each join (tables - 1), each OR, each LIKE;
- component 2: nested queries (subqueries in conditions, INTERSECT / UNION / EXCEPT);
- others: more than one aggregate, more than one selected column, more than one WHERE
  condition, more than one GROUP BY column.

A query sqlglot cannot parse is "unknown".
"""

from __future__ import annotations

from sqlglot import exp, parse_one
from sqlglot.errors import ParseError


def _conditions(where: exp.Expression | None) -> int:
    if where is None:
        return 0
    return len(list(where.find_all(exp.Connector))) + 1


def hardness(sql: str, dialect: str = "mysql") -> str:
    try:
        tree = parse_one(sql, read=dialect)
    except ParseError:
        return "unknown"
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return "unknown"
    where = select.args.get("where")
    group = select.args.get("group")
    comp1 = sum(bool(select.args.get(k)) for k in ("where", "group", "order", "limit"))
    comp1 += len(select.args.get("joins") or [])
    comp1 += len(list(select.find_all(exp.Or))) + len(list(select.find_all(exp.Like)))
    comp2 = len(list(tree.find_all(exp.Union, exp.Intersect, exp.Except)))
    comp2 += sum(1 for s in select.find_all(exp.Subquery, exp.Select) if s is not select)
    aggregates = len(list(select.find_all(exp.AggFunc)))
    others = sum(
        (
            aggregates > 1,
            len(select.expressions) > 1,
            _conditions(where.this if where else None) > 1,
            len(group.expressions) > 1 if group else False,
        )
    )
    if comp1 <= 1 and others == 0 and comp2 == 0:
        return "easy"
    if (others <= 2 and comp1 <= 1 and comp2 == 0) or (comp1 <= 2 and others < 2 and comp2 == 0):
        return "medium"
    if (
        (others > 2 and comp1 <= 2 and comp2 == 0)
        or (2 < comp1 <= 3 and others <= 2 and comp2 == 0)
        or (comp1 <= 1 and others == 0 and comp2 <= 1)
    ):
        return "hard"
    return "extra"
