// After publishing: the endpoint's URL, ready-to-copy calls, and the app's API keys (a new
// key is shown once, with a warning).

import { useCallback, useEffect, useMemo, useState } from "react";
import { api } from "../api/client";
import type { AppOut, KeyCreated, KeyOut } from "../api/types";
import { toastError } from "../ui/toast";
import { CopyButton, Modal } from "../ui/Modal";
import { buildSnippets } from "./snippets";

interface Props {
  app: AppOut;
  publishedNumber: number | null;
  inputs: Record<string, unknown>;
  onClose: () => void;
}

const TABS = [
  ["curl", "curl"],
  ["python", "Python (httpx)"],
  ["openai", "Python (openai)"],
  ["javascript", "JavaScript"],
] as const;

export function PublishDialog({ app, publishedNumber, inputs, onClose }: Props) {
  const [tab, setTab] = useState<(typeof TABS)[number][0]>("curl");
  const [created, setCreated] = useState<KeyCreated | null>(null);
  const snippets = useMemo(
    () => buildSnippets(window.location.origin, app.slug, inputs, created?.key ?? "dw_YOUR_KEY"),
    [app.slug, inputs, created],
  );
  return (
    <Modal title={`Publish “${app.name}”`} onClose={onClose} testId="publish-dialog" wide>
      {app.published_version_id ? (
        <p data-testid="publish-status">
          Published{publishedNumber ? ` version ${publishedNumber}` : ""}. Calls need an API key of this app.
        </p>
      ) : (
        <p className="field-message">Not published yet.</p>
      )}
      <div className="field">
        <div className="field-title">Endpoint</div>
        <div className="row">
          <code className="url" data-testid="publish-url">
            POST {snippets.url}
          </code>
          <CopyButton text={snippets.url} testId="copy-url" />
        </div>
        <div className="field-help">
          Body <code>{`{"inputs": {...}}`}</code>; add <code>"stream": true</code> for server-sent events or <code>"async": true</code> for a run id to poll. OpenAI clients: base URL{" "}
          <code>{window.location.origin}/v1</code>, model <code>{app.slug}</code>.
        </div>
      </div>
      <div className="tabs" role="tablist">
        {TABS.map(([id, label]) => (
          <button key={id} role="tab" aria-selected={tab === id} className={`tab${tab === id ? " active" : ""}`} data-testid={`snippet-tab-${id}`} onClick={() => setTab(id)}>
            {label}
          </button>
        ))}
      </div>
      <div className="snippet">
        <pre data-testid={`snippet-${tab}`}>{snippets[tab]}</pre>
        <CopyButton text={snippets[tab]} testId={`copy-snippet-${tab}`} />
      </div>
      <KeyManager app={app} created={created} onCreated={setCreated} />
    </Modal>
  );
}

export function KeyManager({ app, created, onCreated }: { app: AppOut; created: KeyCreated | null; onCreated: (k: KeyCreated | null) => void }) {
  const [keys, setKeys] = useState<KeyOut[] | null>(null);
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  const load = useCallback(() => {
    api.listKeys(app.slug).then(setKeys, (e: unknown) => toastError(e, "Could not list the API keys"));
  }, [app.slug]);
  useEffect(load, [load]);
  const create = async () => {
    setBusy(true);
    try {
      const key = await api.createKey(app.slug, name.trim() || `key ${(keys?.length ?? 0) + 1}`);
      onCreated(key);
      setName("");
      load();
    } catch (e) {
      toastError(e, "Could not create the key");
    } finally {
      setBusy(false);
    }
  };
  const revoke = async (k: KeyOut) => {
    if (!window.confirm(`Revoke the key “${k.name}” (${k.prefix}…)? Callers using it will be refused.`)) return;
    try {
      await api.deleteKey(app.slug, k.id);
      if (created?.id === k.id) onCreated(null);
      load();
    } catch (e) {
      toastError(e, "Could not revoke the key");
    }
  };
  const live = (keys ?? []).filter((k) => !k.revoked_at);
  return (
    <section className="keys" data-testid="keys">
      <h3>API keys</h3>
      {created && (
        <div className="key-created" role="alert">
          <div className="warning">Copy this key now: it is shown this once and cannot be read again.</div>
          <div className="row">
            <code className="key-value" data-testid="key-value">
              {created.key}
            </code>
            <CopyButton text={created.key} testId="copy-key" />
          </div>
        </div>
      )}
      <div className="row">
        <input className="input" placeholder="Key name (e.g. ci)" aria-label="Key name" data-testid="key-name" value={name} onChange={(e) => setName(e.target.value)} onKeyDown={(e) => e.key === "Enter" && create()} />
        <button className="btn btn-primary" data-testid="create-key" disabled={busy} onClick={create}>
          Create key
        </button>
      </div>
      {keys === null ? (
        <p className="muted">Loading keys…</p>
      ) : live.length === 0 ? (
        <p className="muted">No keys yet: the endpoint refuses every call until one is created.</p>
      ) : (
        <table className="table">
          <thead>
            <tr>
              <th>Name</th>
              <th>Key</th>
              <th>Created</th>
              <th>Last used</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {live.map((k) => (
              <tr key={k.id} data-testid={`key-${k.id}`}>
                <td>{k.name}</td>
                <td className="mono">{k.prefix}…</td>
                <td>{formatTime(k.created_at)}</td>
                <td>{k.last_used_at ? formatTime(k.last_used_at) : "never"}</td>
                <td>
                  <button className="btn btn-small btn-danger" data-testid={`revoke-key-${k.id}`} onClick={() => revoke(k)}>
                    Revoke
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

export function formatTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" });
}
