// The tools of an MCP server, as the server lists them (POST /api/v1/mcp/tools), for the
// mcp_tool block's config form.

import type { components } from "../api/schema";
import { type RequestOptions, request } from "../api/transport";

export interface McpTool {
  name: string;
  title?: string | null;
  description?: string | null;
  input_schema: JsonSchemaObject;
}

export interface JsonSchemaObject {
  type?: string;
  properties?: Record<string, { type?: string | string[]; description?: string; default?: unknown; title?: string }>;
  required?: string[];
}

/** Where the server is, from the block's config: a URL, or a stdio command (when the
 *  operator allows it), with the secret holding its bearer token. */
export type McpServerIn = components["schemas"]["McpServerIn"];

export function serverOf(config: Record<string, unknown>): McpServerIn | null {
  const ref: McpServerIn = {};
  if (typeof config.url === "string" && config.url) ref.url = config.url;
  else if (Array.isArray(config.command) && config.command.length > 0) ref.command = config.command.map(String);
  else return null;
  if (typeof config.token_secret === "string" && config.token_secret) ref.token_secret = config.token_secret;
  return ref;
}

export function listMcpTools(server: McpServerIn, options?: RequestOptions): Promise<McpTool[]> {
  return request<{ tools: McpTool[] }>("POST", "/api/v1/mcp/tools", server, options).then((r) => r.tools);
}

/** A tool's arguments, one row each: name, type, whether required, description, default. */
export function argumentsOf(tool: McpTool): { name: string; type: string; required: boolean; description: string; default?: unknown }[] {
  const required = new Set(tool.input_schema.required ?? []);
  return Object.entries(tool.input_schema.properties ?? {}).map(([name, spec]) => ({
    name,
    type: Array.isArray(spec.type) ? spec.type.join(" | ") : (spec.type ?? "any"),
    required: required.has(name),
    description: spec.description ?? spec.title ?? "",
    ...(spec.default === undefined ? {} : { default: spec.default }),
  }));
}
