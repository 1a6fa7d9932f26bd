"""MCP both ways, with the official SDK: published apps served as MCP tools (`server`,
`hosting`), and flows calling the tools of other MCP servers (`client`, the `mcp_tool` block).
The SDK is imported only when MCP is used."""
