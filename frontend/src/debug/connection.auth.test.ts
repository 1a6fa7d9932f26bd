// The debug panel's calls behind an admin token (the docker-compose shape): the run's POST,
// its event stream and every reconnect send the token the user gave, as the editor's other
// calls do; a refused token asks for it again.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ADMIN_TOKEN_EVENT, ApiError, setAdminToken } from "../api/transport";
import { followRun, followRunEvents, startDebugRun } from "./connection";
import { applyMessage, startingState, type RunState } from "./runState";
import { byteStream, fixtures, jsonResponse, rawEvents, sseResponse } from "./testutil";

const TOKEN = "s3cret-admin-token";
const full = fixtures.parallelChatSse;
const events = rawEvents(full);
const flowNodes = (fixtures.parallelChatFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));

type Call = { url: string; headers: Record<string, string> };

function recordingFetch(answer: (url: string) => Response) {
  const calls: Call[] = [];
  const impl = vi.fn(async (input: string | URL | Request, init: RequestInit = {}) => {
    calls.push({ url: String(input), headers: (init.headers ?? {}) as Record<string, string> });
    return answer(String(input));
  });
  return { impl, calls };
}

beforeEach(() => setAdminToken(TOKEN));
afterEach(() => {
  setAdminToken("");
  vi.unstubAllGlobals();
});

describe("the debug connection behind an admin token", () => {
  it("sends the token with the POST that starts a debug run", async () => {
    const server = recordingFetch(() => sseResponse(byteStream([full])));
    vi.stubGlobal("fetch", server.impl);
    const body = { flow: fixtures.parallelChatFlow, inputs: {}, app: null, stream: true as const };
    await startDebugRun(body, new AbortController().signal);
    expect(server.calls).toHaveLength(1);
    expect(server.calls[0].url).toBe("/api/v1/runs/debug");
    expect(server.calls[0].headers.Authorization).toBe(`Bearer ${TOKEN}`);
    expect(server.calls[0].headers["Content-Type"]).toBe("application/json");
  });

  it("sends the token when following a run's events", async () => {
    const server = recordingFetch(() => sseResponse(byteStream([full])));
    vi.stubGlobal("fetch", server.impl);
    await followRunEvents("r1", new AbortController().signal);
    expect(server.calls[0].url).toBe("/api/v1/runs/r1/events");
    expect(server.calls[0].headers.Authorization).toBe(`Bearer ${TOKEN}`);
  });

  it("sends the token when it reconnects to a run whose stream broke", async () => {
    const cut = events.slice(0, 4).join("");
    const server = recordingFetch(() => sseResponse(byteStream([events.slice(4).join("")])));
    let state: RunState = startingState(flowNodes);
    await followRun({
      open: async () => sseResponse(byteStream([cut], "error")),
      onMessage: (m) => {
        state = applyMessage(state, m);
      },
      runId: () => state.runId,
      lastEventId: () => state.lastEventId,
      signal: new AbortController().signal,
      fetch: server.impl as unknown as typeof fetch,
      sleep: async () => undefined,
    });
    expect(server.calls).toHaveLength(1);
    expect(server.calls[0].headers.Authorization).toBe(`Bearer ${TOKEN}`);
    expect(server.calls[0].headers["Last-Event-ID"]).toBe("3");
    expect(state.lastEventId).toBe(events.length - 1); // every event arrived
  });

  it("asks for the token again when the server refuses it", async () => {
    const asked = vi.fn();
    window.addEventListener(ADMIN_TOKEN_EVENT, asked);
    try {
      const refusal = jsonResponse(
        { error: { code: "admin_token_required", message: "this API needs the admin token" } },
        401,
      );
      const run = followRun({
        open: async () => refusal,
        onMessage: () => undefined,
        runId: () => null,
        lastEventId: () => -1,
        signal: new AbortController().signal,
      });
      await expect(run).rejects.toBeInstanceOf(ApiError);
      await expect(run).rejects.toMatchObject({ status: 401, code: "admin_token_required" });
      expect(asked).toHaveBeenCalledTimes(1);
    } finally {
      window.removeEventListener(ADMIN_TOKEN_EVENT, asked);
    }
  });
});
