// The document's sub-flows in the Flow tab: each listed with what it takes and gives, and
// opened as a group — a read-only canvas of its nodes and wires — on request. They are run by
// subflow/map/repeat nodes (docs/flow-format.md) and edited in the document for now.

import { Background, ReactFlow, ReactFlowProvider, type Edge, type Node } from "@xyflow/react";
import { useMemo, useState } from "react";
import type { SubFlow } from "../api/types";
import { type BlockMap, edgeToFlow, flowToGraph, needsLayout } from "./graph";
import { layoutGraph } from "./layout";
import "./subflow.css";

/** A sub-flow's interface: the names of its input and output nodes. */
export function subflowInterface(sub: SubFlow, blocks: BlockMap): { inputs: string[]; outputs: string[] } {
  const inputs: string[] = [];
  const outputs: string[] = [];
  for (const node of sub.nodes ?? []) {
    const role = blocks.get(node.block)?.role;
    const name = typeof node.config?.name === "string" ? node.config.name : node.id;
    if (role === "flow_input") inputs.push(name);
    else if (role === "flow_output") outputs.push(name);
  }
  return { inputs, outputs };
}

export function SubflowList({ subflows, blocks }: { subflows: Record<string, SubFlow>; blocks: BlockMap }) {
  const [open, setOpen] = useState<string | null>(null);
  const names = Object.keys(subflows);
  if (names.length === 0) return null;
  return (
    <div className="field" data-testid="subflows">
      <div className="field-title">Sub-flows</div>
      <ul className="subflow-list">
        {names.map((name) => {
          const sub = subflows[name];
          const { inputs, outputs } = subflowInterface(sub, blocks);
          return (
            <li key={name} data-testid={`subflow-${name}`}>
              <strong>{name}</strong>{" "}
              <span className="muted small">
                {(sub.nodes ?? []).length} nodes · takes {inputs.join(", ") || "nothing"} · gives{" "}
                {outputs.join(", ") || "nothing"}
              </span>
              {sub.description && <div className="muted small">{sub.description}</div>}
              <button type="button" className="btn btn-small" data-testid={`open-subflow-${name}`} onClick={() => setOpen(name)}>
                Open
              </button>
            </li>
          );
        })}
      </ul>
      {open !== null && subflows[open] && (
        <SubflowViewer name={open} sub={subflows[open]} blocks={blocks} onClose={() => setOpen(null)} />
      )}
    </div>
  );
}

function SubflowViewer({
  name,
  sub,
  blocks,
  onClose,
}: {
  name: string;
  sub: SubFlow;
  blocks: BlockMap;
  onClose: () => void;
}) {
  const { nodes, edges } = useMemo(() => {
    const doc = { format: "dagwright.flow" as const, version: 1 as const, nodes: sub.nodes, edges: sub.edges };
    const graph = flowToGraph(doc, blocks);
    const placed = needsLayout(doc) ? layoutGraph(graph.nodes, graph.edges) : null;
    const shown: Node[] = graph.nodes.map((n) => ({
      id: n.id,
      position: placed?.get(n.id) ?? n.position,
      data: { label: `${n.data.label ?? n.id} · ${n.data.block}` },
      draggable: false,
      connectable: false,
    }));
    const wires: Edge[] = graph.edges.map((e) => {
      const flowEdge = edgeToFlow(e);
      return {
        id: e.id,
        source: e.source,
        target: e.target,
        label: `${flowEdge.source.port} → ${flowEdge.target.port}${flowEdge.branch ? ` [${flowEdge.branch}]` : ""}`,
      };
    });
    return { nodes: shown, edges: wires };
  }, [sub, blocks]);
  return (
    <div className="subflow-overlay" role="dialog" aria-label={`Sub-flow ${name}`} data-testid="subflow-viewer">
      <div className="subflow-head">
        <strong>Sub-flow {name}</strong>
        <span className="muted small"> read-only · {nodes.length} nodes</span>
        <span className="subflow-spacer" />
        <button type="button" className="btn btn-small" data-testid="close-subflow" onClick={onClose}>
          Close
        </button>
      </div>
      <div className="subflow-canvas">
        <ReactFlowProvider>
          <ReactFlow nodes={nodes} edges={edges} fitView nodesDraggable={false} nodesConnectable={false} elementsSelectable={false}>
            <Background />
          </ReactFlow>
        </ReactFlowProvider>
      </div>
    </div>
  );
}
