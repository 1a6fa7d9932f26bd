"""Issue 21, "the editor a newcomer enjoys", end to end in Debian's Chromium against the real
server and its scripted model: each test is one finding of the issue, written to fail before
its fix."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from support.server import LiveServer, live_server

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from editor_open import big_flow

DOCS_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shot(page: Page, name: str) -> None:
    """With DAGWRIGHT_UPDATE_SCREENSHOTS=1, the screen replaces docs/screenshots/<name>.png."""
    if os.environ.get("DAGWRIGHT_UPDATE_SCREENSHOTS") == "1":
        page.screenshot(path=str(DOCS_SCREENSHOTS / f"{name}.png"))


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
    shot(page, "large-flow")
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


def drop_block(page: Page, block: str, x: int, y: int) -> str:
    """Drags a block from the palette onto the canvas at (x, y); returns the new node's id."""
    before = set(page.eval_on_selector_all(".react-flow__node", "ns => ns.map(n => n.dataset.id)"))
    page.get_by_test_id(f"palette-block-{block}").drag_to(
        page.get_by_test_id("canvas"), target_position={"x": x, "y": y}
    )
    page.wait_for_function(
        "n => document.querySelectorAll('.react-flow__node').length > n", arg=len(before)
    )
    after = set(page.eval_on_selector_all(".react-flow__node", "ns => ns.map(n => n.dataset.id)"))
    (added,) = after - before
    return str(added)


def test_problems_wait_for_the_blocks_worked_on_and_read_plainly(
    page: Page, server: LiveServer
) -> None:
    """Finding 6: four dropped blocks show no red; a broken template shows its message once,
    without pydantic's prefix or a snake_case code; Validate shows everything; a block dropped
    at the canvas's edge lands wholly on it."""
    make_app(server, "quiet")
    page.goto("/#/apps/quiet")
    with page.expect_response("**/api/v1/validate") as validated:
        for block, x in (("text_input", 4), ("template", 320), ("chat", 560), ("output", 800)):
            drop_block(page, block, x, 200)
    assert validated.value.ok
    page.wait_for_timeout(900)  # the debounced validation of the last drop
    expect(page.locator(".dw-node.has-errors")).to_have_count(0)
    canvas_box = page.get_by_test_id("canvas").bounding_box()
    first_box = page.locator(".react-flow__node").first.bounding_box()
    assert canvas_box is not None
    assert first_box is not None
    assert first_box["x"] >= canvas_box["x"], "the block dropped at the edge went under the palette"
    page.get_by_test_id("tab-problems").click()
    expect(page.get_by_test_id("problems-hidden")).to_be_visible()

    template = page.locator(".dw-node[data-block=template]").get_attribute("data-testid")
    assert template is not None
    page.get_by_test_id(template).click()
    page.get_by_test_id("config-template").fill("{{ x ")
    expect(page.locator(f"[data-testid={template}].has-errors")).to_have_count(1)
    panel = page.get_by_test_id("config-panel")
    expect(panel).not_to_contain_text("Value error")
    expect(panel).not_to_contain_text("invalid_config")
    message = panel.locator(".field-error .field-message").inner_text()
    assert panel.inner_text().count(message.strip()) == 1

    page.get_by_test_id("validate").click()
    expect(page.locator(".dw-node.has-errors")).not_to_have_count(1)
    page.get_by_test_id("tab-problems").click()
    expect(page.get_by_test_id("problems-hidden")).to_have_count(0)
    expect(page.get_by_test_id("problems")).not_to_contain_text("invalid_config")


def test_the_model_form_puts_the_prompt_and_model_first(page: Page, server: LiveServer) -> None:
    """Finding 5, at 1280x720: the prompt is the first setting and on screen, its variables
    highlighted; a model picker lists the configured models with the scripted one labelled;
    the tuning fields wait under Advanced."""
    page.set_viewport_size({"width": 1280, "height": 720})
    make_app(server, "model-form")
    page.goto("/#/apps/model-form")
    node = drop_block(page, "chat", 400, 200)
    page.get_by_test_id(f"node-{node}").click()
    prompt = page.get_by_test_id("config-prompt")
    box = prompt.bounding_box()
    assert box is not None
    assert box["y"] + 40 < 720, "the prompt is below the fold"
    prompt.fill("Answer {{ question }} briefly")
    expect(page.locator(".tpl-var")).to_have_text("{{ question }}")
    picker = page.get_by_test_id("config-model-picker")
    expect(picker.locator("option", has_text="scripted answers, not a model")).to_have_count(2)
    expect(page.get_by_test_id("model-picker-scripted")).to_be_visible()
    shot(page, "llm-form")
    picker.select_option(index=1)
    expect(page.get_by_test_id("config-temperature")).to_be_hidden()
    page.get_by_test_id("config-advanced").locator("summary").click()
    expect(page.get_by_test_id("config-provider")).to_have_value("scripted")


def test_a_template_makes_an_app_in_one_click(page: Page, server: LiveServer) -> None:
    """Finding 4: the home page offers the shipped flows with a description and a preview;
    one click makes an app from one and opens it."""
    page.goto("/")
    card = page.get_by_test_id("template-examples-hello")
    expect(card).to_contain_text("hello")
    expect(card.locator("svg.template-preview rect")).to_have_count(3)
    expect(page.get_by_test_id("template-autotqa-planner")).to_be_visible()
    expect(page.get_by_test_id("template-methods-mac_sql-bird")).to_be_visible()
    shot(page, "templates")
    card.click()
    expect(page.locator(".react-flow__node")).to_have_count(3)
    slug = page.url.split("#/apps/")[1].split("/")[0]
    versions = httpx.get(f"{server.base_url}/api/v1/apps/{slug}/versions").json()["items"]
    assert len(versions) == 1


def test_a_half_built_flow_is_kept_on_the_server(
    page: Page, server: LiveServer, browser: Browser
) -> None:
    """Finding 7: an invalid flow in progress is autosaved to the server, and another browser
    (no localStorage) opens it."""
    make_app(server, "wip")
    page.goto("/#/apps/wip")
    drop_block(page, "chat", 400, 200)
    page.wait_for_timeout(1500)  # the autosave's debounce
    draft = httpx.get(f"{server.base_url}/api/v1/apps/wip/draft")
    assert draft.status_code == 200
    assert [n["block"] for n in draft.json()["flow"]["nodes"]] == ["chat"]
    other = browser.new_context(base_url=server.base_url, viewport={"width": 1440, "height": 900})
    try:
        elsewhere = other.new_page()
        elsewhere.goto("/#/apps/wip")
        expect(elsewhere.locator(".dw-node[data-block=chat]")).to_have_count(1)
        expect(elsewhere.get_by_test_id("draft-notice")).to_be_visible()
    finally:
        other.close()


def test_a_save_or_a_discard_drops_the_draft_with_one_delete(
    page: Page, server: LiveServer
) -> None:
    """The editor drops the server's draft once per save (it sent two DELETEs) and once per
    discard, and the draft is gone after either."""
    make_app(server, "once", echo_flow())
    draft_url = f"{server.base_url}/api/v1/apps/once/draft"
    deletes: list[str] = []
    page.context.on(
        "request",
        lambda r: deletes.append(r.url) if r.method == "DELETE" and r.url == draft_url else None,
    )
    page.on("dialog", lambda d: d.accept())

    def edit_and_wait_for_the_autosave(text: str) -> None:
        page.get_by_test_id("node-t").click()
        with page.expect_response(lambda r: r.request.method == "PUT" and r.url == draft_url):
            page.get_by_test_id("config-template").fill(text)
        assert httpx.get(draft_url).status_code == 200

    page.goto("/#/apps/once")
    edit_and_wait_for_the_autosave("you wrote {{ x }}")
    page.get_by_test_id("save").click()
    with page.expect_response(lambda r: r.request.method == "DELETE" and r.url == draft_url):
        page.get_by_test_id("save-confirm").click()
    expect(page.get_by_test_id("version-label")).to_have_text("v2")
    expect(page.get_by_test_id("unsaved")).to_have_count(0)
    assert deletes == [draft_url]
    assert httpx.get(draft_url).status_code == 404

    # Discard: the draft, restored in another tab, is thrown away there.
    deletes.clear()
    edit_and_wait_for_the_autosave("you typed {{ x }}")
    other = page.context.new_page()
    other.on("dialog", lambda d: d.accept())
    other.goto("/#/apps/once")
    expect(other.get_by_test_id("draft-notice")).to_be_visible()
    with other.expect_response(lambda r: r.request.method == "DELETE" and r.url == draft_url):
        other.get_by_test_id("discard-draft").click()
    expect(other.get_by_test_id("draft-notice")).to_have_count(0)
    expect(other.get_by_test_id("unsaved")).to_have_count(0)
    assert deletes == [draft_url]
    assert httpx.get(draft_url).status_code == 404


def test_publish_offers_to_save_the_canvas_first_with_its_diff(
    page: Page, server: LiveServer
) -> None:
    """Finding 8: with unsaved changes, Publish shows in its dialog what the canvas changes
    against the saved version and saves and publishes it in one step; no toast covers it."""
    make_app(server, "pub-diff", echo_flow())
    page.goto("/#/apps/pub-diff")
    page.get_by_test_id("node-t").click()
    page.get_by_test_id("config-template").fill("you wrote {{ x }}")
    page.get_by_test_id("publish").click()
    expect(page.get_by_test_id("publish-diff")).to_contain_text("changed: t")
    shot(page, "publish-diff")
    page.get_by_test_id("save-and-publish").click()
    expect(page.get_by_test_id("publish-status")).to_contain_text("Published version 2")
    expect(page.locator("[data-testid^=toast-]")).to_have_count(0)
    app = httpx.get(f"{server.base_url}/api/v1/apps/pub-diff").json()
    published = httpx.get(
        f"{server.base_url}/api/v1/apps/pub-diff/versions/{app['published_version_id']}"
    ).json()
    assert published["number"] == 2
    templates = [n["config"]["template"] for n in published["flow"]["nodes"] if n["id"] == "t"]
    assert templates == ["you wrote {{ x }}"]


def test_papercuts(page: Page, server: LiveServer) -> None:
    """Finding 10: the shortcuts popover closes on Escape and on a click outside; a dock left
    tall is restored at most half the window; the output block is called an output; blocks
    have human titles; the run's JSON shows straight quotes (copyable JSON)."""
    make_app(server, "papercuts", echo_flow())
    page.add_init_script("localStorage.setItem('dagwright.debugHeight', '2000')")
    page.goto("/#/apps/papercuts")
    dock = page.get_by_test_id("debug-dock").bounding_box()
    assert dock is not None
    assert dock["height"] <= 900 / 2 + 40, f"the dock was restored {dock['height']} px tall"

    page.get_by_test_id("help").click()
    expect(page.get_by_test_id("shortcuts")).to_be_visible()
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("shortcuts")).to_be_hidden()
    page.get_by_test_id("help").click()
    expect(page.get_by_test_id("shortcuts")).to_be_visible()
    page.get_by_test_id("app-name").click(position={"x": 2, "y": 2})
    expect(page.get_by_test_id("shortcuts")).to_be_hidden()
    page.keyboard.press("Escape")

    expect(page.get_by_test_id("palette-block-text_input")).to_contain_text("Text input")
    page.get_by_test_id("node-out").click()
    expect(page.get_by_test_id("node-block-kind")).to_contain_text("output")
    expect(page.get_by_test_id("node-block-kind")).not_to_contain_text("input")
    expect(page.get_by_test_id("node-block-title")).to_contain_text("Output")

    page.get_by_test_id("debug-input-q").fill("hello")
    page.get_by_test_id("run").click()
    expect(page.get_by_test_id("node-out-status")).to_have_attribute("title", "succeeded")
    viewer = page.locator(".dw-json-string", has_text="you said hello").first
    expect(viewer).to_have_text('"you said hello"')


def test_autotqa_offline_says_what_the_scripted_model_knows(page: Page, server: LiveServer) -> None:
    """Finding 2: offline, the page says the scripted model knows only the demo questions and
    offers them; another question is refused at once (no rounds); the sources and tables, and
    a table's columns, are shown."""
    page.goto("/#/tqa")
    notice = page.get_by_test_id("tqa-scripted")
    expect(notice).to_contain_text("scripted")
    known = page.get_by_test_id("tqa-known-question")
    expect(known.filter(has_text="What is the year-end bonus for Tom?")).to_have_count(1)

    page.get_by_test_id("tqa-question").fill("How many customers churned last year?")
    page.get_by_test_id("tqa-ask").click()
    error = page.get_by_test_id("tqa-error")
    expect(error).to_contain_text("scripted_question_unknown")
    expect(error).to_contain_text("What is the year-end bonus for Tom?")
    expect(
        page.get_by_test_id("tqa-conversations").locator("[data-testid^=tqa-conv-]")
    ).to_have_count(0)

    schema = page.get_by_test_id("tqa-schema")
    expect(schema.locator("[data-testid^=tqa-source-]").first).to_be_visible()
    schema.locator("[data-testid^=tqa-table-]").first.click()
    expect(page.get_by_test_id("tqa-columns")).to_be_visible()
    shot(page, "autotqa-offline")

    known.filter(has_text="What is the year-end bonus for Tom?").click()
    expect(page.get_by_test_id("tqa-question")).to_have_value("What is the year-end bonus for Tom?")


def test_the_examples_page_uploads_searches_and_deletes(
    page: Page, server: LiveServer, tmp_path: Path
) -> None:
    """The embedding service's page: make a namespace, upload a CSV with a progress bar,
    search with scores, delete an example, then the namespace."""
    page.on("dialog", lambda dialog: dialog.accept())
    rows = ["question,sql"] + [f'"How many orders in month {m}?",SELECT {m}' for m in range(1, 31)]
    data = tmp_path / "shots.csv"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    page.goto("/")
    page.get_by_test_id("nav-examples").click()
    page.get_by_test_id("ns-name").fill("shots")
    page.get_by_test_id("ns-create").click()
    expect(page.get_by_test_id("ns-view-shots")).to_be_visible()
    page.get_by_test_id("examples-file").set_input_files(str(data))
    expect(page.get_by_test_id("examples-progress-text")).to_have_text("30 / 30")
    expect(page.get_by_test_id("example")).to_have_count(30)
    page.get_by_test_id("examples-query").fill("How many orders in month 7?")
    page.get_by_test_id("examples-search").click()
    hits = page.get_by_test_id("examples-hit")
    expect(hits).to_have_count(5)
    expect(hits.first).to_contain_text("month 7?")
    score = float(page.get_by_test_id("examples-score").first.inner_text())
    assert 0 < score <= 1.0001
    shot(page, "examples")
    page.get_by_test_id("example").first.get_by_role("button", name="Delete").click()
    expect(page.get_by_test_id("example")).to_have_count(29)
    page.get_by_test_id("ns-delete").click()
    expect(page.get_by_test_id("ns-shots")).to_have_count(0)
    assert httpx.get(f"{server.base_url}/api/v1/namespaces/shots").status_code == 404


TOKEN = "e2e-admin-token"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", tmp_path_factory.mktemp("guarded"), admin_token=TOKEN) as running:
        yield running


def test_run_works_behind_an_admin_token(browser: Browser, guarded: LiveServer) -> None:
    """Finding 1: with the admin token given in the editor, the debug panel's Run works."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    base = guarded.base_url
    httpx.post(f"{base}/api/v1/apps", json={"slug": "guarded", "name": "g"}, headers=headers)
    saved = httpx.post(
        f"{base}/api/v1/apps/guarded/versions",
        json={"flow": echo_flow(), "note": "e2e"},
        headers=headers,
    )
    saved.raise_for_status()
    context = browser.new_context(base_url=base, viewport={"width": 1440, "height": 900})
    try:
        context.add_init_script(f"localStorage.setItem('dagwright.adminToken', '{TOKEN}')")
        page = context.new_page()
        page.goto("/#/apps/guarded")
        page.get_by_test_id("debug-input-q").fill("hello")
        page.get_by_test_id("run").click()
        expect(page.get_by_test_id("node-out-status")).to_have_attribute("title", "succeeded")
    finally:
        context.close()
