"""Evaluation datasets: imported from a file (the packs' native formats or JSONL / CSV / TSV
with a field mapping), their examples stored per split, their tables registered as data
sources the flows query (`eval_<name>` for table files; `<name>_<db>` per Spider database),
and a split's examples loaded into a few-shot namespace."""

from __future__ import annotations

import builtins
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.evaluation.datasets import (
    DEFAULT_METRIC,
    KINDS,
    ParsedExample,
    read_dataset,
    unique_ids,
)
from dagwright.evaluation.metrics import METRICS
from dagwright.store.db import session
from dagwright.store.evaluation_models import EvalDataset, EvalExample
from dagwright.store.evaluations import DatasetRepository
from dagwright.store.paging import DEFAULT_LIMIT, Page, window

if TYPE_CHECKING:
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.embedding.service import ExampleStore
    from dagwright.services.data_sources import DataSourceService

NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
SPLIT = re.compile(r"[A-Za-z0-9_.-]{1,32}")


@dataclass(frozen=True, slots=True)
class DatasetSummary:
    id: str
    name: str
    kind: str
    metric: str
    source: str | None
    splits: dict[str, int]  # split -> examples

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind,
            "metric": self.metric,
            "source": self.source,
            "splits": self.splits,
        }


def example_dict(row: EvalExample) -> dict[str, Any]:
    return {
        "id": row.example_id,
        "split": row.split,
        "question": row.question,
        "gold": row.gold,
        "tables": row.tables,
        "meta": row.meta,
    }


class DatasetService:
    def __init__(
        self,
        engine: Engine,
        sources: DataSourceService,
        folder: Path,
        examples: ExampleStore | None = None,
    ) -> None:
        self._db = engine
        self._sources = sources
        # Each dataset's tables: under a source root (<data dir>/sources/eval-datasets), the
        # only folders the file and SQLite sources may read.
        self._folder = folder
        self._examples = examples  # for few-shot pools

    @property
    def sources(self) -> DataSourceService:
        """The data sources the datasets' tables are registered in."""
        return self._sources

    def import_file(
        self,
        name: str,
        kind: str,
        path: Path,
        *,
        split: str = "dev",
        metric: str | None = None,
        mapping: dict[str, str] | None = None,
        limit: int | None = None,
        server_url: str | None = None,
        tables_beside: bool = True,
    ) -> DatasetSummary:
        """Reads `path` into the dataset's `split` (replacing that split), creating the
        dataset on first import, and registers its tables as data sources. Spider's
        databases are served from SQLite files, or with `server_url` (postgresql://... or
        mysql://..., no password in it: the client's environment gives one) from that
        server, a schema each; the metric runs queries on the SQLite files either way.

        The tables an example names are read relative to `path`'s folder, never outside it
        (`SourcePaths.check_relative`); with `tables_beside=False` (an upload) none is read.
        A file refused part-way leaves nothing behind: no dataset, no source, no file."""
        if server_url is not None and kind != "spider":
            raise InputError("only Spider databases are loaded into a database server")
        if not NAME.fullmatch(name):
            raise InputError(f"dataset name {name!r}: lower-case letters, digits and _ (<= 31)")
        if not SPLIT.fullmatch(split):
            raise InputError(f"split name {split!r}: letters, digits, _ . - (<= 32)")
        if kind not in KINDS:
            raise InputError(f"unknown dataset kind {kind!r} (one of {', '.join(KINDS)})")
        metric = metric or DEFAULT_METRIC[kind]
        if metric not in METRICS:
            raise InputError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
        with session(self._db) as db:
            dataset = DatasetRepository(db).by_name(name)
        if dataset is not None and dataset.kind != kind:
            raise ConflictError(
                f"dataset {name!r} holds {dataset.kind} examples, not {kind}", "dataset_kind"
            )
        tables = self._folder / name / "tables"
        # The files the examples name are read only in the dataset file's own folder, under
        # the policy every file source is read under; an upload's folder holds nothing but
        # the upload, so it may name no file at all.
        from dagwright.data.connectors.common import NO_LOCAL_PATHS

        paths = self._sources.source_paths()
        rule = paths.confined_to(path.parent) if tables_beside else NO_LOCAL_PATHS
        parsed = self._read(kind, path, tables, mapping, limit, rule)
        created = not (self._folder / name).exists()
        added = _move_in(parsed.staging, tables)
        try:
            source = self._register_sources(name, kind, path, tables, parsed.examples, server_url)
        except BaseException:
            _remove(added, self._folder / name if created else None)
            raise
        if dataset is None:
            dataset = EvalDataset(
                name=name,
                kind=kind,
                metric=metric,
                mapping=dict(mapping or {}),
                source=source,
                folder=str(tables),
            )
        rows = [
            EvalExample(
                dataset_id=dataset.id,
                split=split,
                example_id=p.example_id,
                seq=seq,
                question=p.question,
                gold=p.gold,
                tables=self._table_refs(name, kind, source, p.tables),
                meta=p.meta,
            )
            for seq, p in enumerate(parsed.examples)
        ]
        with session(self._db) as db:
            DatasetRepository(db).replace_split(dataset, split, rows)
            db.commit()
        return self.get(name)

    def _read(
        self,
        kind: str,
        path: Path,
        tables: Path,
        mapping: dict[str, str] | None,
        limit: int | None,
        paths: SourcePaths,
    ) -> _Staged:
        """The file's examples, their tables written into a staging folder beside the
        dataset's (same file system: moved in with a rename); on any error the staging
        folder is removed and nothing else was touched. A table the dataset has already is
        not read again."""
        self._folder.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".import-", dir=self._folder))
        try:
            for existing in tables.glob("*") if tables.is_dir() else ():
                # Seen by the readers as present (they skip it): an empty placeholder.
                (staging / existing.name).touch()
            known = {entry.name for entry in staging.iterdir()}
            parsed: builtins.list[ParsedExample] = []
            for example in unique_ids(read_dataset(kind, path, staging, mapping, paths)):
                if limit is not None and len(parsed) >= limit:
                    break
                parsed.append(example)
            for placeholder in known:
                (staging / placeholder).unlink()
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return _Staged(staging, parsed)

    def _register_sources(
        self,
        name: str,
        kind: str,
        path: Path,
        tables: Path,
        parsed: builtins.list[ParsedExample],
        server_url: str | None,
    ) -> str | None:
        """Registers the tables' sources; when one is refused, those this call added are
        removed again (a source it replaced stays replaced: it served the same dataset)."""
        before = {entry.name for entry in self._sources.list()}
        added: builtins.list[str] = []
        try:
            return self._put_sources(name, kind, path, tables, parsed, server_url, added)
        except BaseException:
            for source in added:
                if source not in before:
                    self._sources.delete(source)
            raise

    def _put_sources(
        self,
        name: str,
        kind: str,
        path: Path,
        tables: Path,
        parsed: builtins.list[ParsedExample],
        server_url: str | None,
        added: builtins.list[str],
    ) -> str | None:
        description = f"tables of the evaluation dataset {name}"
        if kind == "spider":
            for db_id in sorted({t for p in parsed for t in p.tables}):
                source_name = _db_source(name, db_id)
                about = f"database {db_id} of the evaluation dataset {name}"
                built = tables / f"{db_id}.sqlite"
                if server_url is None:
                    self._sources.put(source_name, "sqlite", {"path": str(built)}, about)
                    added.append(source_name)
                    continue
                from dagwright.evaluation.spider_server import load_into_server

                # Never into the server's own database: refused before anything is loaded.
                self._sources.source_paths().check_server(server_url, [source_name], source_name)
                pack = path.parent / "databases" / db_id  # as read_spider found it
                served_by = load_into_server(pack, built, server_url, source_name)
                config = {"url": server_url, "schemas": [source_name]}
                self._sources.put(source_name, served_by, config, about)
                added.append(source_name)
            return None
        if not any(p.tables for p in parsed):
            return None
        source = f"eval_{name}"
        self._sources.put(source, "files", {"path": str(tables)}, description)
        added.append(source)
        return source

    @staticmethod
    def _table_refs(
        name: str, kind: str, source: str | None, tables: builtins.list[str]
    ) -> builtins.list[str]:
        if kind == "spider":
            return [_db_source(name, db_id) for db_id in tables]
        return [f"{source}.{table}" for table in tables]

    def list(self) -> builtins.list[DatasetSummary]:
        with session(self._db) as db:
            datasets = DatasetRepository(db).all()
        return [self._summary(d) for d in datasets]

    def row(self, name: str) -> EvalDataset:
        with session(self._db) as db:
            return DatasetRepository(db).find(name)

    def get(self, name: str) -> DatasetSummary:
        return self._summary(self.row(name))

    def _summary(self, dataset: EvalDataset) -> DatasetSummary:
        with session(self._db) as db:
            sizes = DatasetRepository(db).split_sizes(dataset.id)
        return DatasetSummary(
            dataset.id, dataset.name, dataset.kind, dataset.metric, dataset.source, sizes
        )

    def examples(
        self, name: str, split: str, limit: int | None = None
    ) -> builtins.list[EvalExample]:
        """The split's examples (the first `limit` of them), in the order of the file."""
        dataset = self.row(name)
        with session(self._db) as db:
            rows = DatasetRepository(db).examples(dataset.id, split, limit)
        if not rows and split not in self._summary(dataset).splits:
            raise NotFoundError(f"dataset {name!r} has no split {split!r}", "split_not_found")
        return rows

    def example_page(
        self, name: str, split: str, offset: int = 0, limit: int = DEFAULT_LIMIT
    ) -> Page[EvalExample]:
        """One page of the split's examples, in the order of the dataset's file."""
        at = window(offset, limit)
        dataset = self.row(name)
        with session(self._db) as db:
            page = DatasetRepository(db).example_page(dataset.id, split, at)
        if not page.total and split not in self._summary(dataset).splits:
            raise NotFoundError(f"dataset {name!r} has no split {split!r}", "split_not_found")
        return page

    async def load_few_shot(
        self, name: str, split: str, namespace: str, embedder: str = "hashing"
    ) -> int:
        """The split's examples (question, gold answer or SQL, tables) into a few-shot
        namespace, keyed by dataset and example id so loading twice changes nothing."""
        if self._examples is None:
            raise ConflictError("no example store here to load few-shot examples into")
        store = self._examples
        rows = self.examples(name, split)
        records = [
            {
                "dataset": name,
                "example_id": r.example_id,
                "question": r.question,
                "answer": _gold_text(r.gold),
                "tables": ", ".join(r.tables),
                "source": f"dataset:{name}/{split}",
            }
            for r in rows
        ]
        try:
            store.get_namespace(namespace)
        except NotFoundError:
            store.create_namespace(namespace, embedder, ["dataset", "example_id"], "question")
        return len(await store.upsert(namespace, records))


@dataclass(frozen=True, slots=True)
class _Staged:
    """A file read: its examples and the folder holding the tables they added."""

    staging: Path
    examples: builtins.list[ParsedExample]


def _move_in(staging: Path, tables: Path) -> builtins.list[Path]:
    """The staged tables moved into the dataset's folder (renames: each appears whole) and
    the staging folder removed; the files added."""
    added: builtins.list[Path] = []
    try:
        tables.mkdir(parents=True, exist_ok=True)
        for staged in sorted(staging.iterdir()):
            target = tables / staged.name
            if not target.exists():
                staged.replace(target)
                added.append(target)
    except BaseException:
        _remove(added, None)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return added


def _remove(added: builtins.list[Path], created: Path | None) -> None:
    """Undoes `_move_in` after a later step failed: the dataset's folder when this import
    `created` it, else the files it added."""
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
        return
    for file in added:
        file.unlink(missing_ok=True)


def _db_source(name: str, db_id: str) -> str:
    return f"{name}_{db_id.lower()}"


def _gold_text(gold: dict[str, Any]) -> str:
    if "sql" in gold:
        return str(gold["sql"])
    if "targetValue" in gold:
        return str(gold["targetValue"])
    if "label" in gold:
        return "entailed" if gold["label"] == 1 else "refuted"
    return str(gold.get("answer", ""))
