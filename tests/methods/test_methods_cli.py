"""`dagwright methods install` publishes every method flow as an app (again: unchanged) and
registers the AutoTQA tools, in the data directory's database."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagwright.cli.methods import methods_app
from dagwright.methods.publish import METHOD_FLOWS


def test_install_publishes_the_methods_once_and_registers_the_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DAGWRIGHT_DATABASE_URL", raising=False)
    monkeypatch.chdir(tmp_path)  # no dagwright.toml: the scripted model, said so
    runner = CliRunner()
    first = runner.invoke(methods_app, ["install"])
    assert first.exit_code == 0, first.output
    assert [line.split()[0] for line in first.stdout.splitlines()] == list(METHOD_FLOWS)
    assert all(line.endswith("v1 published") for line in first.stdout.splitlines())
    again = runner.invoke(methods_app, ["install"])
    assert all(line.endswith("v1 unchanged") for line in again.stdout.splitlines())

    from dagwright.store.db import database_url, make_engine
    from dagwright.tqa.tools import ToolRegistry

    engine = make_engine(database_url(tmp_path))
    try:
        tools = {tool.name: tool.app for tool in ToolRegistry(engine).list()}
    finally:
        engine.dispose()
    assert tools["mac_sql"] == "mac-sql-spider"
    assert tools["chain_of_table"] == "chain-of-table-wikitq"
