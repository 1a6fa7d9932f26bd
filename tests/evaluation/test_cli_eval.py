"""`dagwright eval` end to end on a data directory: import, run (with a recording, then
again offline from it), report, compare, the publish gate and feedback. No model provider is
configured, so dagwright's scripted model answers (scripted answers, not a model's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dagwright.cli.eval import eval_app
from dagwright.registry import Registry
from dagwright.services.apps import AppService
from dagwright.store.db import database_url, make_engine, migrate

from .test_evaluation_service import _flow

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(folder))
    for name in ("DAGWRIGHT_DATABASE_URL", "DAGWRIGHT_SETTINGS", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no dagwright.toml here: the scripted model answers
    return folder


def _invoke(*args: str) -> str:
    result = runner.invoke(eval_app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _run(*args: str) -> str:
    """`eval run` in a process of its own: it starts a scripted model server, whose logging
    must not outlive CliRunner's captured streams."""
    done = subprocess.run(
        [sys.executable, "-c", "from dagwright.cli.eval import eval_app; eval_app()", "run", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _json_tail(output: str) -> Any:
    """The JSON document a command printed (after any notes)."""
    return json.loads(output[output.index("{") :])


def test_run_record_replay_compare_gate_feedback(data_dir: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "qa.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)})
            + "\n"
            for i in range(4)
        )
    )
    _invoke("datasets", "import", "qa", str(dataset), "--kind", "generic")
    engine = make_engine(database_url(data_dir))
    migrate(engine)
    apps = AppService(engine, Registry.default())
    apps.create_app("asker", "asker")
    chat = _flow(
        [
            {"id": "question", "block": "text_input", "config": {"name": "question"}},
            {"id": "ask", "block": "chat", "config": {"prompt": "Answer: {{ question }}"}},
            {"id": "answer", "block": "output", "config": {"name": "answer"}},
        ],
        [("question", "output", "ask", "question"), ("ask", "output", "answer", "value")],
    )
    apps.publish("asker", apps.create_version("asker", chat).id)
    engine.dispose()

    recording = tmp_path / "answers.jsonl"
    first = _json_tail(_run("asker", "--dataset", "qa", "--record", str(recording), "--json"))
    assert recording.read_text().count("\n") >= 4  # every model exchange recorded
    again = _json_tail(
        _run("asker@1", "--dataset", "qa", "--replay", str(recording), "--fresh", "--json")
    )
    a, b = first["evaluation"], again["evaluation"]
    assert a["id"] != b["id"]
    compared = _json_tail(_invoke("compare", a["id"], b["id"], "--json"))
    assert compared["examples"] == 4
    assert compared["gained"] == []  # the replay answered exactly as recorded
    assert compared["lost"] == []
    assert compared["difference"] == 0

    # `eval list` pages: newest first, the page says how many there are in all
    listed = _json_tail(_invoke("list", "--limit", "1", "--json"))
    assert (listed["total"], [e["id"] for e in listed["items"]]) == (2, [b["id"]])
    listed = runner.invoke(eval_app, ["list", "--offset", "1", "--limit", "1"])
    assert listed.stdout.startswith(a["id"])
    assert listed.stderr.strip() == "1 of 2 evaluations"
    listed = runner.invoke(eval_app, ["list", "--limit", "1"])
    assert listed.stderr.strip() == "1 of 2 evaluations; next page: --offset 1"

    results = runner.invoke(eval_app, ["report", a["id"], "--json"])
    report = _json_tail(results.output)
    assert report["examples"] == 4
    run_id = report["failures"][0]["run_id"]

    _invoke("gate", "set", "asker", "--dataset", "qa", "--tolerance", "0.05")
    check = runner.invoke(eval_app, ["gate", "check", "asker@1"])
    assert check.exit_code == 0, check.output  # evaluated, nothing published to fall below
    given = _json_tail(_invoke("feedback", run_id, "--score", "0", "--correction", "2"))
    assert given["example_namespace"] == "feedback-asker"
