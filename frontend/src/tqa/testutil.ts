// Test helpers: streams and a conversation captured from a real `dagwright serve` whose agents
// were played by the scripted model (tests/support/tqa_script.yaml: scripted, not a model's).

import tomDepartmentSse from "./fixtures/tom_department.sse?raw";
import roundLimitSse from "./fixtures/round_limit.sse?raw";
import llmSchedulerSse from "./fixtures/llm_scheduler.sse?raw";
import lucyConversation from "./fixtures/lucy.conversation.json?raw";
import { SseParser, type SseMessage } from "../api/sse";
import type { ConversationRecord } from "./types";

export const fixtures = {
  /** "Which department does tom work in?": 'tom' → empty → the checked hint → FINANCE. */
  tomDepartmentSse,
  /** "Count the employees forever" with max_rounds 4: round_limit. */
  roundLimitSse,
  /** the LLM scheduler, falling back to the FSM rule once. */
  llmSchedulerSse,
  /** GET of "What is the bonus of Lucy?": a wrong column (query_failed) retried → 2100. */
  lucy: JSON.parse(lucyConversation) as ConversationRecord,
};

export function messagesOf(text: string): SseMessage[] {
  const parser = new SseParser();
  return [...parser.feed(text), ...parser.end()];
}
