// Whether a wire being dragged may land: checked on every handle the pointer passes, so the
// editor refuses an incompatible connection while dragging and says why.

import type { Compatibility, TypesResponse } from "../api/types";
import { type Graph, parseSourceHandle } from "./graph";

export interface ConnectionLike {
  source: string | null;
  target: string | null;
  sourceHandle?: string | null;
  targetHandle?: string | null;
}

export interface ConnectionCheck {
  ok: boolean;
  reason?: string;
  /** "check": allowed, each value is checked at run time. */
  compat?: string;
}

/** One edge's types by the server's matrix (GET /api/v1/types). A pair it does not list
 *  (types born of dynamic ports) is allowed: validation, asked after every edit, and Save
 *  judge it by the same rules. The editor has no type rules of its own. */
function checkTypes(
  source: string,
  target: string,
  matrix: TypesResponse["compatibility"],
): { ok: boolean; compat: Compatibility | "unknown"; reason?: string } {
  const compat = matrix[source]?.[target] ?? "unknown";
  if (compat === "no") return { ok: false, compat, reason: `${source} → ${target}: incompatible` };
  return { ok: true, compat };
}

export function checkConnection(
  graph: Graph,
  c: ConnectionLike,
  matrix: TypesResponse["compatibility"],
): ConnectionCheck {
  if (!c.source || !c.target) return { ok: false, reason: "not a port" };
  if (c.source === c.target) return { ok: false, reason: "a node cannot feed itself" };
  const source = graph.nodes.find((n) => n.id === c.source);
  const target = graph.nodes.find((n) => n.id === c.target);
  if (!source || !target) return { ok: false, reason: "unknown node" };
  const { port: sourcePort, branch } = parseSourceHandle(c.sourceHandle);
  const targetPort = c.targetHandle ?? "";
  const out = source.data.ports.outputs.find((p) => p.name === sourcePort);
  const inp = target.data.ports.inputs.find((p) => p.name === targetPort);
  if (!out || !inp) return { ok: false, reason: "unknown port" };
  if (out.missing || inp.missing) return { ok: false, reason: `${out.missing ? sourcePort : targetPort} is not a port of this block` };
  const duplicate = graph.edges.some(
    (e) =>
      e.source === c.source &&
      e.target === c.target &&
      (e.targetHandle ?? "") === targetPort &&
      parseSourceHandle(e.sourceHandle).port === sourcePort &&
      (parseSourceHandle(e.sourceHandle).branch ?? e.data?.branch) === branch,
  );
  if (duplicate) return { ok: false, reason: "already connected" };
  if (reaches(graph, c.target, c.source)) {
    return { ok: false, reason: `a cycle: ${c.target} already leads to ${c.source} (loops belong in a sub-flow)` };
  }
  const verdict = checkTypes(out.type, inp.type, matrix);
  if (!verdict.ok) return { ok: false, reason: verdict.reason, compat: verdict.compat };
  return { ok: true, compat: verdict.compat };
}

/** Is `to` downstream of `from`? */
function reaches(graph: Graph, from: string, to: string): boolean {
  const next = new Map<string, string[]>();
  for (const e of graph.edges) {
    const list = next.get(e.source);
    if (list) list.push(e.target);
    else next.set(e.source, [e.target]);
  }
  const seen = new Set<string>([from]);
  const stack = [from];
  while (stack.length) {
    const id = stack.pop()!;
    if (id === to) return true;
    for (const n of next.get(id) ?? []) {
      if (!seen.has(n)) {
        seen.add(n);
        stack.push(n);
      }
    }
  }
  return false;
}
