"""The editor's pages for issue 22 in Chromium: the "waiting for you" list answering a paused
run's form, and the trigger editor (add, refuse a bad schedule, disable, delete)."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page, expect

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


def test_triggers_are_added_disabled_and_deleted(page: Page, server: LiveServer) -> None:
    server.api.published_app("e2e-triggers", example("hello"))
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
    hook_url = page.get_by_test_id("trigger-shop").get_by_test_id("webhook-url")
    expect(hook_url).to_contain_text("/api/v1/hooks/")

    # The URL shown fires the app with the body mapped to its input.
    import httpx

    fired = httpx.post(hook_url.inner_text(), json={"customer": {"first": "Ann"}})
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
