// The triggers and human-in-the-loop APIs (docs/integrations.md), typed for the pages here.

import { request } from "../api/transport";
import type { Page } from "../api/types";

export type FieldType = "text" | "number" | "integer" | "boolean";

export interface FormField {
  name: string;
  type: FieldType;
  label: string;
  required: boolean;
  default: unknown;
}

/** What an AutoTQA tool call that needs approval will run (tqa/approvals.py). */
export interface ToolApproval {
  conversation_id: string;
  question: string;
  turn: number;
  tool: string;
  app: string;
  role: string | null;
  input: unknown;
  sql?: string;
  code?: string;
  /** A tool that plans (the Python tool): the SQL and program it wrote, which run as they are once approved. */
  plan?: { sql: string; code: string };
  /** The Executor's run that had the tool write the plan. */
  plan_run_id?: string | null;
}

export interface HumanRequest {
  id: string;
  /** The paused run; null for an AutoTQA conversation's tool-call approval. */
  run_id: string | null;
  conversation_id?: string | null;
  app_id: string | null;
  node: string;
  message: string;
  form: { fields: FormField[]; choices: string[]; approval?: ToolApproval };
  status: "waiting" | "answered" | "expired" | "cancelled";
  choice: string | null;
  resumed_run_id: string | null;
  expires_at: string | null;
  created_at: string;
  link?: string;
}

export interface Trigger {
  id: string;
  kind: "cron" | "webhook";
  name: string;
  enabled: boolean;
  cron: string | null;
  timezone: string;
  catch_up: "latest" | "skip" | "all";
  inputs: Record<string, unknown>;
  input_map: Record<string, string>;
  secret_name: string | null;
  url?: string;
}

export interface Firing {
  id: string;
  tick: string;
  run_id: string | null;
  status: string;
  error: string | null;
}

/** What an answer did: the continuing run, or (run_id null) the paused run still waits for
 *  `waiting_for` other answers (several map items may wait at once). */
export interface Answered {
  run_id: string | null;
  status: "running" | "waiting";
  waiting_for?: number;
  /** An approval's answer: the AutoTQA conversation that goes on. */
  conversation_id?: string;
}

/** What an answer did, in a sentence (the waiting list and the debug panel say it). */
export function answeredText(done: Answered): string {
  if (done.conversation_id) return `Answered: the AutoTQA conversation ${done.conversation_id} goes on.`;
  if (done.run_id !== null) return `Answered: the run goes on as ${done.run_id}.`;
  const more = done.waiting_for ?? 0;
  return more > 0
    ? `Answered: the run still waits for ${more} more answer${more === 1 ? "" : "s"}.`
    : "Answered: the run goes on in a moment.";
}

const REQUESTS = "/api/v1/human/requests";
/** The most a page holds (store/paging.py MAX_LIMIT). */
const MAX_PAGE = 200;

export const humanApi = {
  /** One page of the requests still waiting, oldest first. */
  waiting: (offset = 0, limit = 50) =>
    request<Page<HumanRequest>>("GET", `${REQUESTS}?${new URLSearchParams({ offset: String(offset), limit: String(limit) })}`),
  /** Every request one run waits on (the debug panel's run), following the pages: a map
   *  whose items all ask holds one per item. */
  ofRun: async (runId: string, signal?: AbortSignal) => {
    const items: HumanRequest[] = [];
    for (;;) {
      const query = new URLSearchParams({ run_id: runId, offset: String(items.length), limit: String(MAX_PAGE) });
      const page = await request<Page<HumanRequest>>("GET", `${REQUESTS}?${query}`, undefined, { signal });
      items.push(...page.items);
      if (page.items.length === 0 || items.length >= page.total) return items;
    }
  },
  /** The approvals an AutoTQA conversation waits on (one at a time, in practice). */
  ofConversation: (conversationId: string) =>
    request<Page<HumanRequest>>("GET", `${REQUESTS}?${new URLSearchParams({ conversation_id: conversationId, limit: "20" })}`).then(
      (page) => page.items,
    ),
  /** `flow`: for a debug run of an unsaved flow, the canvas's flow to go on with. */
  answer: (id: string, values: Record<string, unknown>, choice: string | null, flow?: unknown) =>
    request<Answered>("POST", `${REQUESTS}/${encodeURIComponent(id)}/answer`, {
      values,
      choice,
      ...(flow === undefined ? {} : { flow }),
    }),
};

export const triggersApi = {
  list: (slug: string) =>
    request<{ items: Trigger[] }>("GET", `/api/v1/apps/${encodeURIComponent(slug)}/triggers`).then((r) => r.items),
  create: (slug: string, body: Partial<Trigger>) =>
    request<Trigger>("POST", `/api/v1/apps/${encodeURIComponent(slug)}/triggers`, body),
  update: (id: string, changes: Partial<Trigger>) =>
    request<Trigger>("PATCH", `/api/v1/triggers/${encodeURIComponent(id)}`, changes),
  remove: (id: string) => request<void>("DELETE", `/api/v1/triggers/${encodeURIComponent(id)}`),
  firings: (id: string) =>
    request<{ items: Firing[] }>("GET", `/api/v1/triggers/${encodeURIComponent(id)}/firings`).then((r) => r.items),
};

/** A form field's text as the value its type asks for (the server checks it again). */
export function fieldValue(type: FieldType, text: string): unknown {
  if (type === "boolean") return text === "true";
  if (type === "integer" || type === "number") {
    const n = Number(text);
    return text.trim() === "" || Number.isNaN(n) ? text : n;
  }
  return text;
}
