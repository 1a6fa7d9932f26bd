"""The web editor end to end, in Debian's Chromium against the real server: build a flow from
an empty canvas by dragging blocks and wiring ports, configure it, see a type-mismatched wire
refused, save, debug-run it against the scripted model and see every node's output, publish,
and call the published URL with a key made in the editor. Screenshots of the main screens are
taken on the way; with DAGWRIGHT_UPDATE_SCREENSHOTS=1 they replace docs/screenshots/ (the
README's), otherwise they go to a temporary folder so a test run leaves the tree clean."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import httpx
from playwright.sync_api import Locator, Page, expect

from support.server import LiveServer

DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
SCREENSHOTS = (
    DOCS_SCREENSHOTS
    if os.environ.get("DAGWRIGHT_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.mkdtemp(prefix="dagwright-screenshots-"))
)


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000  # a real picture of the screen, not an empty page


def drop_block(page: Page, block: str, x: int, y: int) -> str:
    """Drags a block from the palette onto the canvas at (x, y); returns the new node's id."""
    before = set(node_ids(page))
    canvas = page.get_by_test_id("canvas")
    page.get_by_test_id(f"palette-block-{block}").drag_to(canvas, target_position={"x": x, "y": y})
    page.wait_for_function(
        "n => document.querySelectorAll('.react-flow__node').length > n", arg=len(before)
    )
    (added,) = set(node_ids(page)) - before
    return added


def node_ids(page: Page) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        ".react-flow__node", "nodes => nodes.map(n => n.getAttribute('data-id'))"
    )
    return ids


def wire(page: Page, source: Locator, target: Locator) -> None:
    """Drags a wire from one handle to another with the mouse, as a person does."""
    start, end = source.bounding_box(), target.bounding_box()
    assert start is not None
    assert end is not None
    page.mouse.move(start["x"] + start["width"] / 2, start["y"] + start["height"] / 2)
    page.mouse.down()
    page.mouse.move(end["x"] + end["width"] / 2, end["y"] + end["height"] / 2, steps=12)
    page.mouse.up()


def configure(page: Page, node: str, field: str, value: str) -> None:
    page.get_by_test_id(f"node-{node}").click()
    page.get_by_test_id(f"config-{field}").fill(value)


def test_build_run_publish_and_call_a_flow(page: Page, server: LiveServer) -> None:  # noqa: PLR0915
    page.on("dialog", lambda dialog: dialog.accept())
    page.goto("/")
    page.get_by_test_id("new-app").click()
    page.get_by_test_id("new-app-name").fill("Greeter")
    page.get_by_test_id("new-app-slug").fill("greeter")
    page.get_by_test_id("new-app-create").click()
    expect(page.get_by_test_id("canvas")).to_be_visible()

    question = drop_block(page, "text_input", 120, 160)
    chat = drop_block(page, "chat", 420, 160)
    answer = drop_block(page, "output", 720, 160)
    configure(page, question, "name", "question")
    configure(page, chat, "prompt", "hello {{ question }}")
    expect(page.get_by_test_id(f"port-{chat}-in-question")).to_be_visible()
    configure(page, answer, "name", "answer")

    # A text output into a list input is refused while the wire is dragged, with the reason.
    lengths = drop_block(page, "list_length", 420, 420)
    wire(
        page,
        page.get_by_test_id(f"port-{question}-out-output"),
        page.get_by_test_id(f"port-{lengths}-in-items"),
    )
    refused = page.get_by_test_id("connection-refused")
    expect(refused).to_be_visible()
    expect(refused).to_contain_text("str")
    assert page.locator(".react-flow__edge").count() == 0
    page.get_by_test_id(f"node-{lengths}").click()
    page.keyboard.press("Delete")

    wire(
        page,
        page.get_by_test_id(f"port-{question}-out-output"),
        page.get_by_test_id(f"port-{chat}-in-question"),
    )
    wire(
        page,
        page.get_by_test_id(f"port-{chat}-out-output"),
        page.get_by_test_id(f"port-{answer}-in-value"),
    )
    expect(page.locator(".react-flow__edge")).to_have_count(2)
    expect(page.get_by_test_id("unsaved")).to_be_visible()
    shot(page, "editor")

    page.get_by_test_id("save").click()
    page.get_by_test_id("save-note").fill("first greeter")
    page.get_by_test_id("save-confirm").click()
    expect(page.get_by_test_id("unsaved")).to_have_count(0)
    versions = server.api.http.get("/api/v1/apps/greeter/versions").json()["items"]
    assert [v["note"] for v in versions] == ["first greeter"]

    # Debug run: a text input answered by a chat model opens in chat mode; every node turns
    # succeeded, and the chat node's output is the scripted answer.
    page.get_by_test_id("chat-input").fill("Ada")
    page.get_by_test_id("chat-send").click()
    expect(page.get_by_test_id("run-status")).to_contain_text(re.compile("succeeded", re.I))
    for node in (question, chat, answer):
        expect(page.get_by_test_id(f"debug-node-{node}")).to_have_attribute(
            "data-status", "succeeded"
        )
    page.get_by_test_id(f"debug-node-{chat}").click()
    expect(page.get_by_test_id("debug-output")).to_contain_text("scripted model")
    shot(page, "debug-run")

    page.get_by_test_id("publish").click()
    shown = page.get_by_test_id("publish-url").inner_text()
    found = re.search(r"https?://\S+", shown)
    assert found is not None, shown
    url = found.group(0)
    assert url == f"{server.base_url}/api/v1/apps/greeter/run"
    page.get_by_test_id("create-key").click()
    key = page.get_by_test_id("key-value").inner_text().strip()
    shot(page, "publish")

    called = httpx.post(
        url,
        json={"inputs": {"question": "Grace"}},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert called.status_code == 200, called.text
    body = called.json()
    assert body["status"] == "succeeded"
    assert "scripted model" in body["outputs"]["answer"]


def test_app_list_and_a_bad_import(page: Page, server: LiveServer, tmp_path: Path) -> None:
    server.api.http.post("/api/v1/apps", json={"slug": "listed", "name": "Listed app"})
    page.goto("/")
    expect(page.get_by_test_id("app-listed")).to_be_visible()
    shot(page, "apps")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "not-an-export"}', encoding="utf-8")
    page.get_by_test_id("import-file").set_input_files(str(broken))
    expect(page.get_by_test_id("import-error")).to_be_visible()
    assert page.get_by_test_id("import-error").inner_text().strip()


def test_ask_the_tables_and_watch_the_agents(page: Page, server: LiveServer) -> None:
    """AutoTQA in the browser: the question streams turn by turn, the tool call shows its SQL
    and result table, the answer comes with its evidence, all labelled scripted."""
    page.goto("/")
    page.get_by_test_id("nav-tqa").click()
    page.get_by_test_id("tqa-question").fill("What is the year-end bonus for Tom?")
    page.get_by_test_id("tqa-ask").click()
    expect(page.get_by_test_id("tqa-status")).to_have_attribute(
        "data-status", "completed", timeout=60_000
    )
    expect(page.get_by_test_id("tqa-answer")).to_contain_text("1569")
    expect(page.locator('[data-agent="Executor"]').first).to_be_visible()
    sql = page.locator('[data-testid^="tqa-sql-"]').first
    expect(sql).to_contain_text("payroll.main.salary")
    expect(page.locator('[data-testid^="tqa-rows-"]').first).to_contain_text("1569")
    expect(page.get_by_test_id("tqa-scripted-note")).to_be_visible()
    shot(page, "autotqa")

    # Stored: the conversation is listed and replays from the server.
    page.reload()
    expect(page.get_by_test_id("tqa-answer")).to_contain_text("1569")


def test_a_flow_opens_with_its_template_ports_from_the_server(
    page: Page, server: LiveServer
) -> None:
    # The editor reads no template itself: opening a flow asks the server for every dynamic
    # node's ports in one call, and draws them once known (edges never shown as broken).
    document = {
        "format": "dagwright.flow",
        "version": 1,
        "name": "letters",
        "nodes": [
            {"id": "who", "block": "text_input", "config": {"name": "who"}},
            {"id": "when", "block": "text_input", "config": {"name": "when"}},
            {
                "id": "letter",
                "block": "template",
                "config": {
                    "template": "Dear {{ who }}, {% if when %}see you {{ when }}{% endif %}"
                },
            },
            {"id": "route", "block": "switch", "config": {"cases": ["short"]}},
            {"id": "out", "block": "output", "config": {"name": "letter"}},
        ],
        "edges": [
            {
                "source": {"node": "who", "port": "output"},
                "target": {"node": "letter", "port": "who"},
            },
            {
                "source": {"node": "when", "port": "output"},
                "target": {"node": "letter", "port": "when"},
            },
            {
                "source": {"node": "letter", "port": "output"},
                "target": {"node": "route", "port": "value"},
            },
            {
                "source": {"node": "route", "port": "output"},
                "target": {"node": "out", "port": "value"},
                "branch": "short",
            },
        ],
    }
    server.api.create_app("letters")
    server.api.save("letters", document)
    asked: list[str] = []
    page.on(
        "request",
        lambda r: asked.append(r.url) if r.method == "POST" and "/ports" in r.url else None,
    )
    page.goto("/#/apps/letters")
    letter = page.get_by_test_id("node-letter")
    expect(letter).to_be_visible()
    expect(letter).not_to_have_attribute("data-ports", "pending")
    for port in ("who", "when"):
        expect(page.get_by_test_id(f"port-letter-in-{port}")).to_be_visible()
    expect(page.locator(".port-missing")).to_have_count(0)
    expect(page.locator(".port-pending")).to_have_count(0)
    expect(page.locator(".react-flow__edge")).to_have_count(4)
    assert [url.split("/api/v1")[1] for url in asked] == ["/blocks/ports"]  # one call for all

    # A pasted copy has no answer yet: it is asked for, and shows its ports once known.
    letter.click()
    page.keyboard.press("Control+c")
    page.keyboard.press("Control+v")
    copy = page.get_by_test_id("node-letter_2")
    expect(copy).to_be_visible()
    expect(copy).not_to_have_attribute("data-ports", "pending")
    expect(page.get_by_test_id("port-letter_2-in-when")).to_be_visible()
    assert [url.split("/api/v1")[1] for url in asked] == ["/blocks/ports"] * 2
