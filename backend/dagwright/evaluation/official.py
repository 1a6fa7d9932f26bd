"""Scoring prediction files in the benchmarks' official formats, without running anything
(`dagwright eval score`).

- wikitq: the release's TSV (`id`, `targetValue`, optionally `targetCanon`); predictions
  `id<TAB>item1<TAB>item2...` (the official evaluator's format).
- tabfact: JSONL (`label`; `id`, else the line's 0-based index); predictions `id<TAB>label`
  lines, or JSON / JSONL.
- fetaqa: the release's JSONL (`feta_id`, `answer`); predictions one answer per line in
  dataset order (the release's `test_preds_seq2seq.txt`), or JSON / JSONL with ids.
- spider: `SQL<TAB>db_id` lines (the official gold file) or the pack's CSV
  (`database,question,sql`); predictions one SQL per line, in order (the official format).
- bird: `SQL<TAB>db_id` lines (`dev_gold.sql`) or `dev.json`; predictions the official JSON
  `{"0": "SQL<TAB>----- bird -----<TAB>db_id", ...}`.
- numeric: JSONL / CSV / TSV with `id` and `answer`; predictions `id<TAB>answer`, JSON(L).

As in the official WikiTQ evaluator, only examples with a prediction are counted (an unknown
id is a warning); the other formats are positional or complete by construction, and a missing
prediction there is scored as wrong.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from dagwright.errors import DagwrightError
from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport, accuracy_report

BIRD_SEPARATOR = "\t----- bird -----\t"


class ScoreInputError(DagwrightError):
    """A dataset or predictions file that cannot be read as the metric's format."""

    code = "invalid_score_input"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScoreInputError(f"cannot read {path}: {exc.strerror}") from None


def _json_records(path: Path) -> list[dict[str, Any]]:
    text = _read(path)
    try:
        if path.suffix == ".json":
            data = json.loads(text)
            return data if isinstance(data, list) else [data]
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise ScoreInputError(f"{path}: not JSON: {exc}") from None


def _keyed_predictions(path: Path) -> dict[str, Any]:
    """id -> prediction from `id<TAB>value` lines, a JSON object {id: value}, or JSON(L)
    records with an id (`id`, `feta_id`, `question_id`) and a value (`prediction`, `answer`,
    `label`)."""
    text = _read(path)
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        if isinstance(data, dict):
            return {str(k): v for k, v in data.items()}
        result = {}
        for record in data:
            key = next((record[k] for k in ("id", "feta_id", "question_id") if k in record), None)
            value = next(
                (record[k] for k in ("prediction", "answer", "label") if k in record), None
            )
            if key is None:
                raise ScoreInputError(f"{path}: a record without an id: {record}")
            result[str(key)] = value
        return result
    result = {}
    for line in text.splitlines():
        if line.strip():
            key, _, value = line.partition("\t")
            result[key] = value
    return result


def _items_by_id(
    golds: list[tuple[str, dict[str, Any]]], predictions: dict[str, Any]
) -> list[Item]:
    return [Item(key, gold, predictions.get(key)) for key, gold in golds]


def score_wikitq(dataset: Path, predictions: Path) -> ScoreReport:
    from dagwright.evaluation.metrics import wikitq

    lines = wikitq.official_lines(_read(dataset))
    if not lines:
        raise ScoreInputError(f"{dataset} is empty")
    header = lines[0].split("\t")
    if "id" not in header or "targetValue" not in header:
        raise ScoreInputError(f"{dataset}: the header has no id and targetValue columns")
    targets = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("\t"), strict=False))
        targets[row["id"]] = wikitq.targets_from_row(row)
    examples = []
    notes = []
    for line in wikitq.official_lines(_read(predictions)):
        fields = line.split("\t")
        if fields[0] not in targets:
            notes.append(f'WARNING: Example ID "{fields[0]}" not found')
            continue
        ok = wikitq.is_correct(targets[fields[0]], fields[1:])
        examples.append(ExampleScore(fields[0], float(ok), ok))
    return accuracy_report("wikitq", examples, notes)


def score_tabfact(dataset: Path, predictions: Path) -> ScoreReport:
    from dagwright.evaluation.metrics import tabfact

    golds = [(str(r.get("id", i)), r) for i, r in enumerate(_json_records(dataset))]
    return tabfact.score(_items_by_id(golds, _keyed_predictions(predictions)))


def score_fetaqa(dataset: Path, predictions: Path) -> ScoreReport:
    from dagwright.evaluation.metrics import fetaqa

    golds = [(str(r.get("feta_id", i)), r) for i, r in enumerate(_json_records(dataset))]
    text = _read(predictions)
    if predictions.suffix in (".json", ".jsonl"):
        keyed = _keyed_predictions(predictions)
    else:  # the release's format: one generated answer per line, in dataset order
        lines = text.split("\n")
        if len(lines) == len(golds) + 1 and lines[-1] == "":
            lines.pop()
        if len(lines) != len(golds):
            raise ScoreInputError(
                f"{predictions}: {len(lines)} lines for {len(golds)} examples "
                "(one answer per line, in dataset order)"
            )
        keyed = {key: line for (key, _), line in zip(golds, lines, strict=True)}
    return fetaqa.score(_items_by_id(golds, keyed))


def _gold_sql(dataset: Path) -> list[tuple[str, dict[str, Any]]]:
    if dataset.suffix == ".csv":
        with dataset.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
        return [
            (str(i), {"sql": r["sql"], "db_id": r["database"], "question": r.get("question")})
            for i, r in enumerate(rows)
        ]
    if dataset.suffix == ".json":
        return [
            (str(r.get("question_id", i)), {"sql": r["SQL"], "db_id": r["db_id"]})
            for i, r in enumerate(_json_records(dataset))
        ]
    golds: list[tuple[str, dict[str, Any]]] = []
    for i, line in enumerate(_read(dataset).splitlines()):
        if line.strip():
            sql, _, db_id = line.strip().rpartition("\t")
            if not sql:
                raise ScoreInputError(f"{dataset}: line {i + 1} is not SQL<TAB>db_id")
            golds.append((str(len(golds)), {"sql": sql, "db_id": db_id}))
    return golds


def score_spider(
    dataset: Path, predictions: Path, databases: Any, keep_distinct: bool = False
) -> ScoreReport:
    from dagwright.evaluation.metrics.sql_exec import SpiderExecution

    golds = _gold_sql(dataset)
    lines = [line.strip() for line in _read(predictions).splitlines()]
    if lines and lines[-1] == "" and len(lines) == len(golds) + 1:
        lines.pop()
    if len(lines) != len(golds):
        raise ScoreInputError(
            f"{predictions}: {len(lines)} queries for {len(golds)} gold queries (one per line)"
        )
    keyed = {key: sql for (key, _), sql in zip(golds, lines, strict=True)}
    return SpiderExecution(databases, keep_distinct).score(_items_by_id(golds, keyed))


def score_bird(dataset: Path, predictions: Path, databases: Any, ves: int = 0) -> ScoreReport:
    from dagwright.evaluation.metrics.sql_exec import BirdExecution

    golds = _gold_sql(dataset)
    raw = _keyed_predictions(predictions)
    keyed: dict[str, Any] = {}
    for position, (key, _) in enumerate(golds):
        value = raw.get(str(position), raw.get(key))
        if isinstance(value, str):
            value = value.split(BIRD_SEPARATOR)[0]
        keyed[key] = value if value not in (0, "0") else None
    return BirdExecution(databases, ves).score(_items_by_id(golds, keyed))


def score_numeric(dataset: Path, predictions: Path) -> ScoreReport:
    from dagwright.evaluation.metrics import numeric

    if dataset.suffix in (".csv", ".tsv"):
        with dataset.open(encoding="utf-8", newline="") as handle:
            delimiter = "\t" if dataset.suffix == ".tsv" else ","
            records: list[dict[str, Any]] = list(csv.DictReader(handle, delimiter=delimiter))
    else:
        records = _json_records(dataset)
    golds = [(str(r.get("id", i)), r) for i, r in enumerate(records)]
    return numeric.score(_items_by_id(golds, _keyed_predictions(predictions)))


def per_example_lines(report: ScoreReport) -> list[str]:
    """`id<TAB>True|False` (accuracies) or `id<TAB>score` (graded metrics)."""
    return [
        f"{e.id}\t{e.correct}" if e.correct is not None else f"{e.id}\t{e.score:.6f}"
        for e in report.examples
    ]
