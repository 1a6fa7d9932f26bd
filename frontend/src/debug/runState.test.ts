// @vitest-environment node
import { describe, expect, it } from "vitest";
import {
  applyMessage,
  fromRecord,
  idleState,
  isFinal,
  isPaused,
  mergeRecord,
  nodeRunStates,
  runScripted,
  sameNodeStates,
  startingState,
  streamedText,
  type RunState,
} from "./runState";
import type { SseMessage } from "../api/sse";
import { fixtures, messagesOf } from "./testutil";

const flowNodes = (fixtures.parallelChatFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));

function reduce(messages: SseMessage[], start: RunState = startingState(flowNodes)): RunState {
  return messages.reduce(applyMessage, start);
}

describe("the event reducer over a real stream", () => {
  const messages = messagesOf(fixtures.parallelChatSse);
  const state = reduce(messages);

  it("ends with the recorded result", () => {
    expect(state.phase).toBe("succeeded");
    expect(state.done).toBe(true);
    expect(state.runId).toBe(fixtures.parallelChatRecord.id);
    expect(state.flowName).toBe("parallel_chat");
    expect(state.inputs).toEqual({ question: "Who is Tom?" });
    expect(state.outputs).toEqual(fixtures.parallelChatRecord.outputs);
    expect(state.usage).toEqual(fixtures.parallelChatRecord.usage);
    expect(state.lastEventId).toBe(messages.length - 1);
    expect(state.duration).toBeCloseTo(fixtures.parallelChatRecord.duration!, 9);
  });

  it("settles every node: succeeded, or skipped down the branch not taken", () => {
    const statuses = Object.fromEntries(state.order.map((id) => [id, state.nodes[id].status]));
    expect(statuses).toEqual({
      question: "succeeded",
      draft: "succeeded",
      summary: "succeeded",
      words: "succeeded",
      combine: "succeeded",
      lang: "succeeded",
      big: "skipped",
      answer: "succeeded",
      n: "succeeded",
      count: "succeeded",
      bigout: "skipped",
    });
    expect(state.nodes.lang.branch).toBe("false");
    expect(state.nodes.big.error).toBe("input 'n' is on a branch not taken");
    expect(state.order.slice(0, 3)).toEqual(["question", "draft", "summary"]); // the flow's order
  });

  it("joins LLM token deltas into the streamed answer, with usage and the scripted mark", () => {
    for (const id of ["draft", "summary"]) {
      const node = state.nodes[id];
      expect(streamedText(node)).toBe(node.output);
      expect(node.scripted).toBe(true);
      expect(node.model).toBe("scripted");
      expect(node.usage!.calls).toBe(1);
      expect(node.usage!.completion_tokens).toBeGreaterThan(0);
    }
    expect(state.nodes.words.tokens).toEqual([]);
    expect(state.nodes.words.scripted).toBe(false);
    expect(runScripted(state)).toBe(true);
    const sum = state.nodes.draft.usage!.prompt_tokens + state.nodes.summary.usage!.prompt_tokens;
    expect(sum).toBe(state.usage!.prompt_tokens);
  });

  it("shows nodes running while they run, tokens arriving one by one", () => {
    const firstToken = messages.findIndex(
      (m) => m.event === "node_message" && JSON.parse(m.data).kind === "token",
    );
    const mid = reduce(messages.slice(0, firstToken + 1));
    expect(mid.phase).toBe("running");
    const streamingNode = JSON.parse(messages[firstToken].data).node as string;
    expect(mid.nodes[streamingNode].status).toBe("running");
    expect(streamedText(mid.nodes[streamingNode])).toBe(JSON.parse(messages[firstToken].data).data.text);
    expect(mid.nodes.combine.status).toBe("pending");
    expect(nodeRunStates(mid)[streamingNode]).toEqual({ status: "running" });
  });

  it("gives the canvas a state per node", () => {
    const states = nodeRunStates(state);
    expect(Object.keys(states).sort()).toEqual(flowNodes.map((n) => n.id).sort());
    expect(states.draft.status).toBe("succeeded");
    expect(states.draft.tokens).toBe(
      state.nodes.draft.usage!.prompt_tokens + state.nodes.draft.usage!.completion_tokens,
    );
    expect(states.draft.durationMs).toBeGreaterThan(0);
    expect(states.big).toEqual({ status: "skipped" });
    expect(nodeRunStates(idleState())).toEqual({});
    expect(sameNodeStates(states, nodeRunStates(state))).toBe(true);
    expect(sameNodeStates(states, { ...states, big: { status: "failed" } })).toBe(false);
  });

  it("ignores events it applied already: a repeated stream changes nothing", () => {
    const twice = reduce(messages, state);
    expect(twice).toBe(state);
    const overlap = reduce(messages.slice(10), reduce(messages.slice(0, 20)));
    expect(streamedText(overlap.nodes.draft)).toBe(streamedText(state.nodes.draft));
    expect(overlap.nodes.summary.usage).toEqual(state.nodes.summary.usage);
  });
});

describe("failed, cancelled and reused runs", () => {
  it("a failed node: its error, and the run's error naming it", () => {
    const state = reduce(messagesOf(fixtures.failSse), startingState([]));
    expect(state.phase).toBe("failed");
    expect(state.nodes.p.status).toBe("failed");
    expect(state.nodes.p.error).toBe(
      "ValueError: input 'text' is not valid JSON: Expecting value at line 1, column 1",
    );
    expect(state.error).toMatchObject({ code: "node_failed", node: "p", error_type: "ValueError" });
    expect(nodeRunStates(state).p.error).toContain("not valid JSON");
  });

  it("a cancelled run: the running node cancelled, the others never reached stay pending", () => {
    const nodes = ["question", "wait", "answer", "out"].map((id) => ({ id }));
    const state = reduce(messagesOf(fixtures.cancelSse), startingState(nodes));
    expect(state.phase).toBe("cancelled");
    expect(state.nodes.wait.status).toBe("cancelled");
    expect(state.nodes.wait.error).toBe("cancelled by request");
    expect(state.nodes.wait.duration).toBeGreaterThan(0.5);
    expect(state.nodes.wait.messages[0]).toMatchObject({ kind: "request" });
    expect(state.nodes.answer.status).toBe("pending");
    expect(state.error?.code).toBe("cancelled");
  });

  it("a re-run from a node: the nodes before it are reused, it and those after it run", () => {
    const state = reduce(
      messagesOf(fixtures.reuseSse),
      startingState(flowNodes, { runId: fixtures.parallelChatRecord.id, fromNode: "combine" }),
    );
    expect(state.phase).toBe("succeeded");
    for (const id of ["question", "words", "draft", "summary", "n", "count", "lang"])
      expect(state.nodes[id].status).toBe("reused");
    expect(state.nodes.combine.status).toBe("succeeded");
    expect(state.nodes.answer.status).toBe("succeeded");
    expect(state.nodes.big.status).toBe("skipped");
    expect(state.nodes.draft.output).toBe(String(fixtures.parallelChatRecord.outputs!.answer).split(" / ")[0]);
    expect(nodeRunStates(state).draft.status).toBe("reused");
    expect(state.nodes.draft.scripted).toBe(true); // a reused scripted answer stays labelled
    expect(state.nodes.combine.scripted).toBe(false);
  });
});

describe("stored runs", () => {
  it("a run's trace gives the same picture as its live stream", () => {
    const recorded = fromRecord(fixtures.parallelChatRecord, flowNodes);
    const streamed = reduce(messagesOf(fixtures.parallelChatSse));
    expect(recorded.source).toBe("record");
    expect(recorded.phase).toBe("succeeded");
    expect(recorded.done).toBe(true);
    for (const id of flowNodes.map((n) => n.id)) {
      const a = recorded.nodes[id];
      const b = streamed.nodes[id];
      expect(a.status, id).toBe(b.status);
      expect(a.output, id).toEqual(b.output);
      if (b.started !== null && a.started !== null) {
        expect(a.started).toBeCloseTo(b.started, 9);
        expect(a.finished!).toBeCloseTo(b.finished!, 6);
      }
    }
    expect(recorded.nodes.draft.usage).toEqual(streamed.nodes.draft.usage);
    // The stored trace has no scripted flag; the scripted model's replies say so.
    expect(recorded.nodes.draft.scripted).toBe(true);
    expect(recorded.nodes.combine.scripted).toBe(false); // a template, not a model
    expect(recorded.startedAt).toBeGreaterThan(1e9);
  });

  it("a reused node's trace has no start: it still shows, as reused", () => {
    const state = fromRecord(fixtures.reuseRecord, flowNodes);
    expect(state.nodes.draft.status).toBe("reused");
    expect(state.nodes.draft.started).toBeNull();
    expect(state.nodes.combine.status).toBe("succeeded");
  });

  it("a resume that finds the run over (run_record) keeps the streamed tokens", () => {
    const messages = messagesOf(fixtures.parallelChatSse);
    const firstToken = messages.findIndex((m) => m.data.includes('"kind":"token"'));
    const partial = reduce(messages.slice(0, firstToken + 3));
    const record: SseMessage = {
      event: "run_record",
      data: JSON.stringify(fixtures.parallelChatRecord),
      id: null,
    };
    const merged = applyMessage(partial, record);
    expect(merged.phase).toBe("succeeded");
    expect(merged.done).toBe(true);
    expect(merged.outputs).toEqual(fixtures.parallelChatRecord.outputs);
    expect(merged.nodes.combine.status).toBe("succeeded");
    const streamedSoFar = streamedText(partial.nodes.draft) + streamedText(partial.nodes.summary);
    expect(streamedSoFar.length).toBeGreaterThan(0);
    expect(merged.nodes.draft.tokens).toEqual(partial.nodes.draft.tokens);
    expect(mergeRecord(merged, fixtures.parallelChatRecord).nodes.draft.scripted).toBe(true);
  });
});

describe("a run that stops to wait for a person", () => {
  // A real stream: a map over three drafts whose second asks a person (human_input).
  const nodes = (fixtures.mapWaitingFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));
  const messages = messagesOf(fixtures.mapWaitingSse);

  it("is waiting once run_finished says so (its status failed, its code the pause's)", () => {
    const finishedAt = messages.findIndex((m) => m.event === "run_finished");
    const finished = JSON.parse(messages[finishedAt].data) as { status: string; error: { code: string } };
    expect([finished.status, finished.error.code]).toEqual(["failed", "waiting_for_human"]);
    const state = messages.slice(0, finishedAt + 1).reduce(applyMessage, startingState(nodes));
    expect(state.phase).toBe("waiting");
    expect(isPaused(state)).toBe(true);
    expect(isFinal(state.phase)).toBe(false);
  });

  it("stays waiting with the recorded result, and so does its stored record", () => {
    const state = messages.reduce(applyMessage, startingState(nodes));
    expect(state.phase).toBe("waiting");
    expect(state.done).toBe(true);
    expect(state.error?.code).toBe("waiting_for_human");
    const record = { ...fixtures.parallelChatRecord, status: "waiting", error: state.error };
    const stored = fromRecord(record);
    expect(stored.phase).toBe("waiting");
    expect(isPaused(stored)).toBe(true);
  });

  it("a failed run is not paused", () => {
    const failed = reduce(messagesOf(fixtures.failSse));
    expect(failed.phase).toBe("failed");
    expect(isPaused(failed)).toBe(false);
  });

  it("once it went on, its record says resumed, and one not yet taken by a worker queued: neither failed", () => {
    const error = { code: "waiting_for_human", message: "node 'ask' waits for a person", node: "ask" };
    const resumed = fromRecord({ ...fixtures.parallelChatRecord, status: "resumed", error });
    expect(resumed.phase).toBe("resumed");
    expect(isFinal(resumed.phase)).toBe(false);
    expect(isPaused(resumed)).toBe(false);
    expect(fromRecord({ ...fixtures.parallelChatRecord, status: "queued" }).phase).toBe("queued");
  });
});
