// Data-Copilot interface shapes as the server answers them
// (backend/dagwright/methods/data_copilot/{interface,library}.py).

export type InputType = "str" | "int" | "float" | "bool" | "date" | "list" | "table";

export interface InterfaceInput {
  name: string;
  type: InputType;
  description: string;
  default: unknown;
}

/** The stored definition: what a PUT sends back whole (the server forbids unknown fields). */
export interface InterfaceDef {
  name: string;
  description: string;
  inputs: InterfaceInput[];
  tables: string[];
  code: string;
  tests: Record<string, unknown>[];
}

/** GET /api/v1/data-copilot/{source}/interfaces: one entry per interface in use. */
export interface InterfaceEntry {
  name: string;
  version: number;
  origin: string; // designed | merged | edited
  signature: string;
  interface: InterfaceDef;
  created_at: string;
}

export interface UncoveredRequest {
  id: string;
  request: string;
  reason: string;
}

export interface SourceSummary {
  name: string;
  kind: string;
  description: string;
}
