"""The data source registry: sources from the settings file (`[sources.<name>]` in
dagwright.toml), the built-in demo sources, and sources added through the API (stored in the
`data_sources` table), all registered in one catalog behind one query engine.

Credentials never enter the registry: a configuration names secrets (`password_secret`,
`header_secrets`...), read from the secret store when the connector is created.

File and SQLite sources read only under the source roots (`SourcePaths`): by default
`<data dir>/sources` and `<data dir>/billing`, or the folders DAGWRIGHT_SOURCE_ROOTS names
(os.pathsep-separated), plus the demo's folders; never the data directory's own files (the
database, the secret key, Qdrant's storage...). A source outside them is refused when it is
added (`source_path_forbidden`); one already stored, or in the settings file, is kept in the
catalog as a source that answers every use with that error.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import Engine

from dagwright.errors import ConflictError, DataError, NotFoundError
from dagwright.registry.services import Secrets
from dagwright.settings import Settings
from dagwright.store.data_sources import DataSourceRepository
from dagwright.store.db import session
from dagwright.tabular import TableAccess

if TYPE_CHECKING:
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.data.engine import QueryEngine
    from dagwright.data.limits import QueryLimits
    from dagwright.data.table_catalogue import CatalogueOptions, RefreshStatus
    from dagwright.egress import EgressPolicy
    from dagwright.tabular import EmbedderFactory

# The data layer (DuckDB, Arrow) is imported on first use: a server start does not pay for it.

Origin = Literal["file", "demo", "api"]


def query_limits(settings: Settings) -> QueryLimits:
    """The engine's limits: the defaults of QueryLimits, with what DAGWRIGHT_QUERY_MEMORY,
    DAGWRIGHT_QUERY_THREADS, DAGWRIGHT_QUERY_TEMP_DIR and DAGWRIGHT_QUERY_TEMP_SIZE say."""
    from dagwright.data.limits import QueryLimits

    given: dict[str, Any] = {
        "memory_limit": settings.query_memory,  # DuckDB's memory limit, e.g. "2GB"
        "threads": settings.query_threads,
        "temp_directory": settings.query_temp_dir,  # where DuckDB may spill (unset: never)
        "max_temp_directory_size": settings.query_temp_size,  # at most this much there
    }
    return QueryLimits(**{field: value for field, value in given.items() if value is not None})


def limit_process_memory(value: str | None) -> int | None:
    """Applies `value` (DAGWRIGHT_PROCESS_MEMORY, e.g. "6GB") as the soft RLIMIT_DATA of this
    process (the private memory it may map: the heap, DuckDB's and Arrow's buffers) and
    returns it in bytes; None when it is not set, not supported here, or a lower limit is
    already in force. Past it an allocation fails: DuckDB reports that query's
    `query_memory`, Python a MemoryError, instead of the kernel killing the server. It
    counts address space (VmData, ~1.5 GB at rest), not resident memory: give it room."""
    value = (value or "").strip()
    if not value or value == "0":
        return None
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?)b?", value.lower())
    if match is None:
        raise DataError(
            f"DAGWRIGHT_PROCESS_MEMORY={value!r} is not a size (e.g. 6GB)", code="source_config"
        )
    number, unit, binary = match.groups()
    scale = (1024 if binary else 1000) ** "_kmgt".index(unit or "_")
    wanted = int(float(number) * scale)
    try:
        import resource
    except ImportError:  # not a Unix
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if soft != resource.RLIM_INFINITY and soft <= wanted:
        return None
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (wanted, hard))
    return wanted


@dataclass(frozen=True, slots=True)
class SourceEntry:
    name: str
    kind: str
    config: dict[str, Any]  # without `kind`; names secrets, never holds them
    description: str
    origin: Origin
    catalogue_ttl_s: float | None = None  # None: the global DAGWRIGHT_CATALOGUE_TTL_S

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "config": self.config,
            "description": self.description,
            "origin": self.origin,
            "editable": self.origin == "api",
            "catalogue_ttl_s": self.catalogue_ttl_s,
        }


def demo_sources(folder: Path) -> dict[str, dict[str, Any]]:
    """The paper's Figure 1 split across two systems: `hr` (SQLite: employee, department)
    and `payroll` (a CSV file: salary), built in `folder` once (atomically: several server
    processes may start together)."""
    folder = folder.resolve()  # the sources must not depend on the working directory
    database, csv = folder / "figure1.sqlite", folder / "salary.csv"
    if not (database.is_file() and csv.is_file()):
        from dagwright.data.demo import load_figure1

        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder) as staging:
            built = load_figure1(staging)
            os.replace(built["csv"], csv)
            os.replace(built["sqlite"], database)
    return {
        "hr": {"kind": "sqlite", "path": str(database)},
        "payroll": {"kind": "files", "path": str(csv)},
    }


def fixed_sources(
    file_sources: Mapping[str, Mapping[str, Any]], demo_folder: Path | None
) -> dict[str, SourceEntry]:
    """The sources that are not stored: the demo's (built in `demo_folder`, unless it is
    None) and the settings file's (which win over the demo's on a shared name)."""
    entries: dict[str, SourceEntry] = {}
    if demo_folder is not None:
        for name, settings in demo_sources(demo_folder).items():
            entries[name] = _entry(name, settings, "Figure 1 of the AutoTQA paper", "demo")
    for name, given in file_sources.items():
        entries[name] = _entry(name, given, str(given.get("description", "")), "file")
    return entries


def engine_over(
    entries: Mapping[str, SourceEntry],
    secrets: Secrets,
    limits: QueryLimits | None,
    paths: SourcePaths,
    egress: EgressPolicy | None = None,
) -> QueryEngine:
    """A query engine over these sources. File and SQLite paths are checked against
    ``paths``, to which the demo sources' folders are added
    (dagwright builds them itself). A source with a forbidden path stays in the catalog as
    one that answers `source_path_forbidden`: the others go on working."""
    from dagwright.data.catalog import Catalog
    from dagwright.data.engine import QueryEngine

    demo = [Path(e.config["path"]).parent for e in entries.values() if e.origin == "demo"]
    config = {name: {**e.config, "kind": e.kind} for name, e in entries.items()}
    catalog = Catalog.from_config(
        config, secrets, paths=paths.with_roots(demo), defer_path_refusals=True, egress=egress
    )
    from dagwright.data.limits import QueryLimits

    return QueryEngine(catalog, limits or QueryLimits())


def catalogue_options(settings: Settings) -> CatalogueOptions:
    """The stored table catalogue's settings: kept in `<data dir>/catalogue`."""
    from dagwright.data.table_catalogue import CatalogueOptions

    return CatalogueOptions(
        folder=settings.data_dir / "catalogue",
        check_s=settings.catalogue_check_s,
        ttl_s=settings.catalogue_ttl_s,
        sample_rows=settings.catalogue_sample_rows,
        embedder=settings.catalogue_embedder or None,
    )


def demo_folder(settings: Settings) -> Path | None:
    """Where the Figure 1 demo sources are built; None when DAGWRIGHT_DEMO_SOURCES=0."""
    return settings.data_dir / "demo" if settings.demo_sources else None


def settings_table_access(
    secrets: Secrets,
    settings: Settings,
    paths: Callable[[], SourcePaths],
    embedders: EmbedderFactory | None = None,
    egress: Callable[[], EgressPolicy] | None = None,
) -> TableAccess:
    """Table access for a process without the database (the command line): the settings
    file's sources and the demo's, their local paths checked against ``paths()``."""
    fixed = fixed_sources(settings.sources, demo_folder(settings))
    limits = query_limits(settings)
    return TableAccess(
        lambda: engine_over(fixed, secrets, limits, paths(), egress() if egress else None),
        embedders,
        catalogue_options(settings),
        ttls=lambda name: fixed[name].catalogue_ttl_s if name in fixed else None,
    )


class DataSourceService(TableAccess):
    """The registry and the engine over it (`engine()`), built on first use and kept in step
    with changes made through this service."""

    def __init__(
        self,
        engine: Engine,
        secrets: Secrets,
        *,
        file_sources: Mapping[str, Mapping[str, Any]] | None = None,
        demo_folder: Path | None = None,
        limits: QueryLimits | None = None,
        paths: Callable[[], SourcePaths],
        embedders: EmbedderFactory | None = None,
        egress: Callable[[], EgressPolicy] | None = None,
        catalogue: CatalogueOptions | None = None,
    ) -> None:
        """``paths``: the rule local file and SQLite sources are read under (the process's
        source roots, never the data directory's own files). ``embedders``: what
        `embedder(spec)` answers with (schema_lookup's ranking by meaning). ``catalogue``:
        where the stored table catalogue is kept (None: in memory)."""
        self._db = engine
        self._secrets = secrets
        self._file_sources = {name: dict(s) for name, s in (file_sources or {}).items()}
        self._demo_folder = demo_folder
        self._limits = limits
        self._given_paths = paths
        self._egress = egress  # where http_json sources may connect (None: the default)
        self._paths: SourcePaths | None = None
        super().__init__(self._build_engine, embedders, catalogue, ttls=self.catalogue_ttl)

    def source_paths(self) -> SourcePaths:
        """The rule file and SQLite sources are checked against, with the demo's folder
        (asked for on first use: it is part of the data layer, which a server start does not
        import)."""
        if self._paths is None:
            paths = self._given_paths()
            if self._demo_folder is not None:
                paths = paths.with_roots([self._demo_folder])
            self._paths = paths
        return self._paths

    # -- the registry ----------------------------------------------------------------------

    def _fixed(self) -> dict[str, SourceEntry]:
        return fixed_sources(self._file_sources, self._demo_folder)

    def list(self) -> list[SourceEntry]:
        entries = self._fixed()
        with session(self._db) as db:
            for row in DataSourceRepository(db).all():
                entries.setdefault(
                    row.name,
                    SourceEntry(
                        row.name, row.kind, row.config, row.description, "api", row.catalogue_ttl_s
                    ),
                )
        return sorted(entries.values(), key=lambda entry: entry.name)

    def catalogue_ttl(self, name: str) -> float | None:
        """The source's own catalogue TTL (None: the global one): asked once per refresh."""
        fixed = self._fixed().get(name)
        if fixed is not None:
            return fixed.catalogue_ttl_s
        with session(self._db) as db:
            row = DataSourceRepository(db).get(name)
            return None if row is None else row.catalogue_ttl_s

    def get(self, name: str) -> SourceEntry:
        for entry in self.list():
            if entry.name == name:
                return entry
        raise NotFoundError(f"no data source {name!r}", "source_not_found")

    def put(
        self,
        name: str,
        kind: str,
        config: Mapping[str, Any],
        description: str = "",
        catalogue_ttl_s: float | None = None,
    ) -> SourceEntry:
        """Adds or replaces an API source. The connector is created first (so a bad
        configuration is refused and nothing is stored) but not connected: `check` does.
        ``catalogue_ttl_s``: the source's own catalogue TTL (None: the global one); a
        change of it alone keeps what the catalogue read of the source."""
        _check_ttl(catalogue_ttl_s)
        if name in self._fixed():
            raise ConflictError(
                f"data source {name!r} comes from the settings file or the demo; change it there",
                "source_not_editable",
            )
        from dagwright.data.catalog import create_connector

        settings = {**config, "kind": kind}
        # A forbidden file or SQLite path is refused here (source_path_forbidden, 400).
        connector = create_connector(
            name, settings, self._secrets, paths=self.source_paths(), egress=self._egress_policy()
        )
        with session(self._db) as db:
            repository = DataSourceRepository(db)
            before = repository.get(name)
            same = before is not None and (before.kind, before.config) == (kind, dict(config))
            repository.put(name, kind, config, description, catalogue_ttl_s)
            db.commit()
        opened = self._opened()
        if opened is not None:
            opened.catalog.replace(name, connector)
            if not same:
                self.catalogue().forget(name)  # what it read of the old configuration
        else:
            connector.close()
        return SourceEntry(name, kind, dict(config), description, "api", catalogue_ttl_s)

    def delete(self, name: str) -> None:
        if name in self._fixed():
            raise ConflictError(
                f"data source {name!r} comes from the settings file or the demo; remove it there",
                "source_not_editable",
            )
        with session(self._db) as db:
            if not DataSourceRepository(db).delete(name):
                raise NotFoundError(f"no data source {name!r}", "source_not_found")
            db.commit()
        opened = self._opened()
        if opened is not None:
            opened.catalog.remove(name)
            self.catalogue().forget(name)

    # -- the engine ------------------------------------------------------------------------

    def _build_engine(self) -> QueryEngine:
        entries = {e.name: e for e in self.list()}
        return engine_over(
            entries, self._secrets, self._limits, self.source_paths(), self._egress_policy()
        )

    def _egress_policy(self) -> EgressPolicy | None:
        return None if self._egress is None else self._egress()

    def _opened(self) -> QueryEngine | None:
        with self._lock:
            return self._engine

    def check(self, name: str) -> dict[str, Any]:
        """Connects to a source and lists its tables: what a user runs after adding one."""
        self.get(name)
        catalog = self.engine().catalog
        catalog.refresh(name)
        return {"name": name, "tables": [str(ref) for ref in catalog.table_refs(name)]}

    def refresh(self, name: str, *, force: bool = False) -> RefreshStatus:
        """Reads the source's tables into the stored catalogue now (those changed, new,
        or past the TTL; ``force``: all), returning what was done."""
        self.get(name)
        return self.catalogue().refresh(name, force=force)

    def start_refresh(self, name: str, *, force: bool = False) -> RefreshStatus:
        """Starts that refresh in the background (the API's: a large source takes long)."""
        self.get(name)
        return self.catalogue().start_refresh(name, force=force)

    def refresh_status(self, name: str) -> RefreshStatus | None:
        self.get(name)
        return self.catalogue().status(name)


def _entry(name: str, settings: Mapping[str, Any], description: str, origin: Origin) -> SourceEntry:
    # A settings-file source's `catalogue_ttl_s` is the registry's, as its description is:
    # not given to the connector (which refuses keys it does not know).
    kept = ("kind", "description", "catalogue_ttl_s")
    config = {k: v for k, v in settings.items() if k not in kept}
    ttl = settings.get("catalogue_ttl_s")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
        raise DataError(
            f"source {name!r}: catalogue_ttl_s must be a number of seconds, not {ttl!r}",
            code="source_config",
        )
    _check_ttl(ttl, name)
    given = None if ttl is None else float(ttl)
    return SourceEntry(name, str(settings.get("kind", "")), config, description, origin, given)


def _check_ttl(ttl: float | None, name: str | None = None) -> None:
    if ttl is not None and not 0 <= ttl < float("inf"):
        where = f"source {name!r}: " if name else ""
        raise DataError(
            f"{where}catalogue_ttl_s must be 0 or more seconds, not {ttl!r}", code="source_config"
        )
