"""CSV, TSV, Parquet and JSON files as tables.

``path`` is a file (one table) or a folder: each data file in it is a table named by its stem,
and each sub-folder of data files is one table named by the folder, read one split per file.
The format comes from the extension unless ``format`` says. Parquet and CSV are scanned with
``pyarrow.dataset``, which reads only the asked columns (Parquet skips row groups by their
statistics too); JSON files (newline-delimited or one array of objects) are read whole.

``path`` must be absolute and, symlinks and ``..`` resolved, under a source root
(``SourcePaths``): checked when the source is made, again each time the folder is listed,
and for every file found in it (a symlink in an allowed folder that leads out of it makes
its table ``source_path_forbidden``). The files are read through their resolved paths.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.json as pajson
from pydantic import BaseModel, ConfigDict

from dagwright.data.connector import ColumnInfo, Connector, Filter, Split, TableInfo
from dagwright.data.connectors.common import (
    BATCH_ROWS,
    NO_LOCAL_PATHS,
    SourcePathError,
    SourcePaths,
    arrow_filter,
    arrow_pushable,
)
from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets

FileFormat = Literal["csv", "tsv", "parquet", "json"]

EXTENSIONS: dict[str, FileFormat] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}


class FilesConfig(BaseModel):
    """``path``: a file or a folder. ``format``: "auto" (by extension) or the format of every
    file. ``delimiter``: the CSV field separator when it is not ',' (TSV: tab)."""

    model_config = ConfigDict(extra="forbid")

    path: str
    format: Literal["auto", "csv", "tsv", "parquet", "json"] = "auto"
    schema_name: str = "main"
    delimiter: str | None = None


@dataclass(frozen=True, slots=True)
class _FileTable:
    format: FileFormat
    paths: tuple[Path, ...]  # resolved (no symlinks), each allowed by the source's SourcePaths
    refused: SourcePathError | None = None  # a file of the table leads outside the roots

    def stamp(self) -> tuple[tuple[str, int, int], ...]:
        """What changes when a file changes (for the schema cache)."""
        stamps = []
        for path in self.paths:
            stat = path.stat()
            stamps.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(stamps)


class FilesConnector(Connector):
    kind = "files"
    config_model = FilesConfig
    reads_local_paths: ClassVar[bool] = True  # create_connector passes it a SourcePaths

    def __init__(self, source: str, config: FilesConfig, paths: SourcePaths) -> None:
        """SourcePathError when ``config.path`` is not allowed by ``paths``."""
        super().__init__(source)
        self.config = config
        self.paths = paths
        self.given = Path(config.path).expanduser()
        self.root = self.paths.check(config.path, source)
        self._lock = threading.Lock()
        # Inferring a CSV or JSON schema reads the files: kept until a file changes.
        self._infos: dict[str, tuple[tuple[tuple[str, int, int], ...], TableInfo]] = {}
        # The last listing: (root, each folder's stamp, the tables), kept until a folder's
        # stamp changes (see _discover).
        self._listed: tuple[Path, dict[str, tuple[int, int]], dict[str, _FileTable]] | None = None

    @classmethod
    def from_config(
        cls,
        source: str,
        config: Mapping[str, Any],
        secrets: Secrets,
        *,
        paths: SourcePaths | None = None,
    ) -> Self:
        """``paths``: the folders the source may read (none when not given)."""
        return cls(
            source, FilesConfig.model_validate(config), NO_LOCAL_PATHS if paths is None else paths
        )

    def schemas(self) -> list[str]:
        return [self.config.schema_name]

    def tables(self, schema: str) -> list[str]:
        return sorted(self._discover()) if schema == self.config.schema_name else []

    def table_info(self, schema: str, table: str) -> TableInfo:
        found = self._find(schema, table)
        try:
            stamp = found.stamp()
            with self._lock:
                cached = self._infos.get(table)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            info = self._infer(schema, table, found)
        except FileNotFoundError as exc:
            raise self.not_found(schema, table, str(exc)) from exc
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            raise self._bad_file(table, exc) from exc
        with self._lock:
            self._infos[table] = (stamp, info)
        return info

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        found = self._find(schema, table)
        info = self.table_info(schema, table)
        pushed = tuple(f for f in filters if arrow_pushable(f, info.column(f.column).type))
        return [
            Split(
                schema,
                table,
                tuple(columns),
                pushed,
                index,
                len(found.paths),
                {"path": str(path), "format": found.format, "schema": info.arrow_schema()},
            )
            for index, path in enumerate(found.paths)
        ]

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        schema: pa.Schema = split.detail["schema"]
        try:
            # Checked again at the moment of reading: the file may have become a symlink.
            path = self.paths.check(split.detail["path"], self.source, strict=True)
        except FileNotFoundError as exc:
            raise self.not_found(split.schema, split.table, str(exc)) from exc
        expression = arrow_filter(split.filters, schema)
        try:
            if split.detail["format"] == "json":
                data = _conform(_read_json(path), schema)
                if expression is not None:
                    data = data.filter(expression)
                selected = data.select(list(split.columns))
                batches: Iterator[pa.RecordBatch] = iter(selected.to_batches(BATCH_ROWS))
            else:
                dataset = ds.dataset(
                    path, schema=schema, format=self._format(split.detail["format"])
                )
                batches = dataset.to_batches(
                    columns=list(split.columns), filter=expression, batch_size=BATCH_ROWS
                )
            yield from batches
        except FileNotFoundError as exc:
            raise self.not_found(split.schema, split.table, str(exc)) from exc
        except (pa.ArrowInvalid, OSError, ValueError) as exc:
            raise self._bad_file(split.table, exc) from exc

    def _discover(self) -> dict[str, _FileTable]:
        """The tables under ``path`` now (files appear and vanish between calls), each file
        resolved and checked against the source roots once per listing.

        The listing is kept while the folders' own stamps (mtime, inode) are unchanged: a
        file added, removed or renamed in a folder changes that folder's mtime, so asking
        for one table of a folder of 10,000 files costs a stat of each folder, not a walk
        (it was a walk with a realpath of every file per table: quadratic). A file whose
        content changes keeps its name: its table's metadata is re-read by ``stamp``."""
        try:
            root = self.paths.check(self.config.path, self.source, strict=True)
        except OSError:
            root = self.root  # gone (or a symlink loop): reported as unreachable below
        if root.is_file():
            fmt = self._format_of(self.given)
            return {self.given.stem: self._table(fmt, [root])} if fmt else {}
        if not root.is_dir():
            raise DataSourceError(
                f"source {self.source!r} is unreachable: {self.given} is neither a file nor a"
                " folder",
                code="source_unreachable",
                source=self.source,
            )
        with self._lock:
            listed = self._listed
        if listed is not None and listed[0] == root and _folders_unchanged(listed[1]):
            return listed[2]
        folders: dict[str, tuple[int, int]] = {}
        found = self._walk(root, folders)
        with self._lock:
            self._listed = (root, folders, found)
        return found

    def _walk(self, root: Path, folders: dict[str, tuple[int, int]]) -> dict[str, _FileTable]:
        """One scandir pass over the folder (sub-folders walked once each), recording each
        folder's stamp in ``folders``."""
        folders[str(root)] = _folder_stamp(str(root))
        found: dict[str, _FileTable] = {}
        with os.scandir(root) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
        for entry in entries:
            if entry.name.startswith((".", "_")):
                continue  # hidden files, _SUCCESS markers...
            child = Path(entry.path)
            if entry.is_file() and (fmt := self._format_of(child)):
                # Two files with one stem (a.csv, a.json): the second keeps its extension.
                name = child.stem if child.stem not in found else child.name
                found[name] = self._table(fmt, [child])
            elif entry.is_dir():
                files = sorted(_files_under(entry.path, folders))
                formats = {self._format_of(path) for path in files}
                if len(formats) == 1 and (fmt := formats.pop()):
                    found[entry.name] = self._table(fmt, files)
        return found

    def table_stamp(self, schema: str, table: str) -> str | None:
        """The sizes and mtimes of the table's files: what changes when its data does."""
        found = self._find(schema, table)
        try:
            return repr(found.stamp())
        except FileNotFoundError:
            return None

    def _table(self, fmt: FileFormat, files: Sequence[Path]) -> _FileTable:
        """A table of these files, by their resolved paths; refused when one of them leads
        outside the roots (a symlink planted in the folder, say)."""
        resolved = []
        for path in files:
            real = Path(os.path.realpath(path))
            if not self.paths.allows(real):
                return _FileTable(fmt, (), self.paths.refusal(path, real, self.source))
            resolved.append(real)
        return _FileTable(fmt, tuple(resolved))

    def _find(self, schema: str, table: str) -> _FileTable:
        found = self._discover().get(table) if schema == self.config.schema_name else None
        if found is None:
            raise self.not_found(schema, table, f"no such file or folder under {self.given}")
        if found.refused is not None:
            refused = found.refused
            raise SourcePathError(refused.message, refused.path, self.paths.roots, self.source)
        return found

    def _format_of(self, path: Path) -> FileFormat | None:
        if self.config.format != "auto":
            return self.config.format
        return EXTENSIONS.get(path.suffix.lower())

    def _format(self, fmt: FileFormat) -> ds.FileFormat:
        if fmt == "parquet":
            return ds.ParquetFileFormat()
        delimiter = self.config.delimiter or ("\t" if fmt == "tsv" else ",")
        return ds.CsvFileFormat(parse_options=pacsv.ParseOptions(delimiter=delimiter))

    def _infer(self, schema: str, table: str, found: _FileTable) -> TableInfo:
        rows: int | None = None
        if found.format == "json":
            data = pa.concat_tables(
                [_read_json(path) for path in found.paths], promote_options="permissive"
            )
            arrow_schema, rows = data.schema, data.num_rows
        else:
            dataset = ds.dataset(list(found.paths), format=self._format(found.format))
            arrow_schema = dataset.schema
            if found.format == "parquet":
                rows = dataset.count_rows()  # from the files' metadata, no data read
        columns = tuple(
            ColumnInfo(
                field.name,
                # All-null columns have Arrow's null type: exposed as text (see connector.py).
                pa.string() if pa.types.is_null(field.type) else field.type,
                f"{found.format}:{field.type}",
            )
            for field in arrow_schema
        )
        return TableInfo(schema, table, columns, row_estimate=rows)

    def _bad_file(self, table: str, exc: BaseException) -> DataSourceError:
        return DataSourceError(
            f"source {self.source!r}: table {table} could not be read: {exc}",
            code="bad_value",
            source=self.source,
        )


def _folder_stamp(folder: str) -> tuple[int, int]:
    """What changes when a folder's entries do: its mtime (and inode: replaced whole)."""
    try:
        stat = os.stat(folder)
    except OSError:
        return (-1, -1)
    return (stat.st_mtime_ns, stat.st_ino)


def _folders_unchanged(folders: Mapping[str, tuple[int, int]]) -> bool:
    return all(_folder_stamp(folder) == stamp for folder, stamp in folders.items())


def _files_under(folder: str, folders: dict[str, tuple[int, int]]) -> Iterator[Path]:
    """The data files under ``folder`` at any depth (hidden and ``_`` names skipped), each
    folder's stamp recorded in ``folders``; symlinked folders are not followed (rglob's
    rule)."""
    folders[folder] = _folder_stamp(folder)
    with os.scandir(folder) as listing:
        entries = list(listing)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            yield from _files_under(entry.path, folders)
        elif entry.is_file() and not entry.name.startswith((".", "_")):
            yield Path(entry.path)


def _read_json(path: Path) -> pa.Table:
    """A JSON file: one array of objects, or one object per line."""
    with path.open("rb") as handle:
        start = handle.read(256).lstrip()
    if not start.startswith(b"["):
        return pajson.read_json(path)
    with path.open("rb") as handle:
        rows = json.load(handle)
    if not all(isinstance(row, dict) for row in rows):
        raise ValueError(f"{path.name}: a JSON array of tables must hold objects only")
    return pa.Table.from_pylist(rows)


def _conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` with exactly the columns of ``schema`` (missing ones null), cast to it."""
    arrays = [
        data.column(field.name).cast(field.type)
        if field.name in data.column_names
        else pa.nulls(data.num_rows, field.type)
        for field in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
