"""Tables from HTTP JSON APIs.

Each table is a URL (a template whose ``{name}`` placeholders are filled from ``params``,
URL-quoted), a JSONPath to the rows in the answer, and a declared schema (column -> type);
a column's value is the row's field of the same name unless ``fields`` gives a JSONPath
relative to the row. Answers are cached for ``ttl_s`` seconds per URL. Secret values go into
headers (``header_secrets``) or parameters (``param_secrets``), never into messages.

Declared types: string, int (int64), int32, float (float64), bool, date, timestamp, decimal(p,s)
and json (any value, as its JSON text). Another type name is a ``type_unmapped`` error when
the source is created.
"""

from __future__ import annotations

import datetime
import decimal
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Self
from urllib.parse import quote

import httpx
import pyarrow as pa
from jsonpath_ng.ext.parser import parse as parse_jsonpath
from jsonpath_ng.jsonpath import JSONPath
from pydantic import BaseModel, ConfigDict, Field

from dagwright.data.connector import ColumnInfo, Connector, Filter, Split, TableInfo
from dagwright.data.connectors.common import (
    BATCH_ROWS,
    arrow_filter,
    arrow_pushable,
    rows_to_batch,
)
from dagwright.egress import EgressDeniedError, EgressPolicy
from dagwright.errors import DataSourceError
from dagwright.registry.services import Secrets
from dagwright.secrets import Redactor

SCHEMA = "main"
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")

TYPES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "str": pa.string(),
    "text": pa.string(),
    "json": pa.string(),
    "int": pa.int64(),
    "integer": pa.int64(),
    "int64": pa.int64(),
    "bigint": pa.int64(),
    "int32": pa.int32(),
    "float": pa.float64(),
    "float64": pa.float64(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "datetime": pa.timestamp("us", tz="UTC"),
}


class HttpTableConfig(BaseModel):
    """One table: ``url`` (default: the source's), extra ``params``, ``rows`` (JSONPath to the
    list of rows), ``columns`` (name -> type), ``fields`` (name -> JSONPath in a row)."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    params: dict[str, str] = {}
    rows: str = "$[*]"
    columns: dict[str, str] = Field(min_length=1)
    fields: dict[str, str] = {}
    comment: str | None = None


class HttpJsonConfig(BaseModel):
    """The source: a default ``url``, ``params`` and ``headers`` shared by its tables, and
    the names of the secrets that fill headers and parameters."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    params: dict[str, str] = {}
    param_secrets: dict[str, str] = {}
    headers: dict[str, str] = {}
    header_secrets: dict[str, str] = {}
    tables: dict[str, HttpTableConfig] = Field(min_length=1)
    ttl_s: float = Field(60.0, ge=0)
    timeout_s: float = Field(10.0, gt=0)


def declared_type(name: str) -> pa.DataType | None:
    """The Arrow type of a declared type name; None when there is none."""
    spelled = name.strip().lower()
    if match := DECIMAL.fullmatch(spelled):
        return pa.decimal128(int(match[1]), int(match[2]))
    return TYPES.get(spelled)


def _converter(declared: str, type_: pa.DataType) -> Callable[[Any], Any] | None:
    if declared.strip().lower() == "json":
        return lambda value: json.dumps(value, ensure_ascii=False)
    if pa.types.is_date32(type_):
        return lambda value: datetime.date.fromisoformat(value) if isinstance(value, str) else value
    if pa.types.is_timestamp(type_):
        return _timestamp
    if pa.types.is_decimal(type_):
        # Through text, so 9.1 is 9.1 and not the binary float's 9.0999...
        return lambda value: decimal.Decimal(str(value))
    return None


def _timestamp(value: Any) -> Any:
    """ISO text (a trailing Z allowed) or epoch seconds as a UTC instant."""
    if isinstance(value, int | float):
        return datetime.datetime.fromtimestamp(value, tz=datetime.UTC)
    moment = datetime.datetime.fromisoformat(value)
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


class _Table:
    """A configured table, resolved once: its URL, paths and schema."""

    def __init__(self, source: str, name: str, config: HttpTableConfig, url: str) -> None:
        self.name = name
        self.url = url
        self.comment = config.comment
        try:
            self.rows: JSONPath = parse_jsonpath(config.rows)
            self.fields: dict[str, JSONPath] = {
                column: parse_jsonpath(path) for column, path in config.fields.items()
            }
        except Exception as exc:  # jsonpath-ng raises lexer, parser and plain errors
            raise ValueError(f"table {name}: invalid JSONPath: {exc}") from exc
        columns = []
        self.converters: dict[str, Callable[[Any], Any] | None] = {}
        for column, declared in config.columns.items():
            type_ = declared_type(declared)
            if type_ is None:
                raise DataSourceError(
                    f"{source}.{SCHEMA}.{name}.{column}: declared type {declared!r} is not one of"
                    f" {', '.join(sorted(TYPES))} or decimal(p,s)",
                    code="type_unmapped",
                    source=source,
                )
            columns.append(ColumnInfo(column, type_, declared))
            self.converters[column] = _converter(declared, type_)
        self.info = TableInfo(SCHEMA, name, tuple(columns), comment=config.comment)

    def value(self, row: Any, column: str) -> Any:
        path = self.fields.get(column)
        if path is None:
            return row.get(column) if isinstance(row, dict) else None
        matches = path.find(row)
        return matches[0].value if matches else None


class HttpJsonConnector(Connector):
    kind = "http_json"
    config_model = HttpJsonConfig
    connects_out: ClassVar[bool] = True  # create_connector passes it the egress policy

    def __init__(
        self,
        source: str,
        config: HttpJsonConfig,
        secrets: Secrets,
        egress: EgressPolicy | None = None,
    ) -> None:
        """``egress``: where the source's URLs may connect (dagwright/egress.py); without
        one, the default policy (public addresses only)."""
        super().__init__(source)
        self.config = config
        params = dict(config.params)
        params.update({name: secrets.get(secret) for name, secret in config.param_secrets.items()})
        headers = dict(config.headers)
        headers.update(
            {name: secrets.get(secret) for name, secret in config.header_secrets.items()}
        )
        secret_values = [params[name] for name in config.param_secrets]
        self._redact = Redactor([*secret_values, *(headers[h] for h in config.header_secrets)])
        self._tables: dict[str, _Table] = {}
        for name, table in config.tables.items():
            template = table.url or config.url
            if template is None:
                raise ValueError(f"table {name}: no url (give one for the table or the source)")
            self._tables[name] = _Table(source, name, table, _fill(template, params | table.params))
        from dagwright.egress_http import sync_client

        policy = EgressPolicy() if egress is None else egress
        self._client = sync_client(policy, headers=headers, timeout=config.timeout_s)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}

    @classmethod
    def from_config(
        cls,
        source: str,
        config: Mapping[str, Any],
        secrets: Secrets,
        egress: EgressPolicy | None = None,
    ) -> Self:
        return cls(source, HttpJsonConfig.model_validate(config), secrets, egress)

    def schemas(self) -> list[str]:
        return [SCHEMA]

    def tables(self, schema: str) -> list[str]:
        return sorted(self._tables) if schema == SCHEMA else []

    def table_info(self, schema: str, table: str) -> TableInfo:
        return self._table(schema, table).info

    def splits(
        self, schema: str, table: str, columns: Sequence[str], filters: Sequence[Filter] = ()
    ) -> list[Split]:
        info = self._table(schema, table).info
        pushed = [f for f in filters if arrow_pushable(f, info.column(f.column).type)]
        return [Split(schema, table, tuple(columns), tuple(pushed))]

    def read(self, split: Split) -> Iterator[pa.RecordBatch]:
        table = self._table(split.schema, split.table)
        # The asked columns and those the filters test, which the batch drops at the end.
        names = list(dict.fromkeys([*split.columns, *(f.column for f in split.filters)]))
        schema = table.info.arrow_schema(names)
        found = [match.value for match in table.rows.find(self._document(table))]
        # "$.items" finds the list itself, "$.items[*]" its elements: both mean the rows.
        rows = found[0] if len(found) == 1 and isinstance(found[0], list) else found
        converters = [table.converters[name] for name in names]
        expression = arrow_filter(split.filters, schema)
        for start in range(0, max(len(rows), 1), BATCH_ROWS):
            chunk = [
                tuple(table.value(row, name) for name in names)
                for row in rows[start : start + BATCH_ROWS]
            ]
            batch = rows_to_batch(
                chunk, schema, converters, lambda i: f"{self.source}.{table.name}.{names[i]}"
            )
            if expression is not None:
                batch = batch.filter(expression)
            yield batch.select(list(split.columns))

    def close(self) -> None:
        self._client.close()

    def _table(self, schema: str, table: str) -> _Table:
        found = self._tables.get(table) if schema == SCHEMA else None
        if found is None:
            raise self.not_found(schema, table)
        return found

    def _document(self, table: _Table) -> Any:
        """The parsed answer of the table's URL, from the cache while it is fresh."""
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(table.url)
        if cached is not None and now - cached[0] < self.config.ttl_s:
            return cached[1]
        shown = self._redact(table.url)
        try:
            response = self._client.get(table.url)
        except EgressDeniedError as exc:
            raise EgressDeniedError(f"source {self.source!r}: {exc.message}") from None
        except httpx.HTTPError as exc:
            raise DataSourceError(
                f"source {self.source!r} is unreachable ({shown}): {self._redact(str(exc))}",
                code="source_unreachable",
                source=self.source,
            ) from exc
        if response.status_code in (401, 403):
            code = "source_auth"
        elif response.status_code == 404:
            code = "table_not_found"
        elif response.is_error:
            code = "source_error"
        else:
            try:
                document = response.json()
            except ValueError as exc:
                raise DataSourceError(
                    f"source {self.source!r}: {shown} did not answer JSON: {exc}",
                    code="bad_value",
                    source=self.source,
                ) from exc
            with self._lock:
                self._cache[table.url] = (now, document)
            return document
        raise DataSourceError(
            f"source {self.source!r}: {shown} answered HTTP {response.status_code}:"
            f" {self._redact(response.text[:200])}",
            code=code,
            source=self.source,
        )


def _fill(template: str, params: Mapping[str, str]) -> str:
    """The template with each ``{name}`` replaced by its URL-quoted value."""

    def value(match: re.Match[str]) -> str:
        name = match[1]
        if name not in params:
            raise ValueError(f"URL placeholder {{{name}}} has no value in params")
        return quote(params[name], safe="")

    return PLACEHOLDER.sub(value, template)
