// The graph being edited (xyflow's nodes and edges, mirrored in a ref so handlers always see
// the latest) and its undo history. Every user edit goes through `edit`, which records the
// previous graph and bumps `revision`; a change that is not an edit (selection, ports from
// the server, a drag frame) goes through `replace` or `setGraph` and bumps nothing.

import { type RefObject, useCallback, useMemo, useRef, useState } from "react";
import type { Graph } from "../graph";
import { History } from "../history";

export interface EditorGraph {
  graph: Graph;
  /** The latest graph, for handlers that must not wait for a render. */
  graphRef: RefObject<Graph>;
  /** The graph as the last edit, undo or redo left it (not moved by a drag in progress, nor
   *  changed by a selection): what the flow document is derived from. */
  edited: Graph;
  /** Bumped by every edit, undo and redo. */
  revision: number;
  history: History<Graph>;
  setGraph: (next: Graph) => void;
  /** A user edit: undoable, marks the document changed. Same `coalesceKey` edits in a row
   *  (typing into one field) are one undo step. */
  edit: (fn: (g: Graph) => Graph, coalesceKey?: string) => void;
  /** A change that is not an edit (selection, ports from the server). */
  replace: (fn: (g: Graph) => Graph) => void;
  /** The graph already changed (a drag): record `before` as one undo step. */
  recordEdit: (before: Graph) => void;
  undo: () => void;
  redo: () => void;
}

export function useEditorGraph(initial: Graph): EditorGraph {
  const history = useMemo(() => new History<Graph>(), []);
  const [graph, setGraphState] = useState<Graph>(initial);
  const graphRef = useRef(graph);
  const [{ edited, revision }, setEdited] = useState({ edited: initial, revision: 0 });
  const committed = useCallback((next: Graph) => setEdited((e) => ({ edited: next, revision: e.revision + 1 })), []);

  const setGraph = useCallback((next: Graph) => {
    graphRef.current = next;
    setGraphState(next);
  }, []);

  const edit = useCallback(
    (fn: (g: Graph) => Graph, coalesceKey?: string) => {
      const before = graphRef.current;
      const next = fn(before);
      if (next === before) return;
      history.push(before, coalesceKey);
      setGraph(next);
      committed(next);
    },
    [committed, history, setGraph],
  );

  const replace = useCallback((fn: (g: Graph) => Graph) => setGraph(fn(graphRef.current)), [setGraph]);

  const recordEdit = useCallback(
    (before: Graph) => {
      history.push(before);
      committed(graphRef.current);
    },
    [committed, history],
  );

  const undo = useCallback(() => {
    const prev = history.undo(graphRef.current);
    if (prev) {
      setGraph(prev);
      committed(prev);
    }
  }, [committed, history, setGraph]);

  const redo = useCallback(() => {
    const next = history.redo(graphRef.current);
    if (next) {
      setGraph(next);
      committed(next);
    }
  }, [committed, history, setGraph]);

  return { graph, graphRef, edited, revision, history, setGraph, edit, replace, recordEdit, undo, redo };
}
