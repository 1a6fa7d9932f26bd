// The editor's debug-run panel: run the graph on the canvas, watch it live, inspect every
// node, browse and re-open past runs, re-run from a node.
//
// This file only composes: the run (started, followed, opened, cancelled) is useDebugRun, the
// form and the chat are useRunInputs, past runs are useRunHistory, the canvas hears of node
// states through useCanvasRunStates; each area of the panel is a component in ./parts.

import { useMemo, type JSX } from "react";
import "./debug.css";
import type { NodeRunState } from "../api/types";
import { useCanvasRunStates } from "./hooks/useCanvasRunStates";
import { useDebugRun } from "./hooks/useDebugRun";
import { RUNS_PAGE, useRunHistory } from "./hooks/useRunHistory";
import { useRunInputs } from "./hooks/useRunInputs";
import { IterationPanel } from "./IterationStrip";
import { InputsArea } from "./parts/InputsArea";
import { NodeInspector } from "./parts/NodeInspector";
import { NodeList } from "./parts/NodeList";
import { RunAlerts } from "./parts/RunAlerts";
import { RunResult } from "./parts/RunResult";
import { RunsList } from "./parts/RunsList";
import { RunToolbar } from "./parts/RunToolbar";
import { Section } from "./parts/Section";
import { Timeline } from "./parts/Timeline";
import { ViewBoundary } from "./parts/ViewBoundary";
import { WaitingForms } from "./parts/WaitingForms";
import { emptyNode, idleState, isFinal, type RunState } from "./runState";
import type { FlowDocument } from "./types";

export interface DebugPanelProps {
  flow: FlowDocument; // the current (possibly unsaved) flow
  appSlug: string | null;
  selectedNodeId: string | null;
  onSelectNode: (id: string | null) => void;
  onNodeStates: (states: Record<string, NodeRunState>) => void;
}

export function DebugPanel({ flow, appSlug, selectedNodeId, onSelectNode, onNodeStates }: DebugPanelProps): JSX.Element {
  const flowNodes = useMemo(() => (flow.nodes ?? []).map((n) => ({ id: n.id, block: n.block })), [flow.nodes]);
  const labels = useMemo(() => Object.fromEntries((flow.nodes ?? []).map((n) => [n.id, n.label || n.id])), [flow.nodes]);

  const history = useRunHistory(appSlug);
  const debug = useDebugRun({ flow, appSlug, flowNodes, onSettled: history.reload });
  const inputs = useRunInputs(flow, debug);
  const { run, streaming: busy } = debug;
  useCanvasRunStates(run, onNodeStates);

  // Before any run, every node of the flow is listed as not run yet.
  const shown: RunState = useMemo(() => {
    if (run.phase !== "idle") return run;
    const state = idleState();
    for (const node of flowNodes) {
      state.nodes[node.id] = emptyNode(node.id, node.block);
      state.order.push(node.id);
    }
    return state;
  }, [run, flowNodes]);

  const inFlow = selectedNodeId !== null && flowNodes.some((n) => n.id === selectedNodeId);
  const selectedNode =
    selectedNodeId === null
      ? null
      : (shown.nodes[selectedNodeId] ??
        (inFlow ? emptyNode(selectedNodeId, flowNodes.find((n) => n.id === selectedNodeId)!.block) : null));
  const canRerun = !!run.runId && !busy && isFinal(run.phase) && inFlow;
  const rerunHint = !run.runId
    ? "Run the flow first: a re-run reuses the outputs of a recorded run"
    : busy
      ? "Wait for the current run to finish"
      : run.phase === "waiting"
        ? "The run waits for an answer: answer it first (a re-run needs a finished run)"
        : run.phase === "resumed"
        ? "The run went on as another run: open that one from the runs list"
        : !isFinal(run.phase)
        ? "The run has not finished"
        : !inFlow
          ? "This node is not in the current flow"
          : `Run "${selectedNodeId}" and everything after it again; the nodes before it pass on their outputs of run ${run.runId.slice(0, 8)}`;

  return (
    <div className="dw-debug">
      <RunToolbar debug={debug} onRun={inputs.submit} onUseInputs={inputs.fields.length > 0 ? inputs.fillFrom : undefined} />
      <RunAlerts debug={debug} onSelectNode={onSelectNode} />
      <WaitingForms run={run} flow={flow} onResumed={(id) => void debug.openRun(id)} />

      <div className="dw-grid">
        <InputsArea inputs={inputs} debug={debug} />

        <Section title="Nodes" className="dw-area-nodes">
          <ViewBoundary name="node list">
            <NodeList run={shown} labels={labels} selected={selectedNodeId} onSelect={(id) => onSelectNode(id)} />
          </ViewBoundary>
        </Section>
        <Section
          title={selectedNode ? `Node ${labels[selectedNode.id] ?? selectedNode.id}` : "Result"}
          className="dw-area-detail"
          extra={
            selectedNode && (
              <button type="button" className="dw-link" onClick={() => onSelectNode(null)}>
                show result
              </button>
            )
          }
        >
          <ViewBoundary name="inspector">
            {selectedNode ? (
              <>
                <NodeInspector
                  node={selectedNode}
                  label={labels[selectedNode.id] ?? selectedNode.id}
                  inFlow={inFlow}
                  canRerun={canRerun}
                  rerunHint={rerunHint}
                  onRerun={() => {
                    if (run.runId && selectedNodeId) void debug.runFlow({}, { run_id: run.runId, from_node: selectedNodeId });
                  }}
                />
                <IterationPanel key={selectedNode.id} run={shown} nodeId={selectedNode.id} />
              </>
            ) : (
              <RunResult run={run} failedToStart={!!debug.error} />
            )}
          </ViewBoundary>
        </Section>

        <Section title="Timeline" className="dw-area-timeline">
          <ViewBoundary name="timeline">
            <Timeline run={run} liveNow={debug.live ? debug.clock : 0} labels={labels} selected={selectedNodeId} onSelect={(id) => onSelectNode(id)} />
          </ViewBoundary>
        </Section>

        <Section title="Runs" className="dw-area-runs">
          <ViewBoundary name="run history">
            <RunsList
              appSlug={appSlug}
              runs={history.items}
              total={history.total}
              offset={history.offset}
              limit={RUNS_PAGE}
              loading={history.loading}
              error={history.error}
              currentRunId={run.runId}
              onOpen={(id) => void debug.openRun(id)}
              onPage={(offset) => void history.load(offset)}
              onRefresh={() => void history.load(history.offset)}
            />
          </ViewBoundary>
        </Section>
      </div>
    </div>
  );
}
