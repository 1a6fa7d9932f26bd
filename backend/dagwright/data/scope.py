"""A question's scope: the sources (and, within a source, the schemas) its SQL may read.

A scope is written as a list of entries, ``source`` (every schema of it) or
``source.schema`` (that schema only): the shape a TQA dataset's, an AutoTQA request's and
the table blocks' ``sources`` take. An empty list means no limit, so it parses to None;
a ``SourceScope`` with no entries (two scopes that do not overlap) admits nothing.

The query engine enforces it (``QueryEngine.query(..., scope=...)``): every table reference
the planner resolves is checked against the scope *before* the catalog resolves it, so a
refused name is never looked up and its error cannot tell what exists outside the scope.
Nothing else is readable in the first place: table functions, DuckDB's catalogue
(information_schema, duckdb_tables()) and ATTACH are refused for every query
(data/safety.py), and DuckDB only sees the tables registered for the query.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dagwright.errors import InputError, SqlRefusedError

if TYPE_CHECKING:
    from dagwright.data.catalog import Catalog, TableRef

OUT_OF_SCOPE = "table_out_of_scope"
# More entries than any real dataset names: bounds the work of checking one.
MAX_SCOPE_ENTRIES = 256


class ScopeError(InputError):
    """A scope that names sources or schemas the catalog does not have, or is malformed
    (422: the caller's to fix)."""

    code = "invalid_scope"


@dataclass(frozen=True, slots=True)
class SourceScope:
    """Source name -> the schemas admitted in it (lower-cased; None: all of them)."""

    sources: Mapping[str, frozenset[str] | None]

    @classmethod
    def parse(cls, entries: Iterable[str] | None, *, field: str = "sources") -> SourceScope | None:
        """The scope of ``entries`` (None when there are none: no limit). ScopeError naming
        ``field`` for an entry that is not ``source`` or ``source.schema``."""
        listed = list(entries or [])
        if not listed:
            return None
        if len(listed) > MAX_SCOPE_ENTRIES:
            raise ScopeError(f"{field}: at most {MAX_SCOPE_ENTRIES} entries, not {len(listed)}")
        sources: dict[str, set[str] | None] = {}
        for entry in listed:
            if not isinstance(entry, str) or not entry.strip():
                raise ScopeError(f"{field}: {entry!r} is not a source name")
            source, _, schema = entry.strip().partition(".")
            source = source.lower()
            if not source or (not schema and entry.strip().endswith(".")):
                raise ScopeError(f"{field}: {entry!r} is not 'source' or 'source.schema'")
            if schema:
                admitted = sources.setdefault(source, set())
                if admitted is not None:
                    admitted.add(schema.lower())
            else:
                sources[source] = None  # the whole source, whatever else names it
        return cls(
            {name: None if s is None else frozenset(s) for name, s in sorted(sources.items())}
        )

    @property
    def entries(self) -> list[str]:
        """The scope written back as entries."""
        return [
            entry
            for source, schemas in self.sources.items()
            for entry in (
                [source] if schemas is None else [f"{source}.{s}" for s in sorted(schemas)]
            )
        ]

    def __str__(self) -> str:
        return ", ".join(self.entries) or "nothing"

    def narrowed(self, other: SourceScope | None) -> SourceScope:
        """What both scopes admit (an empty scope, admitting nothing, if they do not
        overlap: never no limit)."""
        if other is None:
            return self
        sources: dict[str, frozenset[str] | None] = {}
        for source, mine in self.sources.items():
            if source not in other.sources:
                continue
            theirs = other.sources[source]
            if mine is None or theirs is None:
                both = theirs if mine is None else mine
            else:
                both = mine & theirs
            if both is None or both:
                sources[source] = both
        return SourceScope(sources)

    def admits(self, ref: TableRef) -> bool:
        if ref.source not in self.sources:
            return False
        schemas = self.sources[ref.source]
        return schemas is None or ref.schema.lower() in schemas

    def check_name(self, parts: Sequence[str], catalog: Catalog, line: int | None = None) -> None:
        """Refuses a table name (as the SQL writes it: ``source.schema.table`` or
        ``source.table``) outside the scope, before the catalog resolves it:
        SqlRefusedError (``table_out_of_scope``) naming the table."""
        if len(parts) not in (2, 3):
            return  # not a catalog name at all: the catalog refuses it, naming nothing else
        shown = ".".join(parts)
        source = parts[0].lower()
        schemas = self.sources.get(source, frozenset())
        outside = source not in self.sources
        if not outside and schemas is not None:
            if len(parts) == 3:
                outside = parts[1].lower() not in schemas
            else:
                # source.table names the source's only schema: it must be an admitted one.
                available = catalog.schemas(source)
                if len(available) != 1:
                    # The catalog's own refusal would list every schema, closed ones too.
                    where = f" at line {line}" if line is not None else ""
                    raise SqlRefusedError(
                        f"table {shown}{where} names no schema: write"
                        f" {source}.<schema>.{parts[1]} (this question may read {self})"
                    )
                outside = available[0].lower() not in schemas
        if outside:
            raise self.refusal(shown, line)

    def check(self, ref: TableRef, line: int | None = None) -> None:
        """Refuses a resolved table outside the scope."""
        if not self.admits(ref):
            raise self.refusal(str(ref), line)

    def refusal(self, table: str, line: int | None = None) -> SqlRefusedError:
        where = f" at line {line}" if line is not None else ""
        return SqlRefusedError(
            f"table {table}{where} is outside this question's scope (it may read: {self});"
            " only tables of those sources and schemas can be queried",
            code=OUT_OF_SCOPE,
        )

    def validate(self, catalog: Catalog, *, field: str = "sources") -> None:
        """ScopeError naming every source (and schema) of the scope the catalog does not
        have, so a typo is refused when asked, not found as an empty answer."""
        known = set(catalog.names())
        unknown = [source for source in self.sources if source not in known]
        if unknown:
            raise ScopeError(
                f"{field}: no data source {', '.join(map(repr, unknown))} (sources:"
                f" {', '.join(sorted(known)) or 'none'})"
            )
        missing = []
        for source, schemas in self.sources.items():
            if schemas is None:
                continue
            available = {schema.lower() for schema in catalog.schemas(source)}
            missing += [f"{source}.{schema}" for schema in sorted(schemas - available)]
        if missing:
            raise ScopeError(f"{field}: no schema {', '.join(map(repr, missing))}")

    def tables(self, catalog: Catalog) -> list[TableRef]:
        """The catalog's tables in the scope; only the scope's sources are asked."""
        refs: list[TableRef] = []
        known = set(catalog.names())
        for source, schemas in self.sources.items():
            if source not in known:
                continue
            if schemas is None:
                refs += catalog.table_refs(source)
                continue
            from dagwright.data.catalog import TableRef

            for schema in catalog.schemas(source):
                if schema.lower() in schemas:
                    refs += [TableRef(source, schema, t) for t in catalog.tables(source, schema)]
        return refs
