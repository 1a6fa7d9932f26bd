"""The iteration strip in the browser: the classify example (a map over a sub-flow) saved as
an app, debug-run against the scripted model; the map node's inspector shows one strip
entry per question, and clicking one opens that question's nodes with their outputs; the
sub-flow opens from the Flow tab as a group."""

from __future__ import annotations

import json
import re
from pathlib import Path

from playwright.sync_api import Page, expect

from support.server import LiveServer

EXAMPLE = Path(__file__).resolve().parents[2] / "flows" / "examples" / "classify_questions.json"


def test_map_iterations_in_the_debug_panel(page: Page, server: LiveServer) -> None:
    http = server.api.http
    assert http.post("/api/v1/apps", json={"slug": "classify", "name": "Classify"}).is_success
    flow = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    saved = http.post("/api/v1/apps/classify/versions", json={"flow": flow})
    assert saved.status_code == 201, saved.text

    page.goto("/#/apps/classify")
    expect(page.get_by_test_id("canvas")).to_be_visible()
    # The map node shows no red port: its ports come from the document's sub-flow.
    expect(page.get_by_test_id("node-classify_each")).to_be_visible()
    page.get_by_test_id("run").click()
    expect(page.get_by_test_id("run-status")).to_contain_text(re.compile("succeeded", re.I))

    # The sub-flow's nodes are not rows of their own: they are the map node's iterations.
    expect(page.locator('[data-testid^="debug-node-classify_each["]')).to_have_count(0)
    page.get_by_test_id("debug-node-classify_each").click()
    strip = page.get_by_test_id("iterations-classify_each")
    expect(strip).to_be_visible()
    entries = strip.locator('[data-testid^="iteration-classify_each["]')
    expect(entries).to_have_count(3)
    for index in range(3):
        entry = page.get_by_test_id(f"iteration-classify_each[{index}]")
        expect(entry).to_have_attribute("data-status", "succeeded")
        expect(entry).to_have_text(str(index + 1))

    page.get_by_test_id("iteration-classify_each[1]").click()
    ask = page.get_by_test_id("iteration-node-classify_each[1]/ask")
    expect(ask).to_have_attribute("data-status", "succeeded")
    ask.locator("summary").click()
    expect(ask).to_contain_text("scripted model")
    expect(page.get_by_test_id("iteration-nodes")).to_contain_text("How many employees")

    # The sub-flow itself opens from the Flow tab as a group of its nodes.
    page.get_by_test_id("tab-flow").click()
    expect(page.get_by_test_id("subflow-classify")).to_contain_text("takes question")
    page.get_by_test_id("open-subflow-classify").click()
    viewer = page.get_by_test_id("subflow-viewer")
    expect(viewer.locator(".react-flow__node")).to_have_count(3)
    expect(viewer).to_contain_text("ask · chat")
    page.get_by_test_id("close-subflow").click()
    expect(viewer).to_have_count(0)
