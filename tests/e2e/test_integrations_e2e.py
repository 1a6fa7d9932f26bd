"""The editor's pages for issue 22 in Chromium: the "waiting for you" list answering a paused
run's form, the same forms in the debug panel for a debug run paused inside map items, and
the trigger editor (add, refuse a bad schedule, disable, delete)."""

from __future__ import annotations

import re
from typing import Any

from playwright.sync_api import Page, expect

from support.mcp_server import mcp_tool_server
from support.server import LiveServer, edge, example, flow, node


def _review_flow() -> dict[str, Any]:
    return flow(
        [
            node("draft", "text_input", name="draft"),
            node(
                "review",
                "human_input",
                message="Please review: {{ draft }}",
                inputs=["draft"],
                fields=[{"name": "score", "type": "integer", "label": "Score"}],
                choices=["approve", "reject"],
            ),
            node("approved", "template", template="approved with {{ a.score }}"),
            node("rejected", "template", template="rejected ({{ a.choice }})"),
            node("out", "output", name="verdict"),
        ],
        [
            edge("draft", "review.draft"),
            {**edge("review", "approved.a"), "branch": "approve"},
            {**edge("review", "rejected.a"), "branch": "reject"},
            edge("approved", "out"),
            edge("rejected", "out"),
        ],
    )


def test_a_waiting_run_is_answered_from_its_form(page: Page, server: LiveServer) -> None:
    key = server.api.published_app("e2e-review", _review_flow())
    paused = server.api.run("e2e-review", key, {"draft": "the memo"}).json()
    assert paused["status"] == "waiting"

    page.goto("/#/waiting")
    form = page.get_by_test_id("human-request-review")
    expect(form).to_contain_text("Please review: the memo")
    form.get_by_label("Score").fill("4.5")
    form.get_by_role("button", name="approve").click()
    expect(form.get_by_role("alert")).to_contain_text("'score' must be integer")
    form.get_by_label("Score").fill("4")
    form.get_by_role("button", name="approve").click()
    notice = page.get_by_test_id("human-resumed")
    expect(notice).to_be_visible()
    resumed_id = notice.inner_text().split()[-1].rstrip(".")
    assert server.api.wait_for_run(resumed_id)["outputs"] == {"verdict": "approved with 4"}
    expect(page.get_by_text("No run is waiting for an answer.")).to_be_visible()


def test_the_waiting_list_shows_a_page_and_more_on_demand(page: Page, server: LiveServer) -> None:
    key = server.api.published_app("e2e-many", _review_flow())
    for n in range(52):
        assert server.api.run("e2e-many", key, {"draft": f"memo {n}"}).json()["status"] == "waiting"
    total = server.api.http.get("/api/v1/human/requests", params={"limit": 1}).json()["total"]
    assert total >= 52

    page.goto("/#/waiting")
    forms = page.locator('[data-testid^="human-request-"]')
    expect(forms).to_have_count(50)  # the first page, oldest first
    expect(page.get_by_text(f"50 of {total} shown")).to_be_visible()
    page.get_by_test_id("human-more").click()
    expect(forms).to_have_count(total)
    expect(page.get_by_test_id("human-more")).to_have_count(0)
    # Answered, the list starts again from its first page.
    forms.first.get_by_label("Score").fill("1")
    forms.first.get_by_role("button", name="reject").click()
    expect(page.get_by_test_id("human-resumed")).to_be_visible()
    expect(forms).to_have_count(50)
    expect(page.get_by_text(f"50 of {total - 1} shown")).to_be_visible()


def _map_review_flow() -> dict[str, Any]:
    """Two drafts (the input's default), each approved or rejected by a person in a map item."""
    one = {
        "nodes": [
            node("draft", "text_input", name="draft"),
            node(
                "approve",
                "human_input",
                message="Approve {{ d }}?",
                inputs=["d"],
                fields=[
                    {"name": "urgent", "type": "boolean", "label": "Urgent", "required": False}
                ],
                choices=["approve", "reject"],
            ),
            node("ok", "template", template="{{ a.choice }} {{ a.urgent }}"),
            node("no", "template", template="{{ a.choice }} {{ a.urgent }}"),
            node("verdict", "output", name="verdict"),
        ],
        "edges": [
            edge("draft", "approve.d"),
            {**edge("approve", "ok.a"), "branch": "approve"},
            {**edge("approve", "no.a"), "branch": "reject"},
            edge("ok", "verdict"),
            edge("no", "verdict"),
        ],
    }
    document = flow(
        [
            node("drafts", "list_input", name="drafts", default=["memo", "note"]),
            node("each", "map", subflow="one", item="draft", output="verdict"),
            node("out", "output", name="verdicts"),
        ],
        [edge("drafts", "each.items"), edge("each", "out")],
    )
    document["subflows"] = {"one": one}
    return document


def test_a_debug_run_paused_in_map_items_is_answered_in_the_debug_panel(
    page: Page, server: LiveServer
) -> None:
    server.api.create_app("e2e-debug-review")
    server.api.save("e2e-debug-review", _map_review_flow())
    page.goto("/#/apps/e2e-debug-review")
    expect(page.get_by_test_id("canvas")).to_be_visible()
    page.get_by_test_id("run").click()

    waiting = page.get_by_test_id("debug-waiting")
    expect(waiting).to_contain_text("The run waits for 2 answers")
    first = waiting.get_by_test_id("human-request-each[0]/approve")
    second = waiting.get_by_test_id("human-request-each[1]/approve")
    expect(first).to_contain_text("Approve memo?")
    expect(second).to_contain_text("Approve note?")
    expect(page.get_by_text("The run failed")).to_have_count(0)  # a pause is no failure
    expect(page.get_by_test_id("run-status")).to_have_text("waiting")
    # The map's items wait in its iteration strip: their own status and label, not failed.
    page.get_by_test_id("debug-node-each").click()
    strip = page.get_by_test_id("iterations-each")
    expect(strip).to_contain_text("2 · 2 waiting for input")
    for index in range(2):
        item = page.get_by_test_id(f"iteration-each[{index}]")
        expect(item).to_have_attribute("data-status", "waiting")
        expect(item).to_have_attribute("title", f"each[{index}]: waiting for input")
        expect(item).to_have_text(f"⏸ {index + 1}")
    page.get_by_test_id("iteration-each[0]").click()
    asking = page.get_by_test_id("iteration-node-each[0]/approve")
    expect(asking).to_have_attribute("data-status", "waiting")

    first.get_by_label("Urgent").check()
    first.get_by_role("button", name="approve").click()
    expect(waiting).to_contain_text("The run waits for an answer")
    expect(first).to_have_count(0)
    expect(waiting.get_by_test_id("debug-answered")).to_have_text(
        "Answered: the run still waits for 1 more answer."
    )
    second.get_by_role("button", name="reject").click()

    # The panel follows the run that goes on: the map's items are done in its strip, and
    # the items' answers are their nodes' outputs.
    expect(page.get_by_test_id("debug-waiting")).to_have_count(0)
    expect(page.get_by_test_id("run-status")).to_contain_text(re.compile("succeeded", re.I))
    expect(strip).to_contain_text("2 · 2 succeeded")
    for index in range(2):
        item = page.get_by_test_id(f"iteration-each[{index}]")
        expect(item).to_have_attribute("data-status", "succeeded")
        expect(item).to_have_text(str(index + 1))
    page.get_by_role("button", name="show result").click()
    expect(page.get_by_test_id("run-outputs")).to_contain_text("approve True")
    expect(page.get_by_test_id("run-outputs")).to_contain_text("reject")


def test_the_mcp_tool_form_lists_the_servers_tools_with_their_schema(
    page: Page, server: LiveServer
) -> None:
    with mcp_tool_server() as url:
        server.api.create_app("e2e-mcp")
        calls = flow(
            [
                node("text", "text_input", name="text"),
                node("call", "mcp_tool", url=url, tool="add", inputs=["text"]),
                node("out", "output", name="answer"),
            ],
            [edge("text", "call.text"), edge("call", "out")],
        )
        server.api.save("e2e-mcp", calls)
        page.goto("/#/apps/e2e-mcp")
        page.get_by_test_id("node-call").click()
        tools = page.get_by_test_id("mcp-tools")
        tools.get_by_role("button", name="List the server's tools").click()
        picker = tools.get_by_label("Tool")
        # The first MCP call loads the SDK in the server: room for it on a loaded machine.
        expect(picker).to_have_value("add", timeout=30_000)  # the node's tool, listed
        expect(tools.get_by_test_id("mcp-tool-schema")).to_contain_text("Add two integers.")
        picker.select_option("shout")
        schema = tools.get_by_test_id("mcp-tool-schema")
        expect(schema).to_contain_text("Shout a text back")
        expect(schema.get_by_test_id("mcp-arg-text")).to_contain_text("string")
        expect(schema.get_by_test_id("mcp-arg-text")).to_contain_text("required")
        expect(schema.get_by_test_id("mcp-arg-marks")).to_contain_text("integer")
        expect(schema.get_by_test_id("mcp-arg-marks")).to_contain_text("default 1")
        # Picking a tool sets the node's config: the Flow's JSON says so once saved.
        expect(page.get_by_test_id("config-tool")).to_have_value("shout")


def test_triggers_are_added_disabled_and_deleted(page: Page, server: LiveServer) -> None:
    server.api.published_app("e2e-triggers", example("hello"))
    assert server.api.http.put("/api/v1/secrets/shop_key", json={"value": "k3y"}).status_code == 204
    page.goto("/#/apps/e2e-triggers/triggers")
    expect(page.get_by_text("No trigger yet.")).to_be_visible()

    new = page.get_by_role("region", name="New trigger")
    new.get_by_label("Name").fill("mornings")
    new.get_by_label("Schedule").fill("every morning")
    new.get_by_role("button", name="Add trigger").click()
    expect(page.get_by_role("alert")).to_contain_text("not a valid schedule")
    new.get_by_label("Schedule").fill("0 9 * * 1-5")
    new.get_by_label("Time zone").fill("Europe/Paris")
    new.get_by_label("Inputs").fill('{"name": "team"}')
    new.get_by_role("button", name="Add trigger").click()
    schedule = page.get_by_test_id("trigger-mornings")
    expect(schedule).to_contain_text("0 9 * * 1-5 in Europe/Paris")

    new.get_by_label("Kind").select_option("webhook")
    new.get_by_label("Name").fill("shop")
    new.get_by_label("Body mapping").fill('{"name": "customer.first"}')
    new.get_by_role("button", name="Add trigger").click()
    expect(page.get_by_role("alert")).to_contain_text("needs secret_name")  # none: refused
    new.get_by_label("Signing secret").fill("shop_key")
    new.get_by_role("button", name="Add trigger").click()
    hook_url = page.get_by_test_id("trigger-shop").get_by_test_id("webhook-url")
    expect(hook_url).to_contain_text("/api/v1/hooks/")
    expect(page.get_by_test_id("trigger-shop")).to_contain_text("X-Dagwright-Timestamp")

    # The URL shown fires the app with the body mapped to its input, signed as shown.
    import json

    import httpx

    from dagwright.services.webhook_signing import signed_headers

    body = json.dumps({"customer": {"first": "Ann"}}).encode()
    fired = httpx.post(hook_url.inner_text(), content=body, headers=signed_headers("k3y", body))
    assert fired.status_code == 202
    page.get_by_test_id("trigger-shop").get_by_role("button", name="Firings").click()
    expect(page.get_by_test_id("trigger-shop").get_by_role("list", name="Firings")).to_contain_text(
        fired.json()["run_id"]
    )

    schedule.get_by_role("button", name="Disable").click()
    expect(schedule).to_contain_text("(disabled)")
    schedule.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("trigger-mornings")).to_have_count(0)
    items = server.api.http.get("/api/v1/apps/e2e-triggers/triggers").json()["items"]
    assert [t["name"] for t in items] == ["shop"]
