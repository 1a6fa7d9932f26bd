"""Calling the agents and tools: each is a published app, reached in-process (the run service,
recorded like any run, mode `tqa`) or over HTTP (its published endpoint, with an API key).
Either way the orchestrator gets the outputs, the tokens spent and the run id."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagwright.errors import DagwrightError
from dagwright.registry import Usage
from dagwright.runtime.events import NodeUsage

if TYPE_CHECKING:
    import httpx

    from dagwright.services.apps import AppService
    from dagwright.services.runs.service import RunService

# The published app of each agent (and of the LLM scheduler).
AGENT_APPS = {
    "Planner": "autotqa-planner",
    "Engineer": "autotqa-engineer",
    "Critic": "autotqa-critic",
    "scheduler": "autotqa-scheduler",
    "Executor": "autotqa-executor",
}


class AgentCallError(DagwrightError):
    """An agent's or tool's run did not succeed (its message names the run)."""

    code = "agent_failed"

    def __init__(self, message: str, code: str | None = None, run_id: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.run_id = run_id


@dataclass(slots=True)
class AgentReply:
    outputs: dict[str, Any]
    usage: dict[str, Any] | None
    run_id: str | None
    duration: float  # seconds, as the caller saw it


def agent_usage(usage: Usage) -> dict[str, Any]:
    """AutoTQA's JSON form of what an agent spent: Usage's, with total_tokens."""
    return {**usage.to_dict(), "total_tokens": usage.total_tokens}


def normal_usage(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A run's usage as its record or a server's answer gives it, in AutoTQA's form."""
    return agent_usage(Usage.from_dict(usage)) if usage else None


class AgentCaller:
    """Runs a published app with inputs; raises AgentCallError when it does not succeed
    (code `agent_timeout` after `time_limit` seconds)."""

    async def call(
        self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
    ) -> AgentReply:
        raise NotImplementedError


class InProcessAgentCaller(AgentCaller):
    """Through this process's run service: each call is a recorded run (mode `tqa`); its
    usage includes that of the runs it invoked (the Executor's tools)."""

    def __init__(self, apps: AppService, runs: RunService) -> None:
        self._apps = apps
        self._runs = runs

    async def call(
        self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
    ) -> AgentReply:
        started = time.perf_counter()
        try:
            target = await asyncio.to_thread(self._apps.get_version, app, "published")
            plan = self._apps.compiled(target)
            live = await self._runs.start(
                plan, inputs, app_id=target.app_id, version_id=target.id, mode="tqa"
            )
        except DagwrightError as exc:
            raise AgentCallError(f"app {app!r}: {exc.message}", exc.code) from exc
        try:
            record = await asyncio.wait_for(live.wait(), time_limit)
        except TimeoutError:
            live.run.cancel(f"took longer than {time_limit:g} s")
            raise AgentCallError(
                f"app {app!r} (run {live.run_id}) did not finish within {time_limit:g} s",
                "agent_timeout",
                live.run_id,
            ) from None
        except asyncio.CancelledError:
            live.run.cancel("the conversation was cancelled")
            raise
        if record.status != "succeeded":
            error = record.error or {}
            raise AgentCallError(
                f"app {app!r} (run {record.id}) {record.status}: "
                f"{error.get('message', 'no error recorded')}",
                str(error.get("code") or "agent_failed"),
                record.id,
            )
        usage = normal_usage(record.usage)
        children = await asyncio.to_thread(self._runs.children_usage, record.id)
        if children:
            total = Usage.from_dict(record.usage or {})
            for child in children:
                total.add(child)
            usage = agent_usage(total)
        if usage is not None:
            # Say when the scripted model answered (never present its answers as a model's).
            usage["scripted"] = any(
                isinstance(event, NodeUsage) and event.call.scripted for event in live.run.events
            )
        return AgentReply(
            dict(record.outputs or {}), usage, record.id, time.perf_counter() - started
        )


class HttpAgentCaller(AgentCaller):
    """Through the published endpoints of a dagwright server: POST /api/v1/apps/{app}/run
    with the app's API key (`keys` by app slug; `default_key` for the others)."""

    def __init__(
        self,
        base_url: str,
        keys: Mapping[str, str] | None = None,
        default_key: str | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        # httpx (with its command line's rich) costs a server's start-up ~0.2 s of CPU; only
        # the HTTP caller needs it.
        import httpx

        self._keys = dict(keys or {})
        self._default_key = default_key
        self._client = client or httpx.AsyncClient(base_url=base_url, timeout=None)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def call(
        self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
    ) -> AgentReply:
        import httpx

        key = self._keys.get(app, self._default_key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        started = time.perf_counter()
        try:
            response = await self._client.post(
                f"/api/v1/apps/{app}/run",
                json={"inputs": dict(inputs)},
                headers=headers,
                timeout=time_limit,
            )
        except httpx.TimeoutException:
            raise AgentCallError(
                f"app {app!r} did not answer within {time_limit:g} s", "agent_timeout"
            ) from None
        except httpx.HTTPError as exc:
            raise AgentCallError(f"app {app!r}: {exc}", "agent_unreachable") from exc
        body: dict[str, Any] = response.json() if response.content else {}
        if response.status_code != 200:
            error = body.get("error") or {}
            raise AgentCallError(
                f"app {app!r}: HTTP {response.status_code}: {error.get('message', response.text)}",
                str(error.get("code") or "agent_failed"),
            )
        if body.get("status") != "succeeded":
            error = body.get("error") or {}
            raise AgentCallError(
                f"app {app!r} (run {body.get('run_id')}) {body.get('status')}: "
                f"{error.get('message', 'no error recorded')}",
                str(error.get("code") or "agent_failed"),
                body.get("run_id"),
            )
        return AgentReply(
            dict(body.get("outputs") or {}),
            normal_usage(body.get("usage")),
            body.get("run_id"),
            time.perf_counter() - started,
        )
