"""The `dagwright` command: run, validate, blocks and demo, through the real console script
(subprocess) and through typer's runner for the finer cases."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagwright.cli.main import app
from support.flows import edge, flow_doc, node

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "flows" / "examples"
runner = CliRunner()


def dagwright_command() -> list[str]:
    script = Path(sys.executable).with_name("dagwright")
    if script.exists():
        return [str(script)]
    found = shutil.which("dagwright")
    return [found] if found else [sys.executable, "-m", "dagwright"]


def test_console_script_runs_an_example_flow() -> None:
    done = subprocess.run(
        [*dagwright_command(), "run", str(EXAMPLES / "hello.json"), "--input", "name=Ann"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "greeting: Hello, Ann!\n"


def test_run_json_and_trace() -> None:
    result = runner.invoke(
        app,
        [
            "run",
            str(EXAMPLES / "triage_by_length.json"),
            "--json",
            "--trace",
            "-i",
            "text=one two three",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["status"] == "succeeded"
    assert payload["outputs"] == {
        "route": "short question (3 words): answer directly",
        "word_count": 3,
    }
    statuses = {t["node"]: t["status"] for t in payload["trace"]}
    assert statuses["long_reply"] == "skipped"
    assert statuses["short_reply"] == "succeeded"
    assert all(t["duration"] is not None for t in payload["trace"] if t["status"] == "succeeded")


def test_run_trace_table_and_file_input(tmp_path: Path) -> None:
    text = tmp_path / "q.txt"
    text.write_text(" ".join(["word"] * 12))
    result = runner.invoke(
        app, ["run", str(EXAMPLES / "triage_by_length.json"), "-i", f"text=@{text}", "--trace"]
    )
    assert result.exit_code == 0, result.output
    assert "route: long question (12 words): plan it in steps" in result.stdout
    assert "trace (ms since the run started)" in result.stderr
    assert "short_reply" in result.stderr
    assert "skipped" in result.stderr


def test_every_example_runs() -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    for path in EXAMPLES.glob("*.json"):
        assert f"== {path.name}" in result.stdout
    assert "customers: Tom, Ann" in result.stdout
    assert "order_count: 3" in result.stdout


def write_flow(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "flow.json"
    path.write_text(json.dumps(doc))
    return path


BROKEN = {
    "format": "dagwright.flow",
    "version": 1,
    "nodes": [
        {"id": "q", "block": "text_input", "config": {"name": "q"}},
        {"id": "x", "block": "no_such_block"},
        {"id": "n", "block": "list_length"},
        {"id": "out", "block": "output", "config": {"name": "r"}},
    ],
    "edges": [
        {"source": {"node": "q"}, "target": {"node": "n", "port": "items"}},
        {"source": {"node": "n"}, "target": {"node": "out", "port": "value"}},
    ],
}


def test_validate_prints_every_problem_and_exits_non_zero(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", str(write_flow(tmp_path, BROKEN))])
    assert result.exit_code == 2
    assert "error: x: [unknown_block] unknown block 'no_such_block'" in result.stdout
    assert (
        "error: n.items: [type_mismatch] q.output gives str but n.items takes list[Any]"
        in result.stdout
    )
    assert "invalid (2 error(s), 0 warning(s))" in result.stdout
    as_json = runner.invoke(app, ["validate", "--json", str(write_flow(tmp_path, BROKEN))])
    codes = sorted(p["code"] for p in json.loads(as_json.stdout))
    assert codes == ["type_mismatch", "unknown_block"]


def test_validate_a_good_flow() -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES / "hello.json")])
    assert result.exit_code == 0
    assert "valid (0 error(s), 0 warning(s))" in result.stdout


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "malformed JSON at line 1, column 2"),
        ('{"format": "dagwright.flow", "version": 99}', "flow format version 99 is not supported"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    for command in ("run", "validate"):
        result = runner.invoke(app, [command, str(path)])
        assert result.exit_code == 2
        assert message in result.stderr


def test_run_reports_bad_inputs(tmp_path: Path) -> None:
    hello = str(EXAMPLES / "hello.json")
    unknown = runner.invoke(app, ["run", hello, "-i", "nmae=Ann"])
    assert unknown.exit_code == 2
    assert "unknown input(s) 'nmae'; the flow takes name" in unknown.stderr
    malformed = runner.invoke(app, ["run", hello, "-i", "name"])
    assert malformed.exit_code == 2
    assert "expected key=value" in malformed.stderr
    missing = runner.invoke(app, ["run", hello, "-i", f"name=@{tmp_path / 'none.txt'}"])
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr


def test_failed_run_names_the_node(tmp_path: Path) -> None:
    doc = {
        "format": "dagwright.flow",
        "version": 1,
        "nodes": [
            {"id": "raw", "block": "text_input", "config": {"name": "raw"}},
            {"id": "parse", "block": "from_json"},
            {"id": "out", "block": "output", "config": {"name": "value"}},
        ],
        "edges": [
            {"source": {"node": "raw"}, "target": {"node": "parse", "port": "text"}},
            {"source": {"node": "parse"}, "target": {"node": "out", "port": "value"}},
        ],
    }
    path = write_flow(tmp_path, doc)
    ok = runner.invoke(app, ["run", str(path), "-i", 'raw={"a": 1}', "--json"])
    assert json.loads(ok.stdout)["outputs"] == {"value": {"a": 1}}
    bad = runner.invoke(app, ["run", str(path), "-i", "raw={oops"])
    assert bad.exit_code == 1
    assert "error: run failed: node 'parse' (from_json) failed" in bad.stderr


def test_blocks_lists_the_registry() -> None:
    result = runner.invoke(app, ["blocks"])
    assert result.exit_code == 0
    for category in ("[input]", "[data_process]", "[condition]"):
        assert category in result.stdout
    assert "template" in result.stdout
    assert "compare" in result.stdout
    schema = json.loads(runner.invoke(app, ["blocks", "--json", "--category", "condition"]).stdout)
    assert {b["name"] for b in schema["blocks"]} >= {"compare", "switch"}
    assert all(b["category"] == "condition" for b in schema["blocks"])


@pytest.fixture
def no_provider_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPENAI_API_KEY", "DAGWRIGHT_SETTINGS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./dagwright.toml
    return tmp_path


def test_llm_flow_without_provider_uses_the_scripted_model_and_says_so(
    no_provider_configured: Path,
) -> None:
    result = runner.invoke(app, ["run", str(EXAMPLES / "answer_question.json"), "--trace"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("answer: [scripted reply]")
    assert "note: no model provider is configured: dagwright's scripted model answers" in (
        result.stderr
    )
    assert "(scripted answers, not a model's)" in result.stderr


def test_record_then_replay(no_provider_configured: Path) -> None:
    recording = no_provider_configured / "run.jsonl"
    flow = str(EXAMPLES / "answer_question.json")
    first = runner.invoke(
        app, ["run", flow, "-i", "question=hello there", "--record", str(recording)]
    )
    assert first.exit_code == 0, first.output
    assert len(recording.read_text().splitlines()) == 1
    again = runner.invoke(
        app, ["run", flow, "-i", "question=hello there", "--replay", str(recording)]
    )
    assert again.exit_code == 0, again.output
    assert again.stdout == first.stdout
    assert f"replaying model answers from {recording}" in again.stderr
    other = runner.invoke(
        app, ["run", flow, "-i", "question=not recorded", "--replay", str(recording)]
    )
    assert other.exit_code == 1
    assert "no scripted reply matches this request" in other.stderr


def test_configured_provider_is_used(
    no_provider_configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.models import scripted_server

    script = {"rules": [{"model": "analyst-1", "match": "bonus", "reply": "12,000 (provider)"}]}
    with scripted_server(script) as server:
        settings = no_provider_configured / "dagwright.toml"
        settings.write_text(
            'default_provider = "local"\n\n[providers.local]\n'
            f'base_url = "{server.base_url}"\napi_key_env = "DW_TEST_KEY"\n'
            'default_model = "analyst-1"\n'
        )
        monkeypatch.setenv("DW_TEST_KEY", "sk-test-not-real")
        result = runner.invoke(app, ["run", str(EXAMPLES / "answer_question.json")])
    assert result.exit_code == 0, result.output
    assert result.stdout == "answer: 12,000 (provider)\n"
    assert "note:" not in result.stderr
    assert "sk-test-not-real" not in result.output


def test_schema_lookup_with_a_provider_embedder_runs_from_the_command_line(
    no_provider_configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block declares the tables service only; the embedder ("openai:<provider>") is the
    process's, made through its model gateway when first needed."""
    from support.models import scripted_server

    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(no_provider_configured / "data"))
    flow = no_provider_configured / "lookup.json"
    flow.write_text(
        json.dumps(
            flow_doc(
                [
                    node("q", "text_input", name="question"),
                    node("look", "schema_lookup", embedder="openai:local::64", top_tables=1),
                    node("out", "output", name="tables"),
                ],
                [edge("q", "look.question"), edge("look.tables", "out")],
            )
        )
    )
    hashed = {"name": "hashed", "endpoint": "embeddings", "reply": ""}  # hashed word vectors
    with scripted_server({"rules": [hashed]}) as server:
        (no_provider_configured / "dagwright.toml").write_text(
            f'[providers.local]\nbase_url = "{server.base_url}"\ndefault_model = "scripted"\n'
        )
        result = runner.invoke(app, ["run", str(flow), "-i", "question=Who earns the most salary?"])
        embedded = [entry for entry in server.stats()["log"] if entry["endpoint"] == "embeddings"]
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("tables: [")
    assert json.loads(result.stdout.removeprefix("tables: ")) == ["payroll.main.salary"]
    assert embedded  # the ranking by meaning went through the configured provider


def test_bad_settings_file_is_reported(no_provider_configured: Path) -> None:
    (no_provider_configured / "dagwright.toml").write_text("[providers.x]\ntimeout = -1\n")
    result = runner.invoke(app, ["run", str(EXAMPLES / "answer_question.json")])
    assert result.exit_code == 2
    assert "dagwright.toml: providers.x.timeout: Input should be greater than 0" in result.stderr


# -- start-up: a command imports what it uses ------------------------------------------------

HEAVY = (
    "fastapi",
    "uvicorn",
    "sqlmodel",
    "sqlalchemy",
    "duckdb",
    "pyarrow",
    "qdrant_client",
    "openai",
    "numpy",
    "networkx",
    "httpx",
    "jsonschema",
    # dagwright's own layers a text flow does not use (blocks import them where called)
    "dagwright.tqa",
    "dagwright.services",
    "dagwright.data",
    "dagwright.store",
    "dagwright.embedding",
    "dagwright.llm.gateway",
    "dagwright.mcp",
    "dagwright.methods",
    "dagwright.api",
    "dagwright.evaluation",
)


def test_running_a_text_flow_imports_no_server_data_or_model_package() -> None:
    code = (
        "import sys\n"
        "from dagwright.cli.main import app\n"
        "try:\n"
        f"    app(['run', {str(EXAMPLES / 'hello.json')!r}, '-i', 'name=Ann'])\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["greeting: Hello, Ann!", "[]"]


def test_help_lists_the_commands_loaded_on_use() -> None:
    from dagwright.cli.main import LAZY_COMMANDS

    listed = runner.invoke(app, ["--help"])
    assert listed.exit_code == 0, listed.output
    for name in ("run", "validate", "blocks", "demo", *LAZY_COMMANDS):
        assert f" {name} " in listed.output
    data = runner.invoke(app, ["data", "--help"])
    assert data.exit_code == 0
    assert "sources" in data.output
    serve = runner.invoke(app, ["serve", "--help"])
    assert serve.exit_code == 0
    assert "--port" in serve.output
    unknown = runner.invoke(app, ["nonsense"])
    assert unknown.exit_code == 2


def test_services_are_built_when_a_block_first_asks() -> None:
    from contextlib import ExitStack

    from dagwright.registry import (
        MODELS,
        SECRETS,
        TABLES,
        BlockServices,
        MissingServiceError,
        NodeContext,
    )
    from dagwright.secrets import EnvSecrets
    from dagwright.tabular import TableAccess

    built: list[str] = []

    with ExitStack() as stack:

        def tables() -> TableAccess:
            built.append("tables")
            access = TableAccess(lambda: None)  # type: ignore[arg-type,return-value]
            stack.callback(lambda: built.append("closed"))
            return access

        services = BlockServices({SECRETS: EnvSecrets()})
        services.provide_lazily(TABLES, tables)
        context = NodeContext("run", "node", lambda *_: None, lambda *_: None, services)
        assert built == []
        assert services.built() == ["secrets"]
        first = context.service(TABLES)
        assert context.service(TABLES) is first
        assert built == ["tables"]
        with pytest.raises(MissingServiceError):
            context.service(MODELS)
    assert built == ["tables", "closed"]
