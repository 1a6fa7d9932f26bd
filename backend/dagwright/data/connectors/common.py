"""What several connectors share: filters as Arrow expressions or SQL, Python rows as Arrow
batches, the SQL databases' settings, key-range split policy and connection pool, and the
rule for which local files a source may read (``SourcePaths``)."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar, cast
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.data.connector import Filter, Split, TableInfo
from dagwright.data.connectors.own_store import OwnStore
from dagwright.errors import DataError, DataSourceError

C = TypeVar("C")

# Rows per batch when a connector builds batches from Python rows (SQLite, MySQL).
BATCH_ROWS = 10_000


class DatabaseConfig(BaseModel):
    """The settings of a database server source. ``url`` holds no password: the password is
    read from the secret ``password_secret`` names. ``schemas``: the schemas to expose."""

    model_config = ConfigDict(extra="forbid")
    SCHEMES: ClassVar[tuple[str, ...]]  # the URL schemes of the kind; the first is shown

    url: str
    password_secret: str | None = None
    schemas: list[str] | None = None
    connect_timeout_s: int = Field(5, ge=1)
    split_rows: int = Field(250_000, ge=1)
    max_splits: int = Field(8, ge=1, le=64)

    @field_validator("url")
    @classmethod
    def _check_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in cls.SCHEMES:
            raise ValueError(f"the URL must start with {cls.SCHEMES[0]}://")
        if parts.password is not None:
            raise ValueError("the URL must not hold a password: name a secret in password_secret")
        return url


COMPARISONS: dict[str, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def arrow_filter(filters: Sequence[Filter], schema: pa.Schema) -> pc.Expression | None:
    """The conjunction of ``filters`` as an Arrow expression (None when there are none), with
    values typed as the columns of ``schema`` so Arrow compares like DuckDB does."""
    expression: pc.Expression | None = None
    for item in filters:
        term = _arrow_term(item, schema.field(item.column).type)
        expression = term if expression is None else expression & term
    return expression


def _arrow_term(item: Filter, type_: pa.DataType) -> pc.Expression:
    column = pc.field(item.column)
    if item.op == "is_null":
        return column.is_null()
    if item.op == "not_null":
        return pc.is_valid(column)
    if item.op == "in":
        return column.isin(pa.array(list(item.value), type=type_))
    # A literal of the column's own type, so Arrow compares as DuckDB does (the stubs only
    # know Python literals; pc.scalar takes an Arrow scalar too).
    value = pc.scalar(cast(Any, pa.scalar(item.value, type=type_)))
    return COMPARISONS[item.op](column, value)


def arrow_pushable(item: Filter, type_: pa.DataType) -> bool:
    """Whether Arrow gives the same answer as DuckDB for this filter. It does except for
    float NaN, which DuckDB orders above every number and Arrow compares as unordered: a
    ``>`` or ``>=`` on a float column stays in DuckDB."""
    return not (pa.types.is_floating(type_) and item.op in (">", ">="))


def sql_pushable(item: Filter, type_: pa.DataType) -> bool:
    """Whether a SQL database gives the same answer as DuckDB for this filter, so it may run
    at the source. Null tests always do. Text is compared under the database's collation
    (MySQL's default ignores case, PostgreSQL's may order 'b' before 'B'), so only equality
    and IN are pushed for text: a case-insensitive match returns more rows, which DuckDB then
    drops, never fewer. Timestamps (time zones), decimals and 4-byte floats (binding and
    rounding differ) stay in DuckDB."""
    if item.op in ("is_null", "not_null"):
        return True
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return item.op in ("=", "in")
    return (
        pa.types.is_integer(type_)
        or pa.types.is_float64(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_date32(type_)
    )


def sql_where(
    filters: Sequence[Filter], quote: Callable[[str], str], placeholder: Callable[[int], str]
) -> tuple[str, list[Any]]:
    """``filters`` as a SQL condition with bound parameters: (condition, parameters). The
    condition is empty when there are no filters; ``placeholder(n)`` spells the n-th (from 1)
    parameter in the driver's style."""
    terms: list[str] = []
    params: list[Any] = []

    def bind(value: Any) -> str:
        params.append(value)
        return placeholder(len(params))

    for item in filters:
        column = quote(item.column)
        if item.op == "is_null":
            terms.append(f"{column} IS NULL")
        elif item.op == "not_null":
            terms.append(f"{column} IS NOT NULL")
        elif item.op == "in":
            terms.append(f"{column} IN ({', '.join(bind(value) for value in item.value)})")
        else:
            terms.append(f"{column} {'<>' if item.op == '!=' else item.op} {bind(item.value)}")
    return " AND ".join(terms), params


def rows_to_batch(
    rows: Sequence[Sequence[Any]],
    schema: pa.Schema,
    converters: Sequence[Callable[[Any], Any] | None],
    where: Callable[[int], str],
) -> pa.RecordBatch:
    """Python rows as one batch of ``schema``. ``converters[i]`` (when not None) turns a
    non-null value of column i into what Arrow takes for its type. A value that does not fit
    raises ``DataSourceError(code="bad_value")`` naming the column (``where(i)``)."""
    arrays = []
    for index, values in enumerate(zip(*rows, strict=True) if rows else [()] * len(schema)):
        convert = converters[index]
        try:
            if convert is not None:
                values = tuple(None if value is None else convert(value) for value in values)
            arrays.append(pa.array(values, type=schema.field(index).type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
            sample = next((value for value in values if value is not None), None)
            raise DataSourceError(
                f"column {where(index)} holds a value that is not {schema.field(index).type}"
                f" (e.g. {sample!r}): {exc}",
                code="bad_value",
            ) from exc
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def integer_key(info: TableInfo) -> str | None:
    """The table's primary key when it is one integer column (splittable by ranges)."""
    if len(info.primary_key) != 1:
        return None
    column = info.column(info.primary_key[0])
    return column.name if pa.types.is_integer(column.type) else None


def split_count(row_estimate: int | None, split_rows: int, max_splits: int) -> int:
    """How many key-range splits a table of ``row_estimate`` rows gets: one up to
    ``split_rows`` rows, then one per ``split_rows`` rows, at most ``max_splits``."""
    if row_estimate is None or row_estimate <= split_rows:
        return 1
    return max(1, min(max_splits, math.ceil(row_estimate / split_rows)))


def key_ranges(low: int, high: int, parts: int) -> list[tuple[int | None, int | None]]:
    """``parts`` half-open ranges [lo, hi) covering low..high. The first has no lower and the
    last no upper bound, so rows inserted outside low..high after the bounds were read are
    still read by exactly one split."""
    step = max(1, math.ceil((high - low + 1) / parts))
    bounds = [low + step * index for index in range(1, parts) if low + step * index <= high]
    edges: list[int | None] = [None, *bounds, None]
    return [(edges[index], edges[index + 1]) for index in range(len(edges) - 1)]


def plan_ranges(
    info: TableInfo,
    split_rows: int,
    max_splits: int,
    bounds: Callable[[str], tuple[int | None, int | None]],
) -> tuple[str | None, list[tuple[int | None, int | None]]]:
    """The split key and key ranges of a table: one unbounded range unless the table is
    estimated larger than ``split_rows`` and has an integer primary key, whose min and max
    ``bounds(key)`` reads."""
    key = integer_key(info)
    parts = split_count(info.row_estimate, split_rows, max_splits)
    if key is None or parts == 1:
        return None, [(None, None)]
    low, high = bounds(key)
    if low is None or high is None:
        return None, [(None, None)]  # an empty table
    return key, key_ranges(low, high, parts)


def sql_splits(
    info: TableInfo,
    columns: Sequence[str],
    filters: Sequence[Filter],
    ranges: tuple[str | None, list[tuple[int | None, int | None]]],
    select: str,
    quote: Callable[[str], str],
    placeholder: Callable[[int], str],
    **extra: Any,
) -> list[Split]:
    """One split per key range, each with the statement that reads it: ``select`` (the
    "SELECT ... FROM ..." part) with ``filters`` and the range as bound parameters. The
    split's detail holds the statement, its parameters, the Arrow schema to deliver and
    ``extra``."""
    key, bounds = ranges
    schema = pa.schema([(name, info.column(name).type) for name in columns])
    splits = []
    for index, (low, high) in enumerate(bounds):
        where, params = sql_where(filters, quote, placeholder)
        terms = [where] if where else []
        for bound, op in ((low, ">="), (high, "<")):
            if bound is not None and key is not None:
                params.append(bound)
                terms.append(f"{quote(key)} {op} {placeholder(len(params))}")
        query = select + (f" WHERE {' AND '.join(terms)}" if terms else "")
        detail = {
            "query": query,
            "params": tuple(params),
            "range": (key, low, high),
            "schema": schema,
            **extra,
        }
        splits.append(
            Split(
                info.schema, info.name, tuple(columns), tuple(filters), index, len(bounds), detail
            )
        )
    return splits


class ConnectionPool(Generic[C]):
    """Idle connections kept for reuse: opening one costs tens of milliseconds (TCP,
    authentication, and for ADBC the driver's type catalogue), more than a small query.
    Each connection serves one thread at a time; one whose use raised, or was left in the
    middle of a read (a generator closed early), is closed rather than reused, and so is one
    idle for longer than ``max_idle_s``."""

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        size: int = 4,
        max_idle_s: float = 60.0,
    ) -> None:
        self._connect = connect
        self._close = close
        self._size = size
        self._max_idle_s = max_idle_s
        self._lock = threading.Lock()
        self._idle: list[tuple[float, C]] = []

    @contextmanager
    def connection(self) -> Iterator[C]:
        connection = self._take()
        reusable = False
        try:
            yield connection
            reusable = True
        finally:
            if reusable:
                self._give(connection)
            else:
                self._discard(connection)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _since, connection in idle:
            self._discard(connection)

    def _take(self) -> C:
        now = time.monotonic()
        stale = []
        found: C | None = None
        with self._lock:
            while self._idle:
                since, connection = self._idle.pop()
                if now - since <= self._max_idle_s:
                    found = connection
                    break
                stale.append(connection)
        for connection in stale:
            self._discard(connection)
        return found if found is not None else self._connect()

    def _give(self, connection: C) -> None:
        with self._lock:
            if len(self._idle) < self._size:
                self._idle.append((time.monotonic(), connection))
                return
        self._discard(connection)

    def _discard(self, connection: C) -> None:
        with contextlib.suppress(Exception):  # closing a broken connection may fail too
            self._close(connection)


# -- which local files a source may read ------------------------------------------------------

# The setting naming the folders (os.pathsep-separated) sources may read, for messages: the
# composition root gives the rule (`SourcePaths.for_data_dir`), nothing here reads settings.
SOURCE_ROOTS_ENV = "DAGWRIGHT_SOURCE_ROOTS"
# The sub-folders of the data directory that are source roots unless DAGWRIGHT_SOURCE_ROOTS
# says otherwise: files put there for sources, and the cloud-billing demo's Parquet files
# (`dagwright data demo-load --parquet`, by default data/billing).
DEFAULT_DATA_DIR_ROOTS = ("sources", "billing")
# Always a root: the Figure 1 demo the server builds in <data dir>/demo.
DEMO_FOLDER = "demo"
# What the data directory holds besides sources: never readable, whatever the roots say.
DATA_DIR_INTERNALS = (
    "dagwright.db",
    "dagwright.db-wal",
    "dagwright.db-shm",
    "dagwright.db-journal",
    "secret.key",
    "qdrant",
)
# Kernel and device file systems: not data, and /proc/self/environ holds the process's secrets.
SYSTEM_FOLDERS = ("/proc", "/sys", "/dev")
# The committed Figure 1 sources (data/figure1 of a checkout): demo data, always readable.
SHIPPED_DEMO = Path(__file__).resolve().parents[4] / "data" / "figure1"


class SourcePathError(DataError):
    """A file or SQLite source whose path (or a file found in its folder) is outside the
    source roots, inside the data directory's internals, or not absolute. HTTP 400, code
    ``source_path_forbidden``; ``path`` and ``roots`` say what was refused and what is
    allowed."""

    code = "source_path_forbidden"

    def __init__(self, message: str, path: str, roots: Sequence[Path], source: str) -> None:
        super().__init__(message, source=source)
        self.path = path
        self.roots = [str(root) for root in roots]

    def to_dict(self) -> dict[str, object]:
        result = super().to_dict()
        result["path"] = self.path
        result["roots"] = self.roots
        return result


def _real(path: Path | str) -> Path:
    """The absolute path with every symlink and ``..`` resolved, as far as it exists."""
    return Path(os.path.realpath(path))


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _database_files(url: str | None) -> list[Path]:
    """The SQLite file of the database URL (and its journals), when it is one."""
    if not url or not url.startswith("sqlite"):
        return []
    path = unquote(urlsplit(url).path)
    if not path or path == "/:memory:":
        return []
    # sqlite:///relative.db has path "/relative.db"; sqlite:////abs.db has "//abs.db".
    file = Path(path[1:]) if path.startswith("/") and not path.startswith("//") else Path(path)
    return [file.with_name(file.name + suffix) for suffix in ("", "-wal", "-shm", "-journal")]


@dataclass(frozen=True, slots=True)
class SourcePaths:
    """Which local paths file and SQLite sources may read.

    A path is allowed when, with ``..`` and every symlink resolved, it is under one of
    ``roots`` and not under any of ``forbidden``; and when it is inside the data directory,
    only when a root inside the data directory holds it (a root that contains the whole data
    directory, "/" say, does not open it). Relative paths are refused: they would depend on
    the server's working directory. Folders are checked as a whole when a source is added
    and file by file when they are read (a symlink planted in an allowed folder is followed
    and refused)."""

    roots: tuple[Path, ...]
    data_dir: Path | None = None
    forbidden: tuple[Path, ...] = ()
    # The server's own database when it is PostgreSQL or MySQL: no source may reach it
    # (SQLite's file is in ``forbidden``).
    store: OwnStore | None = None

    @classmethod
    def for_data_dir(
        cls,
        data_dir: Path | str,
        *,
        roots: Iterable[Path | str] | None = None,
        extra_roots: Iterable[Path | str] = (),
        database_url: str | None = None,
        settings_file: Path | None = None,
    ) -> SourcePaths:
        """The rule for a server whose data directory is ``data_dir``. ``roots``: the allowed
        folders (the setting DAGWRIGHT_SOURCE_ROOTS; None: <data dir>/sources and
        <data dir>/billing); the demo's folders (<data dir>/demo and the shipped data/figure1)
        and ``extra_roots`` are added to them. The database's SQLite file (``database_url``)
        and the ``settings_file`` are never readable, wherever they are."""
        folder = _real(Path(data_dir).expanduser())
        if roots is None:
            roots = [folder / name for name in DEFAULT_DATA_DIR_ROOTS]
        chosen: list[Path] = []
        for root in [*roots, folder / DEMO_FOLDER, SHIPPED_DEMO, *extra_roots]:
            resolved = _real(Path(root).expanduser())
            if resolved not in chosen:
                chosen.append(resolved)
        forbidden = [folder / name for name in DATA_DIR_INTERNALS]
        forbidden += [_real(path) for path in _database_files(database_url)]
        if settings_file is not None:
            forbidden.append(_real(settings_file.expanduser()))
        forbidden += [Path(name) for name in SYSTEM_FOLDERS]
        store = OwnStore.from_url(database_url)
        return cls(tuple(chosen), folder, tuple(dict.fromkeys(forbidden)), store)

    def with_roots(self, extra: Iterable[Path | str]) -> SourcePaths:
        """This rule with more allowed folders."""
        added = [_real(Path(root)) for root in extra]
        roots = tuple(dict.fromkeys([*self.roots, *added]))
        return SourcePaths(roots, self.data_dir, self.forbidden, self.store)

    def confined_to(self, folder: Path | str) -> SourcePaths:
        """This rule with ``folder`` as its only root (the data directory's own files and the
        system folders still forbidden): what a dataset file's references to its tables may
        read, its own folder and nothing beside it."""
        return SourcePaths((_real(Path(folder)),), self.data_dir, self.forbidden, self.store)

    def check_relative(self, given: str, base: Path, source: str) -> Path:
        """``given``, a path a file names relative to its folder ``base`` (a dataset's
        `table`, `context`, `table_id`...), resolved there when this rule allows it, else
        SourcePathError: an absolute path is refused (it would not depend on ``base``), and
        so is whatever ``..`` or a symlink takes outside the rule's folders."""
        if "\x00" in given:
            raise SourcePathError(
                f"{source}: the path {given!r} holds a NUL character", given, self.roots, source
            )
        if Path(given).is_absolute() or given.startswith("~"):
            raise SourcePathError(
                f"{source}: the path {given!r} is absolute; give it relative to the folder"
                " of the file that names it",
                given,
                self.roots,
                source,
            )
        # Symlinks and ".." resolved first: the check is on the file that would be read.
        resolved = _real(base / given)
        if not self.allows(resolved):
            raise SourcePathError(
                f"{source}: the path {given!r} leads outside the folder of the file that"
                " names it (with '..' or a symlink), or to one of the data directory's own"
                " files",
                given,
                self.roots,
                source,
            )
        return resolved

    def check_server(self, url: str, schemas: Sequence[str] | None, source: str) -> None:
        """OwnStoreError (400) when a database source at ``url`` exposing ``schemas``
        reaches the server's own database (see own_store.py); asked when a source is
        added and each time it connects."""
        if self.store is not None:
            self.store.check(url, schemas, source)

    def allows(self, resolved: Path) -> bool:
        """Whether an already resolved, absolute path may be read."""
        if not resolved.is_absolute():
            return False
        if any(_within(resolved, banned) for banned in self.forbidden):
            return False
        roots = self.roots
        data_dir = self.data_dir
        if data_dir is not None and _within(resolved, data_dir):
            # Inside the data directory only a root that is a sub-folder of it counts: one
            # that holds the whole directory ("/", its parent, itself) does not open it.
            roots = tuple(r for r in roots if r != data_dir and _within(r, data_dir))
        return any(_within(resolved, root) for root in roots)

    def check(self, path: str | Path, source: str, *, strict: bool = False) -> Path:
        """The path resolved (``~`` expanded, ``..`` and symlinks resolved) when this rule
        allows it, else SourcePathError naming the path and the roots. With ``strict`` the
        path must exist (FileNotFoundError otherwise); without, what exists of it is
        resolved (a source may name a file that is not there yet)."""
        given = Path(path).expanduser()
        if not given.is_absolute():
            raise SourcePathError(
                f"source {source!r}: the path {str(path)!r} is relative; give an absolute path"
                f" under one of the source roots: {self._shown_roots()}",
                str(path),
                self.roots,
                source,
            )
        # Symlinks and ".." resolved first: the check is on the file that would be read.
        resolved = Path(os.path.realpath(given, strict=strict))
        if not self.allows(resolved):
            raise self.refusal(path, resolved, source)
        return resolved

    def refusal(self, path: str | Path, resolved: Path, source: str) -> SourcePathError:
        """The error for a path this rule does not allow."""
        via = f" (it resolves to {resolved})" if str(resolved) != str(path) else ""
        return SourcePathError(
            f"source {source!r}: the path {str(path)!r}{via} is outside the folders sources may"
            f" read ({self._shown_roots()}) or is one of the data directory's own files; put"
            f" the data under a source root or add its folder to {SOURCE_ROOTS_ENV}",
            str(path),
            self.roots,
            source,
        )

    def _shown_roots(self) -> str:
        return ", ".join(str(root) for root in self.roots) or "none"


# No local path is readable: the rule of a source given none (tests, tools without a data
# directory); the composition root gives each process its own.
NO_LOCAL_PATHS = SourcePaths(())
