"""Apps calling apps in-process: the child run is recorded with a link to its parent run and
node, nesting is bounded, and cancelling the parent cancels the child."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from dagwright.errors import DagwrightError
from dagwright.runtime import AppFlows, CompiledFlow
from dagwright.services.apps import AppService
from dagwright.services.runs.service import RunService


class InvokeError(DagwrightError):
    code = "invoke_failed"


class InvokeDepthError(DagwrightError):
    code = "invoke_depth"


class InProcessInvoker(AppFlows):
    def __init__(self, apps: AppService, runs: RunService, max_depth: int = 8) -> None:
        self._apps = apps
        self._runs = runs
        self._max_depth = max_depth
        self._depth: dict[str, int] = {}  # run id -> how deep it is nested (this process)

    async def compiled_app(self, app: str, version: str) -> CompiledFlow:
        """An app version's compiled flow, for a sub-flow node that runs it inside the
        calling run (compiled once per version; the lookup runs off the loop)."""
        return await asyncio.to_thread(
            lambda: self._apps.compiled(self._apps.get_version(app, version))
        )

    async def invoke(
        self,
        app: str,
        version: str | None,
        inputs: Mapping[str, Any],
        *,
        parent_run_id: str,
        parent_node: str,
    ) -> dict[str, Any]:
        depth = self._depth.get(parent_run_id, 0) + 1
        if depth > self._max_depth:
            raise InvokeDepthError(
                f"invoking {app!r} would nest {depth} runs deep; the limit is {self._max_depth} "
                "(does an app invoke itself?)"
            )
        target = await asyncio.to_thread(self._apps.get_version, app, version or "published")
        plan = self._apps.compiled(target)
        live = await self._runs.start(
            plan,
            inputs,
            app_id=target.app_id,
            version_id=target.id,
            mode="invoke",
            parent_run_id=parent_run_id,
            parent_node=parent_node,
        )
        self._depth[live.run_id] = depth
        try:
            record = await live.wait()
        except asyncio.CancelledError:
            live.run.cancel("the calling run was cancelled")
            raise
        finally:
            self._depth.pop(live.run_id, None)
        if record.status != "succeeded":
            reason = (record.error or {}).get("message", "no error recorded")
            raise InvokeError(f"app {app!r} (run {record.id}) {record.status}: {reason}")
        return dict(record.outputs or {})
