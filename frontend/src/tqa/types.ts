// The AutoTQA API's shapes (backend/dagwright/api/routes/tqa.py, docs/autotqa.md). A turn has
// one shape everywhere: the stream's `turn` events, a stored conversation's `turns`.

export type AgentName = "User" | "Planner" | "Engineer" | "Executor" | "Critic" | string;
export type SchedulerKind = "fsm" | "llm" | "rolling";
/** `running` while a conversation goes on; the server's endings are the other three. */
export type ConversationStatus = "running" | "waiting" | "completed" | "round_limit" | "failed" | string;

export interface TqaUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  cost?: number | null;
  calls?: number;
  scripted?: boolean;
}

export interface TqaError {
  code: string;
  message: string;
  [key: string]: unknown;
}

export interface SchedulerChoice {
  agent: string;
  reason: string;
  by: string; // fsm | llm | rolling
  fallback: boolean;
  answer: string | null; // the LLM scheduler's own words
  usage: TqaUsage | null;
}

export type Row = Record<string, unknown>;

export interface ToolCall {
  tool: string;
  app: string;
  input: Record<string, unknown> | null;
  sql: string | null;
  columns: string[] | null;
  rows: Row[] | null;
  row_count: number | null;
  truncated: boolean;
  error: TqaError | null;
  hints: string[] | null;
  run_id: string | null;
  outputs?: Record<string, unknown> | null;
}

export interface TqaTurn {
  seq: number;
  agent: AgentName;
  text: string;
  content: unknown;
  scheduler: SchedulerChoice | null;
  tool_call: ToolCall | null;
  usage: TqaUsage | null;
  run_id: string | null;
  error: TqaError | null;
  started: number; // seconds since the conversation began
  duration: number; // seconds
}

export interface Evidence {
  tool: string;
  sql: string | null;
  columns: string[] | null;
  rows: Row[] | null;
  row_count: number | null;
  truncated: boolean;
  outputs: Record<string, unknown> | null;
  run_id: string | null;
}

export interface TqaAnswer {
  form: "value" | "table" | "text" | "template" | string;
  value: unknown;
  text: string | null;
  table: { columns: string[]; rows: unknown[] } | null;
  fields: Record<string, unknown> | null;
  grounded: boolean;
  evidence: Evidence[];
}

export interface TqaTiming {
  total_s: number;
  agents_s: number;
  orchestrator_s: number;
}

/** A conversation as listed (no turns), as streamed in `result` (plus timing), or whole. */
export interface ConversationSummary {
  id: string;
  question: string;
  dataset: string | null;
  sop: string;
  scheduler: SchedulerKind | string;
  max_rounds: number;
  answer_format: string | null;
  profile?: ConversationProfile | null;
  status: ConversationStatus;
  rounds: number;
  answer: TqaAnswer | null;
  error: TqaError | null;
  usage: TqaUsage | null;
  timing?: TqaTiming | null;
  created_at: string;
  finished_at: string | null;
}

export interface ConversationRecord extends ConversationSummary {
  turns: TqaTurn[];
}

export interface ConversationPage {
  items: ConversationSummary[];
  total: number;
  offset: number;
  limit: number;
}

export interface AskBody {
  question: string;
  /** A TQA dataset (profile): its sources, SOP, example namespaces and hints. */
  dataset?: string;
  scheduler: SchedulerKind;
  max_rounds: number;
  answer_format?: string;
}

/** Who reads few-shot examples, and what one of theirs holds. */
export const EXAMPLE_ROLES = {
  planner: "question → plan",
  engineer: "question → report",
  critic: "answer → verdict",
  text_to_sql: "question → sql",
  python: "task → code",
} as const;
export type ExampleRole = keyof typeof EXAMPLE_ROLES;

/** A TQA dataset (AutoTQA profile): GET /api/v1/tqa/datasets. */
export interface TqaDataset {
  name: string;
  description: string;
  sources: string[];
  namespaces: Partial<Record<ExampleRole, string>>;
  examples_k: number;
  hints_k: number;
  sop: string;
  sop_version: number;
  created_at: string | null;
  updated_at: string | null;
}

export interface SopVersion {
  version: number;
  text: string;
  note: string;
  created_at: string;
}

export type HintStatus = "confirmed" | "candidate" | "dropped";

/** Common knowledge of a dataset: written by hand, or learned from a successful retry. */
export interface TqaHint {
  id: string;
  dataset: string;
  text: string;
  status: HintStatus;
  source: "manual" | "learned";
  question: string | null;
  conversation_id: string | null;
  details: { error?: TqaError; tables?: string[]; failed_sql?: string | null; fixed_sql?: string | null } | null;
  created_at: string;
  updated_at: string;
}

/** What a conversation used of its dataset (null: none named). */
export interface ConversationProfile {
  name: string;
  found: boolean;
  sop_version: number;
  namespaces: Record<string, string>;
  examples_k: number;
  sources: string[];
  hints: string[];
  learned_hints: { id: string; status: HintStatus; similarity: number }[];
  learned: string[];
}
