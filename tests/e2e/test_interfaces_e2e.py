"""The Data-Copilot interfaces page in Chromium: an interface stored through the API is shown
with its signature and code, edited (a new version the API then lists) and deleted."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from support.server import LiveServer

INTERFACE = {
    "name": "daily_cost",
    "description": "Daily cost of a tenant",
    "inputs": [{"name": "tenant_id", "type": "int"}],
    "tables": ["billing_pg.billing.daily_billing"],
    "code": "def daily_cost(daily_billing, tenant_id):\n    return daily_billing\n",
}
URL = "/api/v1/data-copilot/billing/interfaces"


def test_an_interface_is_reviewed_edited_and_deleted(page: Page, server: LiveServer) -> None:
    http = server.api.http
    assert http.put(f"{URL}/daily_cost", json=INTERFACE).status_code == 200

    page.goto("/")
    page.get_by_test_id("nav-interfaces").click()
    expect(page.get_by_text("Pick a data source.")).to_be_visible()
    page.goto("/#/interfaces/billing")
    card = page.get_by_test_id("interface-daily_cost")
    expect(card).to_contain_text("daily_cost(tenant_id: int) -> table")
    expect(card).to_contain_text("billing_pg.billing.daily_billing")
    expect(card.locator("pre")).to_contain_text("def daily_cost(daily_billing, tenant_id):")

    card.get_by_role("button", name="Edit").click()
    card.get_by_label("Description").fill("Daily cost of one tenant, day by day")
    card.get_by_role("button", name="Save as v2").click()
    expect(card).to_contain_text("v2 · edited")
    [listed] = http.get(URL).json()
    assert listed["version"] == 2
    assert listed["interface"]["description"] == "Daily cost of one tenant, day by day"
    assert listed["interface"]["code"] == INTERFACE["code"]

    page.once("dialog", lambda dialog: dialog.accept())
    card.get_by_role("button", name="Delete").click()
    expect(card).to_have_count(0)
    expect(page.get_by_text("None yet")).to_be_visible()
    assert http.get(URL).json() == []
