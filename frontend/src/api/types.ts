// The shared TypeScript shapes of the flow document (docs/flow-format.md) and of the API's
// responses (docs/api.md, backend/dagwright/api/schemas.py). Imported by the editor and the
// debug panel alike: keep it free of runtime code beyond tiny helpers. The API's models with a
// server-side schema come from the generated schema.d.ts (`npm run api:types`).

import type { components } from "./schema";

type Schemas = components["schemas"];

// ---------------------------------------------------------------------------------------------
// The flow document (format "dagwright.flow", version 1)

export interface Position {
  x: number;
  y: number;
}

/** What the executor does when the node fails (docs/flow-format.md, "Error policies"). */
export interface ErrorPolicy {
  retry?: number;
  backoff?: number;
  backoff_factor?: number;
  max_backoff?: number;
  fallback?: "fail" | "default" | "error_branch";
  default?: unknown;
}

export interface FlowNode {
  id: string;
  block: string;
  config?: Record<string, unknown>;
  label?: string;
  position?: Position;
  timeout?: number;
  on_error?: ErrorPolicy;
}

/** A graph stored in the document and run by subflow/map/repeat nodes. */
export interface SubFlow {
  description?: string;
  nodes?: FlowNode[];
  edges?: FlowEdge[];
}

export interface PortRef {
  node: string;
  port?: string; // defaults to "output" on a source
}

export interface FlowEdge {
  source: PortRef;
  target: PortRef;
  branch?: string;
}

export interface FlowDocument {
  format: "dagwright.flow";
  version: 1;
  name?: string;
  description?: string;
  nodes?: FlowNode[];
  edges?: FlowEdge[];
  subflows?: Record<string, SubFlow>;
}

export function emptyFlow(name = "untitled"): FlowDocument {
  return { format: "dagwright.flow", version: 1, name, nodes: [], edges: [] };
}

// ---------------------------------------------------------------------------------------------
// The block registry (GET /api/v1/blocks)

export type BlockCategory = "input" | "data_process" | "condition" | "llm" | "invoke" | "tool";
export type BlockRole = "step" | "flow_input" | "flow_output";

/** A JSON Schema fragment as pydantic exports it. */
export type JsonSchema = {
  type?: string | string[];
  title?: string;
  description?: string;
  default?: unknown;
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  required?: string[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  format?: string;
  $ref?: string;
  $defs?: Record<string, JsonSchema>;
  [key: string]: unknown;
};

export interface PortSpec {
  name: string;
  type: string; // the port type's name: "str", "list[str]", "Any", "str | None"...
  schema: JsonSchema;
  required: boolean;
  description: string;
  default?: unknown;
}

export interface BlockSpec {
  name: string;
  category: BlockCategory | string;
  role: BlockRole | string;
  description: string;
  example: string;
  doc: string;
  module?: string;
  mode?: string;
  config_schema: JsonSchema;
  inputs: PortSpec[];
  outputs: PortSpec[];
  /** Static branches of a condition block (compare: true/false); null when they come from
   *  the config (switch: its cases plus default), absent for other blocks. */
  branches?: string[] | null;
  /** Present when the config adds input ports (template variables, zip fields...). */
  dynamic_inputs?: { type: string; schema: JsonSchema };
}

export interface BlocksResponse {
  categories: string[];
  blocks: BlockSpec[];
}

/** POST /api/v1/blocks/{block}/ports: the ports and branches one config gives a block. */
export interface BlockPorts {
  inputs: PortSpec[];
  outputs: PortSpec[];
  branches: string[] | null;
}

/** POST /api/v1/blocks/ports: each node's ports, or its refusal (an unknown block, a config
 *  that does not parse). */
export interface NodesPorts {
  ports: Record<string, BlockPorts>;
  errors: Record<string, { code: string; message: string }>;
}

/** GET /api/v1/types */
export type Compatibility = "yes" | "check" | "no";
export interface TypesResponse {
  types: string[];
  compatibility: Record<string, Record<string, Compatibility>>;
}

// ---------------------------------------------------------------------------------------------
// Validation

export type Severity = "error" | "warning";

export interface Problem {
  node: string | null;
  port: string | null;
  code: string;
  message: string;
  severity: Severity | string;
}

export interface ValidationResult {
  ok: boolean;
  problems: Problem[];
}

// ---------------------------------------------------------------------------------------------
// Apps, versions, keys, secrets

// The API's own models, generated from the server's OpenAPI document (schema.d.ts).
export type AppOut = Schemas["AppOut"];
export type VersionOut = Schemas["VersionOut"];
/** The server types a flow as a JSON object; the editor reads it as a FlowDocument. */
export type VersionDetail = Omit<Schemas["VersionDetail"], "flow"> & { flow: FlowDocument };
export type AppUpdate = Schemas["AppUpdate"];
/** The fields the server fills when they are left out (the generated type marks a field with
 *  a default as always present, as it is in an answer). */
type Defaulted<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;
/** POST /api/v1/apps/{app}/versions: a FlowDocument as the flow; note and author may be left out. */
export type VersionCreate = Defaulted<Omit<Schemas["VersionCreate"], "flow"> & { flow: FlowDocument }, "note" | "author">;

export interface Page<T> {
  items: T[];
  total: number;
  offset: number;
  limit: number;
}

export interface EdgeDiffItem {
  source: PortRef;
  target: PortRef;
  branch?: string | null;
}

/** GET /api/v1/apps/{app}/diff?a=&b=: what changed from version a to version b (moves are
 *  not changes). */
export interface VersionDiff {
  nodes: {
    added: string[];
    removed: string[];
    changed: { id: string; fields: string[] }[];
  };
  edges: {
    added: EdgeDiffItem[];
    removed: EdgeDiffItem[];
  };
  meta: Record<string, { from: string; to: string }>;
}

export type KeyOut = Schemas["KeyOut"];
export type KeyCreated = Schemas["KeyCreated"];
/** POST /api/v1/template-variables: what a template reads, by the server's own parser. */
export type TemplateVariablesOut = Schemas["TemplateVariablesOut"];

/** GET /api/v1/secrets: names only; values never leave the server. */
export interface SecretsResponse {
  names: string[];
}

/** GET /api/v1/apps/{app}/export (and the body of POST /api/v1/apps/import). */
export interface AppExport {
  format: "dagwright.app";
  version: number;
  app: { slug: string; name: string; description: string };
  versions: {
    number: number;
    parent: number | null;
    note: string;
    author: string;
    created_at: string;
    flow: FlowDocument;
  }[];
  published?: number | null;
  [key: string]: unknown;
}

// ---------------------------------------------------------------------------------------------
// Runs (shared with the debug panel)

export type NodeRunStatus =
  | "pending"
  | "running"
  | "succeeded"
  | "skipped"
  | "failed"
  | "cancelled"
  | "reused"
  | "waiting"; // stopped to wait for a person (a human_input node, or a sub-flow node around one)

export type NodeRunState = {
  status: NodeRunStatus;
  durationMs?: number;
  tokens?: number;
  error?: string;
};
