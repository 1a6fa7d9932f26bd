"""Data-Copilot from the command line: `dagwright methods interfaces` reviews and deletes a
library's interfaces in the data directory's database, and a flow run by the CLI reads the
same library (the `InterfaceLibrary` service of `dagwright run`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagwright.cli.execution import run_plan
from dagwright.cli.methods import methods_app
from dagwright.methods.data_copilot.interface import Interface
from dagwright.methods.data_copilot.library import InterfaceLibrary
from dagwright.registry import Registry
from dagwright.runtime import compile_flow, parse_flow
from dagwright.store.db import database_url, make_engine, migrate

INTERFACE = Interface.model_validate(
    {
        "name": "daily_cost",
        "description": "Daily cost of a tenant",
        "inputs": [{"name": "tenant_id", "type": "int"}],
        "tables": ["billing_pg.billing.daily_billing"],
        "code": "def daily_cost(daily_billing, tenant_id):\n    return daily_billing\n",
    }
)


@pytest.fixture
def library(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> InterfaceLibrary:
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DAGWRIGHT_DATABASE_URL", raising=False)
    engine = make_engine(database_url(tmp_path))
    migrate(engine)
    found = InterfaceLibrary(engine)
    found.save("billing", INTERFACE)
    found.log_uncovered("billing", "Forecast next month's cost", "no forecasting interface")
    return found


def test_interfaces_are_listed_and_deleted(library: InterfaceLibrary) -> None:
    runner = CliRunner()
    listed = runner.invoke(methods_app, ["interfaces", "billing"])
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.split() == [
        "v1",
        "designed",
        "daily_cost(tenant_id:",
        "int)",
        "->",
        "table",
    ]
    pending = runner.invoke(methods_app, ["interfaces", "billing", "--uncovered"])
    assert "Forecast next month's cost  (no forecasting interface)" in pending.stdout
    deleted = runner.invoke(methods_app, ["interfaces", "billing", "--delete", "daily_cost"])
    assert deleted.exit_code == 0, deleted.output
    assert library.interfaces("billing") == []
    again = runner.invoke(methods_app, ["interfaces", "billing", "--delete", "daily_cost"])
    assert again.exit_code == 2
    assert "not_found" in again.output


def test_a_flow_run_by_the_cli_reads_the_library(library: InterfaceLibrary) -> None:
    flow = {
        "format": "dagwright.flow",
        "version": 1,
        "nodes": [
            {"id": "today", "block": "text_input", "config": {"name": "today"}},
            {"id": "lib", "block": "dc_library", "config": {"source": "billing"}},
            {"id": "out", "block": "output", "config": {"name": "catalogue"}},
        ],
        "edges": [
            {"source": {"node": "today"}, "target": {"node": "lib", "port": "today"}},
            {
                "source": {"node": "lib", "port": "catalogue"},
                "target": {"node": "out", "port": "value"},
            },
        ],
    }
    plan = compile_flow(parse_flow(flow), Registry.default())
    result = run_plan(plan, {"today": "2024-01-15"}, notice=lambda _: None)
    assert result.status == "succeeded", result.error
    assert result.outputs["catalogue"].startswith(
        "- daily_cost(tenant_id: int) -> table: Daily cost of a tenant"
    )
