"""`dagwright tqa` with the scripted model playing the agents (tests/support/tqa_script.yaml:
scripted answers, not a model's), on a data directory of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagwright.cli.main import app
from dagwright.llm.scripted.runner import ScriptedServer
from support.tqa import agents_script, provider_settings

runner = CliRunner()


@pytest.fixture
def scripted_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    model = ScriptedServer(agents_script()).start()
    settings = tmp_path / "dagwright.toml"
    settings.write_text(provider_settings(model.base_url))
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DAGWRIGHT_SETTINGS", str(settings))
    monkeypatch.delenv("DAGWRIGHT_DATABASE_URL", raising=False)
    monkeypatch.delenv("DAGWRIGHT_QDRANT_URL", raising=False)
    try:
        yield tmp_path
    finally:
        model.stop()


def test_ask_streams_the_turns_then_show_replays_them(scripted_home: Path) -> None:
    asked = runner.invoke(
        app, ["tqa", "ask", "What is the year-end bonus for Tom?", "--scheduler", "fsm"]
    )
    assert asked.exit_code == 0, asked.output
    out = asked.output
    for agent in ("[1] Planner", "[2] Engineer", "[3] Executor", "[4] Engineer", "[5] Critic"):
        assert agent in out
    assert "fsm: Engineer -> Executor: it asked for a tool" in out
    assert "SQL: SELECT s.Bonus FROM hr.main.Employee e JOIN payroll.main.salary s" in out
    assert "answer (value): Tom's year-end bonus is 1569." in out
    assert "scripted model played the agents" in out

    listed = runner.invoke(app, ["tqa", "conversations"])
    assert listed.exit_code == 0, listed.output
    conversation_id = listed.output.split()[0]
    shown = runner.invoke(app, ["tqa", "show", conversation_id])
    assert shown.exit_code == 0, shown.output
    assert "[3] Executor" in shown.output
    assert "1569" in shown.output


def test_round_limit_exits_with_status_1_and_hints_are_edited(scripted_home: Path) -> None:
    limited = runner.invoke(app, ["tqa", "ask", "Count the employees forever", "--max-rounds", "3"])
    assert limited.exit_code == 1
    assert "no answer: round_limit" in limited.output

    added = runner.invoke(app, ["tqa", "hints", "add", "figure1", "Name is capitalised"])
    assert added.exit_code == 0, added.output
    hint_id = added.output.strip().splitlines()[-1]
    assert runner.invoke(app, ["tqa", "hints", "edit", hint_id, "Names start upper"]).exit_code == 0
    listed = runner.invoke(app, ["tqa", "hints", "list", "figure1"])
    assert "Names start upper" in listed.output
    assert runner.invoke(app, ["tqa", "hints", "remove", hint_id]).exit_code == 0
    missing = runner.invoke(app, ["tqa", "hints", "remove", hint_id])
    assert missing.exit_code == 2
    assert "hint_not_found" in missing.output
