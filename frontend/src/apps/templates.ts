// The template gallery's data (GET /api/v1/templates) and making an app from one: the app,
// then its first version; a template that is not valid on its own (an agent that expects
// its caller's tables, say) becomes the new app's draft instead, to finish in the editor.

import { api } from "../api/client";
import type { components } from "../api/schema";
import { ApiError, request } from "../api/transport";
import type { AppOut, FlowDocument } from "../api/types";

export type TemplateOut = components["schemas"]["TemplateOut"];
/** The server types a flow as a JSON object; the editor reads it as a FlowDocument. */
type TemplateDetail = Omit<components["schemas"]["TemplateDetail"], "flow"> & { flow: FlowDocument };

export const listTemplates = () => request<TemplateOut[]>("GET", "/api/v1/templates");

/** A slug from the template's name not yet taken by an app. */
export function freeSlug(base: string, taken: ReadonlySet<string>): string {
  const root = base.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 50) || "app";
  if (!taken.has(root)) return root;
  for (let n = 2; ; n++) if (!taken.has(`${root}-${n}`)) return `${root}-${n}`;
}

export async function createFromTemplate(template: TemplateOut, taken: ReadonlySet<string>): Promise<AppOut> {
  const detail = await request<TemplateDetail>("GET", `/api/v1/templates/${template.id}`);
  const app = await api.createApp(freeSlug(template.name, taken), template.name.replace(/_/g, " "), template.description);
  try {
    await api.createVersion(app.slug, { flow: detail.flow, note: `from the template ${template.id}`, parent_id: null });
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 422)) throw e;
    await request("PUT", `/api/v1/apps/${app.slug}/draft`, { flow: detail.flow, base_version_id: null });
  }
  return app;
}
