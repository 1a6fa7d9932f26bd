// The Data-Copilot interface calls, through the editor's one fetch wrapper.

import { request } from "../api/transport";
import type { InterfaceDef, InterfaceEntry, SourceSummary, UncoveredRequest } from "./types";

const V = "/api/v1";
const e = encodeURIComponent;

export const interfacesApi = {
  sources: () => request<SourceSummary[]>("GET", `${V}/sources`),
  list: (source: string) => request<InterfaceEntry[]>("GET", `${V}/data-copilot/${e(source)}/interfaces`),
  save: (source: string, def: InterfaceDef) =>
    request<{ name: string; version: number; signature: string }>(
      "PUT",
      `${V}/data-copilot/${e(source)}/interfaces/${e(def.name)}`,
      def,
    ),
  remove: (source: string, name: string) =>
    request<unknown>("DELETE", `${V}/data-copilot/${e(source)}/interfaces/${e(name)}`),
  uncovered: (source: string) => request<UncoveredRequest[]>("GET", `${V}/data-copilot/${e(source)}/uncovered`),
};
