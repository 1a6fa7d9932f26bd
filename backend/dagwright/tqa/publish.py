"""Publishing the AutoTQA apps from flows/autotqa: each flow becomes (or updates) an app and
its published version — a new version only when the graph changed — and the built-in tools
are registered. Run by `dagwright tqa publish`, `POST /api/v1/tqa/publish`, and lazily by
the server on the first AutoTQA request."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dagwright.errors import ConflictError, NotFoundError
from dagwright.services.apps import AppService
from dagwright.tqa.tools import BUILTIN_TOOLS, ToolRegistry

# backend/dagwright/tqa/publish.py -> the repository's flows/autotqa (a checkout).
FLOWS_DIR = Path(__file__).resolve().parents[3] / "flows" / "autotqa"
APP_FLOWS = {
    "autotqa-planner": "planner.json",
    "autotqa-engineer": "engineer.json",
    "autotqa-critic": "critic.json",
    "autotqa-scheduler": "scheduler.json",
    "autotqa-text-to-sql": "text_to_sql.json",
    "autotqa-python": "python_on_tables.json",
}


def load_flow(
    file: str, flows_dir: Path = FLOWS_DIR, examples_namespace: str | None = None
) -> dict[str, Any]:
    """A flow of flows/autotqa. With `examples_namespace`, the text-to-SQL flow's `examples`
    input is replaced by a `few_shot` node picking the namespace's examples closest to the
    question (`{question, sql}` payloads)."""
    flow: dict[str, Any] = json.loads((flows_dir / file).read_text(encoding="utf-8"))
    if examples_namespace and any(n["id"] == "examples" for n in flow["nodes"]):
        for node in flow["nodes"]:
            if node["id"] == "examples":
                node["block"] = "few_shot"
                node["config"] = {
                    "namespace": examples_namespace,
                    "k": 5,
                    "template": "Q: {{ example.question }}\nSQL: {{ example.sql }}",
                }
        flow["edges"].append(
            {
                "source": {"node": "question", "port": "output"},
                "target": {"node": "examples", "port": "query"},
            }
        )
    return flow


def publish_agents(
    apps: AppService,
    tools: ToolRegistry,
    *,
    flows_dir: Path = FLOWS_DIR,
    examples_namespace: str | None = None,
) -> list[dict[str, Any]]:
    """Create or update and publish every AutoTQA app; register the built-in tools. Returns
    what was done per app: {app, version, changed}."""
    done: list[dict[str, Any]] = []
    for slug, file in APP_FLOWS.items():
        flow = load_flow(file, flows_dir, examples_namespace if slug.endswith("sql") else None)
        try:
            app = apps.get_app(slug)
        except NotFoundError:
            try:
                app = apps.create_app(
                    slug, str(flow.get("name", slug)), flow.get("description", "")
                )
            except ConflictError:  # another process (replica) created it meanwhile
                app = apps.get_app(slug)
        graph = apps.prepare(flow).graph
        if app.published_version_id is not None:
            current = apps.get_version(slug, "published")
            if current.graph == graph:
                done.append({"app": slug, "version": current.number, "changed": False})
                continue
        version = apps.create_version(slug, flow, note=f"published from flows/autotqa/{file}")
        apps.publish(slug, version.id)
        done.append({"app": slug, "version": version.number, "changed": True})
    for name, (app_slug, description) in BUILTIN_TOOLS.items():
        try:
            existing = tools.get(name)
        except NotFoundError:
            tools.put(name, app_slug, description)
        else:
            if existing.app == app_slug and existing.description != description:
                tools.put(name, app_slug, description)
    return done
