"""The catalog: named data sources, each a connector, and the metadata they report.

Source names are how SQL reaches tables (``source.schema.table``), so they are lower-case SQL
identifiers. The catalog caches what sources report (schemas, table lists, table metadata)
for ``metadata_ttl_s`` seconds: the engine asks for metadata on every query, and a source's
catalog queries would otherwise cost more than small queries do. ``refresh`` forgets it.
"""

from __future__ import annotations

import difflib
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, Self, TypeVar

import pyarrow as pa
from pydantic import BaseModel, ValidationError

from dagwright.data.connector import Connector, Filter, Split, TableInfo
from dagwright.data.connectors import connector_kinds
from dagwright.data.connectors.common import SourcePathError, SourcePaths
from dagwright.data.connectors.own_store import OwnStoreError
from dagwright.egress import EgressPolicy
from dagwright.errors import DataError, DataSourceError, describe_validation_error
from dagwright.registry.services import Secrets
from dagwright.secrets import EnvSecrets

SOURCE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
# Names the engine gives the tables it registers in DuckDB; sources may not look like them.
RESERVED_PREFIX = "_dw"

T = TypeVar("T")


@dataclass(frozen=True, slots=True, order=True)
class TableRef:
    """A table of the catalog, addressed in SQL as ``source.schema.table``."""

    source: str
    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.source}.{self.schema}.{self.table}"

    @property
    def sql(self) -> str:
        """The reference as SQL, schema and table quoted when they need it."""
        return ".".join([self.source, _quote(self.schema), _quote(self.table)])


def _quote(name: str) -> str:
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        return name
    return '"' + name.replace('"', '""') + '"'


def check_source_name(name: str) -> str:
    """The name itself when it can name a source, else ValueError."""
    if not SOURCE_NAME.fullmatch(name) or name.startswith(RESERVED_PREFIX):
        raise ValueError(
            f"{name!r} cannot name a source: use up to 63 lower-case letters, digits and '_',"
            f" starting with a letter or '_' (and not with {RESERVED_PREFIX!r})"
        )
    return name


class Catalog:
    """Sources by name. Thread-safe; ``close`` closes every connector."""

    def __init__(
        self, sources: Mapping[str, Connector] | None = None, *, metadata_ttl_s: float = 60.0
    ) -> None:
        self.metadata_ttl_s = metadata_ttl_s
        self._lock = threading.Lock()
        self._sources: dict[str, Connector] = {}
        self._cache: dict[tuple[str, ...], tuple[float, Any]] = {}
        for name, connector in (sources or {}).items():
            self.add(name, connector)

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Mapping[str, Any]],
        secrets: Secrets | None = None,
        *,
        metadata_ttl_s: float = 60.0,
        paths: SourcePaths | None = None,
        defer_path_refusals: bool = False,
        egress: EgressPolicy | None = None,
    ) -> Self:
        """A catalog from ``{name: {"kind": ..., **connector settings}}`` (a TOML table of
        tables, or the API's JSON). Secrets named by the settings (``password_secret``...)
        are read from ``secrets``, by default the environment; file and SQLite paths are
        checked against ``paths`` (without one, none is allowed). An unknown kind or
        invalid settings raise ``DataError(code="source_config")`` naming the source, a
        forbidden path ``SourcePathError`` (``source_path_forbidden``); with
        ``defer_path_refusals`` such a source is registered as one that raises that error
        on every use, so one stored source cannot take every other source down."""
        secrets = EnvSecrets() if secrets is None else secrets
        catalog = cls(metadata_ttl_s=metadata_ttl_s)
        try:
            for name, settings in config.items():
                try:
                    connector = create_connector(
                        name, settings, secrets, paths=paths, egress=egress
                    )
                except (SourcePathError, OwnStoreError) as exc:
                    if not defer_path_refusals:
                        raise
                    connector = RefusedSource(name, exc)
                catalog.add(name, connector)
        except BaseException:
            catalog.close()
            raise
        return catalog

    def add(self, name: str, connector: Connector) -> None:
        """Registers a source; a name already taken is an error (``replace`` replaces)."""
        check_source_name(name)
        with self._lock:
            if name in self._sources:
                raise DataError(
                    f"source {name!r} exists already", code="source_config", source=name
                )
            self._sources[name] = connector

    def replace(self, name: str, connector: Connector) -> None:
        """Registers a source in place of the one of that name (closed), if any."""
        check_source_name(name)
        with self._lock:
            previous = self._sources.get(name)
            self._sources[name] = connector
            self._forget(name)
        if previous is not None and previous is not connector:
            previous.close()

    def remove(self, name: str) -> None:
        """Unregisters and closes a source."""
        with self._lock:
            connector = self._sources.pop(name, None)
            self._forget(name)
        if connector is not None:
            connector.close()

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._sources)

    def source(self, name: str) -> Connector:
        """The connector of a source; ``DataError(code="source_not_found")`` for an unknown
        name, listing the known ones."""
        with self._lock:
            connector = self._sources.get(name)
            known = sorted(self._sources)
        if connector is None:
            raise DataError(
                f"there is no source {name!r}; sources: {', '.join(known) or '(none)'}",
                code="source_not_found",
                source=name,
            )
        return connector

    def schemas(self, source: str) -> list[str]:
        connector = self.source(source)
        return self._cached((source, "schemas"), connector.schemas)

    def tables(self, source: str, schema: str) -> list[str]:
        connector = self.source(source)
        return self._cached((source, "tables", schema), lambda: connector.tables(schema))

    def table_info(self, ref: TableRef) -> TableInfo:
        connector = self.source(ref.source)
        return self._cached(
            (ref.source, "info", ref.schema, ref.table),
            lambda: connector.table_info(ref.schema, ref.table),
        )

    def table_refs(self, source: str | None = None) -> list[TableRef]:
        """Every table of one source, or of all sources."""
        names = [source] if source is not None else self.names()
        return [
            TableRef(name, schema, table)
            for name in names
            for schema in self.schemas(name)
            for table in self.tables(name, schema)
        ]

    def resolve(self, parts: Sequence[str]) -> TableRef:
        """The table that ``source.schema.table`` or ``source.table`` (when the source has one
        schema) names. Schema and table names match exactly, else ignoring case when that is
        unambiguous (DuckDB ignores the case of names, quoted or not). A wrong source or arity
        is ValueError; a missing schema or table is ``DataSourceError(code="table_not_found")``
        saying what there is."""
        if len(parts) not in (2, 3):
            raise ValueError(
                f"{'.'.join(parts)!r} does not name a catalog table: write source.schema.table"
            )
        source = parts[0].lower()
        if source not in self.names():
            raise ValueError(
                f"{source!r} is not a source of the catalog (sources:"
                f" {', '.join(self.names()) or 'none'})"
            )
        schemas = self.schemas(source)
        if len(parts) == 2:
            if len(schemas) != 1:
                raise ValueError(
                    f"source {source!r} has several schemas ({', '.join(schemas)}): write"
                    f" {source}.<schema>.{parts[1]}"
                )
            schema = schemas[0]
        else:
            schema = self._match(parts[1], schemas, f"schema {source}.{parts[1]}", source)
        table_name = parts[-1]
        tables = self.tables(source, schema)
        if table_name not in tables and table_name.lower() not in _folded(tables):
            # The list may predate the table: read it again once.
            self._drop((source, "tables", schema))
            tables = self.tables(source, schema)
        table = self._match(table_name, tables, f"table {source}.{schema}.{table_name}", source)
        return TableRef(source, schema, table)

    def refresh(self, source: str | None = None) -> None:
        """Forgets cached metadata (of one source, or all)."""
        with self._lock:
            if source is None:
                self._cache.clear()
            else:
                self._forget(source)

    def close(self) -> None:
        with self._lock:
            connectors = list(self._sources.values())
            self._sources.clear()
            self._cache.clear()
        for connector in connectors:
            connector.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _match(self, name: str, names: list[str], what: str, source: str) -> str:
        if name in names:
            return name
        folded = [candidate for candidate in names if candidate.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        close = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        listed = ", ".join(names[:30]) + (" ..." if len(names) > 30 else "")
        raise DataSourceError(
            f"{what} does not exist (there are: {listed or 'none'}){hint}",
            code="table_not_found",
            source=source,
        )

    def _cached(self, key: tuple[str, ...], load: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.metadata_ttl_s:
            value: T = hit[1]
            return value
        loaded = load()
        with self._lock:
            self._cache[key] = (now, loaded)
        return loaded

    def _drop(self, key: tuple[str, ...]) -> None:
        with self._lock:
            self._cache.pop(key, None)

    def _forget(self, source: str) -> None:
        """Drops a source's cached metadata (the lock is held)."""
        for key in [key for key in self._cache if key[0] == source]:
            del self._cache[key]


def _folded(names: list[str]) -> set[str]:
    return {name.lower() for name in names}


class RefusedSource(Connector):
    """A configured source that may not be made (its path is forbidden): every call raises
    the refusal, so the source is listed and explained rather than silently missing."""

    kind = "refused"
    config_model = BaseModel

    def __init__(self, source: str, error: SourcePathError | OwnStoreError) -> None:
        super().__init__(source)
        self.error = error

    @classmethod
    def from_config(cls, source: str, config: Mapping[str, Any], secrets: Secrets) -> Self:
        raise ValueError("a refused source is not configured")

    def _refuse(self) -> NoReturn:
        error = self.error  # a new exception each time: a raised one keeps its traceback
        if isinstance(error, OwnStoreError):
            raise OwnStoreError(error.message, source=self.source) from None
        roots = [Path(root) for root in error.roots]
        raise SourcePathError(error.message, error.path, roots, self.source) from None

    def schemas(self) -> list[str]:
        self._refuse()

    def tables(self, schema: str) -> list[str]:
        self._refuse()

    def table_info(self, schema: str, table: str) -> TableInfo:
        self._refuse()

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        self._refuse()

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        self._refuse()


def create_connector(
    name: str,
    settings: Mapping[str, Any],
    secrets: Secrets,
    *,
    paths: SourcePaths | None = None,
    egress: EgressPolicy | None = None,
) -> Connector:
    """A connector from one source's settings (``kind`` plus the kind's own settings).
    Kinds that read local files (``reads_local_paths``) get ``paths``, the rule their paths
    are checked against (None: no path is allowed); a forbidden path is SourcePathError.
    Kinds that connect out (``connects_out``) get ``egress`` (None: the default policy).
    Database kinds (``reaches_servers``) get ``paths`` too: one reaching the server's own
    database is OwnStoreError."""
    check_source_name(name)
    kinds = connector_kinds()
    kind = settings.get("kind")
    if kind not in kinds:
        raise DataError(
            f"source {name!r}: kind {kind!r} is not one of {', '.join(kinds)}",
            code="source_config",
            source=name,
        )
    options = {key: value for key, value in settings.items() if key != "kind"}
    factory = kinds[kind]
    try:
        if getattr(factory, "connects_out", False):
            # The kinds that declare it take the keyword (http_json).
            out: Connector = factory.from_config(name, options, secrets, egress=egress)  # type: ignore[call-arg]
            return out
        if getattr(factory, "reads_local_paths", False) or getattr(
            factory, "reaches_servers", False
        ):
            # The kinds that declare it take the keyword (files, sqlite; postgres, mysql:
            # kept away from the server's own database).
            made: Connector = factory.from_config(name, options, secrets, paths=paths)  # type: ignore[call-arg]
            return made
        return factory.from_config(name, options, secrets)
    except ValidationError as exc:
        raise DataError(
            f"source {name!r}: {describe_validation_error(exc)}", code="source_config", source=name
        ) from exc
    except ValueError as exc:
        raise DataError(f"source {name!r}: {exc}", code="source_config", source=name) from exc
