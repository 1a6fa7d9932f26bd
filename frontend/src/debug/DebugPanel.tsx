// The editor's debug-run panel: run the graph on the canvas, watch it live, inspect every
// node, browse and re-open past runs, re-run from a node. The run state is built by the pure
// reducer in runState.ts from the server's events; this file wires it to the network and the
// canvas (onNodeStates, at most once per animation frame).

import { useCallback, useEffect, useMemo, useRef, useState, type JSX, type ReactNode } from "react";
import "./debug.css";
import {
  cancelRun,
  followRun,
  followRunEvents,
  getRun,
  listRuns,
  startDebugRun,
  type ConnectionStatus,
} from "./connection";
import { describeError, formatCost, formatSeconds, formatTime, totalTokens, type PanelError } from "./format";
import {
  answerText,
  chatInputs,
  chatSetup,
  inputFields,
  parseInputs,
  syncValues,
  valuesFromInputs,
  type ChatMessage,
  type FormValues,
} from "./inputs";
import { JsonViewer } from "./JsonViewer";
import { ChartsOf } from "../charts/ChartView";
import { IterationPanel } from "./IterationStrip";
import {
  ChatView,
  ErrorBox,
  InputsForm,
  NodeInspector,
  NodeList,
  RunsList,
  ScriptedLabel,
  StatusBadge,
  Timeline,
  ViewBoundary,
} from "./parts";
import {
  applyMessage,
  emptyNode,
  fromRecord,
  idleState,
  isFinal,
  nodeRunStates,
  runScripted,
  sameNodeStates,
  startingState,
  streamedText,
  type RunState,
} from "./runState";
import type { DebugRunBody, FlowDocument, RunRecord } from "./types";
import type { NodeRunState } from "../api/types";

export type { NodeRunState } from "../api/types";

export interface DebugPanelProps {
  flow: FlowDocument; // the current (possibly unsaved) flow
  appSlug: string | null;
  selectedNodeId: string | null;
  onSelectNode: (id: string | null) => void;
  onNodeStates: (states: Record<string, NodeRunState>) => void;
}

const RUNS_PAGE = 20;

const raf: (cb: () => void) => number =
  typeof requestAnimationFrame === "function"
    ? (cb) => requestAnimationFrame(cb)
    : (cb) => setTimeout(cb, 16) as unknown as number;
const cancelRaf: (id: number) => void =
  typeof cancelAnimationFrame === "function" ? (id) => cancelAnimationFrame(id) : (id) => clearTimeout(id);

interface Outcome {
  state: RunState | null; // null: superseded by another run, or nothing ran
  error: PanelError | null;
}

function Section({
  title,
  extra,
  className,
  children,
}: {
  title: ReactNode;
  extra?: ReactNode;
  className?: string;
  children: ReactNode;
}) {
  return (
    <details className={`dw-section ${className ?? ""}`} open>
      <summary>
        <span className="dw-section-title">{title}</span>
        {extra && (
          <span className="dw-section-extra" onClick={(e) => e.preventDefault()}>
            {extra}
          </span>
        )}
      </summary>
      <div className="dw-section-body">{children}</div>
    </details>
  );
}

export function DebugPanel({
  flow,
  appSlug,
  selectedNodeId,
  onSelectNode,
  onNodeStates,
}: DebugPanelProps): JSX.Element {
  const flowNodes = useMemo(
    () => (flow.nodes ?? []).map((n) => ({ id: n.id, block: n.block })),
    [flow.nodes],
  );
  const labels = useMemo(
    () => Object.fromEntries((flow.nodes ?? []).map((n) => [n.id, n.label || n.id])),
    [flow.nodes],
  );
  const fields = useMemo(() => inputFields(flow), [flow]);
  const setup = useMemo(() => chatSetup(flow, fields), [flow, fields]);

  // -- the form and the chat ------------------------------------------------------------
  const [typed, setTyped] = useState<FormValues>({});
  const values = useMemo(() => syncValues(fields, typed), [fields, typed]);
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const [modePref, setModePref] = useState<"form" | "chat" | null>(null);
  const mode = setup ? (modePref ?? "chat") : "form";
  const [transcript, setTranscript] = useState<ChatMessage[]>([]);
  const [draft, setDraft] = useState("");

  // -- the run ----------------------------------------------------------------------------
  const [run, setRun] = useState<RunState>(idleState);
  const runRef = useRef<RunState>(run); // ahead of `run` by at most one animation frame
  const frameRef = useRef<number | null>(null);
  const abortRef = useRef<AbortController | null>(null);
  const [streaming, setStreaming] = useState(false);
  const [conn, setConn] = useState<{ status: ConnectionStatus; attempt: number }>({
    status: "closed",
    attempt: 0,
  });
  const [error, setError] = useState<PanelError | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const localStart = useRef<number | null>(null);
  const [clock, setClock] = useState(0);

  const schedule = useCallback((next: RunState) => {
    runRef.current = next;
    if (frameRef.current !== null) return;
    frameRef.current = raf(() => {
      frameRef.current = null;
      setRun(runRef.current);
    });
  }, []);
  const commitNow = useCallback((next: RunState) => {
    runRef.current = next;
    if (frameRef.current !== null) {
      cancelRaf(frameRef.current);
      frameRef.current = null;
    }
    setRun(next);
  }, []);

  useEffect(
    () => () => {
      abortRef.current?.abort();
      if (frameRef.current !== null) cancelRaf(frameRef.current);
    },
    [],
  );

  // The canvas colours nodes by these: only when they change, once per committed frame.
  const onNodeStatesRef = useRef(onNodeStates);
  useEffect(() => {
    onNodeStatesRef.current = onNodeStates;
  }, [onNodeStates]);
  const lastStates = useRef<Record<string, NodeRunState>>({});
  useEffect(() => {
    const states = nodeRunStates(run);
    if (!sameNodeStates(states, lastStates.current)) {
      lastStates.current = states;
      onNodeStatesRef.current(states);
    }
  }, [run]);

  const live = streaming && (run.phase === "starting" || run.phase === "running");
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => {
      if (localStart.current !== null) setClock((performance.now() - localStart.current) / 1000);
    }, 200);
    return () => clearInterval(timer);
  }, [live]);

  // -- past runs -------------------------------------------------------------------------
  const [runs, setRuns] = useState<{ items: RunRecord[]; total: number; offset: number }>({
    items: [],
    total: 0,
    offset: 0,
  });
  const [runsLoading, setRunsLoading] = useState(false);
  const [runsError, setRunsError] = useState<PanelError | null>(null);
  const runsRequest = useRef(0);
  const runsOffset = useRef(0);

  const loadRuns = useCallback(
    async (offset: number) => {
      if (!appSlug) return;
      const ticket = ++runsRequest.current;
      setRunsLoading(true);
      try {
        const page = await listRuns(appSlug, offset, RUNS_PAGE);
        if (ticket !== runsRequest.current) return;
        runsOffset.current = page.offset;
        setRuns({ items: page.items, total: page.total, offset: page.offset });
        setRunsError(null);
      } catch (e) {
        if (ticket === runsRequest.current) setRunsError(describeError(e));
      } finally {
        if (ticket === runsRequest.current) setRunsLoading(false);
      }
    },
    [appSlug],
  );

  useEffect(() => {
    runsOffset.current = 0;
    setRuns({ items: [], total: 0, offset: 0 });
    setRunsError(null);
    void loadRuns(0);
  }, [loadRuns]);

  // -- following a run -------------------------------------------------------------------
  const follow = useCallback(
    async (open: (signal: AbortSignal) => Promise<Response>, initial: RunState): Promise<Outcome> => {
      abortRef.current?.abort();
      const controller = new AbortController();
      abortRef.current = controller;
      const current = () => abortRef.current === controller;
      setError(null);
      setStreaming(true);
      setClock(0);
      localStart.current = null;
      commitNow(initial);
      let failure: PanelError | null = null;
      try {
        await followRun({
          open,
          signal: controller.signal,
          runId: () => runRef.current.runId,
          lastEventId: () => runRef.current.lastEventId,
          onStatus: (status, attempt) => {
            if (current()) setConn({ status, attempt });
          },
          onMessage: (message) => {
            if (!current()) return;
            const before = runRef.current;
            const next = applyMessage(before, message);
            if (localStart.current === null && next.runId !== null && next.source === "live")
              localStart.current = performance.now() - next.now * 1000;
            schedule(next);
          },
        });
      } catch (e) {
        if (current()) {
          failure = describeError(e);
          setError(failure);
          if (runRef.current.phase === "starting") runRef.current = idleState(); // nothing ran
        }
      }
      if (!current()) return { state: null, error: null };
      abortRef.current = null;
      setStreaming(false);
      setConn({ status: "closed", attempt: 0 });
      commitNow(runRef.current);
      void loadRuns(runsOffset.current);
      return { state: runRef.current.phase === "idle" ? null : runRef.current, error: failure };
    },
    [commitNow, schedule, loadRuns],
  );

  const runFlow = useCallback(
    (inputs: Record<string, unknown>, reuse?: { run_id: string; from_node: string }) => {
      const body: DebugRunBody = { flow, inputs, app: appSlug, stream: true };
      if (reuse) body.reuse = reuse;
      return follow(
        (signal) => startDebugRun(body, signal),
        startingState(flowNodes, reuse ? { runId: reuse.run_id, fromNode: reuse.from_node } : null),
      );
    },
    [flow, appSlug, flowNodes, follow],
  );

  const openRun = useCallback(
    async (id: string) => {
      abortRef.current?.abort(); // stop following a live run (it goes on on the server)
      abortRef.current = null;
      setStreaming(false);
      setConn({ status: "closed", attempt: 0 });
      setError(null);
      try {
        const record = await getRun(id);
        if (record.status === "running") {
          // Still going: follow it from its first event.
          await follow((signal) => followRunEvents(id, signal), startingState(flowNodes));
        } else {
          commitNow(fromRecord(record, flowNodes));
        }
      } catch (e) {
        setError(describeError(e));
      }
    },
    [flowNodes, follow, commitNow],
  );

  const onRun = useCallback(() => {
    const parsed = parseInputs(fields, values);
    setFieldErrors(parsed.errors);
    if (Object.keys(parsed.errors).length > 0) {
      setModePref("form"); // show the fields to fix
      setError({
        title: "Some inputs need fixing",
        message: Object.entries(parsed.errors)
          .map(([name, problem]) => `${name}: ${problem}`)
          .join("; "),
      });
      return;
    }
    void runFlow(parsed.inputs);
  }, [fields, values, runFlow]);

  const onCancel = useCallback(async () => {
    const id = runRef.current.runId;
    if (!id) {
      // Not started as far as we know: stop waiting for it.
      abortRef.current?.abort();
      abortRef.current = null;
      setStreaming(false);
      commitNow(idleState());
      return;
    }
    const following = abortRef.current !== null; // then the stream brings the cancellation
    setCancelling(true);
    try {
      await cancelRun(id);
      if (!following) await openRun(id); // not following it: show what was recorded
    } catch (e) {
      setError(describeError(e));
    } finally {
      setCancelling(false);
    }
  }, [commitNow, openRun]);

  const onSend = useCallback(async () => {
    const text = draft;
    if (!setup || !text.trim()) return;
    const parsed = parseInputs(setup.otherFields, values);
    setFieldErrors(parsed.errors);
    if (Object.keys(parsed.errors).length > 0) {
      setError({ title: "Some inputs need fixing", message: Object.keys(parsed.errors).join(", ") });
      return;
    }
    const inputs = chatInputs(setup, transcript, text, parsed.inputs);
    setDraft("");
    setTranscript((t) => [
      ...t,
      { role: "user", content: text },
      { role: "assistant", content: "", pending: true },
    ]);
    const { state, error: failure } = await runFlow(inputs);
    let reply: ChatMessage;
    if (state && state.phase === "succeeded") {
      const outputs = state.outputs ?? {};
      reply =
        setup.answer in outputs
          ? { role: "assistant", content: answerText(outputs[setup.answer]), runId: state.runId ?? undefined, scripted: runScripted(state) }
          : {
              role: "assistant",
              content: "",
              runId: state.runId ?? undefined,
              error: `The run returned no "${setup.answer}" (its branch was skipped).`,
            };
    } else {
      reply = {
        role: "assistant",
        content: "",
        runId: state?.runId ?? undefined,
        error:
          state?.error?.message ??
          failure?.message ??
          (state ? `The run ended ${state.phase}.` : "The run did not finish."),
      };
    }
    setTranscript((t) => {
      const copy = t.slice();
      const at = copy.map((m) => m.pending).lastIndexOf(true);
      if (at >= 0) copy[at] = reply;
      return copy;
    });
  }, [draft, setup, values, transcript, runFlow]);

  // -- what to show ------------------------------------------------------------------------
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
  const busy = streaming;
  const canRerun = !!run.runId && !busy && isFinal(run.phase) && inFlow;
  const rerunHint = !run.runId
    ? "Run the flow first: a re-run reuses the outputs of a recorded run"
    : busy
      ? "Wait for the current run to finish"
      : !isFinal(run.phase)
        ? "The run has not finished"
        : !inFlow
          ? "This node is not in the current flow"
          : `Run "${selectedNodeId}" and everything after it again; the nodes before it pass on their outputs of run ${run.runId.slice(0, 8)}`;

  const elapsed = live ? Math.max(run.now, clock) : (run.duration ?? (run.phase === "idle" ? null : run.now));
  const scripted = runScripted(run);
  const streamNode = setup?.streamNode ? run.nodes[setup.streamNode] : undefined;
  const chatStreaming = busy && streamNode ? streamedText(streamNode) : "";
  const runFailed = run.error && isFinal(run.phase) && run.phase !== "succeeded";

  return (
    <div className="dw-debug">
      <div className="dw-toolbar">
        {!busy && (
          <button
            type="button"
            className="dw-primary"
            data-testid="run"
            onClick={onRun}
            title="Run the current graph with the form's inputs"
          >
            ▶ Run
          </button>
        )}
        {(busy || (run.runId !== null && run.phase === "running")) && (
          <button
            type="button"
            className="dw-danger"
            data-testid="cancel"
            onClick={() => void onCancel()}
            disabled={cancelling}
          >
            {cancelling ? "Cancelling…" : "Cancel"}
          </button>
        )}
        <StatusBadge
          status={run.phase === "idle" ? "idle" : run.phase}
          testId="run-status"
        />
        {run.reuse && <span className="dw-chip dw-s-reused">from {run.reuse.fromNode}</span>}
        <span className="dw-totals">
          <span title="duration">{formatSeconds(elapsed)}</span>
          {run.usage && totalTokens(run.usage) > 0 && (
            <span title={`${run.usage.prompt_tokens} prompt / ${run.usage.completion_tokens} completion tokens, ${run.usage.calls} call(s)`}>
              {totalTokens(run.usage)} tok ({run.usage.prompt_tokens}/{run.usage.completion_tokens})
            </span>
          )}
          {run.usage && <span title="cost">{formatCost(run.usage.cost)}</span>}
          {scripted && <ScriptedLabel />}
        </span>
        <span className="dw-spacer" />
        {run.source === "record" && run.runId && (
          <span className="dw-viewing">
            past run {run.runId.slice(0, 8)}
            {run.inputs && fields.length > 0 && (
              <button
                type="button"
                className="dw-link"
                onClick={() => setTyped(valuesFromInputs(fields, run.inputs ?? {}))}
              >
                use its inputs
              </button>
            )}
          </span>
        )}
      </div>

      {conn.status === "reconnecting" && (
        <div className="dw-reconnecting" role="status" data-testid="reconnecting">
          reconnecting… (attempt {conn.attempt}); events missed meanwhile will be caught up
        </div>
      )}
      {error && (
        <ErrorBox
          error={error}
          onSelectNode={(id) => onSelectNode(id)}
          onDismiss={() => setError(null)}
        >
          {run.runId && !busy && !isFinal(run.phase) && (
            <button type="button" className="dw-link" onClick={() => void openRun(run.runId!)}>
              load what the server recorded
            </button>
          )}
        </ErrorBox>
      )}
      {runFailed && (
        <ErrorBox
          error={{
            title:
              run.phase === "cancelled"
                ? "The run was cancelled"
                : run.phase === "interrupted"
                  ? "The run was interrupted"
                  : run.error!.node
                    ? `The run failed at ${run.error!.node}`
                    : "The run failed",
            message: run.error!.message,
          }}
        >
          {run.error!.node && (
            <button type="button" className="dw-link" onClick={() => onSelectNode(run.error!.node!)}>
              inspect {run.error!.node}
            </button>
          )}
        </ErrorBox>
      )}

      <div className="dw-grid">
        <Section
          title="Inputs"
          className="dw-area-inputs"
          extra={
            setup && (
              <span className="dw-tabs">
                <button
                  type="button"
                  className={mode === "form" ? "dw-tab-on" : ""}
                  onClick={() => setModePref("form")}
                >
                  Form
                </button>
                <button
                  type="button"
                  className={mode === "chat" ? "dw-tab-on" : ""}
                  onClick={() => setModePref("chat")}
                >
                  Chat
                </button>
              </span>
            )
          }
        >
          <ViewBoundary name="inputs">
            {mode === "chat" && setup ? (
              <>
                {setup.otherFields.length > 0 && (
                  <InputsForm
                    fields={setup.otherFields}
                    values={values}
                    errors={fieldErrors}
                    onChange={(name, value) => setTyped({ ...values, [name]: value })}
                  />
                )}
                <ChatView
                  setup={setup}
                  transcript={transcript}
                  streaming={chatStreaming}
                  busy={busy}
                  draft={draft}
                  onDraft={setDraft}
                  onSend={() => void onSend()}
                  onReset={() => setTranscript([])}
                />
              </>
            ) : (
              <InputsForm
                fields={fields}
                values={values}
                errors={fieldErrors}
                onChange={(name, value) => setTyped({ ...values, [name]: value })}
                onSubmit={busy ? undefined : onRun}
              />
            )}
          </ViewBoundary>
        </Section>

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
              <NodeInspector
                node={selectedNode}
                label={labels[selectedNode.id] ?? selectedNode.id}
                inFlow={inFlow}
                canRerun={canRerun}
                rerunHint={rerunHint}
                onRerun={() => {
                  if (run.runId && selectedNodeId)
                    void runFlow({}, { run_id: run.runId, from_node: selectedNodeId });
                }}
              />
            ) : null}
            {selectedNode ? (
              <IterationPanel key={selectedNode.id} run={shown} nodeId={selectedNode.id} />
            ) : run.phase === "idle" ? (
              <div className="dw-muted">
                {error ? "Nothing ran." : "Fill in the inputs and press Run (or open a past run). Click a node to inspect it."}
              </div>
            ) : (
              <div className="dw-result">
                {run.phase === "starting" && <div className="dw-muted">Starting…</div>}
                {run.startedAt && (
                  <div className="dw-muted">
                    {run.flowName ? `${run.flowName} · ` : ""}started{" "}
                    {formatTime(new Date(run.startedAt * 1000).toISOString())}
                    {run.runId ? ` · run ${run.runId}` : ""}
                  </div>
                )}
                <h4>Outputs</h4>
                <JsonViewer
                  value={run.outputs ?? undefined}
                  testId="run-outputs"
                  empty={isFinal(run.phase) ? "No outputs." : "Not finished yet."}
                />
                <ChartsOf value={run.outputs} testId="run-charts" />
                {run.inputs && (
                  <>
                    <h4>Inputs</h4>
                    <JsonViewer value={run.inputs} />
                  </>
                )}
              </div>
            )}
          </ViewBoundary>
        </Section>

        <Section title="Timeline" className="dw-area-timeline">
          <ViewBoundary name="timeline">
            <Timeline
              run={run}
              liveNow={live ? clock : 0}
              labels={labels}
              selected={selectedNodeId}
              onSelect={(id) => onSelectNode(id)}
            />
          </ViewBoundary>
        </Section>

        <Section title="Runs" className="dw-area-runs">
          <ViewBoundary name="run history">
            <RunsList
              appSlug={appSlug}
              runs={runs.items}
              total={runs.total}
              offset={runs.offset}
              limit={RUNS_PAGE}
              loading={runsLoading}
              error={runsError}
              currentRunId={run.runId}
              onOpen={(id) => void openRun(id)}
              onPage={(offset) => void loadRuns(offset)}
              onRefresh={() => void loadRuns(runs.offset)}
            />
          </ViewBoundary>
        </Section>
      </div>
    </div>
  );
}

export default DebugPanel;
