// The evaluation calls, through the one transport (api/transport.ts).

import { request, upload } from "../api/transport";
import type { Page } from "../api/types";
import type { Comparison, DatasetSummary, EvaluationRecord, Report, StartBody } from "./types";

const V = "/api/v1";
const e = encodeURIComponent;

export const evalApi = {
  datasets: () => request<DatasetSummary[]>("GET", `${V}/datasets`),
  importDataset: (body: { name: string; kind: string; path: string; split: string }) =>
    request<DatasetSummary>("POST", `${V}/datasets`, body),
  /** The newest evaluations (one page: the list shows how many there are in all). */
  evaluations: () => request<Page<EvaluationRecord>>("GET", `${V}/evaluations?limit=100`),
  evaluation: (id: string) => request<EvaluationRecord>("GET", `${V}/evaluations/${e(id)}`),
  start: (body: StartBody) => request<EvaluationRecord>("POST", `${V}/evaluations`, startPayload(body)),
  cancel: (id: string) => request<unknown>("POST", `${V}/evaluations/${e(id)}/cancel`),
  report: (id: string) => request<Report>("GET", `${V}/evaluations/${e(id)}/report`),
  compare: (a: string, b: string) => request<Comparison>("GET", `${V}/evaluations/compare?a=${e(a)}&b=${e(b)}`),
  feedback: (runId: string, body: { score: number; correction?: string }) =>
    request<{ id: string; example_namespace: string | null }>("POST", `${V}/runs/${e(runId)}/feedback`, body),
  upload: async (name: string, kind: string, file: File) => {
    const format = file.name.endsWith(".csv") ? "csv" : file.name.endsWith(".tsv") ? "tsv" : "jsonl";
    return upload<DatasetSummary>(`${V}/datasets/${e(name)}/upload?kind=${e(kind)}&format=${format}`, await file.text());
  },
};

/** The request's body as the server wants it: empty optional fields left out. */
export function startPayload(body: StartBody): Record<string, unknown> {
  const out: Record<string, unknown> = {
    app: body.app.trim(),
    dataset: body.dataset,
    split: body.split || "dev",
    concurrency: body.concurrency,
  };
  if (body.version?.trim()) out.version = body.version.trim();
  if (body.limit) out.limit = body.limit;
  return out;
}

/** The score an evaluation is known by (its metric's primary aggregate), or null. */
export function primaryScore(record: EvaluationRecord): number | null {
  const aggregate = record.aggregate;
  if (!aggregate) return null;
  const value = aggregate[String(aggregate.primary)];
  return typeof value === "number" ? value : null;
}
