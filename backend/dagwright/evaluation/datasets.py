"""Reading datasets in the packs' native formats (and plain JSONL / CSV / TSV with a field
mapping) into examples, and writing each example's tables where a data source can serve them.

- wikitq: the release's TSV; each `context` CSV is copied as a table.
- tabfact: JSONL; each `#`-separated table of `all_csv/` becomes a CSV table.
- fetaqa: JSONL; each `table_array` (first row the header) becomes a CSV table.
- spider: the pack's CSV (`database,question,sql`); each database is built into a SQLite
  file from its MySQL DDL + CSV (one `sqlite` source per database).
- generic: JSONL / CSV / TSV; `mapping` names the id, question, answer, table (a CSV path)
  and sql fields.

Table files are named after their origin (`csv/203-csv/165.csv` -> `t203_165`) so one file
serves every question about the same table.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagwright.errors import DagwrightError

KINDS = ("wikitq", "tabfact", "fetaqa", "spider", "generic")
DEFAULT_METRIC = {
    "wikitq": "wikitq",
    "tabfact": "tabfact",
    "fetaqa": "fetaqa",
    "spider": "spider",
    "generic": "numeric",
}
DEFAULT_MAPPING = {
    "id": "id",
    "question": "question",
    "answer": "answer",
    "table": "table",
    "sql": "sql",
}


class DatasetFormatError(DagwrightError):
    """A dataset file that is not in the format of its kind (HTTP 400)."""

    code = "invalid_dataset"


@dataclass(slots=True)
class ParsedExample:
    example_id: str
    question: str
    gold: dict[str, Any]
    tables: list[str]  # table names, in the dataset's source (or database ids for spider)
    meta: dict[str, Any] = field(default_factory=dict)


def table_name(relative: str) -> str:
    """A SQL-friendly table name from a table file's path: `csv/203-csv/165.csv` -> `t203_165`."""
    stem = re.sub(
        r"(\.html)?\.csv$|\.tsv$", "", relative.replace("-csv/", "_").removeprefix("csv/")
    )
    return "t" + re.sub(r"[^0-9A-Za-z]+", "_", stem).strip("_")


def _rows_tsv(path: Path) -> Iterator[dict[str, str]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    header = lines[0].split("\t")
    for line in lines[1:]:
        if line:
            yield dict(zip(header, line.split("\t"), strict=False))


def _records(path: Path) -> Iterator[dict[str, Any]]:
    if path.suffix in (".csv", ".tsv"):
        with path.open(encoding="utf-8", newline="") as handle:
            yield from csv.DictReader(handle, delimiter="\t" if path.suffix == ".tsv" else ",")
        return
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetFormatError(f"{path}, line {number}: not JSON: {exc.msg}") from None


def unique_header(header: list[str]) -> list[str]:
    """Column names a table can have: an empty one becomes `column_<n>`, a repeated one
    `<name>_2`, `<name>_3`... (WikiTQ's tables repeat headers such as "Points", "Points")."""
    seen: dict[str, int] = {}
    names = []
    for number, raw in enumerate(header, 1):
        name = " ".join(raw.split()) or f"column_{number}"
        base = name
        while name.lower() in seen:
            seen[base.lower()] += 1
            name = f"{base}_{seen[base.lower()]}"
        seen.setdefault(name.lower(), 1)
        names.append(name)
    return names


def _write_csv(target: Path, rows: list[list[str]]) -> None:
    """The table as CSV, rectangular (WikiTQ's have ragged rows where the page spanned
    cells: short rows are padded with empty cells, long ones add columns) and its header made
    unique (the first row is the header)."""
    if target.exists() or not rows:
        return
    width = max(len(row) for row in rows)
    header = rows[0] + [""] * (width - len(rows[0]))
    with target.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(unique_header(header))
        writer.writerows(row + [""] * (width - len(row)) for row in rows[1:])


def _copy_csv(source: Path, target: Path) -> None:
    with source.open(encoding="utf-8", newline="") as handle:
        _write_csv(target, list(csv.reader(handle)))


def _answer_type(items: list[str]) -> str:
    from dagwright.evaluation.metrics import wikitq

    if len(items) > 1:
        return "list"
    value = wikitq.to_value(items[0])
    return {"NumberValue": "number", "DateValue": "date"}.get(type(value).__name__, "string")


def read_wikitq(path: Path, tables: Path) -> Iterator[ParsedExample]:
    from dagwright.evaluation.metrics.wikitq import tsv_unescape_list

    for row in _rows_tsv(path):
        if "targetValue" not in row or "context" not in row:
            raise DatasetFormatError(
                f"{path}: not the WikiTQ format (id, utterance, context, targetValue)"
            )
        name = table_name(row["context"])
        source = path.parent / row["context"]
        if not (tables / f"{name}.csv").exists():
            if not source.is_file():
                raise DatasetFormatError(f"{path}: example {row['id']}: no table {source}")
            _copy_csv(source, tables / f"{name}.csv")
        gold: dict[str, Any] = {k: row[k] for k in ("targetValue", "targetCanon") if k in row}
        kind = row.get("targetCanonType") or _answer_type(tsv_unescape_list(row["targetValue"]))
        yield ParsedExample(row["id"], row["utterance"], gold, [name], {"answer_type": kind})


def read_tabfact(path: Path, tables: Path) -> Iterator[ParsedExample]:
    for index, record in enumerate(_records(path)):
        try:
            table_id, statement, label = record["table_id"], record["statement"], record["label"]
        except KeyError as exc:
            raise DatasetFormatError(f"{path}: record {index} has no {exc.args[0]!r}") from None
        name = table_name(table_id)
        source = path.parent / "all_csv" / table_id
        if not (tables / f"{name}.csv").exists():
            if not source.is_file():
                raise DatasetFormatError(f"{path}: record {index}: no table {source}")
            lines = source.read_text(encoding="utf-8").splitlines()
            _write_csv(tables / f"{name}.csv", [line.split("#") for line in lines if line])
        meta = {"label": "entailed" if label == 1 else "refuted", "caption": record.get("caption")}
        yield ParsedExample(str(record.get("id", index)), statement, {"label": label}, [name], meta)


def read_fetaqa(path: Path, tables: Path) -> Iterator[ParsedExample]:
    for index, record in enumerate(_records(path)):
        key = str(record.get("feta_id", index))
        name = f"feta_{key}"
        _write_csv(tables / f"{name}.csv", [[str(c) for c in row] for row in record["table_array"]])
        meta = {
            "page": record.get("table_page_title"),
            "section": record.get("table_section_title"),
        }
        yield ParsedExample(key, record["question"], {"answer": record["answer"]}, [name], meta)


def read_spider(path: Path, tables: Path) -> Iterator[ParsedExample]:
    from dagwright.evaluation.spider_hardness import hardness
    from dagwright.evaluation.sql_databases import build_from_ddl

    roots = path.parent / "databases"
    for index, record in enumerate(_records(path)):
        db_id = record["database"]
        target = tables / f"{db_id}.sqlite"
        if not target.exists():
            if not (roots / db_id / "schema.sql").is_file():
                raise DatasetFormatError(f"{path}: row {index}: no database {roots / db_id}")
            build_from_ddl(roots / db_id, target)
        gold = {"sql": record["sql"], "db_id": db_id}
        meta = {"db_id": db_id, "hardness": hardness(record["sql"])}
        yield ParsedExample(str(index), record["question"], gold, [db_id], meta)


def read_generic(path: Path, tables: Path, mapping: dict[str, str]) -> Iterator[ParsedExample]:
    names = {**DEFAULT_MAPPING, **mapping}
    for index, record in enumerate(_records(path)):
        if names["question"] not in record:
            raise DatasetFormatError(f"{path}: record {index} has no {names['question']!r} field")
        gold = {k: record[names[k]] for k in ("answer", "sql") if names[k] in record}
        table_names = []
        if record.get(names["table"]):
            source = path.parent / str(record[names["table"]])
            name = table_name(str(record[names["table"]]))
            if not (tables / f"{name}.csv").exists():
                if not source.is_file():
                    raise DatasetFormatError(f"{path}: record {index}: no table {source}")
                _copy_csv(source, tables / f"{name}.csv")
            table_names.append(name)
        key = str(record.get(names["id"], index))
        yield ParsedExample(key, str(record[names["question"]]), gold, table_names, {})


def read_dataset(
    kind: str, path: Path, tables: Path, mapping: dict[str, str] | None = None
) -> Iterator[ParsedExample]:
    """The examples of `path`, writing their tables into `tables` as it goes."""
    if not path.is_file():
        raise DatasetFormatError(f"no dataset file {path}")
    tables.mkdir(parents=True, exist_ok=True)
    if kind == "wikitq":
        return read_wikitq(path, tables)
    if kind == "tabfact":
        return read_tabfact(path, tables)
    if kind == "fetaqa":
        return read_fetaqa(path, tables)
    if kind == "spider":
        return read_spider(path, tables)
    if kind == "generic":
        return read_generic(path, tables, mapping or {})
    raise DatasetFormatError(f"unknown dataset kind {kind!r} (one of {', '.join(KINDS)})")
