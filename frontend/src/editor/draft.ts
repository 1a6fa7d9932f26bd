// Unsaved work, kept in localStorage per app on every edit, so a reload (or a crash) loses
// nothing: the editor restores it with a notice and an option to discard.

import type { FlowDocument } from "../api/types";

export interface Draft {
  flow: FlowDocument;
  /** The saved version the draft started from (null: the app had none). */
  baseVersionId: string | null;
  baseNumber: number | null;
  savedAt: string;
}

const PREFIX = "dagwright.draft.";

export function draftKey(slug: string): string {
  return PREFIX + slug;
}

export function saveDraft(slug: string, draft: Omit<Draft, "savedAt"> & { savedAt?: string }, storage: Storage = localStorage): boolean {
  try {
    const full: Draft = { ...draft, savedAt: draft.savedAt ?? new Date().toISOString() };
    storage.setItem(draftKey(slug), JSON.stringify(full));
    return true;
  } catch {
    return false; // storage full or disabled: the unsaved badge still warns
  }
}

export function loadDraft(slug: string, storage: Storage = localStorage): Draft | null {
  let text: string | null;
  try {
    text = storage.getItem(draftKey(slug));
  } catch {
    return null;
  }
  if (!text) return null;
  try {
    const parsed = JSON.parse(text) as Partial<Draft>;
    const flow = parsed.flow as FlowDocument | undefined;
    if (!flow || flow.format !== "dagwright.flow" || !Array.isArray(flow.nodes ?? [])) return null;
    return {
      flow,
      baseVersionId: parsed.baseVersionId ?? null,
      baseNumber: parsed.baseNumber ?? null,
      savedAt: parsed.savedAt ?? "",
    };
  } catch {
    return null;
  }
}

export function clearDraft(slug: string, storage: Storage = localStorage): void {
  try {
    storage.removeItem(draftKey(slug));
  } catch {
    // nothing to do
  }
}

/** The slugs of apps with a draft (the app list marks them). */
export function draftSlugs(storage: Storage = localStorage): Set<string> {
  const out = new Set<string>();
  try {
    for (let i = 0; i < storage.length; i++) {
      const key = storage.key(i);
      if (key?.startsWith(PREFIX)) out.add(key.slice(PREFIX.length));
    }
  } catch {
    // storage disabled
  }
  return out;
}

/** The flow as a canonical string: two flows with the same content compare equal. */
export function flowFingerprint(flow: FlowDocument): string {
  return JSON.stringify(flow, (_key, value: unknown) => {
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const sorted: Record<string, unknown> = {};
      for (const k of Object.keys(value as Record<string, unknown>).sort()) sorted[k] = (value as Record<string, unknown>)[k];
      return sorted;
    }
    return value;
  });
}
