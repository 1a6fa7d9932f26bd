// Two versions' differences painted on the canvas (from the versions panel): nodes through
// the decoration store, edges as classes on the edges shown.

import { useCallback, useMemo, useState } from "react";
import type { VersionDiff } from "../../api/types";
import type { DecorationStore, DiffMark } from "../decorations";
import { type EditorEdge, edgeKey } from "../graph";

export interface DiffHighlight {
  /** "vA → vB" while a diff is painted, else null. */
  diffLabel: string | null;
  highlight: (diff: VersionDiff, a: number, b: number) => void;
  clearHighlight: () => void;
  /** The edges to draw: the graph's, marked by the diff. */
  shownEdges: EditorEdge[];
}

export function useDiffHighlight(decorations: DecorationStore, edges: EditorEdge[]): DiffHighlight {
  const [diffEdges, setDiffEdges] = useState<Map<string, DiffMark> | null>(null);
  const [diffLabel, setDiffLabel] = useState<string | null>(null);
  const highlight = useCallback(
    (diff: VersionDiff, a: number, b: number) => {
      const marks = new Map<string, { mark: DiffMark; fields?: string[] }>();
      diff.nodes.added.forEach((id) => marks.set(id, { mark: "added" }));
      diff.nodes.removed.forEach((id) => marks.set(id, { mark: "removed" }));
      diff.nodes.changed.forEach((c) => marks.set(c.id, { mark: "changed", fields: c.fields }));
      decorations.setDiff(marks);
      const marked = new Map<string, DiffMark>();
      diff.edges.added.forEach((e) => marked.set(edgeKey(e), "added"));
      diff.edges.removed.forEach((e) => marked.set(edgeKey(e), "removed"));
      setDiffEdges(marked);
      setDiffLabel(`v${a} → v${b}`);
    },
    [decorations],
  );
  const clearHighlight = useCallback(() => {
    decorations.setDiff(new Map());
    setDiffEdges(null);
    setDiffLabel(null);
  }, [decorations]);
  const shownEdges = useMemo(() => {
    if (!diffEdges) return edges;
    return edges.map((e) => {
      const mark = diffEdges.get(e.id);
      return mark ? { ...e, className: `edge-diff-${mark}` } : e;
    });
  }, [edges, diffEdges]);
  return { diffLabel, highlight, clearHighlight, shownEdges };
}
