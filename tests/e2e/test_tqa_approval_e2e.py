"""The AutoTQA page's approval form, in Chromium against a real server (SQLite, the agents
played by the scripted model: tests/support/tqa_script.yaml, scripted answers, not a
model's). The Python tool needs approval; a conversation waits for it; the page shows the
waiting state, the tool, its input and the SQL and program the tool wrote, and approving or
rejecting (with a comment) there lets the conversation go on: approved, the program shown is
the program that runs."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from support.server import Api, LiveServer
from support.tqa import tqa_server

TOTAL = "What is the total bonus of all employees?"
TOOL = "python_on_tables"
# What the scripted model (python-total) writes for the task.
SQL = "SELECT Bonus FROM payroll.main.salary"
CODE = "result = int(df.Bonus.sum())"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with tqa_server("sqlite", tmp_path_factory.mktemp("e2e-tqa")) as running:
        api = running.api
        assert api.http.get("/api/v1/tqa/tools").status_code == 200  # publishes the agents
        marked = api.http.put(
            f"/api/v1/tqa/tools/{TOOL}/approval", json={"requires_approval": True}
        )
        assert marked.status_code == 200, marked.text
        yield running


def waiting_conversation(api: Api) -> str:
    response = api.http.post("/api/v1/tqa/ask", json={"question": TOTAL, "async": True})
    assert response.status_code == 202, response.text
    conversation_id: str = response.json()["id"]
    deadline = time.monotonic() + 30
    while True:
        found: dict[str, Any] = api.http.get(f"/api/v1/tqa/conversations/{conversation_id}").json()
        if found["status"] == "waiting":
            return conversation_id
        assert found["status"] == "running", found
        assert time.monotonic() < deadline, found
        time.sleep(0.1)


def test_a_tool_call_is_approved_on_the_conversation_page(page: Page, server: LiveServer) -> None:
    conversation_id = waiting_conversation(server.api)
    page.goto(f"/#/tqa/{conversation_id}")
    conversation = page.get_by_test_id("tqa-conversation")
    expect(conversation).to_have_attribute("data-status", "waiting")
    expect(page.get_by_test_id("tqa-status")).to_contain_text("needs a person's approval")
    approval = page.get_by_test_id("tqa-approval")
    expect(approval.get_by_test_id("approval-tool")).to_have_text(TOOL)
    expect(approval.get_by_test_id("approval-input")).to_contain_text(
        "Add up the Bonus of every employee"
    )
    shown_sql = approval.get_by_test_id("approval-sql")
    shown_code = approval.get_by_test_id("approval-code")
    expect(shown_sql).to_have_text(SQL)
    expect(shown_code).to_have_text(CODE)
    shown = shown_code.inner_text()
    approval.get_by_role("button", name="approve").click()
    expect(conversation).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(page.get_by_test_id("tqa-approval")).to_have_count(0)
    expect(conversation).to_contain_text("3669")
    # The program that ran is the one shown: the tool's run gave it to its `python` node.
    api = server.api
    done = api.http.get(f"/api/v1/tqa/conversations/{conversation_id}").json()
    [executed] = [t for t in done["turns"] if t["agent"] == "Executor"]
    assert executed["tool_call"]["input"]["plan"] == {"sql": SQL, "code": shown}
    runs = api.http.get("/api/v1/runs", params={"app": "autotqa-python", "limit": 100}).json()
    [ran] = [r for r in runs["items"] if r["parent_run_id"] == executed["tool_call"]["run_id"]]
    nodes = {n["node"]: n for n in api.http.get(f"/api/v1/runs/{ran['id']}").json()["nodes"]}
    assert nodes["write"]["status"] == "skipped"  # nothing was written after the approval
    assert nodes["python"]["inputs"]["code"] == shown


def test_a_rejection_and_its_comment_reach_the_engineer(page: Page, server: LiveServer) -> None:
    conversation_id = waiting_conversation(server.api)
    page.goto(f"/#/tqa/{conversation_id}")
    approval = page.get_by_test_id("tqa-approval")
    approval.get_by_label(re.compile("Comment")).fill("use SQL instead")
    approval.get_by_role("button", name="reject").click()
    # The Executor's turn says so; the Engineer asks again, and the page waits again.
    conversation = page.get_by_test_id("tqa-conversation")
    expect(conversation).to_contain_text(
        "a person rejected this tool call: use SQL instead", timeout=30_000
    )
    expect(conversation).to_have_attribute("data-status", "waiting", timeout=30_000)
    expect(page.get_by_test_id("tqa-approval").get_by_test_id("approval-tool")).to_have_text(TOOL)
