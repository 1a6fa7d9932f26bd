// Following a run's event stream, and surviving a lost connection: when the stream breaks
// (or ends without its `result`), reconnect to GET /api/v1/runs/{id}/events with Last-Event-ID
// so the server sends only what was missed. The reducer ignores ids it applied already, so a
// resumed stream never duplicates tokens.

import { readSse, SseParser, type SseMessage } from "../api/sse";
import { ApiError, apiErrorOf, openStream, request } from "../api/transport";
import type { DebugRunBody, Page, RunRecord } from "./types";

export type ConnectionStatus = "connecting" | "streaming" | "reconnecting" | "closed";

export interface FollowOptions {
  /** Opens the first stream (the POST that starts the run, or a first GET of its events). */
  open: (signal: AbortSignal) => Promise<Response>;
  onMessage: (message: SseMessage) => void;
  onStatus?: (status: ConnectionStatus, attempt: number) => void;
  /** The run's id once known (from its first event): needed to resume. */
  runId: () => string | null;
  /** The highest event id applied so far (-1: none). */
  lastEventId: () => number;
  signal: AbortSignal;
  fetch?: typeof fetch;
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  maxAttempts?: number; // reconnection attempts in a row before giving up
  /** A stream silent this long is taken for lost: a proxy may keep a dead connection open.
   *  `stallMs` once the server was seen sending keep-alive comments (": ping", every 15 s
   *  when idle), `silentStallMs` before that (a node may legitimately run minutes without an
   *  event when the server does not ping). A resume is harmless, so erring is cheap. */
  stallMs?: number;
  silentStallMs?: number;
}

export class StalledError extends Error {
  constructor(ms: number) {
    super(`no data for ${Math.round(ms / 1000)} s`);
  }
}

const BACKOFF_MS = [300, 1000, 2000, 3000, 5000];

function defaultSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Follow a run to its end. Resolves when the recorded result (`result` or `run_record`)
 *  arrived or the signal aborted; rejects with an ApiError the panel can show otherwise. */
export async function followRun(options: FollowOptions): Promise<void> {
  const { signal, onMessage } = options;
  const sleep = options.sleep ?? defaultSleep;
  const maxAttempts = options.maxAttempts ?? 8;
  const status = options.onStatus ?? (() => undefined);

  const stallMs = options.stallMs ?? 40_000;
  const silentStallMs = options.silentStallMs ?? 300_000;
  let pings = false; // the server sends keep-alive comments

  // Each connection gets its own signal: the watchdog aborts a silent one without stopping
  // the whole follow.
  const connection = () => {
    const controller = new AbortController();
    const stop = () => controller.abort();
    signal.addEventListener("abort", stop);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let stalled = false;
    const parser = new SseParser();
    const pulse = () => {
      clearTimeout(timer);
      if (parser.comments > 0) pings = true;
      timer = setTimeout(() => {
        stalled = true;
        controller.abort();
      }, pings ? stallMs : silentStallMs);
    };
    return {
      signal: controller.signal,
      parser,
      pulse,
      stalled: () => stalled,
      done: () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", stop);
      },
    };
  };

  // One stream, read to its end; true when the run's final word came through.
  const consume = async (
    response: Response,
    conn: ReturnType<typeof connection>,
  ): Promise<boolean> => {
    if (!response.body) return false;
    status("streaming", 0);
    let ended = false;
    conn.pulse();
    try {
      for await (const message of readSse(response.body, conn.parser, conn.pulse, conn.signal)) {
        onMessage(message);
        if (message.event === "result" || message.event === "run_record") ended = true;
      }
    } catch (error) {
      if (conn.stalled() && !signal.aborted) throw new StalledError(pings ? stallMs : silentStallMs);
      throw error;
    }
    return ended;
  };

  status("connecting", 0);
  let lost: unknown = null;
  let reached = false;
  const first = connection();
  try {
    const response = await options.open(first.signal);
    reached = true;
    if (!response.ok) throw await apiErrorOf(response);
    if (await consume(response, first)) return status("closed", 0);
  } catch (error) {
    if (signal.aborted) return status("closed", 0);
    if (error instanceof ApiError) {
      status("closed", 0);
      throw error;
    }
    lost = error;
  } finally {
    first.done();
  }

  let attempt = 0;
  while (!signal.aborted) {
    const runId = options.runId();
    if (runId === null) {
      status("closed", 0);
      throw new ApiError(
        0,
        "network",
        reached
          ? `The connection was lost before the run started${lost ? ` (${String(lost)})` : ""}.`
          : `The server could not be reached${lost ? ` (${String(lost)})` : ""}.`,
      );
    }
    if (attempt >= maxAttempts) {
      status("closed", 0);
      throw new ApiError(
        0,
        "network",
        `The connection to run ${runId} was lost and could not be restored after ${attempt} attempts${lost ? ` (${String(lost)})` : ""}.`,
      );
    }
    attempt += 1;
    status("reconnecting", attempt);
    await sleep(BACKOFF_MS[Math.min(attempt - 1, BACKOFF_MS.length - 1)], signal);
    if (signal.aborted) break;
    const conn = connection();
    try {
      const last = options.lastEventId();
      const response = await openStream(`/api/v1/runs/${encodeURIComponent(runId)}/events`, {
        headers: last >= 0 ? { "Last-Event-ID": String(last) } : {},
        signal: conn.signal,
        fetch: options.fetch,
      });
      if (!response.ok) {
        const error = await apiErrorOf(response);
        if (response.status >= 500 || response.status === 429) {
          lost = error.message;
          continue;
        }
        status("closed", 0);
        throw error;
      }
      if (await consume(response, conn)) return status("closed", 0);
      attempt = 0; // it streamed, then broke again: start the count over
      lost = "the stream ended before the run did";
    } catch (error) {
      if (signal.aborted) break;
      if (error instanceof ApiError) throw error;
      lost = error;
    } finally {
      conn.done();
    }
  }
  status("closed", 0);
}

// -- the other calls of the panel ----------------------------------------------------------

export function startDebugRun(body: DebugRunBody, signal: AbortSignal): Promise<Response> {
  return openStream("/api/v1/runs/debug", { json: body, signal });
}

export function followRunEvents(runId: string, signal: AbortSignal): Promise<Response> {
  return openStream(`/api/v1/runs/${encodeURIComponent(runId)}/events`, { signal });
}

export function getRun(runId: string, signal?: AbortSignal): Promise<RunRecord> {
  return request<RunRecord>("GET", `/api/v1/runs/${encodeURIComponent(runId)}`, undefined, { signal });
}

export function cancelRun(runId: string): Promise<RunRecord> {
  return request<RunRecord>("POST", `/api/v1/runs/${encodeURIComponent(runId)}/cancel`);
}

export function listRuns(app: string, offset: number, limit: number, signal?: AbortSignal): Promise<Page<RunRecord>> {
  const query = new URLSearchParams({ app, offset: String(offset), limit: String(limit) });
  return request<Page<RunRecord>>("GET", `/api/v1/runs?${query}`, undefined, { signal });
}
