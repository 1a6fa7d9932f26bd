// The one way the browser talks to the server: every call (JSON requests, uploads, event
// streams) sends the admin token the user gave, and every refusal — the server's
// {"error": {"code", "message", ...}} — becomes an ApiError the UI can show. A refused or
// missing admin token asks for it again (the token bar listens for ADMIN_TOKEN_EVENT).

import { readSse, SseParser, type SseMessage } from "./sse";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const TOKEN_KEY = "dagwright.adminToken";

/** Dispatched on window when the editor API refuses for want of the admin token. */
export const ADMIN_TOKEN_EVENT = "dagwright:admin-token";

/** The admin token the editor API needs when the server listens beyond loopback (kept in
 *  this browser's localStorage; empty: none sent). */
export function adminToken(): string {
  try {
    return localStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}

export function setAdminToken(token: string): void {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: nothing to keep
  }
}

/** `headers` with the admin token, when there is one. */
function withAdminToken(headers: Record<string, string>): Record<string, string> {
  const token = adminToken();
  return token ? { ...headers, Authorization: `Bearer ${token}` } : headers;
}

/** The ApiError a non-2xx response stands for (its body need not be JSON: a proxy's page
 *  becomes the message). */
export async function apiErrorOf(response: Response): Promise<ApiError> {
  const text = await response.text().catch(() => "");
  let error: { code?: string; message?: string } | undefined;
  try {
    error = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
  } catch {
    error = undefined;
  }
  const tokenRefused = error?.code === "admin_token_required" || error?.code === "admin_token_invalid";
  if ((response.status === 401 || tokenRefused) && typeof window !== "undefined") {
    window.dispatchEvent(new Event(ADMIN_TOKEN_EVENT));
  }
  return new ApiError(
    response.status,
    error?.code ?? `http_${response.status}`,
    error?.message ?? (text.slice(0, 300) || response.statusText || `HTTP ${response.status}`),
    (error ?? {}) as Record<string, unknown>,
  );
}

async function send(path: string, init: RequestInit & { headers: Record<string, string> }): Promise<Response> {
  try {
    return await fetch(path, { ...init, headers: withAdminToken(init.headers) });
  } catch (cause) {
    if (init.signal?.aborted) throw cause;
    throw new ApiError(0, "network", `The server could not be reached (${String(cause)}).`);
  }
}

async function json<T>(response: Response): Promise<T> {
  if (!response.ok) throw await apiErrorOf(response);
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  if (!text) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    // A 2xx that is not JSON (a proxy's page, a misrouted static file): the caller would
    // otherwise read fields of undefined far from here.
    throw new ApiError(response.status, "not_json", text.slice(0, 300));
  }
}

export interface RequestOptions {
  /** Aborting it cancels the call: the promise rejects with the abort's DOMException (not an
   *  ApiError), which the caller, having moved on, ignores. */
  signal?: AbortSignal;
}

/** A JSON call: `body` (if any) sent as JSON, the answer parsed; a refusal throws ApiError. */
export async function request<T>(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<T> {
  const response = await send(path, {
    method,
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: options.signal,
  });
  return json<T>(response);
}

/** A file's bytes POSTed as they are; the JSON answer parsed. */
export async function upload<T>(path: string, body: BodyInit, contentType = "application/octet-stream", options: RequestOptions = {}): Promise<T> {
  return json<T>(await send(path, { method: "POST", headers: { "Content-Type": contentType }, body, signal: options.signal }));
}

export interface StreamOptions {
  method?: "GET" | "POST";
  /** Sent as the JSON body. */
  json?: unknown;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** The fetch to use (tests stand in a scripted server). */
  fetch?: typeof fetch;
}

/** Opens a `text/event-stream` response and hands it back as it is, refused or not: the
 *  caller decides what a refusal means (a run's follower retries a 5xx; see apiErrorOf). */
export function openStream(path: string, options: StreamOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { Accept: "text/event-stream", ...options.headers };
  if (options.json !== undefined) headers["Content-Type"] = "application/json";
  const init: RequestInit = {
    method: options.method ?? (options.json === undefined ? "GET" : "POST"),
    headers: withAdminToken(headers),
    signal: options.signal,
  };
  if (options.json !== undefined) init.body = JSON.stringify(options.json);
  return options.fetch ? options.fetch(path, init) : fetch(path, init);
}

/** An event stream's messages as they arrive; a refusal or an unreachable server throws an
 *  ApiError, an abort ends it. */
export async function* streamEvents(path: string, options: StreamOptions = {}): AsyncGenerator<SseMessage> {
  let response: Response;
  try {
    response = await openStream(path, options);
  } catch (cause) {
    if (options.signal?.aborted) throw cause;
    throw new ApiError(0, "network", `The server could not be reached (${String(cause)}).`);
  }
  if (!response.ok) throw await apiErrorOf(response);
  if (!response.body) throw new ApiError(response.status, "no_stream", "The server answered without a stream.");
  yield* readSse(response.body, new SseParser(), undefined, options.signal);
}
