// What the canvas does with the pointer: moves and selection from xyflow, a drag as one undo
// step, wires checked while dragged (a refusal says why beside the pointer), blocks added from
// the palette (dropped, or at the centre), and selecting a node from elsewhere.

import {
  type Connection,
  type EdgeChange,
  type NodeChange,
  type ReactFlowInstance,
  applyEdgeChanges,
  applyNodeChanges,
} from "@xyflow/react";
import { type DragEvent, type RefObject, useCallback, useRef } from "react";
import type { TypesResponse } from "../../api/types";
import { toast } from "../../ui/toast";
import { checkConnection } from "../connect";
import { clearRefusal, showRefusal } from "../ConnectionRefused";
import { type EditorEdge, type EditorNode, type Graph, edgeFromConnection, newNode } from "../graph";
import { NODE_WIDTH } from "../layout";
import { BLOCK_MIME } from "../Palette";
import { pointerPosition } from "../pointer";
import type { Registry } from "../registry";
import type { EditorGraph } from "./useEditorGraph";

export interface CanvasHandlers {
  onNodesChange: (changes: NodeChange<EditorNode>[]) => void;
  onEdgesChange: (changes: EdgeChange<EditorEdge>[]) => void;
  onDragStart: () => void;
  onDragStop: () => void;
  isValidConnection: (c: Connection | EditorEdge) => boolean;
  onConnect: (c: Connection) => void;
  onDragOver: (e: DragEvent) => void;
  onDrop: (e: DragEvent) => void;
  /** Adds a block, selected, at `at` (flow coordinates) or the canvas's centre. */
  addBlock: (name: string, at?: { x: number; y: number }) => void;
  /** Selects one node (null: none) and brings it into view. */
  selectNode: (id: string | null) => void;
}

export function useCanvas(args: {
  editor: EditorGraph;
  rf: ReactFlowInstance<EditorNode, EditorEdge>;
  wrapperRef: RefObject<HTMLDivElement | null>;
  blocks: Registry["byName"];
  matrix: TypesResponse["compatibility"];
  touch: (...ids: string[]) => void;
}): CanvasHandlers {
  const { editor, rf, wrapperRef, blocks, matrix, touch } = args;
  const { graphRef, setGraph, edit, replace, recordEdit } = editor;

  const onNodesChange = useCallback(
    (changes: NodeChange<EditorNode>[]) => {
      // Removal is ours (Delete key), so xyflow's changes are moves, sizes and selection.
      const kept = changes.filter((c) => c.type !== "remove");
      if (kept.length) setGraph({ ...graphRef.current, nodes: applyNodeChanges(kept, graphRef.current.nodes) });
    },
    [graphRef, setGraph],
  );
  const onEdgesChange = useCallback(
    (changes: EdgeChange<EditorEdge>[]) => {
      const kept = changes.filter((c) => c.type !== "remove");
      if (kept.length) setGraph({ ...graphRef.current, edges: applyEdgeChanges(kept, graphRef.current.edges) });
    },
    [graphRef, setGraph],
  );

  const dragBefore = useRef<Graph | null>(null);
  const onDragStart = useCallback(() => {
    dragBefore.current = graphRef.current;
  }, [graphRef]);
  const onDragStop = useCallback(() => {
    const before = dragBefore.current;
    dragBefore.current = null;
    if (!before) return;
    const moved = graphRef.current.nodes.some((n) => {
      const old = before.nodes.find((o) => o.id === n.id);
      return old && (old.position.x !== n.position.x || old.position.y !== n.position.y);
    });
    if (moved) recordEdit(before);
  }, [graphRef, recordEdit]);

  const isValidConnection = useCallback(
    (c: Connection | EditorEdge) => {
      const verdict = checkConnection(graphRef.current, c, matrix);
      const at = pointerPosition();
      if (!verdict.ok) showRefusal(verdict.reason ?? "refused", at.x, at.y);
      else clearRefusal();
      return verdict.ok;
    },
    [graphRef, matrix],
  );
  const onConnect = useCallback(
    (c: Connection) => {
      const verdict = checkConnection(graphRef.current, c, matrix);
      if (!verdict.ok) {
        const at = pointerPosition();
        showRefusal(verdict.reason ?? "refused", at.x, at.y);
        return;
      }
      const edge = edgeFromConnection(c);
      edit((g) => (g.edges.some((e) => e.id === edge.id) ? g : { ...g, edges: [...g.edges, edge] }));
      touch(c.source, c.target);
      if (verdict.compat === "check") toast("info", "Connected; checked at run time", "The types may fit: each value is checked when it arrives.", undefined, 2500);
    },
    [edit, graphRef, matrix, touch],
  );

  // A block dropped near the canvas's edge lands wholly on the visible canvas, not half under
  // the palette or the panel beside it.
  const insideCanvas = useCallback(
    (at: { x: number; y: number }) => {
      const rect = wrapperRef.current?.getBoundingClientRect();
      if (!rect) return { x: Math.round(at.x), y: Math.round(at.y) };
      const margin = 12;
      const topLeft = rf.screenToFlowPosition({ x: rect.left + margin, y: rect.top + margin });
      const bottomRight = rf.screenToFlowPosition({ x: rect.right - margin, y: rect.bottom - margin });
      const x = Math.max(topLeft.x, Math.min(at.x, bottomRight.x - NODE_WIDTH));
      const y = Math.max(topLeft.y, Math.min(at.y, bottomRight.y - 80));
      return { x: Math.round(x), y: Math.round(y) };
    },
    [rf, wrapperRef],
  );
  const addBlock = useCallback(
    (name: string, at?: { x: number; y: number }) => {
      const spec = blocks.get(name);
      if (!spec) return;
      let position = at;
      if (!position) {
        const rect = wrapperRef.current?.getBoundingClientRect();
        const centre = rect ? { x: rect.left + rect.width / 2, y: rect.top + rect.height / 2 } : { x: 400, y: 300 };
        position = rf.screenToFlowPosition(centre);
      }
      const node = newNode(spec, insideCanvas({ x: position.x - NODE_WIDTH / 2, y: position.y - 16 }), graphRef.current.nodes, blocks);
      node.selected = true;
      edit((g) => ({
        nodes: [...g.nodes.map((n) => (n.selected ? { ...n, selected: false } : n)), node],
        edges: g.edges.map((e) => (e.selected ? { ...e, selected: false } : e)),
      }));
    },
    [blocks, edit, graphRef, insideCanvas, rf, wrapperRef],
  );
  const onDragOver = useCallback((e: DragEvent) => {
    if (e.dataTransfer.types.includes(BLOCK_MIME)) {
      e.preventDefault();
      e.dataTransfer.dropEffect = "copy";
    }
  }, []);
  const onDrop = useCallback(
    (e: DragEvent) => {
      const name = e.dataTransfer.getData(BLOCK_MIME);
      if (!name) return;
      e.preventDefault();
      addBlock(name, rf.screenToFlowPosition({ x: e.clientX, y: e.clientY }));
    },
    [addBlock, rf],
  );

  const selectNode = useCallback(
    (id: string | null) => {
      replace((g) => ({
        nodes: g.nodes.map((n) => {
          const want = n.id === id;
          return !!n.selected === want ? n : { ...n, selected: want };
        }),
        edges: g.edges.map((e) => (e.selected ? { ...e, selected: false } : e)),
      }));
      if (id && graphRef.current.nodes.some((n) => n.id === id)) {
        rf.fitView({ nodes: [{ id }], duration: 300, maxZoom: Math.max(rf.getZoom(), 0.9), padding: 0.6 });
      }
    },
    [graphRef, replace, rf],
  );

  return { onNodesChange, onEdgesChange, onDragStart, onDragStop, isValidConnection, onConnect, onDragOver, onDrop, addBlock, selectNode };
}
