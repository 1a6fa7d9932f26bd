// The bars under the top bar: a restored draft (discard or keep it), a newer draft of another
// version waiting to be restored, and the diff being painted on the canvas.

import type { Draft } from "../draft";
import { formatTime } from "../PublishDialog";

export function EditorNotices({ draftNotice, onDiscardDraft, onKeepDraft, pendingDraft, onRestorePending, diffLabel, onClearDiff }: {
  draftNotice: Draft | null;
  onDiscardDraft: () => void;
  onKeepDraft: () => void;
  pendingDraft: Draft | null;
  onRestorePending: () => void;
  diffLabel: string | null;
  onClearDiff: () => void;
}) {
  return (
    <div className="notices">
      {draftNotice && (
        <div className="notice" data-testid="draft-notice" role="status">
          Restored unsaved changes{draftNotice.savedAt ? ` from ${formatTime(draftNotice.savedAt)}` : ""}
          {draftNotice.baseNumber ? ` (based on v${draftNotice.baseNumber})` : ""}.
          <button className="btn btn-small" data-testid="discard-draft" onClick={onDiscardDraft}>
            Discard them
          </button>
          <button className="btn btn-small btn-ghost" onClick={onKeepDraft}>
            Keep
          </button>
        </div>
      )}
      {pendingDraft && (
        <div className="notice" data-testid="pending-draft" role="status">
          This app has unsaved changes based on v{pendingDraft.baseNumber ?? "?"}, saved {formatTime(pendingDraft.savedAt)}.
          <button className="btn btn-small" data-testid="restore-draft" onClick={onRestorePending}>
            Restore them
          </button>
        </div>
      )}
      {diffLabel && (
        <div className="notice notice-diff" data-testid="diff-notice">
          Highlighting {diffLabel}: <span className="diff-added">added</span> · <span className="diff-changed">changed</span> · <span className="diff-removed">removed</span>
          <button className="btn btn-small" data-testid="diff-clear" onClick={onClearDiff}>
            Clear
          </button>
        </div>
      )}
    </div>
  );
}
