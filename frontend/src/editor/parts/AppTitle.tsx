// The app's name in the top bar (click to rename), its slug, the open version and whether
// the canvas has unsaved changes.

import { useState } from "react";
import { api } from "../../api/client";
import type { AppOut } from "../../api/types";
import { toastError } from "../../ui/toast";
import type { VersionRef } from "../hooks/useFlowDocument";

export function AppTitle({ app, onAppChange, baseVersion, openIsPublished, dirty }: {
  app: AppOut;
  onAppChange: (app: AppOut) => void;
  baseVersion: VersionRef | null;
  openIsPublished: boolean;
  dirty: boolean;
}) {
  const [renaming, setRenaming] = useState<string | null>(null);
  const commitRename = async () => {
    const name = renaming?.trim();
    setRenaming(null);
    if (!name || name === app.name) return;
    try {
      onAppChange(await api.updateApp(app.slug, { name }));
    } catch (e) {
      toastError(e, "Could not rename the app");
    }
  };
  return (
    <>
      {renaming !== null ? (
        <input
          className="input app-name-input"
          aria-label="App name"
          autoFocus
          data-testid="app-name-input"
          value={renaming}
          onChange={(e) => setRenaming(e.target.value)}
          onBlur={commitRename}
          onKeyDown={(e) => {
            if (e.key === "Enter") commitRename();
            if (e.key === "Escape") setRenaming(null);
          }}
        />
      ) : (
        <button className="app-name" data-testid="app-name" title="Rename" onClick={() => setRenaming(app.name)}>
          {app.name}
        </button>
      )}
      <span className="muted small mono">{app.slug}</span>
      <span className="version-label" data-testid="version-label">
        {baseVersion ? `v${baseVersion.number}` : "no version yet"}
        {openIsPublished && <span className="tag tag-published">published</span>}
      </span>
      {dirty && (
        <span className="unsaved" data-testid="unsaved" title="Unsaved changes (kept in this browser)">
          ● unsaved
        </span>
      )}
    </>
  );
}
