// The flow document the editor's graph stands for, derived once per revision (not per drag
// frame), and whether it differs from the version it was opened on.

import { type RefObject, useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { FlowDocument } from "../../api/types";
import { flowFingerprint } from "../draft";
import { type Graph, flowToGraph, graphToFlow, needsLayout } from "../graph";
import { layoutGraph } from "../layout";
import type { Registry } from "../registry";

export interface BaseVersion {
  id: string;
  number: number;
  flow: FlowDocument;
}

export type VersionRef = { id: string; number: number };

export type FlowMeta = { name: string; description: string; subflows?: FlowDocument["subflows"] };

/** A document as the editor holds it: nodes without positions are laid out. */
export function prepareGraph(doc: FlowDocument, blocks: Registry["byName"]): Graph {
  const g = flowToGraph(doc, blocks);
  if (needsLayout(doc)) {
    const pos = layoutGraph(g.nodes, g.edges);
    g.nodes = g.nodes.map((n) => ({ ...n, position: pos.get(n.id) ?? n.position }));
  }
  return g;
}

function metaOf(doc: FlowDocument, slug: string): FlowMeta {
  return { name: doc.name ?? slug, description: doc.description ?? "", subflows: doc.subflows };
}

function normalisedFingerprint(doc: FlowDocument, blocks: Registry["byName"], slug: string): string {
  return flowFingerprint(graphToFlow(prepareGraph(doc, blocks), metaOf(doc, slug)));
}

export interface FlowDocumentState {
  flow: FlowDocument;
  meta: FlowMeta;
  metaRef: RefObject<FlowMeta>;
  setMeta: (update: (m: FlowMeta) => FlowMeta) => void;
  dirty: boolean;
  /** `dirty` for handlers (the leave guard). */
  dirtyRef: RefObject<boolean>;
  /** The user threw the changes away: leaving no longer asks. */
  forgetChanges: () => void;
  /** The version the working copy grew from (its parent when saved). */
  baseVersion: VersionRef | null;
  /** A version was saved from `doc`: it is the new base, and nothing is unsaved. */
  markSaved: (version: VersionRef, doc: FlowDocument) => void;
}

export function useFlowDocument(args: {
  edited: Graph;
  initialFlow: FlowDocument;
  initialGraph: Graph;
  base: BaseVersion | null;
  slug: string;
  blocks: Registry["byName"];
}): FlowDocumentState {
  const { edited, initialFlow, initialGraph, base, slug, blocks } = args;
  const [meta, setMeta] = useState(() => metaOf(initialFlow, slug));
  const metaRef = useRef(meta);
  useEffect(() => {
    metaRef.current = meta;
  }, [meta]);
  // What the saved version looks like once read into the editor (the same normalisation as the
  // working copy), so opening a version is never "unsaved".
  const [savedFingerprint, setSavedFingerprint] = useState(() =>
    !base
      ? flowFingerprint(graphToFlow({ nodes: [], edges: [] }, { name: slug, description: "" }))
      : base.flow === initialFlow
        ? flowFingerprint(graphToFlow(initialGraph, metaOf(base.flow, slug))) // laid out once, not twice
        : normalisedFingerprint(base.flow, blocks, slug),
  );
  const [baseVersion, setBaseVersion] = useState<VersionRef | null>(base ? { id: base.id, number: base.number } : null);

  // Once per edit, not per drag frame.
  const flow = useMemo(() => graphToFlow(edited, meta), [edited, meta]);
  const fingerprint = useMemo(() => flowFingerprint(flow), [flow]);
  const dirty = fingerprint !== savedFingerprint;
  const dirtyRef = useRef(dirty);
  useEffect(() => {
    dirtyRef.current = dirty;
  }, [dirty]);
  const forgetChanges = useCallback(() => {
    dirtyRef.current = false;
  }, []);

  const markSaved = useCallback((version: VersionRef, doc: FlowDocument) => {
    setBaseVersion({ id: version.id, number: version.number });
    setSavedFingerprint(flowFingerprint(doc));
  }, []);

  return { flow, meta, metaRef, setMeta, dirty, dirtyRef, forgetChanges, baseVersion, markSaved };
}
