// The AutoTQA calls: the list and the replay through the shared fetch wrapper; the ask as a
// POST answered with server-sent events (EventSource cannot POST), read with the debug panel's
// SSE parser.

import { ADMIN_TOKEN_EVENT, ApiError, adminToken, request } from "../api/http";
import { readSse, SseParser, type SseMessage } from "../debug/sse";
import type { AskBody, ConversationPage, ConversationRecord, HintStatus, SopVersion, TqaDataset, TqaHint } from "./types";

/** The settings of a dataset one can change (a different `sop` is stored as its next version). */
export type DatasetSettings = Partial<Pick<TqaDataset, "description" | "sources" | "namespaces" | "examples_k" | "hints_k" | "sop">>;

const T = "/api/v1/tqa";
const e = encodeURIComponent;

export const tqaApi = {
  conversations: (offset = 0, limit = 20, status?: string) =>
    request<ConversationPage>("GET", `${T}/conversations?offset=${offset}&limit=${limit}${status ? `&status=${e(status)}` : ""}`),
  conversation: (id: string) => request<ConversationRecord>("GET", `${T}/conversations/${e(id)}`),
  datasets: () => request<TqaDataset[]>("GET", `${T}/datasets`),
  createDataset: (name: string, settings: DatasetSettings) => request<TqaDataset>("POST", `${T}/datasets`, { name, ...settings }),
  updateDataset: (name: string, settings: DatasetSettings & { sop_note?: string }) =>
    request<TqaDataset>("PUT", `${T}/datasets/${e(name)}`, settings),
  deleteDataset: (name: string) => request<void>("DELETE", `${T}/datasets/${e(name)}`),
  sops: (name: string) => request<SopVersion[]>("GET", `${T}/datasets/${e(name)}/sops`),
  hints: (dataset: string, status?: HintStatus) =>
    request<TqaHint[]>("GET", `${T}/hints?dataset=${e(dataset)}${status ? `&status=${status}` : ""}`),
  addHint: (dataset: string, text: string) => request<TqaHint>("POST", `${T}/hints`, { dataset, text }),
  updateHint: (id: string, change: { text?: string; status?: HintStatus }) => request<TqaHint>("PUT", `${T}/hints/${e(id)}`, change),
  deleteHint: (id: string) => request<void>("DELETE", `${T}/hints/${e(id)}`),
};

/** The request's body as the server wants it: empty optional fields left out. */
export function askPayload(body: AskBody): Record<string, unknown> {
  const out: Record<string, unknown> = {
    question: body.question.trim(),
    scheduler: body.scheduler,
    max_rounds: body.max_rounds,
    stream: true,
  };
  if (body.dataset?.trim()) out.dataset = body.dataset.trim();
  if (body.answer_format?.trim()) out.answer_format = body.answer_format;
  return out;
}

/** POST /api/v1/tqa/ask with stream: true; yields the events as they arrive. A refusal (a 4xx
 *  with the server's {error: {code, message}}) or an unreachable server throws an ApiError. */
export async function* askStream(body: AskBody, signal?: AbortSignal): AsyncGenerator<SseMessage> {
  const headers: Record<string, string> = { "Content-Type": "application/json", Accept: "text/event-stream" };
  const token = adminToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  let response: Response;
  try {
    response = await fetch(`${T}/ask`, { method: "POST", headers, body: JSON.stringify(askPayload(body)), signal });
  } catch (cause) {
    if (signal?.aborted) throw cause;
    throw new ApiError(0, "network", `The server could not be reached (${String(cause)}).`);
  }
  if (!response.ok) {
    const text = await response.text().catch(() => "");
    let error: { code?: string; message?: string } | undefined;
    try {
      error = (JSON.parse(text) as { error?: { code?: string; message?: string } }).error;
    } catch {
      // not JSON (a proxy's page): the raw text is the message
    }
    if (error?.code === "admin_token_required" || error?.code === "admin_token_invalid") {
      window.dispatchEvent(new Event(ADMIN_TOKEN_EVENT));
    }
    throw new ApiError(
      response.status,
      error?.code ?? `http_${response.status}`,
      error?.message ?? (text.slice(0, 300) || response.statusText),
      (error ?? {}) as Record<string, unknown>,
    );
  }
  if (!response.body) throw new ApiError(response.status, "no_stream", "The server answered without a stream.");
  yield* readSse(response.body, new SseParser(), undefined, signal);
}
