// Publishing a saved version (the app's endpoint), and what the dialogs around it show.

import { useCallback, useState } from "react";
import { api } from "../../api/client";
import type { AppOut } from "../../api/types";
import { toast, toastError } from "../../ui/toast";
import type { VersionRef } from "./useFlowDocument";

export interface Publishing {
  /** Publish `version` (default: the open one) and show the API dialog. */
  publish: (version?: VersionRef | null) => Promise<void>;
  /** The version this session published, if any. */
  publishedNumber: number | null;
  showPublish: boolean;
  setShowPublish: (show: boolean) => void;
  /** The "save, then publish" dialog for unsaved work. */
  preparing: boolean;
  setPreparing: (show: boolean) => void;
  /** Bumped when the list of versions changed (the versions panel reloads). */
  versionsKey: number;
  versionsChanged: () => void;
}

export function usePublishing(app: AppOut, baseVersion: VersionRef | null, onAppChange: (app: AppOut) => void): Publishing {
  const [preparing, setPreparing] = useState(false);
  const [showPublish, setShowPublish] = useState(false);
  const [publishedNumber, setPublishedNumber] = useState<number | null>(null);
  const [versionsKey, setVersionsKey] = useState(0);
  const versionsChanged = useCallback(() => setVersionsKey((k) => k + 1), []);

  const publish = useCallback(
    async (version: VersionRef | null = baseVersion) => {
      if (!version) {
        toast("warning", "Save a version first", "Publishing makes a saved version the app's endpoint.");
        return;
      }
      try {
        const updated = await api.publish(app.slug, version.id);
        onAppChange(updated);
        versionsChanged();
        setPublishedNumber(version.number);
        // The dialog says what was published; a toast would cover its first line.
        setPreparing(false);
        setShowPublish(true);
      } catch (e) {
        toastError(e, "Could not publish");
      }
    },
    [app.slug, baseVersion, onAppChange, versionsChanged],
  );

  return { publish, publishedNumber, showPublish, setShowPublish, preparing, setPreparing, versionsKey, versionsChanged };
}
