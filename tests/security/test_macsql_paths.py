"""MAC-SQL runs model-written SQL on SQLite files a flow names: the file must be one a file
source could read (never the data directory's own database), and the SQL cannot ATTACH
another file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dagwright.blocks.mac_sql import SchemaConfig, _sqlite_target
from dagwright.composition import Composition
from dagwright.data.connectors.common import SourcePathError
from dagwright.methods.mac_sql.agents import execute_sqlite
from dagwright.registry import NodeContext
from dagwright.settings import load_settings


def _database(path: Path) -> Path:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE t (x INTEGER)")
    connection.execute("INSERT INTO t VALUES (1)")
    connection.commit()
    connection.close()
    return path


def test_the_data_directorys_database_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(data_dir))
    monkeypatch.delenv("DAGWRIGHT_SOURCE_ROOTS", raising=False)
    # The rule a process gets from its settings, as a block is given it.
    services = Composition(load_settings()).block_services()
    ctx = NodeContext("run", "node", lambda *_: None, lambda *_: None, services)
    internal = _database(data_dir / "dagwright.db")
    with pytest.raises(SourcePathError, match="outside the folders sources may read"):
        _sqlite_target(SchemaConfig(), ctx, str(internal))
    (data_dir / "sources").mkdir()
    allowed = _database(data_dir / "sources" / "shop.sqlite")
    assert _sqlite_target(SchemaConfig(), ctx, str(allowed)) == (allowed.resolve(), None)


def test_model_written_sql_cannot_attach_another_file(tmp_path: Path) -> None:
    target = _database(tmp_path / "target.sqlite")
    other = _database(tmp_path / "other.sqlite")
    result = execute_sqlite(target, f"ATTACH DATABASE '{other}' AS other", 5.0)
    assert result["data"] is None
    assert "not authorized" in result["error"]
    assert execute_sqlite(target, "SELECT x FROM t", 5.0)["data"] == [[1]]
