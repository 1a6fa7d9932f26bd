// Publishing with unsaved work on the canvas: the dialog itself says what the canvas changes
// against the saved version and offers to save it as a new version and publish that, or to
// publish the saved version as it is. (Publishing used to take the saved version silently,
// with only a toast, over the dialog, to say the canvas was not part of it.)

import { useEffect, useState } from "react";
import { api } from "../api/client";
import { ApiError } from "../api/transport";
import type { FlowDocument, Problem, VersionOut } from "../api/types";
import { Modal } from "../ui/Modal";
import { type CanvasDiff, canvasDiff } from "./canvasDiff";
import { tidyProblems } from "./problemView";

interface Props {
  slug: string;
  flow: FlowDocument;
  base: { id: string; number: number } | null;
  onSaved: (v: VersionOut, doc: FlowDocument) => void;
  onPublish: (version: { id: string; number: number }) => Promise<void>;
  onClose: () => void;
}

function DiffList({ diff }: { diff: CanvasDiff }) {
  const rows: string[] = [];
  if (diff.added.length) rows.push(`added: ${diff.added.join(", ")}`);
  if (diff.removed.length) rows.push(`removed: ${diff.removed.join(", ")}`);
  if (diff.changed.length) rows.push(`changed: ${diff.changed.join(", ")}`);
  if (diff.wiresAdded) rows.push(`${diff.wiresAdded} wire(s) added`);
  if (diff.wiresRemoved) rows.push(`${diff.wiresRemoved} wire(s) removed`);
  return (
    <ul className="publish-diff" data-testid="publish-diff">
      {rows.length ? rows.map((r) => <li key={r}>{r}</li>) : <li>only positions moved</li>}
    </ul>
  );
}

export function PublishPrepare({ slug, flow, base, onSaved, onPublish, onClose }: Props) {
  const [baseFlow, setBaseFlow] = useState<FlowDocument | null | undefined>(base ? undefined : null);
  const [busy, setBusy] = useState(false);
  const [problems, setProblems] = useState<Problem[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (!base) return;
    api.getVersion(slug, base.id).then(
      (v) => setBaseFlow(v.flow),
      () => setBaseFlow(null),
    );
  }, [slug, base]);
  const saveAndPublish = async () => {
    setBusy(true);
    setProblems(null);
    setError(null);
    try {
      const v = await api.createVersion(slug, { flow, note: "saved to publish", parent_id: base?.id ?? null });
      onSaved(v, flow);
      await onPublish({ id: v.id, number: v.number });
    } catch (e) {
      if (e instanceof ApiError && Array.isArray(e.detail?.problems)) setProblems(tidyProblems(e.detail.problems as Problem[]));
      else setError(e instanceof Error ? e.message : String(e));
      setBusy(false);
    }
  };
  return (
    <Modal title="Publish the canvas?" onClose={onClose} testId="publish-prepare">
      <p>
        {base ? `The canvas has changes that are not in v${base.number}, the saved version:` : "Nothing is saved yet: publishing saves the canvas as v1 first."}
      </p>
      {base && baseFlow !== undefined && <DiffList diff={canvasDiff(baseFlow, flow)} />}
      {problems && (
        <div className="error-box" role="alert" data-testid="publish-prepare-error">
          The canvas cannot be saved as a version yet:
          <ul className="problem-list compact">
            {problems.map((p, i) => (
              <li key={i}>
                {p.node ?? "The flow"}: {p.message}
              </li>
            ))}
          </ul>
        </div>
      )}
      {error && (
        <div className="error-box" role="alert" data-testid="publish-prepare-error">
          {error}
        </div>
      )}
      <div className="row dialog-actions">
        <button className="btn btn-accent" data-testid="save-and-publish" disabled={busy} onClick={() => void saveAndPublish()}>
          Save as v{(base?.number ?? 0) + 1} and publish
        </button>
        {base && (
          <button className="btn" data-testid="publish-saved" disabled={busy} onClick={() => void onPublish(base)}>
            Publish v{base.number} as it is
          </button>
        )}
      </div>
    </Modal>
  );
}
