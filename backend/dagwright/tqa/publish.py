"""Publishing the AutoTQA apps from flows/autotqa: each flow becomes (or updates) an app and
its published version — a new version only when the graph changed — and the built-in tools
are registered. Run by `dagwright tqa publish`, `POST /api/v1/tqa/publish`, and lazily by
the server on the first AutoTQA request.

The published flows are the same for every dataset: what differs per dataset (SOP, example
namespaces, hints) is stored in its TQA profile and given to the agents as inputs on each
call, so publishing again never changes how a dataset is answered."""

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
    "autotqa-executor": "executor.json",
    "autotqa-text-to-sql": "text_to_sql.json",
    "autotqa-python": "python_on_tables.json",
}


def load_flow(file: str, flows_dir: Path = FLOWS_DIR) -> dict[str, Any]:
    """A flow of flows/autotqa."""
    flow: dict[str, Any] = json.loads((flows_dir / file).read_text(encoding="utf-8"))
    return flow


def publish_agents(
    apps: AppService,
    tools: ToolRegistry,
    *,
    flows_dir: Path = FLOWS_DIR,
) -> list[dict[str, Any]]:
    """Create or update and publish every AutoTQA app; register the built-in tools. Returns
    what was done per app: {app, version, changed}."""
    done: list[dict[str, Any]] = []
    for slug, file in APP_FLOWS.items():
        flow = load_flow(file, flows_dir)
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
    for name, builtin in BUILTIN_TOOLS.items():
        try:
            existing = tools.get(name)
        except NotFoundError:
            tools.put(name, builtin.app, builtin.description, builtin.role)
        else:
            # A tool of that name running another app is the operator's: left as it is.
            stale = (existing.description, existing.role) != (builtin.description, builtin.role)
            if existing.app == builtin.app and stale:
                tools.put(name, builtin.app, builtin.description, builtin.role)
    return done
