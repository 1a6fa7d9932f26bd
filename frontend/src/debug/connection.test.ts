// @vitest-environment node
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/transport";
import { followRun, type ConnectionStatus } from "./connection";
import { applyMessage, startingState, streamedText, type RunState } from "./runState";
import { byteStream, fixtures, jsonResponse, messagesOf, rawEvents, sseResponse } from "./testutil";

const flowNodes = (fixtures.parallelChatFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));
const full = fixtures.parallelChatSse;
const events = rawEvents(full); // event i has id i
const complete = messagesOf(full).reduce(applyMessage, startingState(flowNodes));
const runId = complete.runId!;

/** The server's GET /runs/{id}/events: the events after Last-Event-ID (optionally repeating
 *  `overlap` already-sent ones, which a client must not apply twice). */
function resumeServer(options: { overlap?: number; failFirst?: number; chunk?: number } = {}) {
  let failures = options.failFirst ?? 0;
  return vi.fn(async (url: string | URL | Request, init?: RequestInit) => {
    expect(String(url)).toBe(`/api/v1/runs/${runId}/events`);
    if (failures-- > 0) throw new TypeError("Failed to fetch");
    const last = Number((init?.headers as Record<string, string>)["Last-Event-ID"] ?? -1);
    const from = Math.max(0, last + 1 - (options.overlap ?? 0));
    const text = events.slice(from).join("");
    const size = options.chunk ?? text.length;
    const chunks: string[] = [];
    for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size));
    return sseResponse(byteStream(chunks));
  });
}

function follower(open: () => Promise<Response>, fetchImpl: typeof fetch, maxAttempts = 8) {
  let state: RunState = startingState(flowNodes);
  const statuses: [ConnectionStatus, number][] = [];
  const promise = followRun({
    open: () => open(),
    onMessage: (m) => {
      state = applyMessage(state, m);
    },
    onStatus: (s, a) => statuses.push([s, a]),
    runId: () => state.runId,
    lastEventId: () => state.lastEventId,
    signal: new AbortController().signal,
    fetch: fetchImpl,
    sleep: async () => undefined,
    maxAttempts,
  });
  return { promise, state: () => state, statuses };
}

describe("following a run", () => {
  it("reads the whole stream when nothing goes wrong", async () => {
    const fetchImpl = vi.fn();
    const f = follower(async () => sseResponse(byteStream([full])), fetchImpl as never);
    await f.promise;
    expect(fetchImpl).not.toHaveBeenCalled();
    expect(f.state()).toEqual(complete);
    expect(f.statuses.map((s) => s[0])).toEqual(["connecting", "streaming", "closed"]);
  });

  it("resumes after a lost connection with Last-Event-ID, without duplicating tokens", async () => {
    // The connection drops mid-way through an event, in the middle of the token stream.
    const cutEvent = events.findIndex((e) => e.includes('"kind":"token"')) + 3;
    const cutAt = events.slice(0, cutEvent).join("").length + 25;
    const server = resumeServer({ overlap: 4, chunk: 17 });
    const f = follower(async () => sseResponse(byteStream([full.slice(0, cutAt)], "error")), server);
    await f.promise;
    expect(server).toHaveBeenCalledTimes(1);
    const headers = server.mock.calls[0][1]!.headers as Record<string, string>;
    expect(headers["Last-Event-ID"]).toBe(String(cutEvent - 1));
    const state = f.state();
    expect(state).toEqual(complete);
    expect(streamedText(state.nodes.draft)).toBe(state.nodes.draft.output);
    expect(streamedText(state.nodes.summary)).toBe(state.nodes.summary.output);
    expect(f.statuses.map((s) => s[0])).toEqual([
      "connecting",
      "streaming",
      "reconnecting",
      "streaming",
      "closed",
    ]);
  });

  it("keeps trying while the server is unreachable, and resumes when it is back", async () => {
    const server = resumeServer({ failFirst: 3 });
    const f = follower(async () => sseResponse(byteStream([events.slice(0, 9).join("")], "error")), server);
    await f.promise;
    expect(server).toHaveBeenCalledTimes(4);
    expect(f.statuses.filter((s) => s[0] === "reconnecting").map((s) => s[1])).toEqual([1, 2, 3, 4]);
    expect(f.state()).toEqual(complete);
  });

  it("reconnects when the stream ends without the run's result", async () => {
    const server = resumeServer();
    const f = follower(async () => sseResponse(byteStream([events.slice(0, 15).join("")])), server);
    await f.promise;
    const headers = server.mock.calls[0][1]!.headers as Record<string, string>;
    expect(headers["Last-Event-ID"]).toBe("14");
    expect(f.state()).toEqual(complete);
  });

  it("takes a silent stream for lost (a proxy keeping a dead connection open) and resumes", async () => {
    // Events 0..9, then nothing at all: no data, no keep-alive ping, no close.
    const hanging = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(events.slice(0, 10).join("")));
      },
    });
    const server = resumeServer();
    let state: RunState = startingState(flowNodes);
    await followRun({
      open: async () => sseResponse(hanging),
      onMessage: (m) => {
        state = applyMessage(state, m);
      },
      runId: () => state.runId,
      lastEventId: () => state.lastEventId,
      signal: new AbortController().signal,
      fetch: server,
      sleep: async () => undefined,
      stallMs: 10_000,
      silentStallMs: 50, // this server sends no keep-alive pings
    });
    expect((server.mock.calls[0][1]!.headers as Record<string, string>)["Last-Event-ID"]).toBe("9");
    expect(state).toEqual(complete);
  });

  it("waits the shorter stall time once the server was seen pinging", async () => {
    const hanging = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(events.slice(0, 6).join("") + ": ping\n\n"));
      },
    });
    const server = resumeServer();
    let state: RunState = startingState(flowNodes);
    const started = Date.now();
    await followRun({
      open: async () => sseResponse(hanging),
      onMessage: (m) => {
        state = applyMessage(state, m);
      },
      runId: () => state.runId,
      lastEventId: () => state.lastEventId,
      signal: new AbortController().signal,
      fetch: server,
      sleep: async () => undefined,
      stallMs: 50,
      silentStallMs: 60_000,
    });
    expect(Date.now() - started).toBeLessThan(5000);
    expect((server.mock.calls[0][1]!.headers as Record<string, string>)["Last-Event-ID"]).toBe("5");
    expect(state).toEqual(complete);
  });

  it("takes the stored run when it finished meanwhile (run_record)", async () => {
    const server = vi.fn(async () =>
      sseResponse(
        byteStream([`event: run_record\ndata: ${JSON.stringify(fixtures.parallelChatRecord)}\n\n`]),
      ),
    );
    const f = follower(async () => sseResponse(byteStream([events.slice(0, 20).join("")], "error")), server);
    await f.promise;
    const state = f.state();
    expect(state.phase).toBe("succeeded");
    expect(state.done).toBe(true);
    expect(state.outputs).toEqual(complete.outputs);
    for (const id of Object.keys(complete.nodes))
      expect(state.nodes[id].status, id).toBe(complete.nodes[id].status);
  });

  it("gives up after the attempts allowed, saying why", async () => {
    const server = vi.fn(async () => {
      throw new TypeError("Failed to fetch");
    });
    const f = follower(
      async () => sseResponse(byteStream([events.slice(0, 5).join("")], "error")),
      server as never,
      3,
    );
    await expect(f.promise).rejects.toThrow(/could not be restored after 3 attempts/);
    expect(server).toHaveBeenCalledTimes(3);
  });

  it("cannot resume a run whose id it never learnt", async () => {
    const f = follower(async () => sseResponse(byteStream([], "error")), vi.fn() as never);
    await expect(f.promise).rejects.toThrow(/lost before the run started/);
  });

  it("reports the server's refusal (a 422 with the API's error shape) as an ApiError", async () => {
    const body = {
      error: {
        code: "flow_invalid",
        message: "the flow has 1 error(s)",
        problems: [{ code: "no_output", message: "no output", node: null, port: null, severity: "error" }],
      },
    };
    const f = follower(async () => jsonResponse(body, 422), vi.fn() as never);
    const error = await f.promise.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe("flow_invalid");
    expect((error as ApiError).detail.problems).toHaveLength(1);
  });

  it("stops quietly when aborted", async () => {
    const controller = new AbortController();
    let state: RunState = startingState(flowNodes);
    const promise = followRun({
      open: async () => sseResponse(byteStream([events.slice(0, 5).join("")], "error")),
      onMessage: (m) => {
        state = applyMessage(state, m);
        if (state.lastEventId === 4) controller.abort();
      },
      runId: () => state.runId,
      lastEventId: () => state.lastEventId,
      signal: controller.signal,
      fetch: vi.fn() as never,
      sleep: async () => undefined,
    });
    await expect(promise).resolves.toBeUndefined();
  });
});
