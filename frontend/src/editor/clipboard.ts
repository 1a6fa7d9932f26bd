// Copy and paste: the selected nodes with the edges between them; a paste gives every node a
// new id (and input/output nodes a new name), remaps the edges and offsets the positions.

import type { FlowEdge, FlowNode } from "../api/types";
import {
  type BlockMap,
  type EditorEdge,
  type EditorNode,
  type Graph,
  edgeFromFlow,
  edgeToFlow,
  estimatePorts,
  ioNames,
  uniqueId,
  uniqueName,
  withEdgePorts,
} from "./graph";

export interface Clip {
  nodes: FlowNode[];
  edges: FlowEdge[];
}

export const CLIP_MIME = "application/x-dagwright-clip";

/** The selected nodes (or the ones named) and the edges whose both ends are among them. */
export function copySelection(graph: Graph, ids?: ReadonlySet<string>): Clip | null {
  const chosen = ids ?? new Set(graph.nodes.filter((n) => n.selected).map((n) => n.id));
  if (chosen.size === 0) return null;
  const nodes: FlowNode[] = graph.nodes
    .filter((n) => chosen.has(n.id))
    .map((n) => {
      const out: FlowNode = {
        id: n.id,
        block: n.data.block,
        config: structuredClone(n.data.config),
        position: { x: n.position.x, y: n.position.y },
      };
      if (n.data.label) out.label = n.data.label;
      if (n.data.timeout !== undefined) out.timeout = n.data.timeout;
      if (n.data.on_error !== undefined) out.on_error = n.data.on_error;
      return out;
    });
  const edges = graph.edges.filter((e) => chosen.has(e.source) && chosen.has(e.target)).map(edgeToFlow);
  return { nodes, edges };
}

/** The graph with the clip pasted in (new nodes and edges selected, the rest not), and the
 *  ids given to the new nodes. */
export function pasteClip(
  graph: Graph,
  clip: Clip,
  blocks: BlockMap,
  offset: { x: number; y: number } = { x: 40, y: 40 },
): { graph: Graph; ids: string[] } {
  const taken = new Set(graph.nodes.map((n) => n.id));
  const inputNames = ioNames(graph.nodes, blocks, "flow_input");
  const outputNames = ioNames(graph.nodes, blocks, "flow_output");
  const idMap = new Map<string, string>();
  const added: EditorNode[] = [];
  for (const n of clip.nodes) {
    const id = uniqueId(n.id, taken);
    taken.add(id);
    idMap.set(n.id, id);
    const config = structuredClone(n.config ?? {});
    const role = blocks.get(n.block)?.role;
    const names = role === "flow_input" ? inputNames : role === "flow_output" ? outputNames : null;
    if (names && typeof config.name === "string") {
      const name = names.has(config.name) ? uniqueName(config.name, names) : config.name;
      names.add(name);
      config.name = name;
    }
    const pos = n.position ?? { x: 0, y: 0 };
    const node: EditorNode = {
      id,
      type: "block",
      position: { x: pos.x + offset.x, y: pos.y + offset.y },
      selected: true,
      data: { block: n.block, config, ports: estimatePorts(blocks.get(n.block), config) },
    };
    if (n.label) node.data.label = n.label;
    if (n.timeout !== undefined) node.data.timeout = n.timeout;
    if (n.on_error !== undefined) node.data.on_error = n.on_error;
    added.push(node);
  }
  const newEdges: EditorEdge[] = clip.edges
    .filter((e) => idMap.has(e.source.node) && idMap.has(e.target.node))
    .map((e) => ({
      ...edgeFromFlow({
        ...e,
        source: { ...e.source, node: idMap.get(e.source.node)! },
        target: { ...e.target, node: idMap.get(e.target.node)! },
      }),
      selected: true,
    }));
  for (const node of added) {
    node.data.ports = withEdgePorts(node.id, node.data.ports, newEdges);
  }
  const nodes = [
    ...graph.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)),
    ...added,
  ];
  const edges = [
    ...graph.edges.map((e) => (e.selected ? { ...e, selected: false } : e)),
    ...newEdges,
  ];
  return { graph: { nodes, edges }, ids: added.map((n) => n.id) };
}

/** The graph without the selected nodes and edges (and the edges of removed nodes). */
export function deleteSelection(graph: Graph): Graph {
  const gone = new Set(graph.nodes.filter((n) => n.selected).map((n) => n.id));
  const edges = graph.edges.filter((e) => !e.selected && !gone.has(e.source) && !gone.has(e.target));
  if (gone.size === 0 && edges.length === graph.edges.length) return graph;
  return { nodes: graph.nodes.filter((n) => !gone.has(n.id)), edges };
}
