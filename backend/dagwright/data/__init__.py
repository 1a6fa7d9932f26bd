"""The data layer: connectors to data sources (the paper's five calls), the catalog of named
sources, the read-only SQL check and the federated query engine (DuckDB fed Arrow)."""

from dagwright.data.catalog import Catalog, TableRef, create_connector
from dagwright.data.connector import (
    ColumnInfo,
    Connector,
    Filter,
    FilterOp,
    ForeignKey,
    Split,
    TableInfo,
)
from dagwright.data.connectors import connector_kinds, register_connector
from dagwright.data.engine import (
    QueryEngine,
    QueryLimits,
    QueryResult,
    ResultColumn,
    SourceRead,
)
from dagwright.data.safety import check_sql

__all__ = [
    "Catalog",
    "ColumnInfo",
    "Connector",
    "Filter",
    "FilterOp",
    "ForeignKey",
    "QueryEngine",
    "QueryLimits",
    "QueryResult",
    "ResultColumn",
    "SourceRead",
    "Split",
    "TableInfo",
    "TableRef",
    "check_sql",
    "connector_kinds",
    "create_connector",
    "register_connector",
]
