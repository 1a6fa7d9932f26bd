"""`dagwright tqa` with the scripted model playing the agents (tests/support/tqa_script.yaml:
scripted answers, not a model's), on a data directory of its own."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def dagwright(*args: str) -> subprocess.CompletedProcess[str]:
    """One `dagwright` command in a process of its own (what it stores, the next one reads)."""
    done = subprocess.run(
        [sys.executable, "-c", "from dagwright.cli.main import app; app()", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done


def run_inputs(home: Path, run_id: str) -> dict[str, Any]:
    from sqlmodel import Session

    from dagwright.store.db import database_url, make_engine
    from dagwright.store.models import Run

    engine = make_engine(database_url(home / "data"))
    try:
        with Session(engine) as db:
            run = db.get(Run, run_id)
            assert run is not None
            return dict(run.inputs or {})
    finally:
        engine.dispose()


def test_a_dataset_persists_across_processes_and_its_lessons_are_reviewed(
    scripted_home: Path,
) -> None:
    tom = "What is the year-end bonus for Tom?"
    # (a question no scripted rule answers: the examples are in the prompts the rules read)
    ann = "What is the year-end bonus for Ann?"
    examples = scripted_home / "plans.jsonl"
    examples.write_text(json.dumps({"question": ann, "plan": "PLAN-EXAMPLE"}) + "\n")
    sql = scripted_home / "sql.jsonl"
    sql.write_text(json.dumps({"question": ann, "sql": "SELECT 'SQL-EXAMPLE'"}) + "\n")
    # (in this process: each command opens the data directory afresh, as another would)
    for name, file in (("fig-plans", examples), ("fig-sql", sql)):
        loaded = runner.invoke(
            app,
            ["examples", "load", name, str(file), "--embedder", "hashing:64",
             "--key", "question", "--text", "question"],
        )  # fmt: skip
        assert loaded.exit_code == 0, loaded.output
    created = dagwright(
        "tqa", "datasets", "create", "fig", "--sources", "hr,payroll",
        "--sop", "SOP v1: ask the tool.",
        "--examples", "planner=fig-plans", "--examples", "text_to_sql=fig-sql",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    assert "SOP version 1" in created.stdout

    def ask_json(question: str) -> dict[str, Any]:
        done = dagwright("tqa", "ask", question, "--dataset", "fig", "--json")
        conversation: dict[str, Any] = json.loads(done.stdout)
        return conversation

    first = ask_json(tom)
    assert first["status"] == "completed"
    assert first["turns"][1]["text"].startswith("[scripted] Following SOP v1")
    planner = run_inputs(scripted_home, first["turns"][1]["run_id"])
    assert "Plan: PLAN-EXAMPLE" in planner["examples"]
    [call] = [t["tool_call"] for t in first["turns"] if t["tool_call"]]
    assert "Sql: SELECT 'SQL-EXAMPLE'" in call["input"]["examples"]

    # A new SOP version, from another process; publishing again changes nothing for it.
    updated = dagwright(
        "tqa", "datasets", "update", "fig", "--sop", "SOP v2: join hr and payroll by ID.",
        "--note", "joins",
    )  # fmt: skip
    assert "SOP version 2" in updated.stdout
    assert runner.invoke(app, ["tqa", "publish"]).exit_code == 0
    second = ask_json(tom)
    assert second["turns"][1]["text"].startswith("[scripted] Following SOP v2")
    assert second["profile"]["sop_version"] == 2
    sops = runner.invoke(app, ["tqa", "datasets", "sops", "fig"]).output
    assert sops.index("v2") < sops.index("v1")

    # A retry that succeeds becomes a candidate hint, reviewed from the command line.
    learned = dagwright("tqa", "ask", "Which department does tom work in?", "--dataset", "fig")
    assert "learned 1 candidate hint(s)" in learned.stdout
    candidates = runner.invoke(app, ["tqa", "hints", "list", "fig", "--status", "candidate"])
    [line] = candidates.output.strip().splitlines()
    hint_id = line.split()[0]
    assert "has 'Tom', not 'tom'" in line
    assert runner.invoke(app, ["tqa", "hints", "confirm", hint_id]).exit_code == 0
    confirmed = runner.invoke(app, ["tqa", "hints", "list", "fig", "--status", "confirmed"])
    assert hint_id in confirmed.output
    later = ask_json("Which department does lucy work in?")
    assert [h["id"] for h in later["profile"]["learned_hints"]] == [hint_id]
    assert len([t for t in later["turns"] if t["tool_call"]]) == 1  # no retry needed
    assert runner.invoke(app, ["tqa", "hints", "drop", hint_id]).exit_code == 0
    dropped = runner.invoke(app, ["tqa", "hints", "list", "fig", "--status", "dropped"])
    assert hint_id in dropped.output


def test_ask_limited_to_one_source_gets_the_engines_refusal(scripted_home: Path) -> None:
    tom = "What is the year-end bonus for Tom?"
    limited = runner.invoke(
        app, ["tqa", "ask", tom, "--source", "hr", "--max-rounds", "3", "--json"]
    )
    assert limited.exit_code == 1, limited.output  # no answer: the join cannot run
    conversation = json.loads(limited.output)
    assert conversation["sources"] == ["hr"]
    call = conversation["turns"][3]["tool_call"]
    assert call["input"]["sources"] == ["hr"]
    assert "JOIN payroll.main.salary" in call["sql"]
    assert call["error"]["code"] == "table_out_of_scope"
    assert "table payroll.main.salary at line 1 is outside" in call["error"]["message"]
    # Repeated, the option names every source the question may use: the join runs.
    both = runner.invoke(app, ["tqa", "ask", tom, "--source", "hr", "--source", "payroll"])
    assert both.exit_code == 0, both.output
    assert "1569" in both.output
    unknown = runner.invoke(app, ["tqa", "ask", tom, "--source", "nowhere"])
    assert unknown.exit_code == 2
    assert "invalid_scope" in unknown.output
    assert "'nowhere'" in unknown.output
    malformed = runner.invoke(app, ["tqa", "ask", tom, "--source", "hr."])
    assert malformed.exit_code == 2
    assert "'hr.'" in malformed.output
