"""The method comparison, scripted: AutoTQA against Chain-of-Table on WikiTQ and TabFact
samples, and against MAC-SQL on Spider, each run through the evaluation harness of a live
server (datasets imported as sources, every example a recorded run, the official metric) and
compared with `GET /evaluations/compare`. The model is dagwright's SCRIPTED server: the
accuracies are the script's, not a model's; what this measures is the COST STRUCTURE —
model calls, tokens and latency per question — which the report prints (docs/methods.md)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import Script
from dagwright.methods.publish import METHOD_FLOWS, load_method_flow
from evaluation.conftest import FIXTURES
from evaluation.test_autotqa_eval import (
    BASE_RULES,
    FALLBACK_RULES,
    _autotqa_app,
    _qualified,
    _sample,
)
from evaluation.test_autotqa_eval import _rules as autotqa_rules
from support.server import Api, LiveServer, live_server
from support.tqa import provider_settings

SAMPLE = 3
# kind -> (dataset name, pack file, method app, its output, the app's inputs from example fields)
PACKS: dict[str, tuple[str, str, str, str, dict[str, str] | None]] = {
    "wikitq": ("wq", "wikitq/seen_tagged.tsv", "chain-of-table-wikitq", "answer", None),
    "tabfact": ("tf", "tabfact/dev.jsonl", "chain-of-table-tabfact", "answer", None),
    "spider": (
        "sp",
        "spider/train_queries.csv",
        "mac-sql-spider",
        "sql",
        {"question": "question", "database": "table"},
    ),
}
AUTOTQA_OUTPUT = {"wikitq": "answer", "tabfact": "answer", "spider": "sql"}


def _method_rules(kind: str, examples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SCRIPTED outputs for the method on each example; the first example gets a wrong answer,
    as AutoTQA's script does, so both score the same and only the costs differ."""
    rules: list[dict[str, Any]] = []
    for number, example in enumerate(examples):
        q = re.escape(example["question"])
        gold = example["gold"]
        right = number != 0
        if kind == "spider":
            source = example["tables"][0]
            sql = _qualified(gold["sql"], source) if right else "SELECT 1 AS one"
            reply = (
                f"Sub question 1: {example['question']}\nSQL\n```sql\n{sql}\n```\nQuestion Solved."
            )
            rules.append(
                {
                    "name": f"decompose-{number}",
                    "match": rf"(?s)^Given a .*【Question】\n{q}\n",
                    "reply": reply,
                }
            )
            continue
        if kind == "wikitq":
            answer = gold["targetValue"].split("|")[0] if right else "[scripted] wrong"
        else:
            answer = (
                ("YES" if gold["label"] == 1 else "NO")
                if right
                else "NO"
                if gold["label"] == 1
                else "YES"
            )
        rules += [
            {
                "name": f"plan-{kind}-{number}",
                "match": rf"(?s)Statement: {q}\nThe next operation must be",
                "replies": ["f_select_row(row 1) -> <END>", "<END>"],
            },
            {
                "name": f"rows-{kind}-{number}",
                "match": rf"statement : {q}\nexplain :$",
                "reply": {"choices": ["The answer is : f_row([row 1])"], "logprobs": [-0.1]},
            },
            {"name": f"query-{kind}-{number}", "match": rf"{q}\nThe answer is:$", "reply": answer},
        ]
    return rules


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("method-comparison")
    packs = data_dir / "sources" / "packs"
    shutil.copytree(FIXTURES, packs)
    scratch = tmp_path_factory.mktemp("scratch")
    rules = list(BASE_RULES)
    for kind, (name, relative, _app, _output, _inputs) in PACKS.items():
        examples = _sample(kind, name, packs / relative, scratch)[:SAMPLE]
        rules += autotqa_rules(kind, examples) + _method_rules(kind, examples)
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


def _evaluate(
    api: Api, app: str, dataset: str, output: str, inputs: dict[str, str] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"app": app, "dataset": dataset, "output": output, "wait": True}
    if inputs:
        body["inputs"] = inputs
    response = api.http.post("/api/v1/evaluations", json=body)
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    assert report["errors"] == 0, report["failures"]
    return report


def _per_question(api: Api, evaluation_id: str) -> list[dict[str, Any]]:
    """Model calls, tokens and latency of each question, from its recorded run."""
    response = api.http.get(f"/api/v1/evaluations/{evaluation_id}/results?limit=200")
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["total"] == len(page["items"])  # every question on one page
    rows = []
    for result in page["items"]:
        run = api.get_run(result["run_id"])
        usage = run["usage"]
        calls, tokens = usage["calls"], usage["prompt_tokens"] + usage["completion_tokens"]
        # AutoTQA's agents run as apps of a conversation: their calls are its turns'.
        found = re.search(r'"conversation_id": "([^"]+)"', json.dumps(run))
        if found is not None:
            conversation = api.http.get(f"/api/v1/tqa/conversations/{found.group(1)}")
            assert conversation.status_code == 200, conversation.text
            usages = [
                usage
                for turn in conversation.json()["turns"]
                for usage in (turn.get("usage"), (turn.get("scheduler") or {}).get("usage"))
                if usage
            ]
            calls += sum(u.get("calls") or 1 for u in usages)
            tokens += sum(u.get("total_tokens") or 0 for u in usages)
        rows.append(
            {
                "id": result["id"],
                "calls": calls,
                "tokens": tokens,
                "latency": result["latency"],
                "correct": result["correct"],
            }
        )
    return rows


def _line(label: str, rows: list[dict[str, Any]], score: float) -> str:
    n = len(rows)
    calls = sum(r["calls"] for r in rows) / n
    tokens = sum(r["tokens"] for r in rows) / n
    latency = sum(r["latency"] or 0.0 for r in rows) / n
    return (
        f"{label:<28} score {score:.3f}  calls/q {calls:5.1f}  tokens/q {tokens:8.0f}  "
        f"latency/q {latency:6.3f}s"
    )


def test_autotqa_against_the_methods_cost_per_question(server: LiveServer) -> None:
    api = server.api
    _autotqa_app(api)
    for slug, file in METHOD_FLOWS.items():
        if slug in {p[2] for p in PACKS.values()}:
            api.published_app(slug, load_method_flow(file))
    packs = server.settings.data_dir / "sources" / "packs"
    lines = ["SCRIPTED model: cost structure only; the scores are the script's, not a model's."]
    for kind, (name, relative, app, output, inputs) in PACKS.items():
        response = api.http.post(
            "/api/v1/datasets",
            json={"name": name, "kind": kind, "path": str(packs / relative), "limit": SAMPLE},
        )
        assert response.status_code == 201, response.text
        base = _evaluate(api, "autotqa", name, AUTOTQA_OUTPUT[kind], None)
        method = _evaluate(api, app, name, output, inputs)
        compared = api.http.get(
            "/api/v1/evaluations/compare",
            params={"a": base["evaluation"]["id"], "b": method["evaluation"]["id"]},
        )
        assert compared.status_code == 200, compared.text
        result = compared.json()
        # The scripts answer the same examples right: the comparison shows no difference.
        assert result["difference"] == pytest.approx(0.0), result
        base_rows = _per_question(api, base["evaluation"]["id"])
        method_rows = _per_question(api, method["evaluation"]["id"])
        assert len(base_rows) == len(method_rows) == SAMPLE
        if kind == "spider":
            # No pruning on these small schemas, the SQL runs: the Decomposer's call alone.
            assert [r["calls"] for r in method_rows] == [1] * SAMPLE
        else:
            # DynamicPlan, GenerateArgs for f_select_row, DynamicPlan again, Query.
            assert [r["calls"] for r in method_rows] == [4] * SAMPLE
        assert all(r["tokens"] > 0 for r in base_rows + method_rows)
        lines.append(f"{kind} ({SAMPLE} questions)")
        lines.append(_line("  AutoTQA", base_rows, base["value"]))
        lines.append(_line(f"  {app}", method_rows, method["value"]))
    print("\n".join(lines))
