// The canvas: xyflow with the editor's nodes, the wires being checked as they are dragged,
// and an empty state that says how to begin.

import { Background, Controls, MiniMap, ReactFlow } from "@xyflow/react";
import type { RefObject } from "react";
import { nodeTypes } from "../BlockNode";
import { ConnectionRefused, clearRefusal } from "../ConnectionRefused";
import type { EditorEdge, EditorNode } from "../graph";
import type { CanvasHandlers } from "../hooks/useCanvas";
import { LevelOfDetail } from "../LevelOfDetail";

export function EditorCanvas({ nodes, edges, handlers, wrapperRef, fitView }: {
  nodes: EditorNode[];
  edges: EditorEdge[];
  handlers: CanvasHandlers;
  wrapperRef: RefObject<HTMLDivElement | null>;
  /** Fit the view to the nodes on first draw (a flow was opened, not a blank canvas). */
  fitView: boolean;
}) {
  return (
    <div className="canvas" ref={wrapperRef} data-testid="canvas" onDragOver={handlers.onDragOver} onDrop={handlers.onDrop}>
      <ReactFlow<EditorNode, EditorEdge>
        nodes={nodes}
        edges={edges}
        nodeTypes={nodeTypes}
        onNodesChange={handlers.onNodesChange}
        onEdgesChange={handlers.onEdgesChange}
        onConnect={handlers.onConnect}
        isValidConnection={handlers.isValidConnection}
        onConnectStart={clearRefusal}
        onNodeDragStart={handlers.onDragStart}
        onNodeDragStop={handlers.onDragStop}
        onSelectionDragStart={handlers.onDragStart}
        onSelectionDragStop={handlers.onDragStop}
        deleteKeyCode={null}
        elevateNodesOnSelect={false}
        selectionKeyCode="Shift"
        multiSelectionKeyCode={["Control", "Meta"]}
        fitView={fitView}
        fitViewOptions={{ padding: 0.1, maxZoom: 1.2 }}
        minZoom={0.02}
        maxZoom={2}
        proOptions={{ hideAttribution: true }}
        defaultEdgeOptions={{ interactionWidth: 12 }}
      >
        <Background gap={20} size={1} />
        <Controls position="bottom-left" />
        <MiniMap pannable zoomable position="bottom-right" nodeStrokeWidth={2} style={{ width: 150, height: 100 }} />
        <LevelOfDetail canvas={wrapperRef} />
      </ReactFlow>
      {nodes.length === 0 && (
        <div className="canvas-empty">
          <p>Drag a block from the palette here.</p>
          <p className="muted small">A flow needs an input (text_input…) and an output block.</p>
        </div>
      )}
      <ConnectionRefused />
    </div>
  );
}
