// Auto-layout with dagre: left to right, ranks by dependency.

import dagre from "@dagrejs/dagre";
import type { EditorEdge, EditorNode } from "./graph";

export const NODE_WIDTH = 220;

export function estimatedHeight(n: EditorNode): number {
  const rows = Math.max(n.data.ports.inputs.length, 0) + Math.max(n.data.ports.branches?.length ?? n.data.ports.outputs.length, 1);
  return 44 + rows * 20;
}

/** New positions for the nodes (only those given; the rest stay). */
export function layoutGraph(
  nodes: readonly EditorNode[],
  edges: readonly EditorEdge[],
): Map<string, { x: number; y: number }> {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: "LR", nodesep: 30, ranksep: 80, marginx: 20, marginy: 20 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) {
    const width = n.measured?.width ?? NODE_WIDTH;
    const height = n.measured?.height ?? estimatedHeight(n);
    g.setNode(n.id, { width, height });
  }
  for (const e of edges) {
    if (g.hasNode(e.source) && g.hasNode(e.target)) g.setEdge(e.source, e.target);
  }
  dagre.layout(g);
  const out = new Map<string, { x: number; y: number }>();
  for (const n of nodes) {
    const p = g.node(n.id) as { x: number; y: number; width: number; height: number } | undefined;
    if (p) out.set(n.id, { x: Math.round(p.x - p.width / 2), y: Math.round(p.y - p.height / 2) });
  }
  return out;
}
