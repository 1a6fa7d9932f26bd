"""A tool call that needs a person's approval, on real processes: a `dagwright serve` process
on its own PostgreSQL schema, the agents played by the scripted model (tests/support/
tqa_script.yaml: scripted answers, not a model's), the `dagwright human` CLI.

The Python tool is marked `requires_approval`; a question the Engineer answers with it
pauses the conversation (`waiting`) with a human request in the same list as the flows'
pauses, showing the tool, its input and the SQL and program the tool wrote (a run that
wrote them and ran nothing); once approved, the tool runs that very program (its child
run's `python` node is given it, nothing is written again). The server is restarted; the
request is approved with the CLI and the conversation goes on and completes. Rejected
through the signed link, the Engineer gets a turn saying so with the comment (and asks
again: waiting again); a cancel ends a waiting conversation and closes its request. An
approval whose answering process stopped before letting the conversation go on is taken up
by the server's sweep.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.llm.scripted.runner import ScriptedServer
from support.server import Api, ServerProcess, postgres_schema, subprocess_environment
from support.tqa import agents_script, provider_settings

TOTAL = "What is the total bonus of all employees?"
TOOL = "python_on_tables"
# What the scripted model (python-total) writes for the task.
PLAN = {"sql": "SELECT Bonus FROM payroll.main.salary", "code": "result = int(df.Bonus.sum())"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("tqa-approval")
    model = ScriptedServer(agents_script()).start()
    try:
        with postgres_schema() as url:
            running = ServerProcess(folder / "api", "api-1", url)
            running.data_dir.mkdir(parents=True, exist_ok=True)
            (running.data_dir / "dagwright.toml").write_text(provider_settings(model.base_url))
            running.start(timeout=120)
            try:
                api = running.api()
                marked = api.http.put(
                    f"/api/v1/tqa/tools/{TOOL}/approval", json={"requires_approval": True}
                )
                assert marked.status_code == 200, marked.text
                assert marked.json()["requires_approval"] is True
                yield running
            finally:
                running.stop()
    finally:
        model.stop()


def conversation(api: Api, conversation_id: str) -> dict[str, Any]:
    response = api.http.get(f"/api/v1/tqa/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def wait_for(api: Api, conversation_id: str, status: str, turns: int = 0) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        found = conversation(api, conversation_id)
        if found["status"] == status and len(found["turns"]) >= turns:
            return found
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def ask_async(api: Api, question: str) -> str:
    response = api.http.post("/api/v1/tqa/ask", json={"question": question, "async": True})
    assert response.status_code == 202, response.text
    conversation_id: str = response.json()["id"]
    return conversation_id


def approval_of(api: Api, conversation_id: str) -> dict[str, Any]:
    """The waiting request of the conversation, from the one list of human requests."""
    every = api.http.get("/api/v1/human/requests", params={"limit": 100}).json()["items"]
    assert conversation_id in [r["conversation_id"] for r in every]
    params = {"conversation_id": conversation_id}
    [found] = api.http.get("/api/v1/human/requests", params=params).json()["items"]
    assert found["conversation_id"] == conversation_id
    return dict(found)


def tool_run(api: Api, executor_run_id: str) -> dict[str, Any]:
    """The Python tool's run (with its nodes) that the Executor's run `executor_run_id`
    called: its child run."""
    runs = api.http.get("/api/v1/runs", params={"app": "autotqa-python", "limit": 100})
    assert runs.status_code == 200, runs.text
    [child] = [r for r in runs.json()["items"] if r["parent_run_id"] == executor_run_id]
    found = api.http.get(f"/api/v1/runs/{child['id']}")
    assert found.status_code == 200, found.text
    return dict(found.json())


def node_of(run: dict[str, Any], node: str) -> dict[str, Any]:
    [found] = [n for n in run["nodes"] if n["node"] == node]
    return dict(found)


def cli(server: ServerProcess, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "dagwright", *args, "--url", server.base_url],
        env=subprocess_environment(),
        cwd=Path(str(server.data_dir)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return done.stdout


def test_an_approved_call_survives_a_restart_and_the_conversation_finishes(
    server: ServerProcess,
) -> None:
    api = server.api()
    conversation_id = ask_async(api, TOTAL)
    waiting = wait_for(api, conversation_id, "waiting")
    # The Engineer asked for the tool; nothing ran it.
    assert [t["agent"] for t in waiting["turns"]] == ["User", "Planner", "Engineer"]
    request = approval_of(api, conversation_id)
    assert request["run_id"] is None
    assert request["node"] == f"turn 2: {TOOL}"
    approval = request["form"]["approval"]
    assert (approval["tool"], approval["app"], approval["role"]) == (
        TOOL,
        "autotqa-python",
        "python",
    )
    assert approval["input"] == {"task": "Add up the Bonus of every employee in the salary table"}
    # The program that will run, written before anyone approves it: written, never run.
    assert approval["plan"] == PLAN
    assert (approval["sql"], approval["code"]) == (PLAN["sql"], PLAN["code"])
    written = tool_run(api, approval["plan_run_id"])
    assert written["inputs"]["mode"] == "write"
    assert node_of(written, "write")["status"] == "succeeded"
    assert node_of(written, "query")["status"] == "skipped"
    assert node_of(written, "python")["status"] == "skipped"
    assert request["form"]["choices"] == ["approve", "reject"]
    assert TOOL in request["message"]
    assert PLAN["code"] in request["message"]

    server.stop()
    server.start(timeout=120)
    api = server.api()
    assert conversation(api, conversation_id)["status"] == "waiting"  # durable
    listed = cli(server, "human", "list")
    assert f"conversation {conversation_id}" in listed

    said = cli(server, "human", "answer", request["id"], "--choice", "approve")
    assert f"conversation {conversation_id} goes on" in said
    done = wait_for(api, conversation_id, "completed")
    assert done["answer"]["value"] == 3669
    executor = done["turns"][3]
    assert executor["agent"] == "Executor"
    assert executor["content"]["approval"] == {
        "request_id": request["id"],
        "approved": True,
        "comment": "",
        "plan": PLAN,
    }
    assert executor["tool_call"]["outputs"]["result"] == 3669
    # What ran is what was approved: the plan, given as it is, nothing written again.
    assert executor["tool_call"]["input"]["mode"] == "plan"
    assert executor["tool_call"]["input"]["plan"] == PLAN
    ran = tool_run(api, executor["tool_call"]["run_id"])
    assert ran["inputs"]["plan"] == PLAN
    assert node_of(ran, "write")["status"] == "skipped"
    assert node_of(ran, "check")["inputs"]["sql"] == PLAN["sql"]
    assert node_of(ran, "python")["status"] == "succeeded"
    assert node_of(ran, "python")["inputs"]["code"] == PLAN["code"]
    again = api.http.post(
        f"/api/v1/human/requests/{request['id']}/answer", json={"choice": "approve"}
    )
    assert again.status_code == 409


def test_a_rejected_call_is_the_engineers_to_read_and_a_cancel_closes_the_wait(
    server: ServerProcess,
) -> None:
    api = server.api()
    conversation_id = ask_async(api, TOTAL)
    wait_for(api, conversation_id, "waiting")
    request = approval_of(api, conversation_id)
    link = api.http.get(request["link"]).json()
    assert "link" not in link  # the link's page does not give the link away
    assert link["form"]["approval"]["tool"] == TOOL
    rejected = api.http.post(
        request["link"], json={"values": {"comment": "not on payroll data"}, "choice": "reject"}
    )
    assert rejected.status_code == 202, rejected.text
    assert rejected.json()["conversation_id"] == conversation_id
    # The Executor's turn says it was rejected, with the comment; the Engineer asks again.
    again = wait_for(api, conversation_id, "waiting", turns=5)
    executor = again["turns"][3]
    assert executor["tool_call"]["error"] == {
        "code": "tool_rejected",
        "message": "a person rejected this tool call: not on payroll data",
    }
    assert "not on payroll data" in executor["text"]
    assert again["turns"][4]["agent"] == "Engineer"
    second = approval_of(api, conversation_id)
    assert second["id"] != request["id"]
    assert second["node"] == f"turn 4: {TOOL}"

    cancelled = api.http.post(f"/api/v1/tqa/conversations/{conversation_id}/cancel")
    assert cancelled.status_code == 200, cancelled.text
    ended = conversation(api, conversation_id)
    assert ended["status"] == "failed"
    assert ended["error"]["code"] == "cancelled"
    closed = api.http.get(f"/api/v1/human/requests/{second['id']}").json()
    assert closed["status"] == "cancelled"
    late = api.http.post(
        f"/api/v1/human/requests/{second['id']}/answer", json={"choice": "approve"}
    )
    assert late.status_code == 409


def test_an_answer_whose_server_stopped_before_going_on_is_taken_up_by_the_sweep(
    server: ServerProcess,
) -> None:
    api = server.api()
    conversation_id = ask_async(api, TOTAL)
    wait_for(api, conversation_id, "waiting")
    request = approval_of(api, conversation_id)
    # The request was claimed as approved a while ago, and the conversation never went on:
    # the answering process stopped in between.
    assert server.database_url is not None
    db = create_engine(server.database_url, poolclass=NullPool)
    try:
        with db.begin() as conn:
            conn.execute(
                text(
                    "UPDATE human_requests SET status = 'answered', choice = 'approve', "
                    'answer = \'{"comment": ""}\', answered_at = :at WHERE id = :id'
                ),
                {"at": datetime.now(UTC) - timedelta(seconds=60), "id": request["id"]},
            )
    finally:
        db.dispose()
    done = wait_for(api, conversation_id, "completed")
    assert done["answer"]["value"] == 3669
