// The right-hand panel: tabs for the selected node's settings, the problems list and the
// flow's own settings (name, description, subflows).

import type { ReactNode } from "react";
import type { Problem } from "../../api/types";
import { ConfigPanel, ProblemsList } from "../ConfigPanel";
import type { EditorNode } from "../graph";
import type { NodeEdits } from "../hooks/useNodeEdits";
import type { FlowMeta } from "../hooks/useFlowDocument";
import type { Registry } from "../registry";
import { SubflowList } from "../SubflowView";

export type SideTab = "node" | "problems" | "flow";

export function SidePanel(props: {
  tab: SideTab;
  onTab: (tab: SideTab) => void;
  registry: Registry;
  selectedNode: EditorNode | null;
  selectedCount: number;
  problems: Problem[];
  hiddenProblems: number;
  portsErrors: Record<string, string>;
  edits: NodeEdits;
  onSelectProblem: (id: string) => void;
  meta: FlowMeta;
  onMeta: (update: (m: FlowMeta) => FlowMeta) => void;
  nodeCount: number;
  edgeCount: number;
  refreshSecrets: () => void;
}) {
  const { tab, onTab, registry, selectedNode, problems, edits } = props;
  const errorCount = problems.filter((p) => p.severity === "error").length;
  const nodeProblems = selectedNode ? problems.filter((p) => p.node === selectedNode.id) : [];
  return (
    <aside className="right">
      <div className="tabs" role="tablist" aria-label="Side panel">
        <SideTabButton id="node" tab={tab} onTab={onTab}>
          Node
        </SideTabButton>
        <SideTabButton id="problems" tab={tab} onTab={onTab}>
          Problems{problems.length > 0 && <span className={`badge ${errorCount ? "badge-error" : "badge-warning"}`}>{problems.length}</span>}
        </SideTabButton>
        <SideTabButton id="flow" tab={tab} onTab={onTab}>
          Flow
        </SideTabButton>
      </div>
      <div className="right-body" role="tabpanel" id={`side-panel-${tab}`} aria-labelledby={`side-tab-${tab}`}>
        {tab === "node" &&
          (selectedNode ? (
            <ConfigPanel
              node={selectedNode}
              spec={registry.byName.get(selectedNode.data.block)}
              secrets={registry.secrets}
              problems={nodeProblems}
              portsError={props.portsErrors[selectedNode.id] ?? null}
              onConfig={edits.onConfig}
              onRename={edits.onRename}
              onLabel={edits.onLabel}
              onTimeout={edits.onTimeout}
              onErrorPolicy={edits.onErrorPolicy}
            />
          ) : (
            <p className="muted">{props.selectedCount > 1 ? `${props.selectedCount} nodes selected.` : "Select a node to edit its settings."}</p>
          ))}
        {tab === "problems" && <ProblemsList problems={problems} hidden={props.hiddenProblems} onSelect={props.onSelectProblem} />}
        {tab === "flow" && (
          <FlowSettings
            meta={props.meta}
            onMeta={props.onMeta}
            nodeCount={props.nodeCount}
            edgeCount={props.edgeCount}
            blocks={registry.byName}
            refreshSecrets={props.refreshSecrets}
          />
        )}
      </div>
    </aside>
  );
}

function SideTabButton({ id, tab, onTab, children }: { id: SideTab; tab: SideTab; onTab: (tab: SideTab) => void; children: ReactNode }) {
  return (
    <button
      role="tab"
      id={`side-tab-${id}`}
      aria-selected={tab === id}
      aria-controls={tab === id ? `side-panel-${id}` : undefined}
      className={`tab${tab === id ? " active" : ""}`}
      data-testid={`tab-${id}`}
      onClick={() => onTab(id)}
    >
      {children}
    </button>
  );
}

function FlowSettings({ meta, onMeta, nodeCount, edgeCount, blocks, refreshSecrets }: {
  meta: FlowMeta;
  onMeta: (update: (m: FlowMeta) => FlowMeta) => void;
  nodeCount: number;
  edgeCount: number;
  blocks: Registry["byName"];
  refreshSecrets: () => void;
}) {
  return (
    <div className="schema-form">
      <div className="field">
        <label className="field-title" htmlFor="flow-name">
          Flow name
        </label>
        <input id="flow-name" className="input" data-testid="flow-name" value={meta.name} onChange={(e) => onMeta((m) => ({ ...m, name: e.target.value }))} />
      </div>
      <div className="field">
        <label className="field-title" htmlFor="flow-description">
          Description
        </label>
        <textarea id="flow-description" className="input" data-testid="flow-description" rows={3} value={meta.description} onChange={(e) => onMeta((m) => ({ ...m, description: e.target.value }))} />
      </div>
      <p className="muted small">
        {nodeCount} nodes, {edgeCount} edges.
      </p>
      {meta.subflows && <SubflowList subflows={meta.subflows} blocks={blocks} />}
      <button className="btn btn-small" onClick={refreshSecrets}>
        Reload secret names
      </button>
    </div>
  );
}
