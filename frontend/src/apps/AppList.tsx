// The app list: create, rename, delete, import (a file; a bad one says why), export.

import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../api/client";
import { ApiError } from "../api/transport";
import type { AppOut } from "../api/types";
import { clearDraft, draftSlugs } from "../editor/draft";
import { downloadJson } from "../ui/download";
import { formatTime } from "../editor/PublishDialog";
import { navigate } from "../router";
import { TemplateGallery } from "./TemplateGallery";
import { Modal } from "../ui/Modal";
import { describeError, toast, toastError } from "../ui/toast";

export function slugify(text: string): string {
  return text
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 60);
}

export function AppList() {
  const [apps, setApps] = useState<AppOut[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [creating, setCreating] = useState(false);
  const [renaming, setRenaming] = useState<{ slug: string; name: string } | null>(null);
  const [importError, setImportError] = useState<{ code: string; message: string; file: string } | null>(null);
  const [drafts, setDrafts] = useState<Set<string>>(() => draftSlugs());
  const fileRef = useRef<HTMLInputElement>(null);

  const loadApps = useCallback(() => {
    api.listApps().then(
      (page) => {
        setApps(page.items);
        setError(null);
      },
      (e: unknown) => setError(e),
    );
  }, []);
  useEffect(loadApps, [loadApps]); // the drafts were read as the list mounted
  const load = useCallback(() => {
    loadApps();
    setDrafts(draftSlugs());
  }, [loadApps]);

  const remove = async (app: AppOut) => {
    if (!window.confirm(`Delete the app “${app.name}” with all its versions, keys and runs? This cannot be undone.`)) return;
    try {
      await api.deleteApp(app.slug);
      clearDraft(app.slug);
      toast("success", `Deleted ${app.name}`);
      load();
    } catch (e) {
      toastError(e, "Could not delete the app");
    }
  };

  const rename = async () => {
    if (!renaming) return;
    const name = renaming.name.trim();
    if (!name) return;
    try {
      await api.updateApp(renaming.slug, { name });
      setRenaming(null);
      load();
    } catch (e) {
      toastError(e, "Could not rename the app");
    }
  };

  const exportApp = async (slug: string) => {
    try {
      downloadJson(`${slug}.dagwright.json`, await api.exportApp(slug));
    } catch (e) {
      toastError(e, "Could not export the app");
    }
  };

  const importFile = async (file: File) => {
    setImportError(null);
    let document: unknown;
    try {
      document = JSON.parse(await file.text());
    } catch (e) {
      setImportError({ code: "invalid_json", message: `the file is not JSON: ${e instanceof Error ? e.message : String(e)}`, file: file.name });
      return;
    }
    const importOnce = (slug?: string) => api.importApp(document, slug);
    try {
      let app: AppOut;
      try {
        app = await importOnce();
      } catch (e) {
        if (!(e instanceof ApiError && e.code === "slug_taken")) throw e;
        const original = (document as { app?: { slug?: string } })?.app?.slug ?? "app";
        const slug = window.prompt(`An app “${original}” exists already. Import it under another slug:`, `${original}-copy`);
        if (!slug) return;
        app = await importOnce(slug);
      }
      toast("success", `Imported ${app.name}`);
      load();
    } catch (e) {
      const { code, message } = describeError(e);
      setImportError({ code, message, file: file.name });
    }
  };

  return (
    <div className="app-list-page">
      <header className="page-head">
        <h1>
          dagwright <span className="muted">apps</span>
        </h1>
        <span className="spacer" />
        <a className="btn" href="#/tqa" data-testid="nav-tqa" title="Ask questions over the data sources' tables (AutoTQA)">
          Ask your tables
        </a>
        <a className="btn" href="#/examples" data-testid="nav-examples" title="Few-shot example namespaces: upload, search, delete">
          Examples
        </a>
        <a className="btn" href="#/evaluations" data-testid="nav-evaluations" title="Datasets, evaluations, reports">
          Evaluations
        </a>
        <a className="btn" href="#/interfaces" data-testid="nav-interfaces" title="Data-Copilot's interfaces per data source: review, edit, delete">
          Interfaces
        </a>
        <a className="btn" href="#/waiting" data-testid="nav-waiting" title="Runs paused at a human_input node, waiting for an answer">
          Waiting for you
        </a>
        <button className="btn" data-testid="import-app" onClick={() => fileRef.current?.click()}>
          Import…
        </button>
        <input
          ref={fileRef}
          type="file"
          accept=".json,application/json"
          hidden
          data-testid="import-file"
          onChange={(e) => {
            const file = e.target.files?.[0];
            e.target.value = "";
            if (file) importFile(file);
          }}
        />
        <button className="btn btn-primary" data-testid="new-app" onClick={() => setCreating(true)}>
          New app
        </button>
      </header>
      {importError && (
        <div className="error-box" role="alert" data-testid="import-error">
          <strong>Could not import {importError.file}</strong>: <code>{importError.code}</code> {importError.message}
          <button className="icon-btn" aria-label="Dismiss" onClick={() => setImportError(null)}>
            ×
          </button>
        </div>
      )}
      {error ? (
        <div className="error-box" role="alert" data-testid="apps-error">
          <code>{describeError(error).code}</code> {describeError(error).message}
          <button className="btn btn-small" onClick={load}>
            Try again
          </button>
        </div>
      ) : apps === null ? (
        <p className="muted">Loading…</p>
      ) : apps.length === 0 ? (
        <div className="empty">
          <p>No apps yet.</p>
          <p className="muted">Create one, or import an exported app (a .json file).</p>
        </div>
      ) : (
        <table className="table apps-table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Slug</th>
              <th>Status</th>
              <th>Updated</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {apps.map((app) => (
              <tr key={app.id} data-testid={`app-${app.slug}`}>
                <td>
                  {renaming?.slug === app.slug ? (
                    <input
                      className="input"
                      autoFocus
                      aria-label="New name"
                      data-testid={`rename-input-${app.slug}`}
                      value={renaming.name}
                      onChange={(e) => setRenaming({ slug: app.slug, name: e.target.value })}
                      onBlur={rename}
                      onKeyDown={(e) => {
                        if (e.key === "Enter") rename();
                        if (e.key === "Escape") setRenaming(null);
                      }}
                    />
                  ) : (
                    <a href={`#/apps/${encodeURIComponent(app.slug)}`} data-testid={`open-app-${app.slug}`} className="app-link">
                      {app.name}
                    </a>
                  )}
                  {app.description && <div className="muted small">{app.description}</div>}
                </td>
                <td className="mono">{app.slug}</td>
                <td>
                  {app.published_version_id ? <span className="tag tag-published">published</span> : <span className="tag">draft</span>}
                  {drafts.has(app.slug) && (
                    <span className="unsaved small" title="Unsaved changes in this browser">
                      {" "}
                      ● unsaved
                    </span>
                  )}
                </td>
                <td className="small">{formatTime(app.updated_at)}</td>
                <td className="row end">
                  <button className="btn btn-small" data-testid={`rename-app-${app.slug}`} onClick={() => setRenaming({ slug: app.slug, name: app.name })}>
                    Rename
                  </button>
                  <button className="btn btn-small" data-testid={`export-app-${app.slug}`} onClick={() => exportApp(app.slug)}>
                    Export
                  </button>
                  <button className="btn btn-small btn-danger" data-testid={`delete-app-${app.slug}`} onClick={() => remove(app)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <TemplateGallery taken={new Set((apps ?? []).map((a) => a.slug))} />
      {creating && <NewAppDialog onClose={() => setCreating(false)} onCreated={(app) => navigate({ page: "editor", slug: app.slug, version: null })} />}
    </div>
  );
}

function NewAppDialog({ onClose, onCreated }: { onClose: () => void; onCreated: (app: AppOut) => void }) {
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const [slugEdited, setSlugEdited] = useState(false);
  const [description, setDescription] = useState("");
  const [error, setError] = useState<{ code: string; message: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const effectiveSlug = slugEdited ? slug : slugify(name);
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      const app = await api.createApp(effectiveSlug, name.trim() || effectiveSlug, description);
      onCreated(app);
    } catch (e) {
      setError(describeError(e));
    } finally {
      setBusy(false);
    }
  };
  return (
    <Modal title="New app" onClose={onClose} testId="new-app-dialog">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <div className="field">
          <label className="field-title" htmlFor="new-app-name">
            Name
          </label>
          <input id="new-app-name" className="input" autoFocus data-testid="new-app-name" value={name} onChange={(e) => setName(e.target.value)} />
        </div>
        <div className="field">
          <label className="field-title" htmlFor="new-app-slug">
            Slug (its URL name)
          </label>
          <input
            id="new-app-slug"
            className="input mono"
            data-testid="new-app-slug"
            value={effectiveSlug}
            onChange={(e) => {
              setSlugEdited(true);
              setSlug(e.target.value);
            }}
          />
          <div className="field-help">lowercase letters, digits and “-”</div>
        </div>
        <div className="field">
          <label className="field-title" htmlFor="new-app-description">
            Description
          </label>
          <input id="new-app-description" className="input" data-testid="new-app-description" value={description} onChange={(e) => setDescription(e.target.value)} />
        </div>
        {error && (
          <div className="error-box" role="alert" data-testid="new-app-error">
            <code>{error.code}</code> {error.message}
          </div>
        )}
        <div className="row end">
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" data-testid="new-app-create" disabled={busy || !effectiveSlug}>
            Create
          </button>
        </div>
      </form>
    </Modal>
  );
}
