// The conversation view's state, pure: a reducer folds the ask stream's events (`conversation`,
// one `turn` per turn, `result`) or a stored conversation (the replay) into one shape the
// views draw; and the small helpers that turn it into words (scheduler choices, endings, totals).

import type { SseMessage } from "../api/sse";
import type {
  AskBody,
  ConversationProfile,
  ConversationRecord,
  ConversationStatus,
  ConversationSummary,
  SchedulerChoice,
  TqaError,
  TqaTurn,
  TqaUsage,
} from "./types";

export type Source = "live" | "replay";

export interface ConversationState {
  source: Source | null;
  id: string | null;
  question: string;
  request: ShownRequest;
  turns: TqaTurn[]; // in seq order, one per seq
  /** running | completed | round_limit | failed; `interrupted`: the stream broke before its
   *  result; `refused`: the server refused the question (nothing ran). */
  status: ConversationStatus | "interrupted" | "refused";
  summary: ConversationSummary | null; // the `result` event, or the stored conversation
  streamError: TqaError | null; // what broke or refused the stream (ApiError code + message)
}

export type ConversationAction =
  | { type: "reset" }
  | { type: "asking"; request: AskBody }
  | { type: "event"; message: SseMessage }
  | { type: "loaded"; conversation: ConversationRecord }
  | { type: "failed"; error: TqaError } // the request or the stream failed
  | { type: "ended" }; // the stream closed (after its result, or not)

export const initialConversation: ConversationState = {
  source: null,
  id: null,
  question: "",
  request: {},
  turns: [],
  status: "running",
  summary: null,
  streamError: null,
};

/** Insert or replace a turn by its seq (a resent event never duplicates a turn). */
export function withTurn(turns: TqaTurn[], turn: TqaTurn): TqaTurn[] {
  const at = turns.findIndex((t) => t.seq >= turn.seq);
  if (at === -1) return [...turns, turn];
  if (turns[at].seq === turn.seq) return [...turns.slice(0, at), turn, ...turns.slice(at + 1)];
  return [...turns.slice(0, at), turn, ...turns.slice(at)];
}

function parse(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return undefined;
  }
}

export function conversationReducer(state: ConversationState, action: ConversationAction): ConversationState {
  switch (action.type) {
    case "reset":
      return initialConversation;
    case "asking":
      return {
        ...initialConversation,
        source: "live",
        question: action.request.question,
        request: action.request,
      };
    case "loaded": {
      const { turns, ...summary } = action.conversation;
      return {
        source: "replay",
        id: summary.id,
        question: summary.question,
        request: requestOf(summary),
        turns: [...turns].sort((a, b) => a.seq - b.seq),
        status: summary.status,
        summary,
        streamError: null,
      };
    }
    case "event": {
      const data = parse(action.message.data);
      if (!data || typeof data !== "object") return state;
      switch (action.message.event) {
        case "conversation": {
          const c = data as { id: string; question?: string };
          return { ...state, id: c.id, question: c.question ?? state.question };
        }
        case "turn":
          return { ...state, turns: withTurn(state.turns, data as TqaTurn) };
        case "result": {
          const summary = data as ConversationSummary;
          return {
            ...state,
            id: summary.id ?? state.id,
            question: summary.question ?? state.question,
            request: { ...state.request, ...requestOf(summary) },
            status: summary.status,
            summary,
          };
        }
        default:
          return state; // an event this view does not know: ignored
      }
    }
    case "failed":
      return {
        ...state,
        streamError: action.error,
        status: state.status !== "running" ? state.status : state.id ? "interrupted" : "refused",
      };
    case "ended":
      if (state.status !== "running") return state;
      return {
        ...state,
        status: state.id ? "interrupted" : "refused",
        streamError: state.streamError ?? {
          code: "stream_ended",
          message: "the stream ended before the conversation's result",
        },
      };
  }
}

/** What was asked, as shown: the request, and the dataset's SOP and profile as the server used them. */
export type ShownRequest = Partial<AskBody> & { sop?: string; profile?: ConversationProfile | null };

function requestOf(s: ConversationSummary): ShownRequest {
  return {
    question: s.question,
    sop: s.sop || undefined,
    profile: s.profile ?? undefined,
    dataset: s.dataset ?? undefined,
    scheduler: s.scheduler as AskBody["scheduler"],
    max_rounds: s.max_rounds,
    answer_format: s.answer_format ?? undefined,
  };
}

/** Fold a whole stream's messages (tests, and what the page does one by one). */
export function foldMessages(messages: SseMessage[], request?: AskBody): ConversationState {
  let state = request ? conversationReducer(initialConversation, { type: "asking", request }) : { ...initialConversation, source: "live" as const };
  for (const message of messages) state = conversationReducer(state, { type: "event", message });
  return conversationReducer(state, { type: "ended" });
}

// -- words ---------------------------------------------------------------------------------

const BY: Record<string, string> = { fsm: "FSM", llm: "LLM", rolling: "Rolling", start: "Start" };

export function schedulerLabel(by: string): string {
  return BY[by] ?? by;
}

/** "FSM: Engineer → Executor: it asked for a tool" — who chose, and why. */
export function schedulerText(choice: SchedulerChoice): string {
  const reason = (choice.reason || `chose ${choice.agent}`).replace(/\s*->\s*/g, " → ");
  const by = schedulerLabel(choice.by);
  return choice.fallback ? `${by} (fell back to the FSM rule): ${reason}` : `${by}: ${reason}`;
}

const STATUS_TEXT: Record<string, string> = {
  running: "Running…",
  waiting: "Waiting: a tool call needs a person's approval",
  completed: "Completed: answered",
  round_limit: "Round limit reached: no answer",
  failed: "Failed: no answer",
  interrupted: "Interrupted: the stream broke before the end",
  refused: "Not asked: the server refused the question",
};

export function statusText(status: string): string {
  return STATUS_TEXT[status] ?? status;
}

/** Only a completed conversation has an answer; every other ending is explicitly not one. */
export function isAnswered(state: Pick<ConversationState, "status" | "summary">): boolean {
  return state.status === "completed" && !!state.summary?.answer;
}

function startsScripted(text: unknown): boolean {
  return typeof text === "string" && /^\s*\[scripted( reply)?\]/.test(text);
}

/** Did the scripted model (not a model) answer this turn — the agent, its tool's model, or the
 *  LLM scheduler's choice? */
export function isScriptedTurn(turn: TqaTurn): boolean {
  if (turn.usage?.scripted || turn.scheduler?.usage?.scripted) return true;
  const content = turn.content as { scripted?: unknown } | null;
  if (content && typeof content === "object" && content.scripted === true) return true;
  return turn.agent !== "User" && turn.agent !== "Executor" && startsScripted(turn.text);
}

export function isScriptedConversation(state: ConversationState): boolean {
  return !!state.summary?.usage?.scripted || state.turns.some(isScriptedTurn);
}

export interface Totals {
  tokens: number;
  promptTokens: number;
  completionTokens: number;
  cost: number | null; // null: no turn said
  rounds: number;
}

function addUsage(t: Totals, u: TqaUsage | null | undefined): void {
  if (!u) return;
  const prompt = u.prompt_tokens ?? 0;
  const completion = u.completion_tokens ?? 0;
  t.promptTokens += prompt;
  t.completionTokens += completion;
  t.tokens += u.total_tokens ?? prompt + completion;
  if (typeof u.cost === "number") t.cost = (t.cost ?? 0) + u.cost;
}

/** The conversation's tokens and cost: the server's total once it has one, else the turns'
 *  (agents, tools and the LLM scheduler's choices) summed so far. */
export function totalsOf(state: ConversationState): Totals {
  const t: Totals = { tokens: 0, promptTokens: 0, completionTokens: 0, cost: null, rounds: 0 };
  if (state.summary?.usage) {
    addUsage(t, state.summary.usage);
  } else {
    for (const turn of state.turns) {
      addUsage(t, turn.usage);
      addUsage(t, turn.scheduler?.usage);
    }
  }
  t.rounds = state.summary?.rounds ?? state.turns.filter((turn) => turn.seq > 0).length;
  return t;
}

export function turnTokens(turn: TqaTurn): number {
  const u = turn.usage;
  if (!u) return 0;
  return u.total_tokens ?? (u.prompt_tokens ?? 0) + (u.completion_tokens ?? 0);
}

export const AGENT_COLOURS: Record<string, string> = {
  User: "#495057",
  Planner: "#7048e8",
  Engineer: "#1c7ed6",
  Executor: "#0c8599",
  Critic: "#e8590c",
};

export function agentColour(agent: string): string {
  return AGENT_COLOURS[agent] ?? "#868e96";
}

export const ROW_LIMIT = 50; // rows drawn of a result table
