// The editor of one app: top bar, palette, canvas, side panel, debug dock and dialogs.
//
// This file only composes. The graph and its undo history live in useEditorGraph; every user
// edit goes through its `edit`, which bumps a revision, and the flow document (validation,
// drafts, the debug panel, saving) is derived once per revision in useFlowDocument, not per
// drag frame. Each concern has its hook in ./hooks and its markup in ./parts.

import { useReactFlow } from "@xyflow/react";
import { useCallback, useMemo, useRef, useState } from "react";
import { DebugPanel } from "../debug/DebugPanel";
import type { AppOut, FlowDocument, NodeRunState, VersionOut } from "../api/types";
import { BlocksContext } from "./BlockNode";
import { DecorationContext, DecorationStore } from "./decorations";
import type { Draft } from "./draft";
import { type EditorEdge, type EditorNode, graphToFlow } from "./graph";
import { useCanvas } from "./hooks/useCanvas";
import { useCommands, useShortcuts } from "./hooks/useCommands";
import { FOLDED_HEIGHT, useDebugDock } from "./hooks/useDebugDock";
import { useDiffHighlight } from "./hooks/useDiffHighlight";
import { useDrafts } from "./hooks/useDrafts";
import { useEditorGraph } from "./hooks/useEditorGraph";
import { type BaseVersion, prepareGraph, useFlowDocument } from "./hooks/useFlowDocument";
import { useNodeEdits } from "./hooks/useNodeEdits";
import { usePortRefresh } from "./hooks/usePortRefresh";
import { usePublishing } from "./hooks/usePublishing";
import { useValidation } from "./hooks/useValidation";
import { Palette } from "./Palette";
import { DebugDock } from "./parts/DebugDock";
import { EditorCanvas } from "./parts/EditorCanvas";
import { EditorNotices } from "./parts/EditorNotices";
import { SaveDialog } from "./parts/SaveDialog";
import { type SideTab, SidePanel } from "./parts/SidePanel";
import { TopBar } from "./parts/TopBar";
import { PublishDialog } from "./PublishDialog";
import { PublishPrepare } from "./PublishPrepare";
import type { Registry } from "./registry";
import { exampleInputs } from "./snippets";
import { VersionsPanel } from "./VersionsPanel";

export type { BaseVersion } from "./hooks/useFlowDocument";

interface Props {
  app: AppOut;
  onAppChange: (app: AppOut) => void;
  registry: Registry;
  base: BaseVersion | null;
  initialFlow: FlowDocument;
  restored: Draft | null;
  pendingDraft: Draft | null;
  onRestorePending: () => void;
  /** The draft is dropped: reopen `base` as it was saved. */
  onDiscardDraft: (base: BaseVersion | null) => void;
  onSaved: (version: VersionOut, flow: FlowDocument) => void;
  onOpenVersion: (number: number) => void;
  refreshSecrets: () => void;
}

export function FlowEditor(props: Props) {
  const { app, registry, base, onAppChange, onSaved } = props;
  const blocks = registry.byName;
  const rf = useReactFlow<EditorNode, EditorEdge>();
  const decorations = useMemo(() => new DecorationStore(), []);
  const wrapperRef = useRef<HTMLDivElement>(null);

  // The first document only: another one remounts the editor.
  const [initial] = useState(() => prepareGraph(props.initialFlow, blocks));
  const editor = useEditorGraph(initial);
  const { graph, graphRef, revision } = editor;
  const doc = useFlowDocument({ edited: editor.edited, initialFlow: props.initialFlow, initialGraph: initial, base, slug: app.slug, blocks });
  const { flow, meta, metaRef, dirty, baseVersion } = doc;
  const { draftNotice, setDraftNotice, discardDraft } = useDrafts({ slug: app.slug, flow, dirty, dirtyRef: doc.dirtyRef, baseVersion, revision, restored: props.restored });
  const [initialNodeIds] = useState(() => initial.nodes.map((n) => n.id));
  const validation = useValidation({ flow, revision, initialNodeIds, decorations });
  const { problems, touch, validate } = validation;

  const selectedIds = useMemo(() => graph.nodes.filter((n) => n.selected).map((n) => n.id), [graph.nodes]);
  const selectedId = selectedIds.length === 1 ? selectedIds[0] : null;
  const selectedData = selectedId ? graph.nodes.find((n) => n.id === selectedId)?.data : undefined;
  const selectedNode = useMemo<EditorNode | null>(
    () => (selectedId && selectedData ? { id: selectedId, type: "block", position: { x: 0, y: 0 }, data: selectedData } : null),
    [selectedId, selectedData],
  );

  const { portsErrors, refreshPorts } = usePortRefresh({ graphRef, nodes: graph.nodes, metaRef, blocks, replace: editor.replace });
  const edits = useNodeEdits({ edit: editor.edit, graphRef, metaRef, blocks, decorations, touch, refreshPorts });
  const canvas = useCanvas({ editor, rf, wrapperRef, blocks, matrix: registry.compatibility, touch });
  const commands = useCommands({ editor, rf, wrapperRef, blocks });
  const diff = useDiffHighlight(decorations, graph.edges);
  const dock = useDebugDock();
  const publishing = usePublishing(app, baseVersion, onAppChange);

  // ---- panels and dialogs --------------------------------------------------------------------
  // The document being saved, taken when the dialog opens (the dialog is modal: no edit meanwhile).
  const [saving, setSaving] = useState<FlowDocument | null>(null);
  const openSave = useCallback(() => setSaving(graphToFlow(graphRef.current, metaRef.current)), [graphRef, metaRef]);
  const [showVersions, setShowVersions] = useState(false);
  const [showHelp, setShowHelp] = useState(false);
  const [sideTab, setSideTab] = useState<SideTab>("node");
  // Selecting a node shows its settings.
  const [tabFor, setTabFor] = useState(selectedId);
  if (tabFor !== selectedId) {
    setTabFor(selectedId);
    if (selectedId) setSideTab("node");
  }

  const runValidate = useCallback(() => {
    setSideTab("problems");
    void validate(graphToFlow(graphRef.current, metaRef.current), true);
  }, [graphRef, metaRef, validate]);

  const { markSaved } = doc;
  const { versionsChanged } = publishing;
  const onSavedVersion = useCallback(
    (v: VersionOut, saved: FlowDocument) => {
      markSaved(v, saved); // no longer dirty: useDrafts drops the draft
      setDraftNotice(null);
      versionsChanged();
      onSaved(v, saved);
    },
    [markSaved, onSaved, setDraftNotice, versionsChanged],
  );

  useShortcuts({
    ...commands,
    undo: editor.undo,
    redo: editor.redo,
    save: openSave,
    validate: runValidate,
    toggleHelp: () => setShowHelp((s) => !s),
    fitView: () => void rf.fitView({ duration: 300, padding: 0.1 }),
    clearSelection: () => canvas.selectNode(null),
  });

  // ---- the debug panel -----------------------------------------------------------------------
  const { revealAll } = validation;
  const onNodeStates = useCallback(
    (states: Record<string, NodeRunState>) => {
      decorations.setRunStates(states);
      if (Object.keys(states).length > 0) revealAll(); // a run: every problem counts now
    },
    [decorations, revealAll],
  );
  // The panel re-renders when its inputs change, never per drag frame.
  const debugPanel = useMemo(
    () =>
      dock.mounted ? (
        <DebugPanel flow={flow} appSlug={app.slug} selectedNodeId={selectedId} onSelectNode={canvas.selectNode} onNodeStates={onNodeStates} />
      ) : null,
    [dock.mounted, flow, app.slug, selectedId, canvas.selectNode, onNodeStates],
  );

  const onDiscardDraft = () => {
    if (!window.confirm("Discard the unsaved changes?")) return;
    doc.forgetChanges();
    discardDraft();
    props.onDiscardDraft(base);
  };

  return (
    <BlocksContext.Provider value={blocks}>
      <DecorationContext.Provider value={decorations}>
        <div className="editor" style={{ gridTemplateRows: `auto auto 1fr ${dock.open ? dock.height : FOLDED_HEIGHT}px` }}>
          <TopBar
            app={app}
            onAppChange={onAppChange}
            baseVersion={baseVersion}
            dirty={dirty}
            empty={graph.nodes.length === 0}
            canUndo={editor.history.canUndo}
            canRedo={editor.history.canRedo}
            errorCount={problems.filter((p) => p.severity === "error").length}
            onUndo={editor.undo}
            onRedo={editor.redo}
            onLayout={commands.layout}
            onValidate={runValidate}
            onToggleVersions={() => setShowVersions((s) => !s)}
            onSave={openSave}
            onPublish={() => void publishing.publish()}
            onPreparePublish={() => publishing.setPreparing(true)}
            onShowEndpoint={() => publishing.setShowPublish(true)}
            showHelp={showHelp}
            onShowHelp={setShowHelp}
          />
          <EditorNotices
            draftNotice={draftNotice}
            onDiscardDraft={onDiscardDraft}
            onKeepDraft={() => setDraftNotice(null)}
            pendingDraft={props.pendingDraft}
            onRestorePending={props.onRestorePending}
            diffLabel={diff.diffLabel}
            onClearDiff={diff.clearHighlight}
          />
          <Palette categories={registry.categories} blocks={registry.blocks} onAdd={canvas.addBlock} />
          <EditorCanvas nodes={graph.nodes} edges={diff.shownEdges} handlers={canvas} wrapperRef={wrapperRef} fitView={initial.nodes.length > 0} />
          <SidePanel
            tab={sideTab}
            onTab={setSideTab}
            registry={registry}
            selectedNode={selectedNode}
            selectedCount={selectedIds.length}
            problems={problems}
            hiddenProblems={validation.hiddenProblems}
            portsErrors={portsErrors}
            edits={edits}
            onSelectProblem={canvas.selectNode}
            meta={meta}
            onMeta={doc.setMeta}
            nodeCount={graph.nodes.length}
            edgeCount={graph.edges.length}
            refreshSecrets={props.refreshSecrets}
          />
          <DebugDock dock={dock}>{debugPanel}</DebugDock>
          {showVersions && (
            <VersionsPanel
              app={app}
              currentVersionId={baseVersion?.id ?? null}
              refreshKey={publishing.versionsKey}
              onOpen={(n) => props.onOpenVersion(n)}
              onPublish={(v) => publishing.publish({ id: v.id, number: v.number })}
              onHighlight={diff.highlight}
              onClose={() => setShowVersions(false)}
            />
          )}
        </div>
        {saving && (
          <SaveDialog
            slug={app.slug}
            flow={saving}
            parentId={baseVersion?.id ?? null}
            dirty={dirty}
            onClose={() => setSaving(null)}
            onSaved={(v, saved) => {
              setSaving(null);
              onSavedVersion(v, saved);
            }}
            onProblems={(list) => {
              validation.showProblems(list);
              setSideTab("problems");
            }}
          />
        )}
        {publishing.preparing && (
          <PublishPrepare
            slug={app.slug}
            flow={flow}
            base={baseVersion}
            onSaved={onSavedVersion}
            onPublish={publishing.publish}
            onClose={() => publishing.setPreparing(false)}
          />
        )}
        {publishing.showPublish && (
          <PublishDialog
            app={app}
            publishedNumber={publishing.publishedNumber ?? (baseVersion && baseVersion.id === app.published_version_id ? baseVersion.number : null)}
            inputs={exampleInputs(graph, blocks)}
            onClose={() => publishing.setShowPublish(false)}
          />
        )}
      </DecorationContext.Provider>
    </BlocksContext.Provider>
  );
}
