// Save the canvas as a new version, with a note and an author. A refusal (422 flow_invalid)
// lists every problem here and in the problems panel.

import { useState } from "react";
import { api } from "../../api/client";
import { ApiError } from "../../api/transport";
import type { FlowDocument, Problem, VersionOut } from "../../api/types";
import { Modal } from "../../ui/Modal";
import { toast } from "../../ui/toast";
import { tidyProblems } from "../problemView";

const AUTHOR_KEY = "dagwright.author";

// The author is remembered in this browser when storage allows; blocked or full storage
// must never cost the save.
function rememberedAuthor(): string {
  try {
    return localStorage.getItem(AUTHOR_KEY) ?? "";
  } catch {
    return "";
  }
}

function rememberAuthor(author: string): void {
  try {
    localStorage.setItem(AUTHOR_KEY, author);
  } catch {
    // storage blocked: typed again next time
  }
}

export function SaveDialog({ slug, flow, parentId, dirty, onClose, onSaved, onProblems }: {
  slug: string;
  flow: FlowDocument;
  parentId: string | null;
  dirty: boolean;
  onClose: () => void;
  onSaved: (v: VersionOut, flow: FlowDocument) => void;
  onProblems: (problems: Problem[]) => void;
}) {
  const [note, setNote] = useState("");
  const [author, setAuthor] = useState(rememberedAuthor);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<{ code: string; message: string; problems?: Problem[] } | null>(null);
  const submit = async () => {
    if (busy) return; // Ctrl+Enter while a save is under way would save a second version
    setBusy(true);
    setError(null);
    if (author) rememberAuthor(author);
    try {
      const v = await api.createVersion(slug, { flow, note, author: author || undefined, parent_id: parentId });
      toast("success", `Saved version ${v.number}`);
      onSaved(v, flow);
    } catch (e) {
      if (e instanceof ApiError) {
        const problems = Array.isArray(e.detail.problems) ? (e.detail.problems as Problem[]) : undefined;
        setError({ code: e.code, message: problems ? `The flow has ${problems.filter((p) => p.severity === "error").length} error(s); nothing was saved.` : e.message, problems });
        if (problems) onProblems(problems);
      } else setError({ code: "error", message: String(e) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title="Save a version" onClose={onClose} testId="save-dialog">
      {!dirty && parentId && <p className="muted">No change since the version you opened; saving makes an identical new version.</p>}
      <div className="field">
        <label className="field-title" htmlFor="save-note">
          Note
        </label>
        <textarea
          id="save-note"
          className="input"
          data-testid="save-note"
          autoFocus
          rows={3}
          placeholder="What changed?"
          value={note}
          onChange={(e) => setNote(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void submit();
          }}
        />
      </div>
      <div className="field">
        <label className="field-title" htmlFor="save-author">
          Author
        </label>
        <input id="save-author" className="input" data-testid="save-author" placeholder="optional" value={author} onChange={(e) => setAuthor(e.target.value)} />
      </div>
      {error && (
        <div className="error-box" role="alert" data-testid="save-error">
          <code>{error.code}</code> {error.message}
          {error.problems && (
            <ul className="problem-list compact">
              {tidyProblems(error.problems).map((p, i) => (
                <li key={i} className={`problem problem-${p.severity}`} title={p.code}>
                  {p.node ?? "The flow"}
                  {p.port ? ` (${p.port})` : ""}: {p.message}
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      <div className="row end">
        <button className="btn" onClick={onClose}>
          Cancel
        </button>
        <button className="btn btn-primary" data-testid="save-confirm" disabled={busy} onClick={() => void submit()}>
          {busy ? "Saving…" : "Save version"}
        </button>
      </div>
    </Modal>
  );
}
