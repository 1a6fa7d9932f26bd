"""The `mcp_tool` block: call a tool of any MCP server (streamable HTTP; stdio when the
operator allows the command). The MCP SDK is imported when the block runs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dagwright.registry import EGRESS, MCP_STDIO, SECRETS, NodeContext, Service, block
from dagwright.secrets import check_secret_name


class McpToolConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(
        None, description="The MCP server's streamable HTTP URL, e.g. https://tools.example/mcp"
    )
    command: list[str] = Field(
        default_factory=list,
        description="A stdio MCP server's program and arguments (only commands the operator "
        "allows in DAGWRIGHT_MCP_STDIO_COMMANDS).",
    )
    tool: str = Field(min_length=1, description="The tool to call, by name.")
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="Fixed arguments of the tool."
    )
    inputs: list[str] = Field(
        default_factory=list,
        description="Tool arguments taken from this node's input ports (one port each).",
    )
    output: str | None = Field(
        None, description="Return only this field of the tool's structured result."
    )
    token_secret: str | None = Field(
        None, description="The secret holding a bearer token for the HTTP server."
    )
    timeout: float = Field(60.0, gt=0, le=3600, description="Seconds to wait for the tool.")

    @field_validator("url")
    @classmethod
    def _http(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return url

    @field_validator("token_secret")
    @classmethod
    def _secret(cls, name: str | None) -> str | None:
        return None if name is None else check_secret_name(name)

    @model_validator(mode="after")
    def _one_server(self) -> McpToolConfig:
        if (self.url is None) == (not self.command):
            raise ValueError("give the MCP server as a url or a command, exactly one of them")
        if len(set(self.inputs)) != len(self.inputs):
            raise ValueError("inputs: a name is given twice")
        return self


def _input_ports(config: McpToolConfig) -> list[str]:
    return list(config.inputs)


def _needs(config: McpToolConfig) -> tuple[Service[Any], ...]:
    # A stdio server is a program started here: the operator's allow-list decides.
    secrets = (SECRETS,) if config.token_secret else ()
    return (*secrets, MCP_STDIO) if config.command else (*secrets, EGRESS)


@block(
    "mcp_tool",
    category="tool",
    description="Call a tool of an MCP server (streamable HTTP, or an allowed stdio command).",
    example="url https://tools.example/mcp, tool 'search', inputs [query] -> the tool's result",
    dynamic_ports=_input_ports,
    needs=_needs,
    # A tool may act on anything: a durable run resumed after its worker died fails (naming
    # the node) rather than call it twice.
    side_effects="not_retryable",
)
async def mcp_tool(config: McpToolConfig, ctx: NodeContext, **inputs: Any) -> Any:
    """Connects to the MCP server, calls `tool` with the fixed `arguments` and the input
    ports named in `inputs`, and returns the tool's structured result (or the field named in
    `output`), else its text. A tool that reports an error fails the node with its message.
    An HTTP server must be at a public address, or one the operator allows in
    DAGWRIGHT_EGRESS_ALLOW (refused: `egress_denied`)."""
    from dagwright.egress import EgressPolicy
    from dagwright.mcp.client import McpTarget, StdioAllowList, call_tool

    token = ctx.service(SECRETS).get(config.token_secret) if config.token_secret else None
    target = McpTarget(config.url, tuple(config.command), token)
    allowed = ctx.service(MCP_STDIO) if config.command else StdioAllowList()
    # A stdio server makes no outbound connection of ours: it needs no egress policy.
    egress = ctx.service(EGRESS) if config.url is not None else EgressPolicy()
    arguments = {**config.arguments, **inputs}
    result = await call_tool(target, config.tool, arguments, allowed, egress, config.timeout)
    if config.output is None:
        return result
    if not isinstance(result, dict) or config.output not in result:
        raise ValueError(f"tool {config.tool!r} returned no field {config.output!r}")
    return result[config.output]
