"""Installing the methods' flows (flows/methods) as published apps, and registering them as
AutoTQA tools, so the CLI (`dagwright run`, `dagwright eval run`), the API and the editor reach
them like any app. Publishing again makes a new version only when a flow changed."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from dagwright.errors import ConflictError, NotFoundError
from dagwright.services.apps import AppService
from dagwright.tqa.tools import ToolRegistry

# backend/dagwright/methods/publish.py -> the repository's flows/methods (a checkout).
FLOWS_DIR = Path(__file__).resolve().parents[3] / "flows" / "methods"
METHOD_FLOWS = {
    "chain-of-table-wikitq": "chain_of_table/wikitq.json",
    "chain-of-table-tabfact": "chain_of_table/tabfact.json",
    "chain-of-table-fetaqa": "chain_of_table/fetaqa.json",
    "mac-sql-spider": "mac_sql/spider.json",
    "mac-sql-bird": "mac_sql/bird.json",
    "finqa-single-agent": "finqa_reflection/single_agent.json",
    "finqa-critic": "finqa_reflection/critic.json",
    "finqa-two-critics": "finqa_reflection/two_critics.json",
    # Data-Copilot on the library named "billing" (dagwright data demo-load): design, then ask.
    "data-copilot-design": "data_copilot/design.json",
    "data-copilot": "data_copilot/deploy.json",
}
# AutoTQA tools: name -> (app, what the Engineer reads). Each plays the `question` role: the
# conversation's question comes along when the Engineer leaves it out (tqa/tools.py).
METHOD_TOOLS = {
    "mac_sql": (
        "mac-sql-spider",
        "MAC-SQL text-to-SQL: selects the relevant tables and columns, decomposes the question "
        'into sub-questions with SQL, runs and repairs the SQL. Input: {"question": "...", '
        '"database": "<a data source\'s name; empty: every source>"}.',
    ),
    "chain_of_table": (
        "chain-of-table-wikitq",
        "Chain-of-Table reasoning over one table: selects rows and columns, groups, sorts and "
        'adds columns step by step, then answers. Input: {"question": "...", "table": '
        '"<source.schema.table>"}.',
    ),
}


def load_method_flow(file: str, flows_dir: Path = FLOWS_DIR) -> dict[str, Any]:
    flow: dict[str, Any] = json.loads((flows_dir / file).read_text(encoding="utf-8"))
    return flow


def publish_methods(
    apps: AppService, tools: ToolRegistry | None = None, *, flows_dir: Path = FLOWS_DIR
) -> list[dict[str, Any]]:
    """Create or update and publish every method app; with `tools`, register the AutoTQA
    tools (an existing tool of the same name is left as it is). Returns {app, version,
    changed} per app."""
    done: list[dict[str, Any]] = []
    for slug, file in METHOD_FLOWS.items():
        flow = load_method_flow(file, flows_dir)
        try:
            apps.get_app(slug)
        except NotFoundError:
            # Another process may have created it meanwhile.
            with contextlib.suppress(ConflictError):
                apps.create_app(slug, str(flow.get("name", slug)), flow.get("description", ""))
        graph = apps.prepare(flow).graph
        if apps.get_app(slug).published_version_id is not None:
            current = apps.get_version(slug, "published")
            if current.graph == graph:
                done.append({"app": slug, "version": current.number, "changed": False})
                continue
        version = apps.create_version(slug, flow, note=f"published from flows/methods/{file}")
        apps.publish(slug, version.id)
        done.append({"app": slug, "version": version.number, "changed": True})
    if tools is not None:
        for name, (app, description) in METHOD_TOOLS.items():
            try:
                tools.get(name)
            except NotFoundError:
                tools.put(name, app, description, "question")
    return done
