// The models the server can call (GET /api/v1/models), fetched once per page: the LLM form's
// model picker lists them.

import type { components } from "./schema";
import { request } from "./transport";

export type ModelsOut = components["schemas"]["ModelsOut"];

let cached: Promise<ModelsOut> | null = null;

export function fetchModels(): Promise<ModelsOut> {
  cached ??= request<ModelsOut>("GET", "/api/v1/models").catch((e: unknown) => {
    cached = null; // a failed look-up is asked again next time
    throw e;
  });
  return cached;
}
