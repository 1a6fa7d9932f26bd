import { describe, expect, it } from "vitest";
import {
  conversationReducer,
  foldMessages,
  initialConversation,
  isAnswered,
  isScriptedConversation,
  isScriptedTurn,
  schedulerText,
  statusText,
  totalsOf,
  type ConversationState,
} from "./conversation";
import { SseParser } from "../api/sse";
import { fixtures, messagesOf } from "./testutil";
import type { AskBody } from "./types";

const request: AskBody = { question: "Which department does tom work in?", scheduler: "fsm", max_rounds: 12 };

/** Feed the raw stream to a parser in odd-sized pieces, dispatching as the page does. */
function foldChunked(text: string, size: number): ConversationState {
  let state = conversationReducer(initialConversation, { type: "asking", request });
  const parser = new SseParser();
  for (let at = 0; at < text.length; at += size) {
    for (const message of parser.feed(text.slice(at, at + size))) state = conversationReducer(state, { type: "event", message });
  }
  return conversationReducer(state, { type: "ended" });
}

describe("conversationReducer on a real stream", () => {
  it("builds the conversation turn by turn from `conversation`, `turn` and `result`", () => {
    const state = foldMessages(messagesOf(fixtures.tomDepartmentSse), request);
    expect(state.source).toBe("live");
    expect(state.id).toBe("bfcbf986bf3a4e699397e929f409976e");
    expect(state.turns.map((t) => t.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(state.turns.map((t) => t.agent)).toEqual(["User", "Planner", "Engineer", "Executor", "Engineer", "Executor", "Engineer", "Critic"]);
    // the empty result, and the hint checked against the data
    const empty = state.turns[3].tool_call!;
    expect(empty.rows).toEqual([]);
    expect(empty.hints![0]).toBe("values are case-sensitive: Name in hr.main.Employee has 'Tom', not 'tom'");
    expect(state.turns[5].tool_call!.rows).toEqual([{ DepName: "FINANCE" }]);
    expect(state.status).toBe("completed");
    expect(isAnswered(state)).toBe(true);
    expect(state.summary!.answer).toMatchObject({ form: "value", value: "FINANCE", grounded: true });
    expect(state.streamError).toBeNull();
    expect(isScriptedConversation(state)).toBe(true);
    expect(totalsOf(state)).toMatchObject({ tokens: 3239, rounds: 7, cost: 0 });
  });

  it("is the same whatever the chunking, and a resent turn replaces, never duplicates", () => {
    const whole = foldMessages(messagesOf(fixtures.tomDepartmentSse), request);
    expect(foldChunked(fixtures.tomDepartmentSse, 7)).toEqual(whole);
    const messages = messagesOf(fixtures.tomDepartmentSse);
    const turn3 = messages.filter((m) => m.event === "turn")[3];
    const again = foldMessages([...messages.slice(0, 6), turn3, ...messages.slice(6)], request);
    expect(again.turns.map((t) => t.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("shows the turns while it runs, before any result", () => {
    const messages = messagesOf(fixtures.tomDepartmentSse).slice(0, 4); // conversation + 3 turns
    let state = conversationReducer(initialConversation, { type: "asking", request });
    for (const message of messages) state = conversationReducer(state, { type: "event", message });
    expect(state.status).toBe("running");
    expect(state.turns).toHaveLength(3);
    const sum = state.turns.reduce((n, t) => n + (t.usage?.total_tokens ?? 0), 0);
    expect(sum).toBeGreaterThan(0);
    expect(totalsOf(state).tokens).toBe(sum); // summed from the turns so far
    // the stream closing now is an interruption, not an answer
    const ended = conversationReducer(state, { type: "ended" });
    expect(ended.status).toBe("interrupted");
    expect(ended.streamError!.code).toBe("stream_ended");
    expect(isAnswered(ended)).toBe(false);
  });

  it("a refused request (nothing ran) keeps the server's code and message", () => {
    let state = conversationReducer(initialConversation, { type: "asking", request });
    state = conversationReducer(state, { type: "failed", error: { code: "invalid_request", message: "scheduler: Input should be 'fsm', 'llm' or 'rolling'" } });
    expect(state.status).toBe("refused");
    expect(state.streamError!.code).toBe("invalid_request");
    expect(statusText(state.status)).toMatch(/refused/);
  });

  it("a round-limit ending has no answer", () => {
    const state = foldMessages(messagesOf(fixtures.roundLimitSse), { ...request, question: "Count the employees forever", max_rounds: 4 });
    expect(state.status).toBe("round_limit");
    expect(state.summary!.answer).toBeNull();
    expect(state.summary!.error!.code).toBe("round_limit");
    expect(isAnswered(state)).toBe(false);
    expect(statusText("round_limit")).toBe("Round limit reached: no answer");
  });

  it("a stored conversation (the replay) gives the same shape as the stream", () => {
    const state = conversationReducer(initialConversation, { type: "loaded", conversation: fixtures.lucy });
    expect(state.source).toBe("replay");
    expect(state.status).toBe("completed");
    expect(state.request).toMatchObject({ scheduler: "fsm", max_rounds: 12 });
    expect(state.turns).toHaveLength(8);
    expect(state.turns[3].tool_call!.error!.code).toBe("query_failed");
    expect(state.summary!.answer!.value).toBe(2100);
  });
});

describe("words", () => {
  it("says who chose the next agent and why", () => {
    const state = foldMessages(messagesOf(fixtures.tomDepartmentSse), request);
    expect(schedulerText(state.turns[3].scheduler!)).toBe("FSM: Engineer → Executor: it asked for a tool");
    expect(schedulerText(state.turns[1].scheduler!)).toBe("FSM: User → Planner: a question to plan");
  });

  it("says when the LLM scheduler fell back to the FSM rule", () => {
    const state = foldMessages(messagesOf(fixtures.llmSchedulerSse), { ...request, scheduler: "llm" });
    expect(schedulerText(state.turns[1].scheduler!)).toBe("LLM: the question goes to the Planner first");
    const fallback = state.turns[2].scheduler!;
    expect(fallback.fallback).toBe(true);
    expect(schedulerText(fallback)).toMatch(/^LLM \(fell back to the FSM rule\): could not read an agent .*FSM rule: Planner → Engineer: a plan to carry out$/);
    // the scheduler's own tokens count
    expect(totalsOf({ ...state, summary: null }).tokens).toBeGreaterThan(
      state.turns.reduce((n, t) => n + (t.usage?.total_tokens ?? 0), 0),
    );
  });

  it("labels the scripted model's turns, never the User's question", () => {
    const state = foldMessages(messagesOf(fixtures.tomDepartmentSse), request);
    expect(isScriptedTurn(state.turns[0])).toBe(false);
    expect(state.turns.slice(1).every(isScriptedTurn)).toBe(true);
  });
});
