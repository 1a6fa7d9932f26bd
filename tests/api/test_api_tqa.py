"""AutoTQA over real HTTP, on SQLite and PostgreSQL, with the scripted model playing the
agents (tests/support/tqa_script.yaml: scripted answers, not a model's). The tables are the
demo's Figure 1 split over two systems: hr (SQLite) and payroll (CSV)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from support.database import DATABASES
from support.server import Api, LiveServer, edge, flow, node, parse_sse
from support.tqa import HELD_QUESTION, tqa_server

TOM = "What is the year-end bonus for Tom?"


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with tqa_server(request.param, tmp_path_factory.mktemp("tqa")) as running:
        yield running


def ask(api: Api, question: str, **options: Any) -> dict[str, Any]:
    response = api.http.post("/api/v1/tqa/ask", json={"question": question, **options})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def agents(conversation: dict[str, Any]) -> list[str]:
    return [turn["agent"] for turn in conversation["turns"]]


def test_figure_1_question_is_answered_by_a_join_across_two_systems(api: Api) -> None:
    conversation = ask(api, TOM)
    assert conversation["status"] == "completed", conversation
    assert agents(conversation) == ["User", "Planner", "Engineer", "Executor", "Engineer", "Critic"]
    answer = conversation["answer"]
    assert answer["form"] == "value"
    assert answer["value"] == 1569
    assert answer["grounded"] is True
    [evidence] = answer["evidence"]
    assert "JOIN payroll.main.salary" in evidence["sql"]
    assert evidence["rows"] == [{"Bonus": 1569}]
    executor = conversation["turns"][3]
    assert executor["tool_call"]["tool"] == "text_to_sql"
    assert executor["tool_call"]["rows"] == [{"Bonus": 1569}]
    assert executor["scheduler"]["by"] == "fsm"
    assert "asked for a tool" in executor["scheduler"]["reason"]
    # every model turn says what it cost; the scripted model answered
    assert all(
        t["usage"]["total_tokens"] > 0
        for t in conversation["turns"][1:]
        if t["agent"] != "Executor" or t["usage"]
    )
    assert conversation["usage"]["total_tokens"] > 0


def test_a_wrong_column_is_retried_with_the_error_and_refined(api: Api) -> None:
    conversation = ask(api, "What is the bonus of Lucy?", dataset="figure1")
    assert conversation["status"] == "completed", conversation
    assert agents(conversation) == [
        "User",
        "Planner",
        "Engineer",
        "Executor",
        "Engineer",
        "Executor",
        "Engineer",
        "Critic",
    ]
    failed, refined = (t["tool_call"] for t in conversation["turns"] if t["tool_call"])
    assert failed["error"]["code"] == "query_failed"
    assert "YearEndBonus" in failed["error"]["message"]
    # the hint checked against the data: the columns the table really has
    assert any("payroll.main.salary has the columns: ID, Bonus" in h for h in failed["hints"])
    # the Executor's second call carried the first one's error back to the tool's model
    assert "query_failed" in refined["input"]["feedback"]
    assert refined["error"] is None
    assert refined["rows"] == [{"Bonus": 2100}]
    assert conversation["answer"]["value"] == 2100
    assert conversation["answer"]["evidence"][0]["sql"] == refined["sql"]


def test_an_empty_result_gets_a_case_hint_checked_against_the_data(api: Api) -> None:
    conversation = ask(api, "Which department does tom work in?")
    assert conversation["status"] == "completed", conversation
    empty, fixed = (t["tool_call"] for t in conversation["turns"] if t["tool_call"])
    assert "e.Name = 'tom'" in empty["sql"]
    assert empty["row_count"] == 0
    assert empty["error"] is None
    assert (
        "values are case-sensitive: Name in hr.main.Employee has 'Tom', not 'tom'" in empty["hints"]
    )
    assert "has 'Tom', not 'tom'" in fixed["input"]["hints"]
    assert fixed["rows"] == [{"DepName": "FINANCE"}]
    assert conversation["answer"] | {"evidence": None} == conversation["answer"] | {
        "form": "value",
        "value": "FINANCE",
        "grounded": True,
        "evidence": None,
    }


@pytest.mark.parametrize(
    ("scheduler", "order"),
    [
        ("fsm", ["Planner", "Engineer", "Executor", "Engineer", "Executor", "Engineer", "Critic"]),
        ("rolling", ["Planner", "Engineer", "Executor", "Critic"] * 2),
        ("llm", ["Planner", "Engineer", "Executor", "Engineer", "Executor", "Critic"]),
    ],
)
def test_each_scheduler_has_its_own_turn_order(api: Api, scheduler: str, order: list[str]) -> None:
    conversation = ask(api, "What is the bonus of Lucy?", scheduler=scheduler)
    assert conversation["status"] == "completed", conversation
    assert agents(conversation) == ["User", *order]
    assert conversation["answer"]["value"] == 2100
    choices = [t["scheduler"] for t in conversation["turns"][1:]]
    assert {c["by"] for c in choices} == {scheduler}
    if scheduler == "llm":
        # the model chose (its answers and their tokens recorded), except the first turn
        assert all(c["answer"] and c["usage"]["total_tokens"] > 0 for c in choices[1:])
        assert not any(c["fallback"] for c in choices)


def test_an_llm_scheduler_answer_naming_no_agent_falls_back_to_the_fsm(api: Api) -> None:
    conversation = ask(api, TOM, scheduler="llm")
    assert conversation["status"] == "completed", conversation
    after_planner = conversation["turns"][2]["scheduler"]
    assert after_planner["fallback"] is True
    assert after_planner["agent"] == "Engineer"
    assert "I cannot decide" in after_planner["answer"]
    assert "could not read an agent" in after_planner["reason"]
    assert conversation["answer"]["value"] == 1569


def test_a_critic_that_never_terminates_ends_at_the_round_limit(api: Api) -> None:
    conversation = ask(api, "Count the employees forever", max_rounds=7)
    assert conversation["status"] == "round_limit"
    assert conversation["answer"] is None  # never an answer
    assert conversation["error"]["code"] == "round_limit"
    assert conversation["rounds"] == 7
    assert len(conversation["turns"]) == 8
    stored = api.http.get(f"/api/v1/tqa/conversations/{conversation['id']}").json()
    assert stored["status"] == "round_limit"
    assert len(stored["turns"]) == 8


def test_a_question_over_tables_that_do_not_exist_is_explained(api: Api) -> None:
    conversation = ask(api, "What is the revenue of the moon base?")
    assert conversation["status"] == "completed", conversation
    [call] = [t["tool_call"] for t in conversation["turns"] if t["tool_call"]]
    assert call["error"] is not None
    assert any("there is no table sales.main.moon_base" in h for h in call["hints"]), call
    answer = conversation["answer"]
    assert answer["form"] == "text"
    assert "no table" in answer["value"]
    assert answer["grounded"] is False
    assert answer["evidence"] == []


def test_agent_outputs_that_cannot_be_parsed_are_recorded_turns(api: Api) -> None:
    conversation = ask(api, "Dance for me", max_rounds=5)
    assert conversation["status"] == "round_limit"
    errors = {t["agent"]: t["error"] for t in conversation["turns"] if t["error"]}
    assert errors["Engineer"]["code"] == "agent_output"
    assert "'tool' or 'report'" in errors["Engineer"]["message"]
    assert errors["Critic"]["code"] == "model_output"  # chat_json could not parse it


def test_a_tool_that_times_out_is_bounded_and_recorded(api: Api) -> None:
    slow = flow(
        [
            node("value", "text_input", name="value"),
            node("slow", "slow_echo", seconds=30),
            node("out", "output", name="value"),
        ],
        [edge("value", "slow"), edge("slow", "out")],
    )
    api.published_app("slow-tool", slow)
    put = api.http.put(
        "/api/v1/tqa/tools/slow_tool", json={"app": "slow-tool", "description": "slow"}
    )
    assert put.status_code == 200, put.text
    conversation = ask(api, "Use the slow tool", max_rounds=4, tool_timeout_s=0.5)
    assert conversation["status"] == "round_limit"
    [call] = [t["tool_call"] for t in conversation["turns"] if t["tool_call"]]
    assert call["error"]["code"] == "tool_timeout"
    assert conversation["turns"][3]["duration"] < 5
    run = api.get_run(call["run_id"])
    assert run["status"] == "cancelled"
    assert api.http.delete("/api/v1/tqa/tools/slow_tool").status_code == 204


def test_a_predefined_format_is_filled(api: Api) -> None:
    conversation = ask(api, TOM, answer_format="Year-end bonus of {{ name }}: {{ bonus }}")
    answer = conversation["answer"]
    assert answer["form"] == "template"
    assert answer["text"] == "Year-end bonus of Tom: 1569"
    assert answer["evidence"][0]["rows"] == [{"Bonus": 1569}]


def test_streamed_turns_then_the_result(api: Api) -> None:
    with api.http.stream(
        "POST", "/api/v1/tqa/ask", json={"question": TOM, "stream": True}
    ) as response:
        assert response.status_code == 200
        events = list(parse_sse(response.iter_lines()))
    kinds = [e.event for e in events]
    assert kinds[0] == "conversation"
    assert kinds[-1] == "result"
    turns = [e.data for e in events if e.event == "turn"]
    assert [t["agent"] for t in turns] == [
        "User",
        "Planner",
        "Engineer",
        "Executor",
        "Engineer",
        "Critic",
    ]
    assert turns[3]["tool_call"]["sql"]
    assert turns[3]["scheduler"]["agent"] == "Executor"
    assert events[-1].data["answer"]["value"] == 1569
    stored = api.http.get(f"/api/v1/tqa/conversations/{events[0].data['id']}").json()
    assert [t["agent"] for t in stored["turns"]] == [t["agent"] for t in turns]


def test_async_ask_is_polled_and_listed(api: Api) -> None:
    response = api.http.post("/api/v1/tqa/ask", json={"question": TOM, "async": True})
    assert response.status_code == 202, response.text
    poll = response.json()["poll"]
    deadline = time.monotonic() + 20
    while (body := api.http.get(poll).json())["status"] == "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert body["status"] == "completed"
    assert body["answer"]["value"] == 1569
    listed = api.http.get("/api/v1/tqa/conversations", params={"status": "completed"}).json()
    assert body["id"] in [c["id"] for c in listed["items"]]
    assert "turns" not in listed["items"][0]


def test_a_background_conversation_is_cancelled_through_the_api(api: Api) -> None:
    response = api.http.post(
        "/api/v1/tqa/ask",
        # Its Critic takes 3 s a turn: the cancel ends it, not its 100 rounds.
        json={"question": HELD_QUESTION, "async": True, "max_rounds": 100},
    )
    assert response.status_code == 202, response.text
    poll = response.json()["poll"]
    cancelled = api.http.post(f"{poll}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    deadline = time.monotonic() + 20
    while (body := api.http.get(poll).json())["status"] == "running":
        assert time.monotonic() < deadline, body
        time.sleep(0.05)
    assert body["status"] == "failed"
    assert body["error"]["code"] == "cancelled"
    assert body["cancel_requested_at"] is not None
    missing = api.http.post("/api/v1/tqa/conversations/nope/cancel")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "conversation_not_found"


def test_hints_are_stored_per_dataset_and_reach_the_engineer(api: Api) -> None:
    added = api.http.post(
        "/api/v1/tqa/hints", json={"dataset": "payroll-ds", "text": "Bonus is in dollars"}
    )
    assert added.status_code == 201, added.text
    hint = added.json()
    changed = api.http.put(
        f"/api/v1/tqa/hints/{hint['id']}", json={"text": "Bonus is in US dollars"}
    )
    assert changed.json()["text"] == "Bonus is in US dollars"
    assert [
        h["text"]
        for h in api.http.get("/api/v1/tqa/hints", params={"dataset": "payroll-ds"}).json()
    ] == ["Bonus is in US dollars"]
    conversation = ask(api, "What is the bonus of Lucy?", dataset="payroll-ds")
    failed = next(t["tool_call"] for t in conversation["turns"] if t["tool_call"])
    assert "Bonus is in US dollars" in failed["hints"]
    run = api.get_run(conversation["turns"][4]["run_id"])  # the Engineer's retry
    assert "Bonus is in US dollars" in run["inputs"]["hints"]
    assert api.http.delete(f"/api/v1/tqa/hints/{hint['id']}").status_code == 204
    assert (
        api.http.delete(f"/api/v1/tqa/hints/{hint['id']}").json()["error"]["code"]
        == "hint_not_found"
    )
    bad = api.http.post("/api/v1/tqa/hints", json={"dataset": "bad name!", "text": "x"})
    assert bad.json()["error"]["code"] == "invalid_hint"


def test_tools_registry_and_published_agents(api: Api) -> None:
    assert api.http.post("/api/v1/tqa/publish", json={}).status_code == 200
    tools = {t["name"]: t for t in api.http.get("/api/v1/tqa/tools").json()}
    assert tools["text_to_sql"]["app"] == "autotqa-text-to-sql"
    missing = api.http.put("/api/v1/tqa/tools/nope", json={"app": "no-such-app"})
    assert missing.status_code == 404
    again = api.http.post("/api/v1/tqa/publish", json={}).json()
    assert {a["app"] for a in again} >= {
        "autotqa-planner",
        "autotqa-engineer",
        "autotqa-critic",
        "autotqa-text-to-sql",
    }
    assert not any(a["changed"] for a in again)  # unchanged flows: no new versions
    app = api.http.get("/api/v1/apps/autotqa-critic").json()
    assert app["published_version_id"]


def test_the_scripted_model_is_said_to_have_answered(api: Api) -> None:
    conversation = ask(api, TOM)
    assert conversation["usage"]["scripted"] is True
    assert all(
        t["usage"]["scripted"] for t in conversation["turns"] if t["agent"] in ("Planner", "Critic")
    )
    run = api.get_run(conversation["turns"][1]["run_id"])  # each agent turn is a recorded run
    assert run["mode"] == "tqa"
    assert run["status"] == "succeeded"


def test_autotqa_is_publishable_as_an_app(api: Api) -> None:
    asker = flow(
        [
            node("question", "text_input", name="question"),
            node("ask", "autotqa_ask", scheduler="fsm", max_rounds=8),
            node("answer", "output", name="answer"),
            node("status", "output", name="status"),
            node("conversation", "output", name="conversation"),
        ],
        [
            edge("question", "ask.question"),
            edge("ask.answer", "answer"),
            edge("ask.status", "status"),
            edge("ask.conversation_id", "conversation"),
        ],
    )
    key = api.published_app("tom-asker", asker)
    response = api.run("tom-asker", key, {"question": TOM})
    assert response.status_code == 200, response.text
    outputs = response.json()["outputs"]
    assert outputs == outputs | {"answer": 1569, "status": "completed"}
    stored = api.http.get(f"/api/v1/tqa/conversations/{outputs['conversation']}").json()
    assert stored["answer"]["evidence"][0]["rows"] == [{"Bonus": 1569}]


async def test_agents_called_by_url_with_api_keys(api: Api) -> None:
    from dagwright.tqa.agents import HttpAgentCaller
    from dagwright.tqa.conversation import AskRequest
    from dagwright.tqa.orchestrator import Orchestrator
    from dagwright.tqa.tools import Tool

    api.http.post("/api/v1/tqa/publish", json={})
    slugs = ["autotqa-planner", "autotqa-engineer", "autotqa-critic", "autotqa-executor"]
    caller = HttpAgentCaller(api.base_url, {slug: api.new_key(slug) for slug in slugs})
    registered = api.http.get("/api/v1/tqa/tools").json()
    tools = [
        Tool(t["name"], t["app"], t["description"], datetime.now(UTC), datetime.now(UTC), t["role"])
        for t in registered
        if t["name"] == "text_to_sql"
    ]
    try:
        done = await Orchestrator(caller, tools=lambda: tools).ask(AskRequest(question=TOM))
    finally:
        await caller.aclose()
    assert done.status == "completed"
    assert done.answer is not None
    assert done.answer["value"] == 1569
    assert [t.agent for t in done.turns] == [
        "User",
        "Planner",
        "Engineer",
        "Executor",
        "Engineer",
        "Critic",
    ]
    assert all(t.run_id for t in done.turns[1:])


def test_python_on_the_rows_of_a_query_is_a_tool(api: Api) -> None:
    conversation = ask(api, "What is the total bonus of all employees?")
    assert conversation["status"] == "completed", conversation
    [call] = [t["tool_call"] for t in conversation["turns"] if t["tool_call"]]
    assert call["tool"] == "python_on_tables"
    assert call["outputs"]["result"] == 3669
    assert call["rows"] == [{"Bonus": 2100}, {"Bonus": 1569}]
    answer = conversation["answer"]
    assert answer["value"] == 3669
    assert answer["grounded"] is True  # the program's result is evidence too
    assert answer["evidence"][0]["outputs"]["result"] == 3669


def test_a_failing_program_is_retried_with_its_error(api: Api) -> None:
    conversation = ask(api, "What is the average bonus?")
    assert conversation["status"] == "completed", conversation
    failed, fixed = (t["tool_call"] for t in conversation["turns"] if t["tool_call"])
    assert failed["error"]["code"] == "python_failed"
    assert "bonus" in failed["error"]["message"]
    assert fixed["error"] is None
    assert fixed["outputs"]["result"] == 1834.5
    assert conversation["answer"]["value"] == 1834.5


def test_bad_requests_are_refused_with_their_reason(api: Api) -> None:
    for body in (
        {"question": TOM, "scheduler": "random"},
        {"question": TOM, "max_rounds": 0},
        {"question": ""},
        {"question": TOM, "unknown": 1},
        {"question": TOM, "dataset": "bad name!"},
    ):
        response = api.http.post("/api/v1/tqa/ask", json=body)
        assert response.status_code == 422, body
        assert "error" in response.json()
    missing = api.http.get("/api/v1/tqa/conversations/nope")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "conversation_not_found"
    api.http.post("/api/v1/tqa/publish", json={})
    bad_tool = api.http.put("/api/v1/tqa/tools/Bad-Name", json={"app": "autotqa-critic"})
    assert bad_tool.json()["error"]["code"] == "invalid_tool"


def test_the_cli_asks_a_running_server_and_streams_its_turns(api: Api) -> None:
    from typer.testing import CliRunner

    from dagwright.cli.main import app

    result = CliRunner().invoke(app, ["tqa", "ask", TOM, "--server", api.base_url])
    assert result.exit_code == 0, result.output
    assert "[3] Executor  <- fsm: Engineer -> Executor: it asked for a tool" in result.output
    assert "1569" in result.output
    assert "scripted model played the agents" in result.output
    limited = CliRunner().invoke(
        app,
        [
            "tqa",
            "ask",
            "Count the employees forever",
            "--max-rounds",
            "2",
            "--server",
            api.base_url,
        ],
    )
    assert limited.exit_code == 1
    assert "no answer: round_limit" in limited.output


def namespace(api: Api, name: str, key: str, examples: list[dict[str, Any]]) -> None:
    created = api.http.post(
        "/api/v1/namespaces",
        json={"name": name, "embedder": "hashing:64", "key_fields": [key], "text_field": key},
    )
    assert created.status_code == 201, created.text
    added = api.http.post(f"/api/v1/namespaces/{name}/examples", json={"examples": examples})
    assert added.status_code == 200, added.text


def test_a_dataset_gives_its_sop_and_examples_to_every_agent_whatever_was_published(
    api: Api,
) -> None:
    lucy = "What is the year-end bonus for Lucy?"
    namespace(api, "fig-planner", "question", [{"question": lucy, "plan": "PLAN-EXAMPLE"}])
    namespace(api, "fig-engineer", "question", [{"question": lucy, "report": "REPORT-EXAMPLE"}])
    namespace(
        api,
        "fig-critic",
        "answer",
        [{"answer": "The query returned the value.", "verdict": "VERDICT-EXAMPLE"}],
    )
    namespace(api, "fig-sql", "question", [{"question": lucy, "sql": "SELECT 'SQL-EXAMPLE'"}])
    created = api.http.post(
        "/api/v1/tqa/datasets",
        json={
            "name": "figure1-profile",
            "sources": ["hr", "payroll"],
            "sop": "SOP v1: ask the tool.",
            "namespaces": {
                "planner": "fig-planner",
                "engineer": "fig-engineer",
                "critic": "fig-critic",
                "text_to_sql": "fig-sql",
            },
            "examples_k": 2,
        },
    )
    assert created.status_code == 201, created.text
    assert created.json()["sop_version"] == 1
    changed = api.http.put(
        "/api/v1/tqa/datasets/figure1-profile",
        json={"sop": "SOP v2: join hr and payroll by ID.", "sop_note": "joins"},
    )
    assert changed.json()["sop_version"] == 2
    same = api.http.put(
        "/api/v1/tqa/datasets/figure1-profile", json={"sop": "SOP v2: join hr and payroll by ID."}
    )
    assert same.json()["sop_version"] == 2  # the same text is not a new version
    sops = api.http.get("/api/v1/tqa/datasets/figure1-profile/sops").json()
    assert [(v["version"], v["note"]) for v in sops] == [(2, "joins"), (1, "the first version")]

    # Publishing (again) never changes what a dataset's questions get: two rounds.
    for _ in range(2):
        assert api.http.post("/api/v1/tqa/publish", json={}).status_code == 200
        conversation = ask(api, TOM, dataset="figure1-profile")
        assert conversation["status"] == "completed", conversation
        turns = conversation["turns"]
        assert "SOP v2: join hr and payroll by ID." in turns[0]["text"]
        assert "Data sources: hr, payroll" in turns[0]["text"]
        assert turns[1]["text"].startswith("[scripted] Following SOP v2")
        inputs = {t["agent"]: api.get_run(t["run_id"])["inputs"] for t in turns[1:]}
        assert "Plan: PLAN-EXAMPLE" in inputs["Planner"]["examples"]
        assert "Report: REPORT-EXAMPLE" in inputs["Engineer"]["examples"]
        assert "Verdict: VERDICT-EXAMPLE" in inputs["Critic"]["examples"]
        [call] = [t["tool_call"] for t in turns if t["tool_call"]]
        assert "Sql: SELECT 'SQL-EXAMPLE'" in call["input"]["examples"]
        assert conversation["profile"] | {"learned_hints": None} == conversation["profile"] | {
            "name": "figure1-profile",
            "found": True,
            "sop_version": 2,
            "examples_k": 2,
            "learned_hints": None,
        }
    # the critic's turn in the paper's form: the report, reiterated, then TERMINATE
    assert turns[-1]["text"] == "Tom's year-end bonus is 1569.\nTERMINATE"


def test_datasets_are_checked(api: Api) -> None:
    missing = api.http.post(
        "/api/v1/tqa/datasets", json={"name": "ds-bad", "namespaces": {"planner": "nope-ns"}}
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "namespace_not_found"
    role = api.http.post(
        "/api/v1/tqa/datasets", json={"name": "ds-bad", "namespaces": {"boss": "x"}}
    )
    assert role.status_code == 422
    assert role.json()["error"]["code"] == "invalid_tqa_dataset"
    assert api.http.post("/api/v1/tqa/datasets", json={"name": "ds-ok"}).status_code == 201
    again = api.http.post("/api/v1/tqa/datasets", json={"name": "ds-ok"})
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "tqa_dataset_exists"
    assert "ds-ok" in [d["name"] for d in api.http.get("/api/v1/tqa/datasets").json()]
    assert api.http.delete("/api/v1/tqa/datasets/ds-ok").status_code == 204
    gone = api.http.get("/api/v1/tqa/datasets/ds-ok")
    assert gone.json()["error"]["code"] == "tqa_dataset_not_found"


def test_a_successful_retry_is_learned_and_given_to_a_similar_later_question(api: Api) -> None:
    assert api.http.post("/api/v1/tqa/datasets", json={"name": "learn-ds"}).status_code == 201
    tom = ask(api, "Which department does tom work in?", dataset="learn-ds")
    assert tom["status"] == "completed", tom
    [candidate] = api.http.get(
        "/api/v1/tqa/hints", params={"dataset": "learn-ds", "status": "candidate"}
    ).json()
    assert tom["profile"]["learned"] == [candidate["id"]]
    assert candidate["source"] == "learned"
    assert candidate["question"] == "Which department does tom work in?"
    assert candidate["conversation_id"] == tom["id"]
    assert "has 'Tom', not 'tom'" in candidate["text"]
    assert candidate["details"]["error"]["code"] == "empty_result"
    assert candidate["details"]["tables"] == ["hr.main.Department", "hr.main.Employee"]
    assert "e.Name = 'Tom'" in candidate["details"]["fixed_sql"]

    # A later, similar question gets the lesson and needs no retry.
    lucy = ask(api, "Which department does lucy work in?", dataset="learn-ds")
    assert lucy["status"] == "completed", lucy
    [call] = [t["tool_call"] for t in lucy["turns"] if t["tool_call"]]
    assert "Learned earlier:" in call["input"]["hints"]
    assert call["rows"] == [{"DepName": "R&D"}]
    assert [h["id"] for h in lucy["profile"]["learned_hints"]] == [candidate["id"]]
    assert lucy["answer"]["value"] == "R&D"
    # ... a question about something else does not
    other = ask(api, "What is the bonus of Lucy?", dataset="learn-ds")
    assert other["profile"]["learned_hints"] == []

    # The operator confirms, edits, then drops it: a dropped hint is never given.
    hint_url = f"/api/v1/tqa/hints/{candidate['id']}"
    assert api.http.put(hint_url, json={"status": "confirmed"}).json()["status"] == "confirmed"
    edited = api.http.put(hint_url, json={"text": candidate["text"] + " Always."}).json()
    assert edited["text"].endswith("Always.")
    assert api.http.put(hint_url, json={"status": "dropped"}).json()["status"] == "dropped"
    again = ask(api, "Which department does lucy work in?", dataset="learn-ds")
    assert again["profile"]["learned_hints"] == []
    empty, fixed = (t["tool_call"] for t in again["turns"] if t["tool_call"])
    assert empty["row_count"] == 0
    assert fixed["rows"] == [{"DepName": "R&D"}]
    bad = api.http.put(hint_url, json={"status": "maybe"})
    assert bad.status_code == 422


def test_a_dataset_and_its_lessons_survive_a_server_restart(tmp_path: Path) -> None:
    data = tmp_path / "restarted"
    ann = "What is the year-end bonus for Ann?"  # no scripted rule answers it
    with tqa_server("sqlite", data) as first:
        namespace(first.api, "rs-plans", "question", [{"question": ann, "plan": "PLAN-EXAMPLE"}])
        created = first.api.http.post(
            "/api/v1/tqa/datasets",
            json={"name": "rs", "sop": "SOP v1: ask.", "namespaces": {"planner": "rs-plans"}},
        )
        assert created.status_code == 201, created.text
        taught = ask(first.api, "Which department does tom work in?", dataset="rs")
        assert len(taught["profile"]["learned"]) == 1
    with tqa_server("sqlite", data) as second:  # the same database and example store
        asked = ask(second.api, TOM, dataset="rs")
        assert asked["turns"][1]["text"].startswith("[scripted] Following SOP v1")
        planner = second.api.get_run(asked["turns"][1]["run_id"])
        assert "Plan: PLAN-EXAMPLE" in planner["inputs"]["examples"]
        lucy = ask(second.api, "Which department does lucy work in?", dataset="rs")
        assert [h["id"] for h in lucy["profile"]["learned_hints"]] == taught["profile"]["learned"]
        assert len([t for t in lucy["turns"] if t["tool_call"]]) == 1


def tables_the_tool_saw(api: Api) -> list[str]:
    """The tables the schema lookup of the newest text-to-SQL tool run described."""
    runs = api.http.get("/api/v1/runs", params={"app": "autotqa-text-to-sql", "limit": 1})
    [newest] = runs.json()["items"]
    nodes = {n["node"]: n for n in api.get_run(newest["id"])["nodes"]}
    tables: list[str] = nodes["schema"]["output"]["tables"]
    return tables


def test_a_datasets_sources_limit_the_tables_the_tools_see(api: Api) -> None:
    created = api.http.post("/api/v1/tqa/datasets", json={"name": "hr-only", "sources": ["hr"]})
    assert created.status_code == 201, created.text
    unlimited = ask(api, TOM)
    assert any(t.startswith("payroll.") for t in tables_the_tool_saw(api))
    assert unlimited["status"] == "completed", unlimited

    limited = ask(api, TOM, dataset="hr-only", max_rounds=4)
    seen = tables_the_tool_saw(api)
    assert seen
    assert all(t.startswith("hr.") for t in seen)
    [call] = [t["tool_call"] for t in limited["turns"] if t["tool_call"]]
    assert call["input"]["sources"] == ["hr"]
    # The engine itself refuses the join with payroll (before issue 30 it ran: only the
    # schema lookup was limited), and the Engineer reads why.
    assert_out_of_scope(call, "payroll.main.salary")
    assert limited["status"] != "completed"


def assert_out_of_scope(call: dict[str, Any], table: str) -> None:
    assert "JOIN payroll.main.salary" in call["sql"]
    assert call["rows"] == []
    assert call["error"]["code"] == "table_out_of_scope", call["error"]
    assert f"table {table} at line 1 is outside this question's scope" in call["error"]["message"]


def test_a_question_limited_to_one_source_cannot_read_another(api: Api) -> None:
    limited = ask(api, TOM, sources=["hr"], max_rounds=4)
    assert [t["agent"] for t in limited["turns"]][:4] == ["User", "Planner", "Engineer", "Executor"]
    call = limited["turns"][3]["tool_call"]
    assert call["input"]["sources"] == ["hr"]
    assert_out_of_scope(call, "payroll.main.salary")
    assert all(t.startswith("hr.") for t in tables_the_tool_saw(api))
    assert limited["sources"] == ["hr"]
    # A schema of a source: the same scope, written out.
    schema = ask(api, TOM, sources=["hr.main"], max_rounds=4)
    assert_out_of_scope(schema["turns"][3]["tool_call"], "payroll.main.salary")
    # The question's own sources replace its dataset's: both sources, the join runs.
    api.http.post("/api/v1/tqa/datasets", json={"name": "hr-only-2", "sources": ["hr"]})
    both = ask(api, TOM, dataset="hr-only-2", sources=["hr", "payroll"])
    assert both["status"] == "completed", both
    assert both["answer"]["value"] == 1569


def test_unknown_sources_are_refused_naming_them(api: Api) -> None:
    for body, named in (
        ({"question": TOM, "sources": ["hr", "nowhere"]}, "'nowhere'"),
        ({"question": TOM, "sources": ["hr.no_schema"]}, "'hr.no_schema'"),
        ({"question": TOM, "sources": ["hr"], "async": True}, None),
    ):
        response = api.http.post("/api/v1/tqa/ask", json=body)
        if named is None:
            assert response.status_code == 202, response.text
            continue
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert (error["code"], named in error["message"]) == ("invalid_scope", True), error
    malformed = api.http.post("/api/v1/tqa/ask", json={"question": TOM, "sources": ["hr."]})
    assert malformed.status_code == 422
    assert "hr." in malformed.json()["error"]["message"]
    dataset = api.http.post(
        "/api/v1/tqa/datasets", json={"name": "ds-nowhere", "sources": ["nowhere"]}
    )
    assert dataset.status_code == 422, dataset.text
    assert "'nowhere'" in dataset.json()["error"]["message"]
    assert api.http.get("/api/v1/tqa/datasets/ds-nowhere").status_code == 404
    asked_async = api.http.post(
        "/api/v1/tqa/ask", json={"question": TOM, "sources": ["nowhere"], "async": True}
    )
    assert asked_async.status_code == 422, asked_async.text


def test_the_autotqa_block_takes_a_scope(api: Api) -> None:
    asker = flow(
        [
            node("question", "text_input", name="question"),
            node("sources", "json_input", name="sources", default=[]),
            node("ask", "autotqa_ask", scheduler="fsm", max_rounds=6, sources=["hr", "payroll"]),
            node("status", "output", name="status"),
            node("answer", "output", name="answer"),
            node("conversation", "output", name="conversation"),
        ],
        [
            edge("question", "ask.question"),
            edge("sources", "ask.sources"),
            edge("ask.status", "status"),
            edge("ask.answer", "answer"),
            edge("ask.conversation_id", "conversation"),
        ],
    )
    key = api.published_app("scoped-asker", asker)
    whole = api.run("scoped-asker", key, {"question": TOM})
    assert whole.status_code == 200, whole.text
    assert whole.json()["outputs"]["answer"] == 1569
    # The input narrows the node's scope: hr alone cannot join payroll.
    narrowed = api.run("scoped-asker", key, {"question": TOM, "sources": ["hr"]})
    assert narrowed.status_code == 200, narrowed.text
    outputs = narrowed.json()["outputs"]
    assert outputs["status"] != "completed"
    stored = api.http.get(f"/api/v1/tqa/conversations/{outputs['conversation']}").json()
    assert stored["sources"] == ["hr"]
    assert_out_of_scope(stored["turns"][3]["tool_call"], "payroll.main.salary")
    # ...and cannot widen it.
    wider = api.run("scoped-asker", key, {"question": TOM, "sources": ["hr", "other"]})
    failed = wider.json()
    assert failed["status"] == "failed", failed
    assert (failed["error"]["code"], failed["error"]["node"]) == ("invalid_scope", "ask")
    assert "other lie outside this node's sources (hr, payroll)" in failed["error"]["message"]
    unknown = api.run("scoped-asker", key, {"question": TOM, "sources": ["payroll.nope"]})
    assert unknown.json()["error"]["code"] == "invalid_scope"
    assert "'payroll.nope'" in unknown.json()["error"]["message"]
