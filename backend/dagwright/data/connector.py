"""The connector interface: the paper's five calls (list schemas, list tables, table metadata,
get splits, get rows) and the values they exchange.

A connector exposes one data source as schemas of tables whose columns have Arrow types; the
query engine asks it for splits of a table (with the columns and filters a query needs) and
reads each split as Arrow record batches. Connectors are used from several threads at once.

Type policy, shared by every connector:

- each column has the Arrow type ``ColumnInfo.type`` and batches are delivered in that type;
  ``ColumnInfo.source_type`` keeps the source's own spelling of the type;
- a source type with no Arrow counterpart is read **as text** when the source can render it
  (SQL databases: a cast to text at the source; SQLite: the value's text), so one exotic column
  never makes a whole table unusable; the original type stays visible in ``source_type``;
- where no text rendering exists — a type declared in a configuration (HTTP JSON), values
  with no common type (Python values) — the connector raises
  ``DataSourceError(code="type_unmapped")`` naming ``source.schema.table.column`` and the type;
- a value that does not fit its column's type (text in a SQLite INTEGER column, "abc" for a
  declared int) is ``DataSourceError(code="bad_value")`` naming the column.
"""

from __future__ import annotations

import datetime
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import pyarrow as pa
from pydantic import BaseModel

from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """One column: its Arrow type, the source's type name, nullability and comment."""

    name: str
    type: pa.DataType
    source_type: str
    nullable: bool = True
    comment: str | None = None


@dataclass(frozen=True, slots=True)
class ForeignKey:
    """``columns`` of this table reference ``ref_columns`` of ``ref_schema.ref_table`` (same
    source)."""

    columns: tuple[str, ...]
    ref_schema: str
    ref_table: str
    ref_columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table's metadata: columns in order, keys, an estimate of its rows, its comment."""

    schema: str
    name: str
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    row_estimate: int | None = None
    comment: str | None = None

    def column(self, name: str) -> ColumnInfo:
        """The column called ``name`` (exact spelling first, then ignoring case, as SQL does);
        KeyError when there is none."""
        for column in self.columns:
            if column.name == name:
                return column
        folded = [column for column in self.columns if column.name.lower() == name.lower()]
        if len(folded) == 1:
            return folded[0]
        raise KeyError(f"table {self.schema}.{self.name} has no column {name!r}")

    def arrow_schema(self, columns: Sequence[str] | None = None) -> pa.Schema:
        """The Arrow schema of ``columns`` (all columns when None), in the order given."""
        chosen = self.columns if columns is None else [self.column(name) for name in columns]
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in chosen])


FilterOp = Literal["=", "!=", "<", "<=", ">", ">=", "in", "is_null", "not_null"]


@dataclass(frozen=True, slots=True)
class Filter:
    """``column op value``. ``value`` is a tuple for ``in`` and None for the null tests. The
    engine converts SQL literals to the column's type before it builds a filter, so a
    connector never sees "5" for an integer column."""

    column: str
    op: FilterOp
    value: Any = None

    def __str__(self) -> str:
        if self.op == "is_null":
            return f"{self.column} is null"
        if self.op == "not_null":
            return f"{self.column} is not null"
        if self.op == "in":
            return f"{self.column} in ({', '.join(_show(item) for item in self.value)})"
        return f"{self.column} {self.op} {_show(self.value)}"


def _show(value: Any) -> str:
    """A filter value as SQL-like text (for evidence and messages, never for execution)."""
    if isinstance(value, str | datetime.date):
        return "'" + str(value).replace("'", "''") + "'"
    return str(value)


@dataclass(frozen=True, slots=True)
class Split:
    """A part of a table that one ``read`` returns. ``filters`` are the filters this split
    applies at the source (a subset of those asked for; the engine re-applies all of them);
    ``detail`` is the connector's own (a file path, a key range, the statement it will run)."""

    schema: str
    table: str
    columns: tuple[str, ...]
    filters: tuple[Filter, ...]
    index: int = 0
    count: int = 1
    detail: Mapping[str, Any] = field(default_factory=dict)


class Connector(ABC):
    """One data source. Subclasses set ``kind`` and ``config_model`` and implement the five
    calls; ``from_config`` builds one from a configuration mapping (what a TOML file or the API
    gives), resolving credentials through ``secrets``. Credentials are kept out of ``repr``,
    logs and error messages."""

    kind: ClassVar[str]
    config_model: ClassVar[type[BaseModel]]

    def __init__(self, source: str) -> None:
        self.source = source

    @classmethod
    @abstractmethod
    def from_config(cls, source: str, config: Mapping[str, Any], secrets: Secrets) -> Self:
        """A connector for the source named ``source``; pydantic's ValidationError when the
        configuration is invalid."""

    @abstractmethod
    def schemas(self) -> list[str]:
        """The schemas this source exposes."""

    @abstractmethod
    def tables(self, schema: str) -> list[str]:
        """The tables (and views) of ``schema``."""

    @abstractmethod
    def table_info(self, schema: str, table: str) -> TableInfo:
        """The table's metadata; ``DataSourceError(code="table_not_found")`` when it does not
        exist (or is outside the schemas the source exposes)."""

    @abstractmethod
    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        """The splits that together hold the table's rows matching ``filters``, reading only
        ``columns``."""

    @abstractmethod
    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        """The split's rows: only ``split.columns``, in that order, typed as ``table_info``
        says, with ``split.filters`` applied (other rows may be included: the engine filters
        again)."""

    def table_stamp(self, schema: str, table: str) -> str | None:
        """Something that changes when the table's data or shape does, cheap to ask (a
        file's size and mtime), or None when the source has nothing cheaper than reading
        the table's metadata again (the stored catalogue then re-reads it after a TTL)."""
        return None

    def close(self) -> None:  # noqa: B027 - most connectors hold nothing between calls
        """Releases what the connector holds (pools, clients)."""

    def not_found(self, schema: str, table: str, detail: str = "") -> DataSourceError:
        """The error for a table this source does not have."""
        message = f"table {self.source}.{schema}.{table} does not exist"
        return DataSourceError(
            f"{message}: {detail}" if detail else message,
            code="table_not_found",
            source=self.source,
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} source={self.source!r}>"
