"""Tables made of Python values (a list of row dicts, a dict of columns, an Arrow table or
record batch, a pandas DataFrame): how a flow's values become queryable next to real
sources. One schema, ``main`` unless configured; tables can be set and removed at any time."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

import pandas as pd
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from dagwright.data.connector import ColumnInfo, Connector, Filter, Split, TableInfo
from dagwright.data.connectors.common import BATCH_ROWS, arrow_filter, arrow_pushable
from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets


class MemoryConfig(BaseModel):
    """``tables``: table name -> value (rows as dicts, columns as lists, Arrow, pandas)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tables: dict[str, Any] = {}
    schema_name: str = "main"


class MemoryConnector(Connector):
    kind = "memory"
    config_model = MemoryConfig

    def __init__(
        self, source: str = "memory", tables: Mapping[str, Any] | None = None, schema: str = "main"
    ) -> None:
        super().__init__(source)
        self.schema = schema
        self._lock = threading.Lock()
        self._tables: dict[str, pa.Table] = {}
        for name, value in (tables or {}).items():
            self.set(name, value)

    @classmethod
    def from_config(cls, source: str, config: Mapping[str, Any], secrets: Secrets) -> Self:
        settings = MemoryConfig.model_validate(config)
        return cls(source, settings.tables, settings.schema_name)

    def set(self, table: str, value: Any) -> None:
        """Adds or replaces ``table``; DataSourceError(code="type_unmapped") when a column's
        values have no common Arrow type."""
        converted = self._to_arrow(table, value)
        with self._lock:
            self._tables[table] = converted

    def remove(self, table: str) -> None:
        """Removes ``table`` (nothing when it is absent)."""
        with self._lock:
            self._tables.pop(table, None)

    def schemas(self) -> list[str]:
        return [self.schema]

    def tables(self, schema: str) -> list[str]:
        if schema != self.schema:
            return []
        with self._lock:
            return sorted(self._tables)

    def table_info(self, schema: str, table: str) -> TableInfo:
        data = self._table(schema, table)
        columns = tuple(
            ColumnInfo(field.name, field.type, str(field.type), field.nullable)
            for field in data.schema
        )
        return TableInfo(schema, table, columns, row_estimate=data.num_rows)

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        data = self._table(schema, table)
        pushed = [f for f in filters if arrow_pushable(f, data.schema.field(f.column).type)]
        return [Split(schema, table, tuple(columns), tuple(pushed))]

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        data = self._table(split.schema, split.table)
        expression = arrow_filter(split.filters, data.schema)
        if expression is not None:
            data = data.filter(expression)  # before selecting: filters may name other columns
        yield from data.select(list(split.columns)).to_batches(max_chunksize=BATCH_ROWS)

    def _table(self, schema: str, table: str) -> pa.Table:
        with self._lock:
            data = self._tables.get(table) if schema == self.schema else None
        if data is None:
            raise self.not_found(schema, table)
        return data

    def _to_arrow(self, table: str, value: Any) -> pa.Table:
        try:
            data = _as_table(value)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise DataSourceError(
                f"{self.source}.{self.schema}.{table}.{_failing_column(value)}: the values have"
                f" no common type ({exc})",
                code="type_unmapped",
                source=self.source,
            ) from exc
        # A column of nothing but nulls has Arrow's null type, which says nothing useful; it
        # is exposed as text, the type a value would most likely have.
        for index, field in enumerate(data.schema):
            if pa.types.is_null(field.type):
                data = data.set_column(index, field.name, data.column(index).cast(pa.string()))
        return data


def _as_table(value: Any) -> pa.Table:
    """Any supported Python value as an Arrow table (TypeError for others)."""
    if isinstance(value, pa.Table):
        return value
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    if isinstance(value, pd.DataFrame):
        return pa.Table.from_pandas(value, preserve_index=False)
    if isinstance(value, Mapping):
        return pa.Table.from_pydict(dict(value))
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        if all(isinstance(row, Mapping) for row in value):
            return pa.Table.from_pylist(list(value))
        return pa.table({"value": pa.array(list(value))})
    raise TypeError(
        f"a table is a list of row dicts, a dict of columns, an Arrow table or a pandas "
        f"DataFrame, not {type(value).__name__}"
    )


def _failing_column(value: Any) -> str:
    """The first column whose values Arrow cannot type, to name it in the error."""
    columns: dict[str, list[Any]] = {}
    if isinstance(value, pd.DataFrame):
        columns = {str(name): value[name].tolist() for name in value.columns}
    elif isinstance(value, Mapping):
        columns = {str(name): list(values) for name, values in value.items()}
    elif isinstance(value, Sequence) and all(isinstance(row, Mapping) for row in value):
        for row in value:
            for name in row:
                columns.setdefault(str(name), [])
        columns = {name: [row.get(name) for row in value] for name in columns}
    else:
        columns = {"value": list(value)}
    for name, values in columns.items():
        try:
            pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return name
    return "?"
