// Unsaved work is never lost: a changed document is kept as a draft in this browser and on
// the server; leaving the app (in-app navigation, back button, closing the tab) asks first.
// This hook is the drafts' one owner: it drops both copies when the document is no longer
// dirty (a save) and when the user discards them, so each drop is one DELETE.

import { type RefObject, useCallback, useEffect, useState } from "react";
import type { FlowDocument } from "../../api/types";
import { setLeaveGuard } from "../../router";
import { type Draft, clearDraft, saveDraft } from "../draft";
import { dropServerDraft, pushServerDraft } from "../serverDraft";
import type { VersionRef } from "./useFlowDocument";

export function useDrafts(args: {
  slug: string;
  flow: FlowDocument;
  dirty: boolean;
  dirtyRef: RefObject<boolean>;
  baseVersion: VersionRef | null;
  revision: number;
  restored: Draft | null;
}): { draftNotice: Draft | null; setDraftNotice: (d: Draft | null) => void; discardDraft: () => void } {
  const { slug, flow, dirty, dirtyRef, baseVersion, revision, restored } = args;
  // A restored draft that equals its version (once normalised) is nothing to mention.
  const [draftNotice, setDraftNotice] = useState<Draft | null>(() => (restored && dirty ? restored : null));

  useEffect(() => {
    if (dirty) {
      const draft = { flow, baseVersionId: baseVersion?.id ?? null, baseNumber: baseVersion?.number ?? null };
      saveDraft(slug, draft);
      pushServerDraft(slug, draft);
    } else if (revision > 0 || restored) {
      // Saved (or edited back to the version): nothing unsaved to keep. A pending draft of
      // another version stays until the user acts.
      clearDraft(slug);
      dropServerDraft(slug);
    }
  }, [flow, dirty, slug, baseVersion, revision, restored]);

  useEffect(() => {
    setLeaveGuard(() => (dirtyRef.current ? "This app has unsaved changes. Leave anyway? (They stay in this browser as a draft.)" : null));
    const onBeforeUnload = (e: BeforeUnloadEvent) => {
      if (!dirtyRef.current) return;
      e.preventDefault();
      e.returnValue = "";
    };
    window.addEventListener("beforeunload", onBeforeUnload);
    return () => {
      setLeaveGuard(null);
      window.removeEventListener("beforeunload", onBeforeUnload);
    };
  }, [dirtyRef]);

  // The user threw the changes away (the editor then reopens its version).
  const discardDraft = useCallback(() => {
    clearDraft(slug);
    dropServerDraft(slug);
    setDraftNotice(null);
  }, [slug]);

  return { draftNotice, setDraftNotice, discardDraft };
}
