// The embedding service's calls (docs/api.md, "examples"): namespaces, examples, search.

import { request } from "../api/transport";
import type { ExampleRecord } from "./records";

export interface Namespace {
  name: string;
  embedder: string;
  dimension: number;
  key_fields: string[];
  text_field: string;
  fields: string[];
  count?: number | null;
}

export interface Example {
  id: string;
  payload: ExampleRecord;
}

export interface Hit extends Example {
  score: number;
}

const N = "/api/v1/namespaces";
const e = encodeURIComponent;

export const examplesApi = {
  namespaces: () => request<Namespace[]>("GET", N),
  namespace: (name: string) => request<Namespace>("GET", `${N}/${e(name)}`),
  createNamespace: (body: { name: string; embedder: string; key_fields: string[]; text_field: string }) => request<Namespace>("POST", N, body),
  deleteNamespace: (name: string) => request<void>("DELETE", `${N}/${e(name)}`),
  upsert: (name: string, examples: ExampleRecord[]) => request<{ ids: string[] }>("POST", `${N}/${e(name)}/examples`, { examples }),
  list: (name: string, limit = 50) => request<{ items: Example[]; next_offset: string | null }>("GET", `${N}/${e(name)}/examples?limit=${limit}`),
  deleteExample: (name: string, id: string) => request<void>("DELETE", `${N}/${e(name)}/examples/${e(id)}`),
  query: (name: string, text: string, k: number) => request<Hit[]>("POST", `${N}/${e(name)}/query`, { text, k }),
};
