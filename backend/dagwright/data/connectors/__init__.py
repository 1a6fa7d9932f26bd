"""The connector kinds: kind name -> connector class (whose ``config_model`` is the pydantic
model of its configuration). A new kind is one module with a ``Connector`` subclass, listed
in ``BUILTIN`` or registered with ``register_connector`` from anywhere."""

from __future__ import annotations

from dagwright.data.connector import Connector
from dagwright.data.connectors.files import FilesConfig, FilesConnector
from dagwright.data.connectors.http_json import HttpJsonConfig, HttpJsonConnector
from dagwright.data.connectors.memory import MemoryConfig, MemoryConnector
from dagwright.data.connectors.mysql import MysqlConfig, MysqlConnector
from dagwright.data.connectors.postgres import PostgresConfig, PostgresConnector
from dagwright.data.connectors.sqlite import SqliteConfig, SqliteConnector

BUILTIN: tuple[type[Connector], ...] = (
    FilesConnector,
    SqliteConnector,
    PostgresConnector,
    MysqlConnector,
    HttpJsonConnector,
    MemoryConnector,
)

_KINDS: dict[str, type[Connector]] = {cls.kind: cls for cls in BUILTIN}


def register_connector(cls: type[Connector]) -> type[Connector]:
    """Adds a connector kind (usable as a class decorator). A kind name already taken by
    another class is an error: two modules would silently fight over it."""
    existing = _KINDS.get(cls.kind)
    if existing is not None and existing is not cls:
        raise ValueError(
            f"connector kind {cls.kind!r} is taken by {existing.__module__}.{existing.__name__}"
        )
    _KINDS[cls.kind] = cls
    return cls


def connector_kinds() -> dict[str, type[Connector]]:
    """Every registered kind, by name."""
    return dict(sorted(_KINDS.items()))


__all__ = [
    "BUILTIN",
    "FilesConfig",
    "FilesConnector",
    "HttpJsonConfig",
    "HttpJsonConnector",
    "MemoryConfig",
    "MemoryConnector",
    "MysqlConfig",
    "MysqlConnector",
    "PostgresConfig",
    "PostgresConnector",
    "SqliteConfig",
    "SqliteConnector",
    "connector_kinds",
    "register_connector",
]
