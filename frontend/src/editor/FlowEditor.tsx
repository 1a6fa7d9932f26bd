// The editor of one app: top bar, palette, canvas, config panel, debug panel.
//
// State: xyflow's nodes and edges (one Graph object, mirrored in a ref so handlers always see
// the latest). Every user edit goes through `edit`, which records the previous graph for undo
// and bumps `revision`; the flow document (validation, drafts, the debug panel, saving) is
// derived from the graph once per revision, not per drag frame.

import {
  Background,
  Controls,
  MiniMap,
  type NodeChange,
  type EdgeChange,
  type Connection,
  ReactFlow,
  applyEdgeChanges,
  applyNodeChanges,
  useReactFlow,
} from "@xyflow/react";
import { type DragEvent, useCallback, useEffect, useMemo, useRef, useState } from "react";
import { DebugPanel } from "../debug/DebugPanel";
import { SubflowList } from "./SubflowView";
import { api } from "../api/client";
import { ApiError } from "../api/http";
import type { AppOut, BlockSpec, ErrorPolicy, FlowDocument, NodeRunState, Problem, VersionDiff, VersionOut } from "../api/types";
import { setLeaveGuard } from "../router";
import { Modal } from "../ui/Modal";
import { toast, toastError } from "../ui/toast";
import { useDismiss } from "../ui/useDismiss";
import { BlocksContext, nodeTypes } from "./BlockNode";
import { type Clip, copySelection, deleteSelection, pasteClip } from "./clipboard";
import { ConfigPanel, ProblemsList } from "./ConfigPanel";
import { checkConnection } from "./connect";
import { ConnectionRefused, clearRefusal, showRefusal } from "./ConnectionRefused";
import { DecorationContext, DecorationStore, type DiffMark } from "./decorations";
import { type Draft, clearDraft, flowFingerprint, saveDraft } from "./draft";
import { shownProblems, tidyProblems } from "./problemView";
import { dropServerDraft, pushServerDraft } from "./serverDraft";
import {
  type EditorEdge,
  type EditorNode,
  type Graph,
  edgeFromConnection,
  edgeFromFlow,
  edgeToFlow,
  edgeKey,
  estimatePorts,
  withPolicyPorts,
  withSubflowPorts,
  flowToGraph,
  graphToFlow,
  isCondition,
  needsLayout,
  newNode,
  withEdgePorts,
} from "./graph";
import { LevelOfDetail } from "./LevelOfDetail";
import { History } from "./history";
import { NODE_WIDTH, layoutGraph } from "./layout";
import { Palette } from "./Palette";
import { PublishDialog, formatTime } from "./PublishDialog";
import { PublishPrepare } from "./PublishPrepare";
import type { Registry } from "./registry";
import { exampleInputs } from "./snippets";
import { VersionsPanel } from "./VersionsPanel";
import { BLOCK_MIME } from "./Palette";

export interface BaseVersion {
  id: string;
  number: number;
  flow: FlowDocument;
}

interface Props {
  app: AppOut;
  onAppChange: (app: AppOut) => void;
  registry: Registry;
  base: BaseVersion | null;
  initialFlow: FlowDocument;
  restored: Draft | null;
  pendingDraft: Draft | null;
  onRestorePending: () => void;
  onDiscardDraft: (base: BaseVersion | null) => void;
  onSaved: (version: VersionOut, flow: FlowDocument) => void;
  onOpenVersion: (number: number) => void;
  refreshSecrets: () => void;
}

const CLIP_KEY = "dagwright.clipboard";
const DEBUG_HEIGHT_KEY = "dagwright.debugHeight";
const AUTHOR_KEY = "dagwright.author";

let pointer = { x: 0, y: 0 };
if (typeof window !== "undefined") {
  window.addEventListener("pointermove", (e) => (pointer = { x: e.clientX, y: e.clientY }), { passive: true });
}

/** A document as the editor holds it: nodes without positions are laid out. */
function prepareGraph(doc: FlowDocument, blocks: Registry["byName"]): Graph {
  const g = flowToGraph(doc, blocks);
  if (needsLayout(doc)) {
    const pos = layoutGraph(g.nodes, g.edges);
    g.nodes = g.nodes.map((n) => ({ ...n, position: pos.get(n.id) ?? n.position }));
  }
  return g;
}

function metaOf(
  doc: FlowDocument,
  slug: string,
): { name: string; description: string; subflows?: FlowDocument["subflows"] } {
  return { name: doc.name ?? slug, description: doc.description ?? "", subflows: doc.subflows };
}

function normalisedFingerprint(doc: FlowDocument, blocks: Registry["byName"], slug: string): string {
  return flowFingerprint(graphToFlow(prepareGraph(doc, blocks), metaOf(doc, slug)));
}

function isEditable(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || !el.tagName) return false;
  return el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName);
}

function needsServerPorts(spec: BlockSpec | undefined): boolean {
  return !!spec && (!!spec.dynamic_inputs || spec.branches === null);
}

export const SHORTCUTS: [string, string][] = [
  ["Ctrl/⌘ + C / X / V", "copy / cut / paste nodes"],
  ["Ctrl/⌘ + Z", "undo"],
  ["Ctrl/⌘ + Shift + Z, Ctrl + Y", "redo"],
  ["Delete / Backspace", "delete the selection"],
  ["Ctrl/⌘ + A", "select every node"],
  ["Shift + drag", "select with a box"],
  ["Ctrl/⌘ + click", "add to / remove from the selection"],
  ["Ctrl/⌘ + S", "save a version"],
  ["Ctrl/⌘ + Enter", "validate"],
  ["Shift + L", "auto-layout"],
  ["F", "fit the view"],
  ["Escape", "clear the selection"],
  ["?", "this help"],
];

export function FlowEditor(props: Props) {
  const { app, registry, base, onAppChange } = props;
  const blocks = registry.byName;
  const rf = useReactFlow<EditorNode, EditorEdge>();
  const decorations = useMemo(() => new DecorationStore(), []);
  const history = useMemo(() => new History<Graph>(), []);

  // ---- the graph -------------------------------------------------------------------------
  const initial = useMemo(() => prepareGraph(props.initialFlow, blocks), []); // the first document only: another remounts the editor
  const [graph, setGraph] = useState<Graph>(initial);
  const graphRef = useRef(graph);
  const [revision, setRevision] = useState(0);
  const [meta, setMeta] = useState(() => metaOf(props.initialFlow, app.slug));
  const metaRef = useRef(meta);
  metaRef.current = meta;
  // What the saved version looks like once read into the editor (the same normalisation as the
  // working copy), so opening a version is never "unsaved".
  const [savedFingerprint, setSavedFingerprint] = useState(() =>
    !base
      ? flowFingerprint(graphToFlow({ nodes: [], edges: [] }, { name: app.slug, description: "" }))
      : base.flow === props.initialFlow
        ? flowFingerprint(graphToFlow(initial, metaOf(base.flow, app.slug))) // laid out once, not twice
        : normalisedFingerprint(base.flow, blocks, app.slug),
  );
  const [baseVersion, setBaseVersion] = useState<{ id: string; number: number } | null>(base ? { id: base.id, number: base.number } : null);

  const setBoth = useCallback((next: Graph) => {
    graphRef.current = next;
    setGraph(next);
  }, []);

  /** A user edit: undoable, marks the document changed. */
  const edit = useCallback(
    (fn: (g: Graph) => Graph, coalesceKey?: string) => {
      const before = graphRef.current;
      const next = fn(before);
      if (next === before) return;
      history.push(before, coalesceKey);
      setBoth(next);
      setRevision((r) => r + 1);
    },
    [history, setBoth],
  );

  /** A change that is not an edit (selection, ports from the server). */
  const replace = useCallback((fn: (g: Graph) => Graph) => setBoth(fn(graphRef.current)), [setBoth]);

  // Once per revision (an edit), not per drag frame: graphRef holds the latest graph.
  const flow = useMemo(() => graphToFlow(graphRef.current, meta), [revision, meta]);
  const fingerprint = useMemo(() => flowFingerprint(flow), [flow]);
  const dirty = fingerprint !== savedFingerprint;
  const dirtyRef = useRef(dirty);
  dirtyRef.current = dirty;

  // ---- drafts, leaving --------------------------------------------------------------------
  // A restored draft that equals its version (once normalised) is nothing to mention.
  const [draftNotice, setDraftNotice] = useState<Draft | null>(() => (props.restored && dirty ? props.restored : null));
  useEffect(() => {
    if (dirty) {
      const draft = { flow, baseVersionId: baseVersion?.id ?? null, baseNumber: baseVersion?.number ?? null };
      saveDraft(app.slug, draft);
      pushServerDraft(app.slug, draft);
    } else if (revision > 0 || props.restored) {
      clearDraft(app.slug); // a pending draft stays until the user acts
      dropServerDraft(app.slug);
    }
  }, [flow, dirty, app.slug, baseVersion, revision, props.restored]);

  useEffect(() => {
    setLeaveGuard(() => (dirtyRef.current ? "This app has unsaved changes. Leave anyway? (They stay in this browser as a draft.)" : null));
    const onBeforeUnload = (e: BeforeUnloadEvent) => {
      if (!dirtyRef.current) return;
      e.preventDefault();
      e.returnValue = "";
    };
    window.addEventListener("beforeunload", onBeforeUnload);
    return () => {
      setLeaveGuard(null);
      window.removeEventListener("beforeunload", onBeforeUnload);
    };
  }, []);

  // ---- validation -------------------------------------------------------------------------
  // The server's problems, tidied; what is shown is filtered by what the user has worked on.
  const [allProblems, setProblems] = useState<Problem[]>([]);
  const touchedRef = useRef(new Set<string>(initial.nodes.map((n) => n.id))); // an opened flow was worked on
  const [touchedRev, setTouchedRev] = useState(0);
  const [revealAll, setRevealAll] = useState(false);
  const touch = useCallback((...ids: string[]) => {
    const fresh = ids.filter((id) => !touchedRef.current.has(id));
    if (fresh.length === 0) return;
    for (const id of fresh) touchedRef.current.add(id);
    setTouchedRev((r) => r + 1);
  }, []);
  // touchedRev stands for the touched set (a ref): it re-filters when a node is first worked on.
  const problems = useMemo(() => shownProblems(allProblems, touchedRef.current, revealAll), [allProblems, revealAll, touchedRev]);
  const hiddenProblems = allProblems.length - problems.length;
  useEffect(() => decorations.setProblems(problems), [decorations, problems]);
  const validationSeq = useRef(0);
  const validate = useCallback(
    async (doc: FlowDocument, loud: boolean) => {
      const seq = ++validationSeq.current;
      try {
        const result = await api.validate(doc);
        if (seq !== validationSeq.current) return;
        setProblems(tidyProblems(result.problems));
        if (loud) {
          setRevealAll(true);
          const errors = result.problems.filter((p) => p.severity === "error").length;
          if (result.ok) toast("success", result.problems.length ? `Valid, with ${result.problems.length} warning(s)` : "The flow is valid");
          else toast("warning", `${errors} problem(s) to fix`, "See the problems list and the red badges.");
        }
      } catch (e) {
        if (loud || !(e instanceof ApiError && e.status === 0)) toastError(e, "Validation failed");
      }
    },
    [],
  );
  useEffect(() => {
    // On open, after the canvas has drawn (the server's answer is not needed to start work).
    const timer = setTimeout(() => validate(flow, false), revision === 0 ? 300 : 600);
    return () => clearTimeout(timer);
  }, [flow, validate, revision]);

  const showProblems = useCallback(
    (list: Problem[]) => {
      validationSeq.current++;
      setRevealAll(true); // the server refused a save: every problem counts now
      setProblems(tidyProblems(list));
    },
    [],
  );

  // ---- ports from the server --------------------------------------------------------------
  const [portsErrors, setPortsErrors] = useState<Record<string, string>>({});
  const portTimers = useRef(new Map<string, ReturnType<typeof setTimeout>>());
  const refreshPorts = useCallback(
    (id: string, delay = 350) => {
      const node = graphRef.current.nodes.find((n) => n.id === id);
      const spec = node && blocks.get(node.data.block);
      if (!node || !needsServerPorts(spec)) return;
      const timers = portTimers.current;
      const old = timers.get(id);
      if (old) clearTimeout(old);
      timers.set(
        id,
        setTimeout(async () => {
          timers.delete(id);
          const current = graphRef.current.nodes.find((n) => n.id === id);
          if (!current) return;
          const config = current.data.config;
          try {
            const ports = await api.ports(current.data.block, config);
            const now = graphRef.current.nodes.find((n) => n.id === id);
            if (!now || now.data.config !== config) return; // edited since: a newer call follows
            replace((g) => ({
              ...g,
              nodes: g.nodes.map((n) =>
                n.id === id
                  ? {
                      ...n,
                      data: {
                        ...n.data,
                        ports: withEdgePorts(
                          id,
                          withSubflowPorts(
                            withPolicyPorts(
                              { inputs: ports.inputs, outputs: ports.outputs, branches: isCondition(spec) ? ports.branches : null },
                              n.data.on_error,
                            ),
                            n.data.block,
                            config,
                            metaRef.current.subflows,
                            blocks,
                          ),
                          g.edges,
                        ),
                      },
                    }
                  : n,
              ),
            }));
            setPortsErrors((errs) => {
              if (!(id in errs)) return errs;
              const next = { ...errs };
              delete next[id];
              return next;
            });
          } catch (e) {
            if (e instanceof ApiError && e.status !== 0) setPortsErrors((errs) => ({ ...errs, [id]: `${e.code}: ${e.message}` }));
          }
        }, delay),
      );
    },
    [blocks, replace],
  );
  useEffect(() => () => portTimers.current.forEach((t) => clearTimeout(t)), []);

  // ---- selection ---------------------------------------------------------------------------
  const selectedIds = useMemo(() => graph.nodes.filter((n) => n.selected).map((n) => n.id), [graph.nodes]);
  const selectedId = selectedIds.length === 1 ? selectedIds[0] : null;
  const selectedData = selectedId ? graph.nodes.find((n) => n.id === selectedId)?.data : undefined;
  const selectedNode = useMemo<EditorNode | null>(
    () => (selectedId && selectedData ? { id: selectedId, type: "block", position: { x: 0, y: 0 }, data: selectedData } : null),
    [selectedId, selectedData],
  );
  const refreshedOnSelect = useRef(new Set<string>());
  useEffect(() => {
    if (selectedId && !refreshedOnSelect.current.has(selectedId)) {
      refreshedOnSelect.current.add(selectedId);
      refreshPorts(selectedId, 0);
    }
  }, [selectedId, refreshPorts]);

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
    [replace, rf],
  );

  // ---- xyflow handlers ---------------------------------------------------------------------
  const onNodesChange = useCallback(
    (changes: NodeChange<EditorNode>[]) => {
      // Removal is ours (Delete key), so xyflow's changes are moves, sizes and selection.
      const kept = changes.filter((c) => c.type !== "remove");
      if (kept.length) setBoth({ ...graphRef.current, nodes: applyNodeChanges(kept, graphRef.current.nodes) });
    },
    [setBoth],
  );
  const onEdgesChange = useCallback(
    (changes: EdgeChange<EditorEdge>[]) => {
      const kept = changes.filter((c) => c.type !== "remove");
      if (kept.length) setBoth({ ...graphRef.current, edges: applyEdgeChanges(kept, graphRef.current.edges) });
    },
    [setBoth],
  );
  const dragBefore = useRef<Graph | null>(null);
  const onDragStart = useCallback(() => {
    dragBefore.current = graphRef.current;
  }, []);
  const onDragStop = useCallback(() => {
    const before = dragBefore.current;
    dragBefore.current = null;
    if (!before) return;
    const moved = graphRef.current.nodes.some((n) => {
      const old = before.nodes.find((o) => o.id === n.id);
      return old && (old.position.x !== n.position.x || old.position.y !== n.position.y);
    });
    if (moved) {
      history.push(before);
      setRevision((r) => r + 1);
    }
  }, [history]);

  const matrix = registry.compatibility;
  const isValidConnection = useCallback(
    (c: Connection | EditorEdge) => {
      const verdict = checkConnection(graphRef.current, c, matrix);
      if (!verdict.ok) showRefusal(verdict.reason ?? "refused", pointer.x, pointer.y);
      else clearRefusal();
      return verdict.ok;
    },
    [matrix],
  );
  const onConnect = useCallback(
    (c: Connection) => {
      const verdict = checkConnection(graphRef.current, c, matrix);
      if (!verdict.ok) {
        showRefusal(verdict.reason ?? "refused", pointer.x, pointer.y);
        return;
      }
      const edge = edgeFromConnection(c);
      edit((g) => (g.edges.some((e) => e.id === edge.id) ? g : { ...g, edges: [...g.edges, edge] }));
      touch(c.source, c.target);
      if (verdict.compat === "check") toast("info", "Connected; checked at run time", "The types may fit: each value is checked when it arrives.", undefined, 2500);
    },
    [edit, matrix, touch],
  );

  // ---- adding nodes ------------------------------------------------------------------------
  const wrapperRef = useRef<HTMLDivElement>(null);
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
    [rf],
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
    [blocks, edit, insideCanvas, rf],
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

  // ---- config edits ------------------------------------------------------------------------
  const onConfig = useCallback(
    (id: string, config: Record<string, unknown>, field: string) => {
      edit(
        (g) => ({
          ...g,
          nodes: g.nodes.map((n) => {
            if (n.id !== id) return n;
            const spec = blocks.get(n.data.block);
            const ports = needsServerPorts(spec)
              ? withEdgePorts(
                  id,
                  withSubflowPorts(
                    withPolicyPorts(estimatePorts(spec, config), n.data.on_error),
                    n.data.block,
                    config,
                    metaRef.current.subflows,
                    blocks,
                  ),
                  g.edges,
                )
              : n.data.ports;
            return { ...n, data: { ...n.data, config, ports } };
          }),
        }),
        `config:${id}:${field}`,
      );
      touch(id);
      refreshPorts(id);
    },
    [blocks, edit, refreshPorts, touch],
  );
  const onLabel = useCallback(
    (id: string, label: string) =>
      edit(
        (g) => ({
          ...g,
          nodes: g.nodes.map((n) => {
            if (n.id !== id) return n;
            const data = { ...n.data };
            if (label) data.label = label;
            else delete data.label;
            return { ...n, data };
          }),
        }),
        `label:${id}`,
      ),
    [edit],
  );
  const onTimeout = useCallback(
    (id: string, timeout: number | undefined) =>
      edit(
        (g) => ({
          ...g,
          nodes: g.nodes.map((n) => {
            if (n.id !== id) return n;
            const data = { ...n.data };
            if (timeout === undefined) delete data.timeout;
            else data.timeout = timeout;
            return { ...n, data };
          }),
        }),
        `timeout:${id}`,
      ),
    [edit],
  );
  const onErrorPolicy = useCallback(
    (id: string, policy: ErrorPolicy | undefined) =>
      edit(
        (g) => ({
          ...g,
          nodes: g.nodes.map((n) => {
            if (n.id !== id) return n;
            const data = { ...n.data };
            if (policy === undefined) delete data.on_error;
            else data.on_error = policy;
            data.ports = withEdgePorts(
              id,
              withPolicyPorts(data.ports, policy),
              g.edges.filter((e) => e.source === id || e.target === id),
            );
            return { ...n, data };
          }),
        }),
        `on_error:${id}`,
      ),
    [edit],
  );
  const onRename = useCallback(
    (id: string, next: string): string | null => {
      if (graphRef.current.nodes.some((n) => n.id === next)) return `“${next}” is taken`;
      edit((g) => ({
        nodes: g.nodes.map((n) => (n.id === id ? { ...n, id: next } : n)),
        edges: g.edges.map((e) => {
          if (e.source !== id && e.target !== id) return e;
          const moved = { ...e, source: e.source === id ? next : e.source, target: e.target === id ? next : e.target };
          return { ...moved, id: edgeFromFlow(edgeToFlow(moved)).id };
        }),
      }));
      decorations.clearNode(id);
      touch(next);
      return null;
    },
    [decorations, edit, touch],
  );

  // ---- commands -----------------------------------------------------------------------------
  const undo = useCallback(() => {
    const prev = history.undo(graphRef.current);
    if (prev) {
      setBoth(prev);
      setRevision((r) => r + 1);
    }
  }, [history, setBoth]);
  const redo = useCallback(() => {
    const next = history.redo(graphRef.current);
    if (next) {
      setBoth(next);
      setRevision((r) => r + 1);
    }
  }, [history, setBoth]);
  const clipRef = useRef<Clip | null>(null);
  const pasteCount = useRef(0);
  const copy = useCallback(() => {
    const clip = copySelection(graphRef.current);
    if (!clip) return false;
    clipRef.current = clip;
    pasteCount.current = 0;
    try {
      localStorage.setItem(CLIP_KEY, JSON.stringify(clip));
    } catch {
      // too big or disabled: this tab's copy still works
    }
    return true;
  }, []);
  const paste = useCallback(() => {
    let clip = clipRef.current;
    if (!clip) {
      try {
        clip = JSON.parse(localStorage.getItem(CLIP_KEY) ?? "null") as Clip | null;
      } catch {
        clip = null;
      }
    }
    if (!clip || !clip.nodes.length) return;
    pasteCount.current += 1;
    let offset = { x: 40 * pasteCount.current, y: 40 * pasteCount.current };
    const rect = wrapperRef.current?.getBoundingClientRect();
    if (rect && pointer.x >= rect.left && pointer.x <= rect.right && pointer.y >= rect.top && pointer.y <= rect.bottom) {
      const at = rf.screenToFlowPosition(pointer);
      const minX = Math.min(...clip.nodes.map((n) => n.position?.x ?? 0));
      const minY = Math.min(...clip.nodes.map((n) => n.position?.y ?? 0));
      offset = { x: Math.round(at.x - minX) + (pasteCount.current - 1) * 20, y: Math.round(at.y - minY) + (pasteCount.current - 1) * 20 };
    }
    const c = clip;
    edit((g) => pasteClip(g, c, blocks, offset).graph);
  }, [blocks, edit, rf]);
  const remove = useCallback(() => edit(deleteSelection), [edit]);
  const selectAll = useCallback(
    () => replace((g) => ({ ...g, nodes: g.nodes.map((n) => (n.selected ? n : { ...n, selected: true })) })),
    [replace],
  );
  const layout = useCallback(() => {
    const g = graphRef.current;
    const positions = layoutGraph(g.nodes, g.edges);
    edit((cur) => ({ ...cur, nodes: cur.nodes.map((n) => ({ ...n, position: positions.get(n.id) ?? n.position })) }));
    requestAnimationFrame(() => rf.fitView({ duration: 300, padding: 0.1 }));
  }, [edit, rf]);

  // ---- dialogs --------------------------------------------------------------------------------
  const [saving, setSaving] = useState(false);
  const [showPublish, setShowPublish] = useState(false);
  const [showVersions, setShowVersions] = useState(false);
  const [showHelp, setShowHelp] = useState(false);
  const helpRef = useRef<HTMLDivElement>(null);
  const closeHelp = useCallback(() => setShowHelp(false), []);
  useDismiss(helpRef, showHelp, closeHelp);
  const [versionsKey, setVersionsKey] = useState(0);
  const [rightTab, setRightTab] = useState<"node" | "problems" | "flow">("node");
  useEffect(() => {
    if (selectedId) setRightTab("node");
  }, [selectedId]);

  const runValidate = useCallback(() => {
    setRightTab("problems");
    validate(graphToFlow(graphRef.current, metaRef.current), true);
  }, [validate]);

  const [preparing, setPreparing] = useState(false);
  const [publishedNumber, setPublishedNumber] = useState<number | null>(null);
  const publish = useCallback(
    async (version: { id: string; number: number } | null = baseVersion) => {
      if (!version) {
        toast("warning", "Save a version first", "Publishing makes a saved version the app's endpoint.");
        return;
      }
      try {
        const updated = await api.publish(app.slug, version.id);
        onAppChange(updated);
        setVersionsKey((k) => k + 1);
        setPublishedNumber(version.number);
        // The dialog says what was published; a toast would cover its first line.
        setPreparing(false);
        setShowPublish(true);
      } catch (e) {
        toastError(e, "Could not publish");
      }
    },
    [app.slug, baseVersion, onAppChange],
  );

  const onSavedVersion = useCallback(
    (v: VersionOut, doc: FlowDocument) => {
      setBaseVersion({ id: v.id, number: v.number });
      setSavedFingerprint(flowFingerprint(doc));
      clearDraft(app.slug);
      dropServerDraft(app.slug);
      setDraftNotice(null);
      setVersionsKey((k) => k + 1);
      props.onSaved(v, doc);
    },
    [app.slug, props],
  );

  // ---- keyboard ------------------------------------------------------------------------------
  const commands = useRef({ undo, redo, copy, paste, remove, selectAll, layout, runValidate, save: () => setSaving(true) });
  commands.current = { undo, redo, copy, paste, remove, selectAll, layout, runValidate, save: () => setSaving(true) };
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const mod = e.ctrlKey || e.metaKey;
      const c = commands.current;
      if (mod && e.key.toLowerCase() === "s") {
        e.preventDefault();
        c.save();
        return;
      }
      if (isEditable(e.target) || document.querySelector(".modal-backdrop")) return;
      const key = e.key.toLowerCase();
      if (mod && key === "z" && !e.shiftKey) c.undo();
      else if (mod && ((key === "z" && e.shiftKey) || key === "y")) c.redo();
      else if (mod && key === "c") {
        if (!c.copy()) return;
      } else if (mod && key === "x") {
        if (c.copy()) c.remove();
      } else if (mod && key === "v") c.paste();
      else if (mod && key === "a") c.selectAll();
      else if (mod && key === "enter") c.runValidate();
      else if (!mod && (e.key === "Delete" || e.key === "Backspace")) c.remove();
      else if (!mod && e.key === "?") setShowHelp((s) => !s);
      else if (!mod && e.shiftKey && key === "l") c.layout();
      else if (!mod && !e.shiftKey && key === "f") rf.fitView({ duration: 300, padding: 0.1 });
      else if (e.key === "Escape") selectNode(null);
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [rf, selectNode]);

  // ---- diff highlight ------------------------------------------------------------------------
  const [diffEdges, setDiffEdges] = useState<Map<string, DiffMark> | null>(null);
  const [diffLabel, setDiffLabel] = useState<string | null>(null);
  const highlight = useCallback(
    (diff: VersionDiff, a: number, b: number) => {
      const marks = new Map<string, { mark: DiffMark; fields?: string[] }>();
      diff.nodes.added.forEach((id) => marks.set(id, { mark: "added" }));
      diff.nodes.removed.forEach((id) => marks.set(id, { mark: "removed" }));
      diff.nodes.changed.forEach((c) => marks.set(c.id, { mark: "changed", fields: c.fields }));
      decorations.setDiff(marks);
      const edges = new Map<string, DiffMark>();
      diff.edges.added.forEach((e) => edges.set(edgeKey(e), "added"));
      diff.edges.removed.forEach((e) => edges.set(edgeKey(e), "removed"));
      setDiffEdges(edges);
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
    if (!diffEdges) return graph.edges;
    return graph.edges.map((e) => {
      const mark = diffEdges.get(e.id);
      return mark ? { ...e, className: `edge-diff-${mark}` } : e;
    });
  }, [graph.edges, diffEdges]);

  // ---- debug panel ---------------------------------------------------------------------------
  const onNodeStates = useCallback(
    (states: Record<string, NodeRunState>) => {
      decorations.setRunStates(states);
      if (Object.keys(states).length > 0) setRevealAll(true); // a run: every problem counts now
    },
    [decorations],
  );
  const [debugOpen, setDebugOpen] = useState(true);
  // A dock dragged tall is restored at most half the window: else the next visit opens on a
  // strip of canvas.
  const [debugHeight, setDebugHeight] = useState(() => Math.max(120, Math.min(Number(localStorage.getItem(DEBUG_HEIGHT_KEY)) || 220, Math.round(window.innerHeight / 2))));
  const startResize = (e: React.PointerEvent) => {
    e.preventDefault();
    const startY = e.clientY;
    const startH = debugHeight;
    let latest = startH;
    const move = (ev: PointerEvent) => {
      latest = Math.max(120, Math.min(window.innerHeight - 160, startH + (startY - ev.clientY)));
      setDebugHeight(latest);
    };
    const up = () => {
      window.removeEventListener("pointermove", move);
      window.removeEventListener("pointerup", up);
      localStorage.setItem(DEBUG_HEIGHT_KEY, String(latest));
    };
    window.addEventListener("pointermove", move);
    window.addEventListener("pointerup", up);
  };

  // The panel re-renders when its inputs change, never per drag frame; it mounts just after
  // the canvas has drawn, so a big flow shows (and takes clicks) first.
  const [debugMounted, setDebugMounted] = useState(false);
  useEffect(() => {
    const t = setTimeout(() => setDebugMounted(true), 0);
    return () => clearTimeout(t);
  }, []);
  const debugPanel = useMemo(
    () =>
      debugMounted ? (
        <DebugPanel flow={flow} appSlug={app.slug} selectedNodeId={selectedId} onSelectNode={selectNode} onNodeStates={onNodeStates} />
      ) : null,
    [debugMounted, flow, app.slug, selectedId, selectNode, onNodeStates],
  );

  // ---- rename the app ------------------------------------------------------------------------
  const [renaming, setRenaming] = useState<string | null>(null);
  const commitRename = async () => {
    const name = renaming?.trim();
    setRenaming(null);
    if (!name || name === app.name) return;
    try {
      onAppChange(await api.updateApp(app.slug, { name }));
    } catch (e) {
      toastError(e, "Could not rename the app");
    }
  };

  const exportApp = async () => {
    try {
      const doc = await api.exportApp(app.slug);
      downloadJson(`${app.slug}.dagwright.json`, doc);
    } catch (e) {
      toastError(e, "Could not export");
    }
  };

  const published = !!app.published_version_id;
  const openIsPublished = !!baseVersion && baseVersion.id === app.published_version_id;
  const nodeProblems = useMemo(() => (selectedId ? problems.filter((p) => p.node === selectedId) : []), [problems, selectedId]);
  const errorCount = problems.filter((p) => p.severity === "error").length;
  const onSelectProblem = useCallback((id: string) => selectNode(id), [selectNode]);
  const onPaletteAdd = useCallback((name: string) => addBlock(name), [addBlock]);

  return (
    <BlocksContext.Provider value={blocks}>
      <DecorationContext.Provider value={decorations}>
        <div className="editor" style={{ gridTemplateRows: `auto auto 1fr ${debugOpen ? debugHeight : 34}px` }}>
          <header className="topbar">
            <a className="btn btn-ghost" href="#/" data-testid="back" title="All apps">
              ← Apps
            </a>
            {renaming !== null ? (
              <input
                className="input app-name-input"
                autoFocus
                data-testid="app-name-input"
                value={renaming}
                onChange={(e) => setRenaming(e.target.value)}
                onBlur={commitRename}
                onKeyDown={(e) => {
                  if (e.key === "Enter") commitRename();
                  if (e.key === "Escape") setRenaming(null);
                }}
              />
            ) : (
              <button className="app-name" data-testid="app-name" title="Rename" onClick={() => setRenaming(app.name)}>
                {app.name}
              </button>
            )}
            <span className="muted small mono">{app.slug}</span>
            <span className="version-label" data-testid="version-label">
              {baseVersion ? `v${baseVersion.number}` : "no version yet"}
              {openIsPublished && <span className="tag tag-published">published</span>}
            </span>
            {dirty && (
              <span className="unsaved" data-testid="unsaved" title="Unsaved changes (kept in this browser)">
                ● unsaved
              </span>
            )}
            <span className="spacer" />
            <button className="btn btn-ghost" data-testid="undo" title="Undo (Ctrl+Z)" onClick={undo} disabled={!history.canUndo}>
              ↶
            </button>
            <button className="btn btn-ghost" data-testid="redo" title="Redo (Ctrl+Shift+Z)" onClick={redo} disabled={!history.canRedo}>
              ↷
            </button>
            <button className="btn" data-testid="layout" title="Auto-layout (Shift+L)" onClick={layout}>
              Layout
            </button>
            <button className="btn" data-testid="validate" title="Validate (Ctrl+Enter)" onClick={runValidate}>
              Validate{errorCount > 0 && <span className="badge badge-error">{errorCount}</span>}
            </button>
            <button className="btn" data-testid="versions" onClick={() => setShowVersions((s) => !s)}>
              History
            </button>
            <button className="btn" data-testid="export" onClick={exportApp} title="Download the app and its versions as JSON">
              Export
            </button>
            <button className="btn btn-primary" data-testid="save" title="Save a version (Ctrl+S)" onClick={() => setSaving(true)}>
              Save
            </button>
            <button
              className="btn btn-accent"
              data-testid="publish"
              disabled={!baseVersion && graph.nodes.length === 0}
              title={dirty || !baseVersion ? "Save the canvas as a version and publish it" : `Publish v${baseVersion.number}`}
              onClick={() => (dirty || !baseVersion ? setPreparing(true) : void publish())}
            >
              Publish
            </button>
            {published && (
              <button className="btn" data-testid="endpoint" onClick={() => setShowPublish(true)}>
                API
              </button>
            )}
            <div className="help-wrap" ref={helpRef}>
              <button className="btn btn-ghost" data-testid="help" aria-expanded={showHelp} onClick={() => setShowHelp((s) => !s)} title="Keyboard shortcuts (?)">
                ?
              </button>
              {showHelp && (
                <div className="popover" data-testid="shortcuts" role="dialog" aria-label="Keyboard shortcuts">
                  <h3>Keyboard shortcuts</h3>
                  <table>
                    <tbody>
                      {SHORTCUTS.map(([k, v]) => (
                        <tr key={k}>
                          <td>
                            <kbd>{k}</kbd>
                          </td>
                          <td>{v}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                  <p className="muted small">Drag a block from the palette onto the canvas; drag from an output port to an input port to connect.</p>
                </div>
              )}
            </div>
          </header>
          <div className="notices">
            {draftNotice && (
              <div className="notice" data-testid="draft-notice" role="status">
                Restored unsaved changes{draftNotice.savedAt ? ` from ${formatTime(draftNotice.savedAt)}` : ""}
                {draftNotice.baseNumber ? ` (based on v${draftNotice.baseNumber})` : ""}.
                <button className="btn btn-small" data-testid="discard-draft" onClick={() => {
                  if (!window.confirm("Discard the unsaved changes?")) return;
                  dirtyRef.current = false;
                  clearDraft(app.slug);
                  props.onDiscardDraft(base);
                }}>
                  Discard them
                </button>
                <button className="btn btn-small btn-ghost" onClick={() => setDraftNotice(null)}>
                  Keep
                </button>
              </div>
            )}
            {props.pendingDraft && (
              <div className="notice" data-testid="pending-draft" role="status">
                This app has unsaved changes based on v{props.pendingDraft.baseNumber ?? "?"}, saved {formatTime(props.pendingDraft.savedAt)}.
                <button className="btn btn-small" data-testid="restore-draft" onClick={props.onRestorePending}>
                  Restore them
                </button>
              </div>
            )}
            {diffLabel && (
              <div className="notice notice-diff" data-testid="diff-notice">
                Highlighting {diffLabel}: <span className="diff-added">added</span> · <span className="diff-changed">changed</span> · <span className="diff-removed">removed</span>
                <button className="btn btn-small" data-testid="diff-clear" onClick={clearHighlight}>
                  Clear
                </button>
              </div>
            )}
          </div>
          <Palette categories={registry.categories} blocks={registry.blocks} onAdd={onPaletteAdd} />
          <div className="canvas" ref={wrapperRef} data-testid="canvas" onDragOver={onDragOver} onDrop={onDrop}>
            <ReactFlow<EditorNode, EditorEdge>
              nodes={graph.nodes}
              edges={shownEdges}
              nodeTypes={nodeTypes}
              onNodesChange={onNodesChange}
              onEdgesChange={onEdgesChange}
              onConnect={onConnect}
              isValidConnection={isValidConnection}
              onConnectStart={clearRefusal}
              onNodeDragStart={onDragStart}
              onNodeDragStop={onDragStop}
              onSelectionDragStart={onDragStart}
              onSelectionDragStop={onDragStop}
              deleteKeyCode={null}
              elevateNodesOnSelect={false}
              selectionKeyCode="Shift"
              multiSelectionKeyCode={["Control", "Meta"]}
              fitView={initial.nodes.length > 0}
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
            {graph.nodes.length === 0 && (
              <div className="canvas-empty">
                <p>Drag a block from the palette here.</p>
                <p className="muted small">A flow needs an input (text_input…) and an output block.</p>
              </div>
            )}
            <ConnectionRefused />
          </div>
          <aside className="right">
            <div className="tabs" role="tablist">
              <button role="tab" className={`tab${rightTab === "node" ? " active" : ""}`} data-testid="tab-node" onClick={() => setRightTab("node")}>
                Node
              </button>
              <button role="tab" className={`tab${rightTab === "problems" ? " active" : ""}`} data-testid="tab-problems" onClick={() => setRightTab("problems")}>
                Problems{problems.length > 0 && <span className={`badge ${errorCount ? "badge-error" : "badge-warning"}`}>{problems.length}</span>}
              </button>
              <button role="tab" className={`tab${rightTab === "flow" ? " active" : ""}`} data-testid="tab-flow" onClick={() => setRightTab("flow")}>
                Flow
              </button>
            </div>
            <div className="right-body">
              {rightTab === "node" &&
                (selectedNode ? (
                  <ConfigPanel
                    node={selectedNode}
                    spec={blocks.get(selectedNode.data.block)}
                    secrets={registry.secrets}
                    problems={nodeProblems}
                    portsError={portsErrors[selectedNode.id] ?? null}
                    onConfig={onConfig}
                    onRename={onRename}
                    onLabel={onLabel}
                    onTimeout={onTimeout}
                    onErrorPolicy={onErrorPolicy}
                  />
                ) : (
                  <p className="muted">{selectedIds.length > 1 ? `${selectedIds.length} nodes selected.` : "Select a node to edit its settings."}</p>
                ))}
              {rightTab === "problems" && <ProblemsList problems={problems} hidden={hiddenProblems} onSelect={onSelectProblem} />}
              {rightTab === "flow" && (
                <div className="schema-form">
                  <div className="field">
                    <label className="field-title" htmlFor="flow-name">
                      Flow name
                    </label>
                    <input id="flow-name" className="input" data-testid="flow-name" value={meta.name} onChange={(e) => setMeta((m) => ({ ...m, name: e.target.value }))} />
                  </div>
                  <div className="field">
                    <label className="field-title" htmlFor="flow-description">
                      Description
                    </label>
                    <textarea id="flow-description" className="input" data-testid="flow-description" rows={3} value={meta.description} onChange={(e) => setMeta((m) => ({ ...m, description: e.target.value }))} />
                  </div>
                  <p className="muted small">
                    {graph.nodes.length} nodes, {graph.edges.length} edges.
                  </p>
                  {meta.subflows && <SubflowList subflows={meta.subflows} blocks={blocks} />}
                  <button className="btn btn-small" onClick={props.refreshSecrets}>
                    Reload secret names
                  </button>
                </div>
              )}
            </div>
          </aside>
          <section className={`debug-dock${debugOpen ? "" : " collapsed"}`} data-testid="debug-dock">
            <div className="debug-bar">
              {debugOpen && <div className="debug-resize" data-testid="debug-resize" onPointerDown={startResize} title="Drag to resize" />}
              <button className="btn btn-ghost btn-small" data-testid="debug-toggle" aria-expanded={debugOpen} onClick={() => setDebugOpen((o) => !o)}>
                {debugOpen ? "▾" : "▸"} Debug
              </button>
            </div>
            <div className="debug-body" hidden={!debugOpen}>
              {debugPanel}
            </div>
          </section>
          {showVersions && (
            <VersionsPanel
              app={app}
              currentVersionId={baseVersion?.id ?? null}
              refreshKey={versionsKey}
              onOpen={(n) => props.onOpenVersion(n)}
              onPublish={(v) => publish({ id: v.id, number: v.number })}
              onHighlight={highlight}
              onClose={() => setShowVersions(false)}
            />
          )}
        </div>
        {saving && (
          <SaveDialog
            slug={app.slug}
            flow={graphToFlow(graphRef.current, metaRef.current)}
            parentId={baseVersion?.id ?? null}
            dirty={dirty}
            onClose={() => setSaving(false)}
            onSaved={(v, doc) => {
              setSaving(false);
              onSavedVersion(v, doc);
            }}
            onProblems={(list) => {
              showProblems(list);
              setRightTab("problems");
            }}
          />
        )}
        {preparing && (
          <PublishPrepare slug={app.slug} flow={flow} base={baseVersion} onSaved={onSavedVersion} onPublish={publish} onClose={() => setPreparing(false)} />
        )}
        {showPublish && (
          <PublishDialog
            app={app}
            publishedNumber={publishedNumber ?? (openIsPublished ? (baseVersion?.number ?? null) : null)}
            inputs={exampleInputs(graphRef.current, blocks)}
            onClose={() => setShowPublish(false)}
          />
        )}
      </DecorationContext.Provider>
    </BlocksContext.Provider>
  );
}

function SaveDialog({ slug, flow, parentId, dirty, onClose, onSaved, onProblems }: {
  slug: string;
  flow: FlowDocument;
  parentId: string | null;
  dirty: boolean;
  onClose: () => void;
  onSaved: (v: VersionOut, flow: FlowDocument) => void;
  onProblems: (problems: Problem[]) => void;
}) {
  const [note, setNote] = useState("");
  const [author, setAuthor] = useState(() => localStorage.getItem(AUTHOR_KEY) ?? "");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<{ code: string; message: string; problems?: Problem[] } | null>(null);
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      if (author) localStorage.setItem(AUTHOR_KEY, author);
      const v = await api.createVersion(slug, { flow, note, author: author || undefined, parent_id: parentId });
      toast("success", `Saved version ${v.number}`);
      onSaved(v, flow);
    } catch (e) {
      if (e instanceof ApiError) {
        const problems = Array.isArray(e.detail.problems) ? (e.detail.problems as Problem[]) : undefined;
        setError({ code: e.code, message: problems ? `The flow has ${problems.filter((p) => p.severity === "error").length} error(s); nothing was saved.` : e.message, problems });
        if (problems) onProblems(problems);
      } else setError({ code: "error", message: String(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title="Save a version" onClose={onClose} testId="save-dialog">
      {!dirty && parentId && <p className="muted">No change since the version you opened; saving makes an identical new version.</p>}
      <div className="field">
        <label className="field-title" htmlFor="save-note">
          Note
        </label>
        <textarea
          id="save-note"
          className="input"
          data-testid="save-note"
          autoFocus
          rows={3}
          placeholder="What changed?"
          value={note}
          onChange={(e) => setNote(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) submit();
          }}
        />
      </div>
      <div className="field">
        <label className="field-title" htmlFor="save-author">
          Author
        </label>
        <input id="save-author" className="input" data-testid="save-author" placeholder="optional" value={author} onChange={(e) => setAuthor(e.target.value)} />
      </div>
      {error && (
        <div className="error-box" role="alert" data-testid="save-error">
          <code>{error.code}</code> {error.message}
          {error.problems && (
            <ul className="problem-list compact">
              {tidyProblems(error.problems).map((p, i) => (
                <li key={i} className={`problem problem-${p.severity}`} title={p.code}>
                  {p.node ?? "The flow"}
                  {p.port ? ` (${p.port})` : ""}: {p.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      <div className="row end">
        <button className="btn" onClick={onClose}>
          Cancel
        </button>
        <button className="btn btn-primary" data-testid="save-confirm" disabled={busy} onClick={submit}>
          {busy ? "Saving…" : "Save version"}
        </button>
      </div>
    </Modal>
  );
}

export function downloadJson(filename: string, data: unknown) {
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
