// The debug panel's run state and the pure reducer that builds it from the server's events
// (live: POST /api/v1/runs/debug and GET /api/v1/runs/{id}/events) or from a stored run's
// trace (GET /api/v1/runs/{id}). No React here: the components only render RunState.

import type { NodeRunState, NodeRunStatus } from "../api/types";
import type { SseMessage } from "../api/sse";
import type {
  NodeRecord,
  RunErrorInfo,
  RunEvent,
  RunRecord,
  RunResult,
  Usage,
} from "./types";

export interface NodeMessageEntry {
  kind: string;
  t: number;
  data: Record<string, unknown>;
}

export interface NodeView {
  id: string;
  block: string | null;
  status: NodeRunStatus;
  inputs: Record<string, unknown> | null;
  output: unknown;
  hasOutput: boolean;
  branch: string | null;
  started: number | null; // seconds since the run started
  finished: number | null;
  duration: number | null; // seconds
  error: string | null; // "ErrorType: message" when failed; the reason when skipped/cancelled
  tokens: string[]; // the streamed answer, per choice
  usage: Usage | null; // summed over the node's model calls
  scripted: boolean; // answered by dagwright's scripted model, not a real one
  model: string | null;
  messages: NodeMessageEntry[]; // other progress reports (an http_request's "request"...)
}

export type RunPhase =
  | "idle"
  | "starting" // the request is sent, no event yet
  | "queued" // recorded, not yet taken by a worker
  | "running"
  | "waiting" // stopped at human_input nodes (recorded `waiting`): an answer makes it go on
  | "resumed" // was waiting and went on, as another run (the continuation)
  | "succeeded"
  | "failed"
  | "cancelled"
  | "interrupted";

export interface RunState {
  runId: string | null;
  phase: RunPhase;
  source: "live" | "record";
  flowName: string | null;
  inputs: Record<string, unknown> | null;
  startedAt: number | null; // wall clock, epoch seconds
  now: number; // the latest event time seen (seconds since the run started)
  duration: number | null;
  outputs: Record<string, unknown> | null;
  error: RunErrorInfo | null;
  usage: Usage | null;
  nodes: Record<string, NodeView>;
  order: string[]; // the flow's node order, then nodes met in events/records
  lastEventId: number; // the highest event id applied (-1: none): a resume sends it
  done: boolean; // the recorded result (or a final record) is in
  reuse: { runId: string; fromNode: string } | null;
}

export interface FlowNodeRef {
  id: string;
  block?: string;
}

const MAX_MESSAGES = 200;
export const LLM_BLOCKS = new Set(["chat", "chat_json", "chat_samples", "completion", "embedding"]);
const FINAL_PHASES = new Set<RunPhase>(["succeeded", "failed", "cancelled", "interrupted"]);

/** The error code of a run that stopped to wait for a person (runtime/pause.py). */
export const WAITING_FOR_HUMAN = "waiting_for_human";

/** Over for good; a waiting run is not: an answer makes it go on. */
export function isFinal(phase: RunPhase): boolean {
  return FINAL_PHASES.has(phase);
}

/** The run stopped to wait for a person: its requests are to be answered, it did not fail. */
export function isPaused(run: RunState): boolean {
  return run.phase === "waiting";
}

/** A node with nothing known of it yet. */
export function emptyNode(id: string, block: string | null = null): NodeView {
  return {
    id,
    block,
    status: "pending",
    inputs: null,
    output: undefined,
    hasOutput: false,
    branch: null,
    started: null,
    finished: null,
    duration: null,
    error: null,
    tokens: [],
    usage: null,
    scripted: false,
    model: null,
    messages: [],
  };
}

export function idleState(): RunState {
  return {
    runId: null,
    phase: "idle",
    source: "live",
    flowName: null,
    inputs: null,
    startedAt: null,
    now: 0,
    duration: null,
    outputs: null,
    error: null,
    usage: null,
    nodes: {},
    order: [],
    lastEventId: -1,
    done: false,
    reuse: null,
  };
}

/** A live run about to start: every node of the flow pending. */
export function startingState(
  nodes: FlowNodeRef[],
  reuse: RunState["reuse"] = null,
): RunState {
  const state = idleState();
  state.phase = "starting";
  state.reuse = reuse;
  for (const node of nodes) {
    if (state.nodes[node.id]) continue;
    state.nodes[node.id] = emptyNode(node.id, node.block ?? null);
    state.order.push(node.id);
  }
  return state;
}

function withNode(state: RunState, id: string, change: (node: NodeView) => NodeView): RunState {
  const known = state.nodes[id];
  const node = change(known ?? emptyNode(id));
  return {
    ...state,
    nodes: { ...state.nodes, [id]: node },
    order: known ? state.order : [...state.order, id],
  };
}

function addUsage(a: Usage | null, b: Partial<Usage>): Usage {
  return {
    prompt_tokens: (a?.prompt_tokens ?? 0) + (Number(b.prompt_tokens) || 0),
    completion_tokens: (a?.completion_tokens ?? 0) + (Number(b.completion_tokens) || 0),
    cost: (a?.cost ?? 0) + (Number(b.cost) || 0),
    calls: (a?.calls ?? 0) + (Number(b.calls) || 0),
  };
}

/** Apply one runtime event. */
export function applyEvent(state: RunState, event: RunEvent): RunState {
  const now = typeof event.t === "number" ? Math.max(state.now, event.t) : state.now;
  let next: RunState = state.runId ? state : { ...state, runId: event.run_id };
  if (now !== next.now) next = { ...next, now };
  if (next.phase === "starting" || next.phase === "idle") next = { ...next, phase: "running" };
  switch (event.type) {
    case "run_started":
      return {
        ...next,
        runId: event.run_id,
        flowName: event.flow,
        inputs: event.inputs,
        startedAt: event.started_at,
      };
    case "node_started":
      return withNode(next, event.node, (node) => ({
        ...node,
        block: event.block,
        status: "running",
        inputs: event.inputs,
        started: event.t,
        finished: null,
        duration: null,
        error: null,
      }));
    case "node_finished":
      return withNode(next, event.node, (node) => ({
        ...node,
        status: event.reused ? "reused" : "succeeded",
        // A reused answer has no usage event to say it was scripted: its text does.
        scripted: node.scripted || (event.reused === true && looksScripted(node.block, event.output)),
        output: event.output,
        hasOutput: true,
        branch: event.branch ?? null,
        started: node.started ?? event.t - event.duration,
        finished: event.t,
        duration: event.duration,
      }));
    case "node_skipped":
      return withNode(next, event.node, (node) => ({
        ...node,
        status: "skipped",
        error: event.reason,
        finished: event.t,
      }));
    case "node_failed":
      return withNode(next, event.node, (node) => ({
        ...node,
        status: "failed",
        error: `${event.error_type}: ${event.message}`,
        started: node.started ?? event.t - event.duration,
        finished: event.t,
        duration: event.duration,
      }));
    case "node_waiting":
      return withNode(next, event.node, (node) => ({
        ...node,
        status: "waiting",
        error: event.message,
        started: node.started ?? event.t - event.duration,
        finished: event.t,
        duration: event.duration,
      }));
    case "node_cancelled":
      return withNode(next, event.node, (node) => ({
        ...node,
        status: "cancelled",
        error: event.reason,
        finished: event.t,
        duration: node.started !== null ? event.t - node.started : null,
      }));
    case "node_message":
      return withNode(next, event.node, (node) => message(node, event.kind, event.t, event.data));
    case "run_finished":
      return {
        ...next,
        // The event says "failed" with the pause's code; the run is recorded as waiting.
        phase: event.error?.code === WAITING_FOR_HUMAN ? "waiting" : event.status,
        outputs: event.outputs,
        duration: event.duration,
        error: event.error,
        usage: event.usage,
      };
    default:
      return next;
  }
}

function message(node: NodeView, kind: string, t: number, data: Record<string, unknown>): NodeView {
  if (kind === "token") {
    const choice = Number(data.choice) || 0;
    const tokens = node.tokens.slice();
    while (tokens.length <= choice) tokens.push("");
    tokens[choice] += String(data.text ?? "");
    return { ...node, tokens };
  }
  if (kind === "usage") {
    return {
      ...node,
      usage: addUsage(node.usage, data as Partial<Usage>),
      scripted: node.scripted || data.scripted === true,
      model: typeof data.model === "string" ? data.model : node.model,
    };
  }
  const messages = [...node.messages, { kind, t, data }];
  if (messages.length > MAX_MESSAGES) messages.splice(0, messages.length - MAX_MESSAGES);
  return { ...node, messages };
}

/** The stream's final `result` event: the run as recorded. */
export function applyResult(state: RunState, result: RunResult): RunState {
  const phase = (isPhase(result.status) ? result.status : state.phase) as RunPhase;
  return {
    ...state,
    runId: state.runId ?? result.run_id,
    phase,
    outputs: result.outputs ?? state.outputs,
    // The event's error names its error_type too; the recorded one is the same otherwise.
    error: result.error ? { ...state.error, ...result.error } : null,
    usage: result.usage ?? state.usage,
    duration: result.duration ?? state.duration,
    done: true,
  };
}

function isPhase(status: string): status is RunPhase {
  return ["queued", "running", "waiting", "resumed", "succeeded", "failed", "cancelled", "interrupted"].includes(status);
}

/** A stored answer of dagwright's scripted model. The stored trace keeps no flag (the live
 *  usage events do): its replies say "[scripted reply]" and its JSON replies `"scripted": true`. */
export function looksScripted(block: string | null, output: unknown): boolean {
  if (!block || !LLM_BLOCKS.has(block)) return false;
  if (typeof output === "string") return output.startsWith("[scripted reply]");
  if (Array.isArray(output)) return output.some((o) => looksScripted(block, o));
  if (output && typeof output === "object") return (output as { scripted?: unknown }).scripted === true;
  return false;
}

function nodeFromRecord(record: NodeRecord, live: NodeView | undefined): NodeView {
  const status = (
    ["succeeded", "reused", "skipped", "failed", "cancelled", "running", "pending", "waiting"].includes(
      record.status,
    )
      ? record.status
      : "failed"
  ) as NodeRunStatus;
  const started = record.started;
  const duration = record.duration;
  const hasOutput = status === "succeeded" || status === "reused";
  const usage = record.usage
    ? addUsage(null, record.usage)
    : (live?.usage ?? null);
  return {
    ...(live ?? emptyNode(record.node)),
    id: record.node,
    block: record.block || live?.block || null,
    status,
    inputs: record.inputs ?? live?.inputs ?? null,
    output: hasOutput ? record.output : undefined,
    hasOutput,
    branch: record.branch,
    started,
    finished: started !== null && duration !== null ? started + duration : (live?.finished ?? null),
    duration,
    error: record.error,
    usage: usage && usage.calls + usage.prompt_tokens + usage.completion_tokens > 0 ? usage : null,
    scripted:
      live?.scripted ||
      record.usage?.scripted === true ||
      looksScripted(record.block, record.output),
    model: record.usage?.model ?? live?.model ?? null,
  };
}

/** A stored run (GET /api/v1/runs/{id}) as RunState; `flowNodes` adds the nodes of the current
 *  flow the run never reached. */
export function fromRecord(record: RunRecord, flowNodes: FlowNodeRef[] = []): RunState {
  return mergeRecord({ ...idleState(), source: "record" }, record, flowNodes);
}

/** Fold a stored run into a state (a resume that finds the run over answers `run_record`):
 *  the record's final word wins; streamed tokens and scripted flags the record lacks stay. */
export function mergeRecord(
  state: RunState,
  record: RunRecord,
  flowNodes: FlowNodeRef[] = [],
): RunState {
  const nodes: Record<string, NodeView> = { ...state.nodes };
  const order = [...state.order];
  const add = (id: string) => {
    if (!order.includes(id)) order.push(id);
  };
  for (const node of flowNodes) {
    if (!nodes[node.id]) nodes[node.id] = emptyNode(node.id, node.block ?? null);
    add(node.id);
  }
  for (const node of record.nodes ?? []) {
    nodes[node.node] = nodeFromRecord(node, state.nodes[node.node]);
    add(node.node);
  }
  let now = state.now;
  for (const node of Object.values(nodes)) now = Math.max(now, node.finished ?? 0);
  if (record.duration !== null) now = Math.max(now, record.duration);
  const phase: RunPhase = isPhase(record.status) ? record.status : "failed";
  return {
    ...state,
    runId: record.id,
    phase,
    inputs: record.inputs,
    startedAt:
      state.startedAt ??
      (record.started_at ? Date.parse(record.started_at) / 1000 : Date.parse(record.created_at) / 1000),
    now,
    duration: record.duration,
    outputs: record.outputs,
    error: record.error,
    usage: record.usage,
    nodes,
    order,
    done: phase !== "running",
  };
}

/** Apply one server-sent event: a runtime event, `result` or `run_record`. An event whose id
 *  was applied already (a resumed stream that repeats itself) changes nothing. */
export function applyMessage(state: RunState, msg: SseMessage): RunState {
  const id = msg.id !== null && /^\d+$/.test(msg.id) ? Number(msg.id) : null;
  if (id !== null && id <= state.lastEventId && msg.event !== "run_record") return state;
  let data: unknown;
  try {
    data = JSON.parse(msg.data);
  } catch {
    return id !== null ? { ...state, lastEventId: id } : state;
  }
  let next: RunState;
  if (msg.event === "result") next = applyResult(state, data as RunResult);
  else if (msg.event === "run_record") next = mergeRecord(state, data as RunRecord);
  else if (data && typeof data === "object" && typeof (data as RunEvent).type === "string")
    next = applyEvent(state, data as RunEvent);
  else next = state;
  return id !== null && msg.event !== "run_record" ? { ...next, lastEventId: id } : next;
}

/** Per-node states for the canvas. */
export function nodeRunStates(state: RunState): Record<string, NodeRunState> {
  const out: Record<string, NodeRunState> = {};
  if (state.phase === "idle") return out;
  for (const id of state.order) {
    const node = state.nodes[id];
    const entry: NodeRunState = { status: node.status };
    if (node.duration !== null) entry.durationMs = Math.round(node.duration * 1000 * 10) / 10;
    if (node.usage) entry.tokens = node.usage.prompt_tokens + node.usage.completion_tokens;
    if (node.error && (node.status === "failed" || node.status === "cancelled" || node.status === "waiting"))
      entry.error = node.error;
    out[id] = entry;
  }
  return out;
}

export function sameNodeStates(
  a: Record<string, NodeRunState>,
  b: Record<string, NodeRunState>,
): boolean {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const key of keys) {
    const x = a[key];
    const y = b[key];
    if (
      !y ||
      x.status !== y.status ||
      x.durationMs !== y.durationMs ||
      x.tokens !== y.tokens ||
      x.error !== y.error
    )
      return false;
  }
  return true;
}

/** The streamed text of a node (choices separated), "" when it streamed nothing. */
export function streamedText(node: NodeView): string {
  if (node.tokens.length <= 1) return node.tokens[0] ?? "";
  return node.tokens.map((text, i) => `[${i}] ${text}`).join("\n\n");
}

export function runScripted(state: RunState): boolean {
  return Object.values(state.nodes).some((n) => n.scripted);
}
