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
import io
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    # The data layer (Arrow) is imported on first use: a server start does not pay for it.
    from dagwright.data.connectors.common import SourcePaths

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
    """A dataset file that is not in the format of its kind, or an example whose field names
    a table the dataset may not read (HTTP 400). ``line`` and ``field`` say where, when the
    fault is one example's."""

    code = "invalid_dataset"

    def __init__(self, message: str, line: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.field = field

    def to_dict(self) -> dict[str, object]:
        result = super().to_dict()
        if self.line is not None:
            result["line"] = self.line
        if self.field is not None:
            result["field"] = self.field
        return result


@dataclass(slots=True)
class ParsedExample:
    example_id: str
    question: str
    gold: dict[str, Any]
    tables: list[str]  # table names, in the dataset's source (or database ids for spider)
    meta: dict[str, Any] = field(default_factory=dict)
    # Where it came from, for errors found after reading (a repeated id).
    where: Where | None = None
    id_field: str | None = None


def table_name(relative: str) -> str:
    """A SQL-friendly table name from a table file's path: `csv/203-csv/165.csv` -> `t203_165`."""
    stem = re.sub(
        r"(\.html)?\.csv$|\.tsv$", "", relative.replace("-csv/", "_").removeprefix("csv/")
    )
    return "t" + re.sub(r"[^0-9A-Za-z]+", "_", stem).strip("_")


# A component of a file name built from an example's id or database id (`feta_<id>.csv`,
# `<db_id>.sqlite`): no separator, no leading dot, short enough for any file system.
SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class Where:
    """An example's place in its file, for errors: the file's name and the line."""

    file: str
    line: int

    def error(self, message: str, field: str | None = None) -> DatasetFormatError:
        about = f", field {field!r}" if field is not None else ""
        return DatasetFormatError(
            f"{self.file}, line {self.line}{about}: {message}", self.line, field
        )


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise Where(path.name, line).error(f"not UTF-8 text (byte {exc.start})") from None


def _rows_tsv(path: Path) -> Iterator[tuple[Where, dict[str, str]]]:
    lines = _read_text(path).split("\n")
    header = lines[0].split("\t")
    for number, line in enumerate(lines[1:], 2):
        if line:
            yield Where(path.name, number), dict(zip(header, line.split("\t"), strict=False))


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity are not JSON: PostgreSQL refuses to store them.
    raise ValueError(f"{name} is not a JSON number")


def _records(path: Path) -> Iterator[tuple[Where, dict[str, Any]]]:
    if path.suffix in (".csv", ".tsv"):
        text = _read_text(path)
        reader = csv.DictReader(
            io.StringIO(text, newline=""), delimiter="\t" if path.suffix == ".tsv" else ","
        )
        try:
            for row in reader:
                yield Where(path.name, reader.line_num), row
        except csv.Error as exc:
            # The underlying reader's count: it includes the line that failed.
            where = Where(path.name, reader.reader.line_num)
            raise where.error(f"not {path.suffix[1:].upper()}: {exc}") from None
        return
    for number, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        where = Where(path.name, number)
        try:
            record = json.loads(line, parse_constant=_refuse_constant)
        except json.JSONDecodeError as exc:
            raise where.error(f"not JSON: {exc.msg}") from None
        except (ValueError, RecursionError) as exc:
            raise where.error(f"not JSON: {exc}") from None
        if not isinstance(record, dict):
            raise where.error(f"not a JSON object but {type(record).__name__}")
        yield where, record


def _field(where: Where, record: dict[str, Any], name: str) -> Any:
    if name not in record:
        raise where.error("missing", name)
    return record[name]


def _text(where: Where, record: dict[str, Any], name: str) -> str:
    """A field that must be text (a number is taken as its text)."""
    value = _field(where, record, name)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise where.error(f"text expected, not {type(value).__name__}", name)
    return str(value)


# The stored example id's length (eval_examples.example_id).
MAX_EXAMPLE_ID = 128


def _example_id(where: Where, value: Any, name: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise where.error(f"text expected, not {type(value).__name__}", name)
    text = str(value)
    if len(text) > MAX_EXAMPLE_ID:
        raise where.error(f"{len(text)} characters; an id has at most {MAX_EXAMPLE_ID}", name)
    return text


def unique_ids(examples: Iterable[ParsedExample]) -> Iterator[ParsedExample]:
    """The examples, refusing an id seen before (a split holds each id once)."""
    seen: dict[str, Where | None] = {}
    for example in examples:
        if example.example_id in seen:
            first = seen[example.example_id]
            where = example.where or Where("the file", 0)
            since = f" (first on line {first.line})" if first is not None else ""
            raise where.error(f"the id {example.example_id!r} is repeated{since}", example.id_field)
        seen[example.example_id] = example.where
        yield example


def _component(where: Where, value: Any, name: str) -> str:
    """An id that becomes part of a file name: refused unless it is a safe one."""
    text = str(value) if isinstance(value, str | int) and not isinstance(value, bool) else None
    if text is None or not SAFE_COMPONENT.fullmatch(text):
        raise where.error(
            "must be letters, digits, '_', '.' or '-' (up to 64, not starting with '.' or"
            f" '-'): it names a file; got {str(value)[:80]!r}",
            name,
        )
    return text


def _table_rows(where: Where, value: Any, name: str) -> list[list[str]]:
    """A table given inline: a list of rows (the first the header), each a list of cells."""
    if not isinstance(value, list) or not value:
        raise where.error(f"a non-empty list of rows expected, not {type(value).__name__}", name)
    rows = []
    for number, row in enumerate(value):
        if not isinstance(row, list):
            raise where.error(f"row {number} is {type(row).__name__}, not a list of cells", name)
        for cell in row:
            if isinstance(cell, list | dict):
                raise where.error(f"row {number} holds a {type(cell).__name__}, not a cell", name)
        rows.append(["" if cell is None else str(cell) for cell in row])
    return rows


def _allowed(paths: SourcePaths, base: Path, where: Where, given: str, name: str) -> Path:
    """A file an example names, relative to the dataset's folder, through the one path
    policy: an absolute path, a `..` or a symlink leaving the folder is refused."""
    from dagwright.data.connectors.common import SourcePathError

    try:
        return paths.check_relative(given, base, f"{where.file}, line {where.line}")
    except SourcePathError as exc:
        raise where.error(
            f"{given[:200]!r} is not a file in the dataset's folder: {exc.message}", name
        ) from None


def _table_file(paths: SourcePaths, base: Path, where: Where, given: str, name: str) -> Path:
    """As `_allowed`, and the file must exist."""
    source = _allowed(paths, base, where, given, name)
    if not source.is_file():
        raise where.error(f"no table {given[:200]!r} beside the dataset file", name)
    return source


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


def _copy_csv(source: Path, target: Path, where: Where, name: str) -> None:
    try:
        with source.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise where.error(f"the table is not UTF-8 CSV: {exc}", name) from None
    _write_csv(target, rows)


def _answer_type(items: list[str]) -> str:
    from dagwright.evaluation.metrics import wikitq

    if len(items) > 1:
        return "list"
    value = wikitq.to_value(items[0])
    return {"NumberValue": "number", "DateValue": "date"}.get(type(value).__name__, "string")


def read_wikitq(path: Path, tables: Path, paths: SourcePaths) -> Iterator[ParsedExample]:
    from dagwright.evaluation.metrics.wikitq import tsv_unescape_list

    for where, row in _rows_tsv(path):
        if "targetValue" not in row or "context" not in row:
            raise DatasetFormatError(
                f"{path.name}: not the WikiTQ format (id, utterance, context, targetValue)"
            )
        example_id, question = _text(where, row, "id"), _text(where, row, "utterance")
        name = table_name(row["context"])
        if not (tables / f"{name}.csv").exists():
            source = _table_file(paths, path.parent, where, row["context"], "context")
            _copy_csv(source, tables / f"{name}.csv", where, "context")
        gold: dict[str, Any] = {k: row[k] for k in ("targetValue", "targetCanon") if k in row}
        kind = row.get("targetCanonType") or _answer_type(tsv_unescape_list(row["targetValue"]))
        example_id = _example_id(where, example_id, "id")
        meta = {"answer_type": kind}
        yield ParsedExample(example_id, question, gold, [name], meta, where, "id")


def read_tabfact(path: Path, tables: Path, paths: SourcePaths) -> Iterator[ParsedExample]:
    for index, (where, record) in enumerate(_records(path)):
        table_id = _text(where, record, "table_id")
        statement = _text(where, record, "statement")
        label = _field(where, record, "label")
        if label not in (0, 1) or isinstance(label, bool | float):
            raise where.error(f"0 or 1 expected, not {str(label)[:40]!r}", "label")
        name = table_name(table_id)
        if not (tables / f"{name}.csv").exists():
            # all_csv/<table_id>: the folder is part of the path the policy checks.
            source = _table_file(paths, path.parent, where, f"all_csv/{table_id}", "table_id")
            try:
                lines = source.read_text(encoding="utf-8").splitlines()
            except UnicodeDecodeError as exc:
                raise where.error(f"the table is not UTF-8 text: {exc}", "table_id") from None
            _write_csv(tables / f"{name}.csv", [line.split("#") for line in lines if line])
        meta = {"label": "entailed" if label == 1 else "refuted", "caption": record.get("caption")}
        key = _example_id(where, record.get("id", index), "id")
        yield ParsedExample(key, statement, {"label": label}, [name], meta, where, "id")


def read_fetaqa(path: Path, tables: Path, paths: SourcePaths) -> Iterator[ParsedExample]:
    del paths  # FeTaQA's tables travel inside the file: it names no other file
    for index, (where, record) in enumerate(_records(path)):
        key = _component(where, record.get("feta_id", index), "feta_id")
        rows = _table_rows(where, _field(where, record, "table_array"), "table_array")
        question, answer = _text(where, record, "question"), _text(where, record, "answer")
        name = f"feta_{key}"
        _write_csv(tables / f"{name}.csv", rows)
        meta = {
            "page": record.get("table_page_title"),
            "section": record.get("table_section_title"),
        }
        yield ParsedExample(key, question, {"answer": answer}, [name], meta, where, "feta_id")


def read_spider(path: Path, tables: Path, paths: SourcePaths) -> Iterator[ParsedExample]:
    from sqlglot.errors import SqlglotError

    from dagwright.evaluation.spider_hardness import hardness
    from dagwright.evaluation.sql_databases import build_from_ddl

    for index, (where, record) in enumerate(_records(path)):
        db_id = _component(where, _field(where, record, "database"), "database")
        question, sql = _text(where, record, "question"), _text(where, record, "sql")
        target = tables / f"{db_id}.sqlite"
        if not target.exists():
            schema = _table_file(
                paths, path.parent, where, f"databases/{db_id}/schema.sql", "database"
            )

            def data_file(table: str, where: Where = where, db_id: str = db_id) -> Path:
                # A table's rows, named by the DDL: through the policy as well.
                given = f"databases/{db_id}/data/{table}.csv"
                return _allowed(paths, path.parent, where, given, "database")

            try:
                build_from_ddl(schema.parent, target, data_file)
            except (sqlite3.Error, UnicodeDecodeError, csv.Error, SqlglotError) as exc:
                raise where.error(
                    f"database {db_id!r} cannot be built: {exc}", "database"
                ) from None
        gold = {"sql": sql, "db_id": db_id}
        try:
            meta = {"db_id": db_id, "hardness": hardness(sql)}
        except RecursionError:
            raise where.error("nested too deeply to parse", "sql") from None
        yield ParsedExample(str(index), question, gold, [db_id], meta)


def read_generic(
    path: Path, tables: Path, mapping: dict[str, str], paths: SourcePaths
) -> Iterator[ParsedExample]:
    names = {**DEFAULT_MAPPING, **mapping}
    for index, (where, record) in enumerate(_records(path)):
        question = _text(where, record, names["question"])
        gold = {k: record[names[k]] for k in ("answer", "sql") if names[k] in record}
        table_names = []
        given = record.get(names["table"])
        if given:
            table = _text(where, record, names["table"])
            name = table_name(table)
            if not (tables / f"{name}.csv").exists():
                source = _table_file(paths, path.parent, where, table, names["table"])
                _copy_csv(source, tables / f"{name}.csv", where, names["table"])
            table_names.append(name)
        key = _example_id(where, record.get(names["id"], index), names["id"])
        yield ParsedExample(key, question, gold, table_names, {}, where, names["id"])


def read_dataset(
    kind: str,
    path: Path,
    tables: Path,
    mapping: dict[str, str] | None = None,
    paths: SourcePaths | None = None,
) -> Iterator[ParsedExample]:
    """The examples of `path`, writing their tables into `tables` as it goes. The files an
    example names (a table, a Spider database) are read only where ``paths`` allows
    (default: the dataset file's own folder), relative to that folder."""
    if not path.is_file():
        raise DatasetFormatError(f"no dataset file {path}")
    from dagwright.data.connectors.common import NO_LOCAL_PATHS

    rule = paths if paths is not None else NO_LOCAL_PATHS.confined_to(path.parent)
    tables.mkdir(parents=True, exist_ok=True)
    if kind == "wikitq":
        return read_wikitq(path, tables, rule)
    if kind == "tabfact":
        return read_tabfact(path, tables, rule)
    if kind == "fetaqa":
        return read_fetaqa(path, tables, rule)
    if kind == "spider":
        return read_spider(path, tables, rule)
    if kind == "generic":
        return read_generic(path, tables, mapping or {}, rule)
    raise DatasetFormatError(f"unknown dataset kind {kind!r} (one of {', '.join(KINDS)})")
