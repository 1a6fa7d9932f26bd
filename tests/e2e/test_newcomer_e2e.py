"""Issue 21, "the editor a newcomer enjoys", end to end in Debian's Chromium against the real
server and its scripted model: each test is one finding of the issue, written to fail before
its fix."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from support.server import LiveServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from editor_open import big_flow


def make_app(server: LiveServer, slug: str, flow: dict[str, object] | None = None) -> None:
    created = httpx.post(f"{server.base_url}/api/v1/apps", json={"slug": slug, "name": slug})
    created.raise_for_status()
    if flow is not None:
        saved = httpx.post(
            f"{server.base_url}/api/v1/apps/{slug}/versions", json={"flow": flow, "note": "e2e"}
        )
        saved.raise_for_status()


def test_a_large_flow_zoomed_out_is_drawn_as_boxes(page: Page, server: LiveServer) -> None:
    """Finding 3: zoomed out on 150 nodes, nodes are plain boxes (their text is not painted);
    zoomed in, the detail comes back."""
    make_app(server, "big-lod", big_flow(150))
    page.goto("/#/apps/big-lod")
    canvas = page.get_by_test_id("canvas")
    expect(page.locator(".react-flow__node")).to_have_count(150)
    expect(canvas).to_have_class(re.compile(r"\blod-far\b"))
    title = page.get_by_test_id("node-t5_3").locator(".dw-node-head")
    assert title.evaluate("e => getComputedStyle(e).visibility") == "hidden"
    page.get_by_test_id("node-t5_3").click()
    for _ in range(12):
        page.locator(".react-flow__controls-zoomin").click()
    expect(canvas).not_to_have_class(re.compile(r"\blod-far\b"))
    assert title.evaluate("e => getComputedStyle(e).visibility") == "visible"


def echo_flow() -> dict[str, object]:
    """text_input q (required) -> template -> output answer."""
    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "echo",
        "nodes": [
            {
                "id": "q",
                "block": "text_input",
                "config": {"name": "q"},
                "position": {"x": 0, "y": 0},
            },
            {
                "id": "t",
                "block": "template",
                "config": {"template": "you said {{ x }}"},
                "position": {"x": 300, "y": 0},
            },
            {
                "id": "out",
                "block": "output",
                "config": {"name": "answer"},
                "position": {"x": 600, "y": 0},
            },
        ],
        "edges": [
            {"source": {"node": "q", "port": "output"}, "target": {"node": "t", "port": "x"}},
            {"source": {"node": "t", "port": "output"}, "target": {"node": "out", "port": "value"}},
        ],
    }


def test_a_required_text_input_left_empty_is_refused(page: Page, server: LiveServer) -> None:
    """Finding 9: Run with a required text input empty names the input and starts no run."""
    make_app(server, "echo-empty", echo_flow())
    page.goto("/#/apps/echo-empty")
    field = page.get_by_test_id("debug-input-q")
    field.fill("   ")
    page.get_by_test_id("run").click()
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_text("q: required")).to_be_visible()
    expect(page.get_by_test_id("node-out-status")).to_have_count(0)  # no run was started
    field.fill("hello")
    page.get_by_test_id("run").click()
    expect(page.get_by_test_id("node-out-status")).to_have_attribute("title", "succeeded")
