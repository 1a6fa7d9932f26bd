"""The AutoTQA app evaluated over a sample of each pack, with the scripted model playing the
agents (every answer below is SCRIPTED, not a model's), through a live server: datasets
imported (tables registered as sources), the app run on each example as a recorded run whose
conversation queries the example's table, and the official metric scoring the answers.

The script is written for the sample: per question, the text-to-SQL tool's query on the
example's table and the Critic's answer (the gold, except for one example per pack), so the
expected scores are known exactly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import Script
from support.server import Api, LiveServer, live_server
from support.tqa import provider_settings

from .conftest import FIXTURES

SAMPLE = 3
BASE_RULES: list[dict[str, Any]] = [
    {
        "name": "planner",
        "match": r"^\[autotqa:planner\]",
        "reply": "[scripted] 1. Query the table. 2. Report.",
    },
    {
        "name": "engineer-report-rows",
        "match": r"(?s)^\[autotqa:engineer\].*\n[1-9]\d* row\(s\):",
        "reply": '{"scripted": true, "action": "report", "report": "[scripted] see the rows"}',
    },
    {
        "name": "engineer-ask-sql",
        "match": r"^\[autotqa:engineer\]",
        "reply": '{"scripted": true, "action": "tool", "tool": "text_to_sql", "input": {}}',
    },
]
FALLBACK_RULES: list[dict[str, Any]] = [
    {
        "name": "critic-gaps",
        "match": r"^\[autotqa:critic\]",
        "reply": '{"scripted": true, "complete": false, "gaps": ["[scripted] no rule"]}',
    },
]


def _question(example: dict[str, Any]) -> str:
    """The question as the app gives it to AutoTQA (the table named)."""
    return f"{example['question']} [table {example['tables'][0]}]"


def _rules(kind: str, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rules = []
    for number, example in enumerate(examples):
        question = re.escape(_question(example))
        gold = example["gold"]
        right = number != 0  # the first example of each pack gets a wrong answer
        if kind == "spider":
            sql = _qualified(gold["sql"], example["tables"][0]) if right else "SELECT 1 AS one"
        else:
            sql = f"SELECT * FROM {example['tables'][0]} LIMIT 1"
        if kind == "wikitq":
            answer: Any = gold["targetValue"].split("|") if right else "[scripted] wrong"
        elif kind == "tabfact":
            answer = ("entailed" if gold["label"] == 1 else "refuted") if right else "maybe"
        else:
            answer = gold.get("answer", "[scripted] see the SQL") if right else "[scripted] wrong"
        rules.append(
            {
                "name": f"sql-{kind}-{number}",
                "match": rf"(?s)^\[autotqa:text_to_sql\].*Question: {question}",
                "reply": sql,
            }
        )
        critic = {"scripted": True, "complete": True, "answer": answer, "summary": "TERMINATE"}
        rules.append(
            {
                "name": f"critic-{kind}-{number}",
                "match": rf"(?s)^\[autotqa:critic\]\nQuestion: {question}",
                "reply": json.dumps(critic),
            }
        )
    return rules


def _qualified(sql: str, source: str) -> str:
    """The gold SQL (MySQL) as the engine runs it: tables under the database's source."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="mysql")
    for table in tree.find_all(exp.Table):
        table.set("db", exp.to_identifier(source))
    return tree.sql(dialect="duckdb")


PACKS = {
    "wikitq": ("wq", "wikitq/seen_tagged.tsv", "answer", "accuracy"),
    "tabfact": ("tf", "tabfact/dev.jsonl", "answer", "accuracy"),
    "fetaqa": ("feta", "fetaqa/dev.jsonl", "answer", "rougeL"),
    "spider": ("sp", "spider/train_queries.csv", "sql", "accuracy"),
}


def _sample(kind: str, name: str, path: Path, scratch: Path) -> list[dict[str, Any]]:
    """The examples the import will make (same reader, same table references)."""
    from dagwright.evaluation.datasets import read_dataset
    from dagwright.services.datasets import DatasetService

    source = None if kind == "spider" else f"eval_{name}"
    examples = []
    for parsed in read_dataset(kind, path, scratch / name):
        refs = DatasetService._table_refs(name, kind, source, parsed.tables)
        examples.append({"question": parsed.question, "gold": parsed.gold, "tables": refs})
        if len(examples) == SAMPLE:
            break
    return examples


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("autotqa-eval")
    packs = data_dir / "sources" / "packs"
    shutil.copytree(FIXTURES, packs)
    rules = list(BASE_RULES)
    scratch = tmp_path_factory.mktemp("scratch")
    for kind, (name, relative, _, _) in PACKS.items():
        rules += _rules(kind, _sample(kind, name, packs / relative, scratch))
    script = Script.model_validate(
        {
            "models": ["scripted"],
            "default_reply": '{"scripted": true, "complete": false, "gaps": ["none fitted"]}',
            "rules": rules + FALLBACK_RULES,
        }
    )
    model = ScriptedServer(script).start()
    try:
        (data_dir / "dagwright.toml").write_text(provider_settings(model.base_url))
        with live_server("sqlite", data_dir) as running:
            yield running
    finally:
        model.stop()


def _autotqa_app(api: Api) -> None:
    nodes = [
        {"id": "question", "block": "text_input", "config": {"name": "question"}},
        {"id": "table", "block": "text_input", "config": {"name": "table"}},
        {
            "id": "ask_text",
            "block": "template",
            "config": {"template": "{{ question }} [table {{ table }}]"},
        },
        {"id": "ask", "block": "autotqa_ask", "config": {"max_rounds": 12}},
        {"id": "first_sql", "block": "json_path", "config": {"path": "$[0].sql", "first": True}},
        {"id": "answer", "block": "output", "config": {"name": "answer"}},
        {"id": "sql", "block": "output", "config": {"name": "sql"}},
    ]
    edges = [
        ("question", "output", "ask_text", "question"),
        ("table", "output", "ask_text", "table"),
        ("ask_text", "output", "ask", "question"),
        ("ask", "answer", "answer", "value"),
        ("ask", "evidence", "first_sql", "data"),
        ("first_sql", "output", "sql", "value"),
    ]
    flow = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "autotqa",
        "nodes": nodes,
        "edges": [
            {"source": {"node": a, "port": ap}, "target": {"node": b, "port": bp}}
            for a, ap, b, bp in edges
        ],
    }
    api.create_app("autotqa")
    api.publish("autotqa", api.save("autotqa", flow)["id"])


def _conversations(api: Api) -> dict[str, dict[str, Any]]:
    """Every AutoTQA conversation, by id, with what its agents spent."""
    found = api.http.get("/api/v1/tqa/conversations", params={"limit": 200}).json()
    assert found["total"] <= 200
    return {c["id"]: c for c in found["items"]}


def _spent(conversations: list[dict[str, Any]]) -> tuple[int, float]:
    usage = [c["usage"] for c in conversations]
    return sum(u["total_tokens"] for u in usage), sum(u["cost"] for u in usage)


def test_autotqa_over_a_sample_of_each_pack(server: LiveServer) -> None:
    api = server.api
    _autotqa_app(api)
    packs = server.settings.data_dir / "sources" / "packs"
    for kind, (name, relative, output, measure) in PACKS.items():
        response = api.http.post(
            "/api/v1/datasets",
            json={"name": name, "kind": kind, "path": str(packs / relative), "limit": SAMPLE},
        )
        assert response.status_code == 201, response.text
        before = _conversations(api)
        response = api.http.post(
            "/api/v1/evaluations",
            json={"app": "autotqa", "dataset": name, "output": output, "wait": True},
        )
        assert response.status_code == 200, response.text
        report = response.json()
        assert report["errors"] == 0, report["failures"]
        assert report["evaluation"]["status"] == "completed"
        # The agents' tokens are the evaluation's (the report said 0: the agents' runs are
        # not the app run's children).
        new = [c for key, c in _conversations(api).items() if key not in before]
        assert len(new) == SAMPLE
        tokens, cost = _spent(new)
        assert tokens > 0
        assert report["cost"]["tokens"] == tokens, (kind, report["cost"])
        assert report["cost"]["cost"] == pytest.approx(cost)
        results = api.http.get(f"/api/v1/evaluations/{report['evaluation']['id']}/results")
        assert all(r["tokens"] > 0 for r in results.json()["items"])
        run_id = report["failures"][0]["run_id"]
        assert api.get_run(run_id)["status"] == "succeeded"  # each example is a recorded run
        if measure == "accuracy":
            assert report["aggregate"]["accuracy"] == pytest.approx(2 / 3), (kind, report)
            assert [f["id"] for f in report["failures"]] == [report["failures"][0]["id"]]
        else:  # FeTaQA: two answers are the gold (ROUGE-L 1), the first is not
            assert 2 / 3 <= report["aggregate"]["rougeL"] < 1, report["aggregate"]
            assert report["aggregate"]["sacrebleu"] < 100


def test_autotqa_eval_run_on_the_command_line_counts_the_agents(server: LiveServer) -> None:
    """`dagwright eval run` in a process of its own over the server's data directory (the
    same database, the same scripted model): its report counts the agents' tokens too."""
    api = server.api
    if api.http.get("/api/v1/apps/autotqa").status_code == 404:
        _autotqa_app(api)
    packs = server.settings.data_dir / "sources" / "packs"
    name, relative, _, _ = PACKS["wikitq"]
    if api.http.get(f"/api/v1/datasets/{name}").status_code == 404:
        response = api.http.post(
            "/api/v1/datasets",
            json={"name": name, "kind": "wikitq", "path": str(packs / relative), "limit": SAMPLE},
        )
        assert response.status_code == 201, response.text
    before = _conversations(api)
    environment = {**os.environ, "DAGWRIGHT_DATA_DIR": str(server.settings.data_dir)}
    if server.settings.database_url:
        environment["DAGWRIGHT_DATABASE_URL"] = server.settings.database_url
    command = ["eval", "run", "autotqa", "--dataset", name, "--fresh", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "dagwright", *command],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=server.settings.data_dir,  # its dagwright.toml: the scripted model
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout[done.stdout.index("{") :])
    new = [c for key, c in _conversations(api).items() if key not in before]
    assert len(new) == SAMPLE
    tokens, cost = _spent(new)
    assert tokens > 0
    assert report["cost"]["tokens"] == tokens
    assert report["cost"]["cost"] == pytest.approx(cost)
