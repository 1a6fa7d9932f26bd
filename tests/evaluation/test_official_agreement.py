"""The ports against the official evaluators themselves, on every example of the shared
packs (../shared/datasets) with synthetic predictions, tricky ones included.

The official code is not part of the repository: point DAGWRIGHT_OFFICIAL_EVALUATORS at a
folder holding ppasupat/WikiTableQuestions' `evaluator.py` and taoyds/test-suite-sql-eval's
`exec_eval.py` and `parse.py` (which needs sqlparse). The WikiTQ evaluator is Python 2: it is
made Python 3 here by renaming its Python 2 names (`ur""`, `unicode`, `basestring`, `long`)
only. Without the folder or the packs these tests are skipped, saying why.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from dagwright.evaluation.metrics import wikitq
from dagwright.evaluation.metrics.sql_exec import SpiderExecution
from dagwright.evaluation.sql_databases import DatabaseRoot, to_sqlite

PACKS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
OFFICIAL = os.environ.get("DAGWRIGHT_OFFICIAL_EVALUATORS")

pytestmark = [
    pytest.mark.skipif(not OFFICIAL, reason="DAGWRIGHT_OFFICIAL_EVALUATORS is not set"),
    pytest.mark.skipif(not PACKS.is_dir(), reason=f"no shared packs at {PACKS}"),
]


def _load(name: str, source: str) -> ModuleType:
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def _official_wikitq() -> ModuleType:
    text = (Path(str(OFFICIAL)) / "evaluator.py").read_text(encoding="utf-8")
    text = text.replace('ur"', 'r"').replace("ur'", "r'")
    for old, new in (("unicode", "str"), ("basestring", "str"), ("long", "int")):
        text = re.sub(rf"\b{old}\b", new, text)
    text = text.replace("__metaclass__ = ABCMeta", "")
    return _load("official_wikitq", text[: text.index("def main():")])


def _variants(items: list[str], canon: list[str] | None) -> Iterator[list[str]]:
    yield items
    if canon:
        yield canon
    yield [x.upper() for x in items]
    yield [x + "." for x in items]
    yield [x + " (note)" for x in items]
    yield [x + "[1]" for x in items]
    yield ['"' + x + '"' for x in items]
    yield [" " + x.replace(" ", "   ") + " " for x in items]
    yield list(reversed(items))
    yield [*items, "extra"]
    yield items[:-1]
    yield items + items
    yield [x.replace("-", "\u2013").replace("'", "\u2019").replace("e", "\u00e9") for x in items]
    yield [x + ".0" for x in items]
    yield [x.replace(",", "") for x in items]
    yield ["1990-01-" + x[:2] if x[:2].isdigit() else x for x in items]
    yield ["xx-" + x for x in items]
    yield [""]
    yield []


def test_wikitq_agrees_with_the_official_evaluator() -> None:
    official = _official_wikitq()
    compared = 0
    for name in ("dev.tsv", "seen_tagged.tsv", "train_pool.tsv"):
        lines = wikitq.official_lines((PACKS / "wikitq" / name).read_text(encoding="utf-8"))
        header = lines[0].split("\t")
        for line in lines[1:]:
            row = dict(zip(header, line.split("\t"), strict=False))
            originals = official.tsv_unescape_list(row["targetValue"])
            canon = official.tsv_unescape_list(row["targetCanon"]) if "targetCanon" in row else None
            theirs = official.to_value_list(originals, canon)
            ours = wikitq.targets_from_row(row)
            for predicted in _variants(originals, canon):
                expected = official.check_denotation(theirs, official.to_value_list(predicted))
                assert wikitq.is_correct(ours, predicted) == expected, (row["id"], predicted)
                compared += 1
    assert compared > 30_000


def test_spider_agrees_with_the_official_exec_eval(tmp_path: Path) -> None:
    pytest.importorskip("sqlparse")
    folder = Path(str(OFFICIAL))
    _load("parse", (folder / "parse.py").read_text(encoding="utf-8"))
    official = _load("official_exec_eval", (folder / "exec_eval.py").read_text(encoding="utf-8"))
    databases = DatabaseRoot(PACKS / "spider" / "databases", tmp_path / "built")
    port = SpiderExecution(databases)
    with (PACKS / "spider" / "train_queries.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))[::10]  # every tenth: all 135 databases, ~660 queries
    compared = 0
    for row in rows:
        db_id = row["database"]
        alone = tmp_path / "official" / db_id  # the evaluator runs on every .sqlite of a folder
        if not alone.is_dir():
            alone.mkdir(parents=True)
            shutil.copyfile(databases.path(db_id), alone / f"{db_id}.sqlite")
        gold = to_sqlite(row["sql"], "mysql")
        try:
            databases(db_id).execute(gold)
        except Exception:
            continue  # MySQL's STR_TO_DATE: two gold queries SQLite cannot run
        predictions = [gold, gold.replace("SELECT", "SELECT DISTINCT", 1), gold + " LIMIT 1"]
        predictions += [gold.replace(" ASC", " DESC"), "SELECT 1", "SELECT * FROM nowhere"]
        for predicted in predictions:
            expected = official.eval_exec_match(
                str(alone / f"{db_id}.sqlite"), predicted, gold, False, False, False
            )
            assert port.judge(gold, predicted, db_id)[0] == bool(expected), (gold, predicted)
            compared += 1
    assert compared > 3000
