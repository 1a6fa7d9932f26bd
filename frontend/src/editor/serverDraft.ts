// The draft's copy on the server (GET/PUT/DELETE /api/v1/apps/{slug}/draft): work in progress,
// valid or not, survives another browser or cleared storage. localStorage stays the fast,
// offline copy; the newer of the two is restored.

import type { components } from "../api/schema";
import { ApiError, request } from "../api/transport";
import type { FlowDocument } from "../api/types";
import type { Draft } from "./draft";

/** The server types a flow as a JSON object; the editor reads it as a FlowDocument. */
type DraftOut = Omit<components["schemas"]["DraftOut"], "flow"> & { flow: FlowDocument };

const AUTOSAVE_MS = 800;
const timers = new Map<string, ReturnType<typeof setTimeout>>();
const path = (slug: string) => `/api/v1/apps/${encodeURIComponent(slug)}/draft`;

export async function fetchServerDraft(slug: string): Promise<Draft | null> {
  try {
    const d = await request<DraftOut>("GET", path(slug));
    return { flow: d.flow, baseVersionId: d.base_version_id ?? null, baseNumber: null, savedAt: d.updated_at };
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 0)) return null; // none, or offline
    throw e;
  }
}

/** Saves the draft a moment after the last edit (typing does not PUT per key). */
export function pushServerDraft(slug: string, draft: Omit<Draft, "savedAt">): void {
  clearTimeout(timers.get(slug));
  timers.set(
    slug,
    setTimeout(() => {
      timers.delete(slug);
      request("PUT", path(slug), { flow: draft.flow, base_version_id: draft.baseVersionId }).catch(() => {
        // offline: the localStorage copy keeps the work; the next edit tries again
      });
    }, AUTOSAVE_MS),
  );
}

export function dropServerDraft(slug: string): void {
  clearTimeout(timers.get(slug));
  timers.delete(slug);
  request("DELETE", path(slug)).catch(() => {
    // already gone or offline: a stale draft is offered on the next open and can be discarded
  });
}

/** The more recently saved of two drafts. */
export function newestDraft(a: Draft | null, b: Draft | null): Draft | null {
  if (!a || !b) return a ?? b;
  return Date.parse(b.savedAt) > Date.parse(a.savedAt) ? b : a;
}
