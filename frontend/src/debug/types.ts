// The shapes the debug panel reads from the server: runtime events as the run streams them
// (backend/dagwright/runtime/events.py, one server-sent event each, `event:` = `type`), the
// final `result` (api/streaming.py result_body) and the stored run with its per-node trace
// (services/runs/records.py RunRecord.to_dict, GET /api/v1/runs/{id}).

export type { FlowDocument, FlowNode, FlowEdge, Page } from "../api/types";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  cost: number;
  calls: number;
}

export interface RunErrorInfo {
  code: string;
  message: string;
  node?: string | null;
  error_type?: string | null;
}

interface EventBase {
  run_id: string;
  t: number; // seconds since the run started (monotonic)
}

export interface RunStartedEvent extends EventBase {
  type: "run_started";
  flow: string;
  inputs: Record<string, unknown>;
  started_at: number; // wall clock, seconds since the epoch
}

export interface NodeStartedEvent extends EventBase {
  type: "node_started";
  node: string;
  block: string;
  inputs: Record<string, unknown>;
}

export interface NodeFinishedEvent extends EventBase {
  type: "node_finished";
  node: string;
  output: unknown;
  duration: number;
  branch?: string | null;
  reused?: boolean; // taken from an earlier run (re-run from a later node)
}

export interface NodeSkippedEvent extends EventBase {
  type: "node_skipped";
  node: string;
  reason: string;
}

export interface NodeFailedEvent extends EventBase {
  type: "node_failed";
  node: string;
  error_type: string;
  message: string;
  duration: number;
}

/** The node stopped to wait for a person (runtime/pause.py): the run waits, not failed. */
export interface NodeWaitingEvent extends EventBase {
  type: "node_waiting";
  node: string;
  message: string;
  duration: number;
}

export interface NodeCancelledEvent extends EventBase {
  type: "node_cancelled";
  node: string;
  reason: string;
}

/** kind "token": data {choice, text}; kind "usage": data {provider, model, latency, attempts,
 *  scripted, tokens_estimated, prompt_tokens, completion_tokens, cost, calls}; other kinds
 *  (an http_request's "request", log lines) are shown as they are. */
export interface NodeMessageEvent extends EventBase {
  type: "node_message";
  node: string;
  kind: string;
  data: Record<string, unknown>;
}

export interface RunFinishedEvent extends EventBase {
  type: "run_finished";
  status: "succeeded" | "failed" | "cancelled";
  outputs: Record<string, unknown>;
  duration: number;
  error: RunErrorInfo | null;
  usage: Usage;
}

export type RunEvent =
  | RunStartedEvent
  | NodeStartedEvent
  | NodeFinishedEvent
  | NodeSkippedEvent
  | NodeFailedEvent
  | NodeWaitingEvent
  | NodeCancelledEvent
  | NodeMessageEvent
  | RunFinishedEvent;

/** The stream's last event (`event: result`): what a sync call answers. */
export interface RunResult {
  run_id: string;
  app_id: string | null;
  version_id: string | null;
  status: string;
  outputs: Record<string, unknown> | null;
  error: RunErrorInfo | null;
  usage: Usage | null;
  duration: number | null;
}

export interface NodeRecord {
  node: string;
  block: string;
  status: string; // succeeded | reused | skipped | failed | cancelled | waiting
  inputs: Record<string, unknown> | null;
  output: unknown;
  branch: string | null;
  error: string | null; // "ValueError: message" when failed; the reason when skipped
  started: number | null;
  duration: number | null;
  usage: (Usage & { scripted?: boolean; model?: string }) | null;
}

/** GET /api/v1/runs/{id} (with nodes) and the items of GET /api/v1/runs (nodes empty). */
export interface RunRecord {
  id: string;
  app_id: string | null;
  version_id: string | null;
  parent_run_id: string | null;
  parent_node: string | null;
  mode: string;
  status: string; // running | succeeded | failed | cancelled | interrupted
  inputs: Record<string, unknown>;
  outputs: Record<string, unknown> | null;
  error: RunErrorInfo | null;
  usage: Usage | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  duration: number | null;
  nodes: NodeRecord[];
  [key: string]: unknown;
}

/** POST /api/v1/runs/debug */
export interface DebugRunBody {
  flow: unknown;
  inputs: Record<string, unknown>;
  app: string | null;
  stream: true;
  reuse?: { run_id: string; from_node: string };
}
