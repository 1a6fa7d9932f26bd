"""The Evaluations page in Chromium: an evaluation started from the page runs, its report
shows with the failed example, and the list of evaluations (one page of them) names it."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Page, expect

from support.server import LiveServer, edge, flow, node


def test_an_evaluation_started_from_the_page_reports(page: Page, server: LiveServer) -> None:
    # The app answers with the question: right where the answer is the question.
    echo = flow(
        [node("question", "text_input", name="question"), node("out", "output", name="answer")],
        [edge("question", "out")],
    )
    server.api.published_app("e2e-echo", echo)
    path = server.settings.data_dir / "sources" / "e2e-echo.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    records = [("e0", "7", "7"), ("e1", "8", "8"), ("e2", "9", "10")]
    path.write_text(
        "".join(json.dumps({"id": i, "question": q, "answer": a}) + "\n" for i, q, a in records)
    )
    created = server.api.http.post(
        "/api/v1/datasets", json={"name": "echoes", "kind": "generic", "path": str(path)}
    )
    assert created.status_code == 201, created.text

    page.goto("/#/evaluations")
    box = page.get_by_role("region", name="Run an evaluation")
    box.get_by_label("app", exact=True).fill("e2e-echo")
    box.get_by_label("dataset", exact=True).select_option("echoes")
    box.get_by_test_id("start-evaluation").click()
    expect(page).to_have_url(re.compile(r"#/evaluations/\w+$"))
    report = page.get_by_test_id("report")
    expect(report).to_contain_text("failures (1)", timeout=30_000)
    expect(report).to_contain_text("e2")
    evaluation_id = page.url.rsplit("/", 1)[-1]
    listed = page.get_by_role("region", name="Evaluations").get_by_test_id(
        f"evaluation-{evaluation_id}"
    )
    expect(listed).to_contain_text("e2e-echo")
    # One page: no "newest N of M" note while every evaluation is on it.
    expect(page.get_by_test_id("evaluations-more")).to_have_count(0)
