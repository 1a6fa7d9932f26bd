// The AutoTQA calls, through the one transport (api/transport.ts): the list and the replay as
// JSON; the ask as a POST answered with server-sent events (EventSource cannot POST).

import type { SseMessage } from "../api/sse";
import { request, streamEvents } from "../api/transport";
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
export function askStream(body: AskBody, signal?: AbortSignal): AsyncGenerator<SseMessage> {
  return streamEvents(`${T}/ask`, { json: askPayload(body), signal });
}
