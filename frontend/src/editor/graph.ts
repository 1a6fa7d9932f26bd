// The flow document <-> @xyflow/react nodes and edges, and the ports a node shows.
// Pure functions: the editor keeps xyflow's nodes and edges as its working state and turns
// them back into a FlowDocument to validate, save, debug and keep as a draft.

import type { Edge, Node } from "@xyflow/react";
import type { BlockSpec, ErrorPolicy, FlowDocument, FlowEdge, FlowNode, PortSpec, SubFlow } from "../api/types";
import { isTemplateField } from "../forms/schema";

/** A port as a node draws it; `missing` marks a port an edge names that the block lacks,
 *  `pending` one an edge names while the server's answer for the node is awaited. */
export type NodePort = PortSpec & { missing?: boolean; pending?: boolean; policy?: boolean };

export interface NodePorts {
  inputs: NodePort[];
  outputs: NodePort[];
  /** The branches of a condition block (its output edges carry one each); null otherwise. */
  branches: string[] | null;
  /** The ports depend on a template only the server reads (POST /api/v1/blocks/ports): these
   *  are the ports known so far, and the server's answer replaces them. */
  pending?: boolean;
}

export type NodeData = {
  block: string;
  config: Record<string, unknown>;
  label?: string;
  timeout?: number;
  on_error?: ErrorPolicy;
  ports: NodePorts;
};

export type EditorNode = Node<NodeData, "block">;
export type EdgeData = { branch?: string };
export type EditorEdge = Edge<EdgeData>;

export interface Graph {
  nodes: EditorNode[];
  edges: EditorEdge[];
}

export type BlockMap = ReadonlyMap<string, BlockSpec>;

export const NODE_ID_RE = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

// ---------------------------------------------------------------------------------------------
// Handles: an input port's handle id is its name; an output's is its name, or
// "<port>#<branch>" for each branch of a condition.

export function sourceHandleId(port: string, branch?: string | null): string {
  return branch ? `${port}#${branch}` : port;
}

export function parseSourceHandle(handle: string | null | undefined): {
  port: string;
  branch?: string;
} {
  const value = handle ?? "output";
  const hash = value.indexOf("#");
  if (hash < 0) return { port: value };
  return { port: value.slice(0, hash), branch: value.slice(hash + 1) };
}

export function edgeKey(e: {
  source: { node: string; port?: string };
  target: { node: string; port?: string };
  branch?: string | null;
}): string {
  const branch = e.branch ? `#${e.branch}` : "";
  return `${e.source.node}.${e.source.port ?? "output"}${branch}->${e.target.node}.${e.target.port ?? "output"}`;
}

// ---------------------------------------------------------------------------------------------
// Ports

export function isCondition(spec: BlockSpec | undefined): boolean {
  return !!spec && (spec.category === "condition" || spec.branches !== undefined);
}

/** The ports one config gives a block, as far as the editor can tell without asking the
 *  server: the static ports, plus for blocks with dynamic inputs the names in list fields
 *  that say they make ports; for conditions with config-made branches (switch), the cases
 *  plus "default". A template-valued field's variables are the server's to read (its Jinja2
 *  parser): with one filled in, the ports are `pending` until the server answers. */
export function estimatePorts(spec: BlockSpec | undefined, config: Record<string, unknown>): NodePorts {
  if (!spec) return { inputs: [], outputs: [], branches: null };
  const inputs: NodePort[] = [...spec.inputs];
  let pending = false;
  if (spec.dynamic_inputs) {
    const seen = new Set(inputs.map((p) => p.name));
    const dynType = spec.dynamic_inputs.type;
    const dynSchema = spec.dynamic_inputs.schema;
    const add = (name: string) => {
      if (!name || seen.has(name)) return;
      seen.add(name);
      inputs.push({ name, type: dynType, schema: dynSchema, required: true, description: "" });
    };
    const props = spec.config_schema.properties ?? {};
    for (const [field, schema] of Object.entries(props)) {
      const value = config[field];
      if (typeof value === "string" && (isTemplateField(field, schema) || /\{\{|\{%/.test(value))) {
        if (value.trim() !== "") pending = true;
      } else if (Array.isArray(value) && /port/i.test(String(schema.description ?? ""))) {
        value.filter((v): v is string => typeof v === "string").forEach(add);
      }
    }
  }
  let branches: string[] | null = null;
  if (isCondition(spec)) {
    if (Array.isArray(spec.branches)) branches = [...spec.branches];
    else {
      const cases = Array.isArray(config.cases)
        ? config.cases.filter((c): c is string => typeof c === "string" && c !== "")
        : [];
      branches = [...new Set(cases), "default"];
    }
  }
  const ports: NodePorts = { inputs, outputs: [...spec.outputs], branches };
  if (pending) ports.pending = true;
  return ports;
}

/** Ports to show while the server's answer for a new config is awaited: the estimate, and
 *  the input ports the node had (a template's variables stay until the server says which
 *  remain, so an edit does not flash its edges red). */
export function pendingPorts(estimate: NodePorts, had: NodePorts): NodePorts {
  if (!estimate.pending) return estimate;
  const names = new Set(estimate.inputs.map((p) => p.name));
  const kept = had.inputs.filter((p) => !p.missing && !p.pending && !p.policy && !names.has(p.name));
  return { ...estimate, inputs: [...estimate.inputs, ...kept] };
}


/** Ports from the server (POST /blocks/{block}/ports) or an estimate, plus a `missing` port
 *  for each port an edge names that the block lacks, so the edge still shows (in red) — or,
 *  while the ports are pending, a `pending` one (not known yet, not wrong). */
export function withEdgePorts(nodeId: string, ports: NodePorts, edges: readonly EditorEdge[]): NodePorts {
  const ins = new Set(ports.inputs.map((p) => p.name));
  const outs = new Set(ports.outputs.map((p) => p.name));
  const inputs = [...ports.inputs];
  const outputs = [...ports.outputs];
  let branches = ports.branches;
  for (const e of edges) {
    if (e.target === nodeId) {
      const port = e.targetHandle ?? "";
      if (port && !ins.has(port)) {
        ins.add(port);
        inputs.push(ports.pending ? pendingPort(port) : missingPort(port));
      }
    }
    if (e.source === nodeId) {
      const { port, branch } = parseSourceHandle(e.sourceHandle);
      if (!outs.has(port)) {
        outs.add(port);
        outputs.push(missingPort(port));
      }
      if (branch && branches && !branches.includes(branch)) branches = [...branches, branch];
    }
  }
  return { ...ports, inputs, outputs, branches };
}

/** The output port a node gains when its error policy sends failures down it. */
export const ERROR_PORT = "error";

/** The ports with the error policy's `error` output added (or left out), as validation does. */
export function withPolicyPorts(ports: NodePorts, policy: ErrorPolicy | undefined): NodePorts {
  const routes = policy?.fallback === "error_branch";
  const has = ports.outputs.find((p) => p.name === ERROR_PORT);
  if (routes && has && !has.missing) return ports;
  const outputs = ports.outputs.filter((p) => p.name !== ERROR_PORT || (!routes && !p.policy));
  if (routes) {
    outputs.push({
      name: ERROR_PORT,
      type: "dict[str, Any]",
      schema: { type: "object" },
      required: false,
      description: "the failure (node, block, type, code, message) when the node fails",
      policy: true,
    });
  }
  return { ...ports, outputs };
}

const SUBFLOW_BLOCKS = new Set(["subflow", "map", "repeat"]);

/** A sub-flow node's ports from a sub-flow of the document: its input nodes (but those the
 *  node fills in itself: map's item and index, repeat's round), as validation derives them.
 *  An app reference is resolved by the server only: its ports show from the edges. */
export function withSubflowPorts(
  ports: NodePorts,
  block: string,
  config: Record<string, unknown>,
  subflows: Record<string, SubFlow> | undefined,
  blocks: BlockMap,
): NodePorts {
  const sub = typeof config.subflow === "string" ? subflows?.[config.subflow] : undefined;
  if (!SUBFLOW_BLOCKS.has(block) || !sub) return ports;
  const taken = new Set(ports.inputs.filter((p) => !p.missing).map((p) => p.name));
  if (block === "map") {
    taken.add(typeof config.item === "string" ? config.item : "item");
    if (typeof config.index === "string") taken.add(config.index);
  }
  if (block === "repeat" && typeof config.round === "string") taken.add(config.round);
  const inputs = ports.inputs.filter((p) => !p.missing);
  for (const node of sub.nodes ?? []) {
    const spec = blocks.get(node.block);
    if (spec?.role !== "flow_input") continue;
    const name = typeof node.config?.name === "string" ? node.config.name : node.id;
    if (taken.has(name)) continue;
    taken.add(name);
    const given = spec.outputs[0];
    const optional = node.config?.default !== undefined && node.config?.default !== null;
    inputs.push({
      name,
      type: given?.type ?? "Any",
      schema: given?.schema ?? {},
      required: !optional && node.config?.required !== false,
      description: `input '${name}' of sub-flow '${String(config.subflow)}'`,
    });
  }
  return { ...ports, inputs };
}

function pendingPort(name: string): NodePort {
  return { name, type: "Any", schema: {}, required: false, description: "asked of the server", pending: true };
}

function missingPort(name: string): NodePort {
  return { name, type: "Any", schema: {}, required: false, description: "not a port of this block", missing: true };
}

// ---------------------------------------------------------------------------------------------
// Document -> graph

export function flowToGraph(doc: FlowDocument, blocks: BlockMap): Graph {
  const nodes: EditorNode[] = (doc.nodes ?? []).map((n, index) => {
    const config = { ...(n.config ?? {}) };
    const estimated = withPolicyPorts(estimatePorts(blocks.get(n.block), config), n.on_error);
    const ports = withSubflowPorts(estimated, n.block, config, doc.subflows, blocks);
    const data: NodeData = { block: n.block, config, ports };
    if (n.label !== undefined) data.label = n.label;
    if (n.timeout !== undefined) data.timeout = n.timeout;
    if (n.on_error !== undefined) data.on_error = n.on_error;
    return {
      id: n.id,
      type: "block",
      position: n.position ? { x: n.position.x, y: n.position.y } : { x: (index % 8) * 260, y: Math.floor(index / 8) * 160 },
      data,
    };
  });
  const ids = new Set<string>();
  const edges: EditorEdge[] = (doc.edges ?? []).map((fe) => {
    const e = edgeFromFlow(fe);
    // A duplicated edge (a validation error) still needs its own id to be drawn.
    for (let k = 2; ids.has(e.id); k++) e.id = `${edgeFromFlow(fe).id}~${k}`;
    ids.add(e.id);
    return e;
  });
  const byNode = new Map<string, EditorEdge[]>();
  for (const e of edges) {
    for (const id of [e.source, e.target]) {
      const list = byNode.get(id);
      if (list) list.push(e);
      else byNode.set(id, [e]);
    }
  }
  for (const node of nodes) {
    const touching = byNode.get(node.id);
    if (touching) node.data.ports = withEdgePorts(node.id, node.data.ports, touching);
  }
  return { nodes, edges };
}

export function edgeFromFlow(e: FlowEdge): EditorEdge {
  const sourcePort = e.source.port ?? "output";
  const targetPort = e.target.port ?? "output";
  const branch = e.branch ?? undefined;
  const edge: EditorEdge = {
    id: edgeKey({ source: { node: e.source.node, port: sourcePort }, target: { node: e.target.node, port: targetPort }, branch }),
    source: e.source.node,
    sourceHandle: sourceHandleId(sourcePort, branch),
    target: e.target.node,
    targetHandle: targetPort,
  };
  if (branch) {
    edge.data = { branch };
    edge.label = branch;
  }
  return edge;
}

/** True when no node of the document has a position (lay it out on open). */
export function needsLayout(doc: FlowDocument): boolean {
  const nodes = doc.nodes ?? [];
  return nodes.length > 0 && nodes.every((n) => !n.position);
}

// ---------------------------------------------------------------------------------------------
// Graph -> document

export function graphToFlow(
  graph: Graph,
  // The document's sub-flows are not drawn on this canvas: kept as they were loaded.
  meta: { name?: string; description?: string; subflows?: Record<string, SubFlow> } = {},
): FlowDocument {
  const doc: FlowDocument = { format: "dagwright.flow", version: 1 };
  if (meta.name !== undefined) doc.name = meta.name;
  if (meta.description) doc.description = meta.description;
  doc.nodes = graph.nodes.map((n) => {
    const out: FlowNode = { id: n.id, block: n.data.block, config: n.data.config };
    if (n.data.label) out.label = n.data.label;
    if (n.data.timeout !== undefined && n.data.timeout !== null) out.timeout = n.data.timeout;
    if (n.data.on_error) out.on_error = n.data.on_error;
    out.position = { x: Math.round(n.position.x), y: Math.round(n.position.y) };
    return out;
  });
  doc.edges = graph.edges.map(edgeToFlow);
  if (meta.subflows && Object.keys(meta.subflows).length > 0) doc.subflows = meta.subflows;
  return doc;
}

export function edgeToFlow(e: EditorEdge): FlowEdge {
  const { port, branch: handleBranch } = parseSourceHandle(e.sourceHandle);
  const branch = e.data?.branch ?? handleBranch;
  const out: FlowEdge = {
    source: { node: e.source, port },
    target: { node: e.target, port: e.targetHandle ?? "output" },
  };
  if (branch) out.branch = branch;
  return out;
}

/** A new edge from a completed connection. */
export function edgeFromConnection(c: {
  source: string;
  target: string;
  sourceHandle?: string | null;
  targetHandle?: string | null;
}): EditorEdge {
  const { port, branch } = parseSourceHandle(c.sourceHandle);
  return edgeFromFlow({
    source: { node: c.source, port },
    target: { node: c.target, port: c.targetHandle ?? "" },
    branch,
  });
}

// ---------------------------------------------------------------------------------------------
// Ids

/** A node id not in `taken`, made from `base` (a block name or an old id). */
export function uniqueId(base: string, taken: ReadonlySet<string>): string {
  let stem = base.replace(/[^A-Za-z0-9_-]/g, "_").replace(/_\d+$/, "");
  if (!/^[A-Za-z_]/.test(stem)) stem = `n_${stem}`;
  stem = stem.slice(0, 56) || "node";
  if (!taken.has(stem)) return stem;
  for (let k = 2; ; k++) {
    const candidate = `${stem}_${k}`;
    if (!taken.has(candidate)) return candidate;
  }
}

/** A flow input/output name not among `taken` (input and output nodes must not share one). */
export function uniqueName(base: string, taken: ReadonlySet<string>): string {
  return uniqueId(base || "value", taken).replace(/-/g, "_");
}

/** The names of the flow's input (or output) nodes. */
export function ioNames(nodes: readonly EditorNode[], blocks: BlockMap, role: "flow_input" | "flow_output"): Set<string> {
  const names = new Set<string>();
  for (const n of nodes) {
    if (blocks.get(n.data.block)?.role === role && typeof n.data.config.name === "string") names.add(n.data.config.name);
  }
  return names;
}

/** A node of a block dropped at a position, with its required config filled with defaults. */
export function newNode(
  spec: BlockSpec,
  position: { x: number; y: number },
  nodes: readonly EditorNode[],
  blocks: BlockMap,
): EditorNode {
  const id = uniqueId(spec.name, new Set(nodes.map((n) => n.id)));
  const config: Record<string, unknown> = {};
  const props = spec.config_schema.properties ?? {};
  for (const field of spec.config_schema.required ?? []) {
    const schema = props[field] ?? {};
    if (field === "name" && (spec.role === "flow_input" || spec.role === "flow_output")) {
      const role = spec.role;
      config.name = uniqueName(role === "flow_output" ? "result" : "input", ioNames(nodes, blocks, role));
    } else if (schema.type === "string") config[field] = "";
    else if (schema.type === "array") config[field] = [];
    else if (schema.type === "object") config[field] = {};
  }
  return {
    id,
    type: "block",
    position,
    data: { block: spec.name, config, ports: estimatePorts(spec, config) },
  };
}
