// What the canvas changes against a saved version, in the publish dialog's words: blocks
// added, removed or changed (settings, label, wiring aside), wires added or removed. Positions
// do not count: moving a block changes nothing a caller sees.

import type { FlowDocument, FlowEdge, FlowNode } from "../api/types";

export interface CanvasDiff {
  added: string[];
  removed: string[];
  changed: string[];
  wiresAdded: number;
  wiresRemoved: number;
}

const nodeKey = (n: FlowNode) => JSON.stringify([n.block, n.config ?? {}, n.label ?? "", n.timeout ?? null, n.on_error ?? null]);
const edgeKey = (e: FlowEdge) => `${e.source.node}.${e.source.port}${e.branch ? `:${e.branch}` : ""}>${e.target.node}.${e.target.port}`;

export function canvasDiff(before: FlowDocument | null, after: FlowDocument): CanvasDiff {
  const old = new Map((before?.nodes ?? []).map((n) => [n.id, n]));
  const now = new Map((after.nodes ?? []).map((n) => [n.id, n]));
  const oldEdges = new Set((before?.edges ?? []).map(edgeKey));
  const newEdges = new Set((after.edges ?? []).map(edgeKey));
  return {
    added: [...now.keys()].filter((id) => !old.has(id)),
    removed: [...old.keys()].filter((id) => !now.has(id)),
    changed: [...now.values()].filter((n) => old.has(n.id) && nodeKey(old.get(n.id)!) !== nodeKey(n)).map((n) => n.id),
    wiresAdded: [...newEdges].filter((e) => !oldEdges.has(e)).length,
    wiresRemoved: [...oldEdges].filter((e) => !newEdges.has(e)).length,
  };
}

export function isEmptyDiff(d: CanvasDiff): boolean {
  return !d.added.length && !d.removed.length && !d.changed.length && !d.wiresAdded && !d.wiresRemoved;
}
