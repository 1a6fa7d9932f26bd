"""Invoke blocks: a flow calling another flow, in-process or on a remote dagwright server."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.registry import APPS, EGRESS, SECRETS, NodeContext, block
from dagwright.telemetry.context import traceparent_for

_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class InvokeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: str = Field(description="The app to call, by slug.")
    version: str | None = Field(
        None, description="A version number or id to pin; empty: the published version."
    )
    inputs: list[str] = Field(
        default_factory=list,
        description="The called app's input names; each becomes an input port of this node.",
    )
    output: str | None = Field(
        None, description="Return only this output of the called app; empty: all, as a dict."
    )

    @field_validator("inputs")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        if len(set(names)) != len(names):
            raise ValueError("inputs: a name is given twice")
        return names


class RemoteInvokeConfig(InvokeConfig):
    url: str = Field(description="The remote dagwright server, e.g. https://flows.example.com")
    api_key_secret: str = Field(description="The secret holding the remote app's API key.")
    timeout: float = Field(120.0, gt=0, le=3600, description="Seconds to wait for the answer.")

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url.rstrip("/")


def _input_ports(config: InvokeConfig) -> list[str]:
    return list(config.inputs)


def _pick(config: InvokeConfig, outputs: dict[str, Any]) -> Any:
    if config.output is None:
        return outputs
    if config.output not in outputs:
        known = ", ".join(outputs) or "none"
        raise ValueError(f"app {config.app!r} returned no output {config.output!r} ({known})")
    return outputs[config.output]


@block(
    "invoke_app",
    category="invoke",
    description="Run another app (its published or a pinned version) as a step of this flow.",
    example="app 'text-to-sql', inputs [question] -> {'sql': ..., 'rows': ...}",
    dynamic_ports=_input_ports,
    needs=(APPS,),
    # What the called app does is its own: a durable run resumed after its worker died fails
    # (naming the node) rather than run it twice.
    side_effects="not_retryable",
)
async def invoke_app(config: InvokeConfig, ctx: NodeContext, **inputs: Any) -> Any:
    """Calls another app of this server in-process, with the same semantics as its URL: the
    published version unless one is pinned. Its run is recorded as a child of this run (open
    it from the trace). The called app's input names are this node's ports; the result is
    the app's outputs as a dict, or the one named in `output`. Calls nest, to a bounded depth."""
    invoker = ctx.service(APPS)
    outputs = await invoker.invoke(
        config.app, config.version, inputs, parent_run_id=ctx.run_id, parent_node=ctx.node_id
    )
    return _pick(config, outputs)


@block(
    "invoke_remote",
    category="invoke",
    description="Call an app published on another dagwright server, with its API key.",
    example="url https://flows.example.com, app 'summarise' -> {'summary': ...}",
    dynamic_ports=_input_ports,
    needs=(SECRETS, EGRESS),
    side_effects="not_retryable",  # a second run of the remote app, as invoke_app
)
async def invoke_remote(config: RemoteInvokeConfig, ctx: NodeContext, **inputs: Any) -> Any:
    """POSTs the inputs to `{url}/api/v1/apps/{app}/run` with the API key from the secret
    store, waits for the run, and returns its outputs (or the one named in `output`). A run
    that fails remotely fails this node with the remote error."""
    import httpx  # here, not at the top: ~60 ms that loading the registry does not pay

    from dagwright.egress_http import async_client

    key = ctx.service(SECRETS).get(config.api_key_secret)
    body: dict[str, Any] = {"inputs": inputs}
    if config.version is not None:
        body["version"] = config.version
    endpoint = f"{config.url}/api/v1/apps/{config.app}/run"
    headers = {"Authorization": f"Bearer {key}"}
    traceparent = traceparent_for(ctx.run_id, ctx.node_id)
    if traceparent is not None:  # the remote run joins this run's trace
        headers["traceparent"] = traceparent
    try:
        # The egress policy checks the remote server's addresses as it connects.
        async with async_client(ctx.service(EGRESS), timeout=config.timeout) as client:
            response = await client.post(endpoint, json=body, headers=headers)
    except httpx.TimeoutException:
        raise ValueError(f"{endpoint} did not answer within {config.timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ValueError(f"cannot reach {endpoint}: {type(exc).__name__}: {exc}") from None
    try:
        payload = response.json()
    except ValueError:
        raise ValueError(f"{endpoint} answered HTTP {response.status_code}, not JSON") from None
    if response.status_code != 200:
        error = payload.get("error", {}) if isinstance(payload, dict) else {}
        message = error.get("message", response.text[:200]) if isinstance(error, dict) else ""
        raise ValueError(f"{endpoint} answered HTTP {response.status_code}: {message}")
    if payload.get("status") != "succeeded":
        error = payload.get("error") or {}
        raise ValueError(
            f"remote run {payload.get('run_id')} {payload.get('status')}: {error.get('message')}"
        )
    outputs = payload.get("outputs")
    if not isinstance(outputs, dict):
        raise ValueError(f"{endpoint} returned no outputs")
    return _pick(config, outputs)
