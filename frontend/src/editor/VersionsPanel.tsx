// Version history: every saved version with its note, author and time; open one, publish
// one, or diff two (listed here and highlighted on the canvas).

import { useCallback, useEffect, useState } from "react";
import { api } from "../api/client";
import type { AppOut, VersionDiff, VersionOut } from "../api/types";
import { toastError } from "../ui/toast";
import { edgeKey } from "./graph";
import { formatTime } from "./PublishDialog";

interface Props {
  app: AppOut;
  currentVersionId: string | null;
  refreshKey: number;
  onOpen: (number: number) => void;
  onPublish: (version: VersionOut) => void;
  onHighlight: (diff: VersionDiff, a: number, b: number) => void;
  onClose: () => void;
}

const PAGE = 50;

export function VersionsPanel({ app, currentVersionId, refreshKey, onOpen, onPublish, onHighlight, onClose }: Props) {
  const [versions, setVersions] = useState<VersionOut[] | null>(null);
  const [total, setTotal] = useState(0);
  const [a, setA] = useState<number | "">("");
  const [b, setB] = useState<number | "">("");
  const [diff, setDiff] = useState<{ diff: VersionDiff; a: number; b: number } | null>(null);

  const load = useCallback(
    (offset: number) => {
      api.listVersions(app.slug, offset, PAGE).then(
        (page) => {
          setTotal(page.total);
          setVersions((prev) => (offset === 0 ? page.items : [...(prev ?? []), ...page.items]));
          if (offset === 0 && page.items.length >= 2) {
            setB((x) => (x === "" ? page.items[0].number : x));
            setA((x) => (x === "" ? page.items[1].number : x));
          }
        },
        (e: unknown) => toastError(e, "Could not list the versions"),
      );
    },
    [app.slug],
  );
  useEffect(() => load(0), [load, refreshKey]);

  const runDiff = async () => {
    if (a === "" || b === "") return;
    try {
      const d = await api.diff(app.slug, a, b);
      setDiff({ diff: d, a, b });
    } catch (e) {
      toastError(e, "Could not diff the versions");
    }
  };

  return (
    <aside className="drawer" data-testid="versions-panel" aria-label="Version history">
      <div className="drawer-head">
        <h2>Versions</h2>
        <button className="icon-btn" aria-label="Close" data-testid="versions-close" onClick={onClose}>
          ×
        </button>
      </div>
      {versions === null ? (
        <p className="muted">Loading…</p>
      ) : versions.length === 0 ? (
        <p className="muted">No version saved yet: Save makes version 1.</p>
      ) : (
        <>
          <div className="diff-picker">
            <span>Diff</span>
            <select className="input" aria-label="From version" data-testid="diff-a" value={a} onChange={(e) => setA(Number(e.target.value))}>
              {versions.map((v) => (
                <option key={v.id} value={v.number}>
                  v{v.number}
                </option>
              ))}
            </select>
            <span>→</span>
            <select className="input" aria-label="To version" data-testid="diff-b" value={b} onChange={(e) => setB(Number(e.target.value))}>
              {versions.map((v) => (
                <option key={v.id} value={v.number}>
                  v{v.number}
                </option>
              ))}
            </select>
            <button className="btn btn-small" data-testid="diff-run" onClick={runDiff} disabled={a === "" || b === ""}>
              Compare
            </button>
          </div>
          {diff && <DiffView {...diff} onHighlight={() => onHighlight(diff.diff, diff.a, diff.b)} />}
          <ul className="version-list">
            {versions.map((v) => (
              <li key={v.id} className={`version${v.id === currentVersionId ? " current" : ""}`} data-testid={`version-${v.number}`}>
                <div className="version-head">
                  <strong>v{v.number}</strong>
                  {v.id === app.published_version_id && <span className="tag tag-published">published</span>}
                  {v.id === currentVersionId && <span className="tag">open</span>}
                  <span className="muted small">{formatTime(v.created_at)}</span>
                </div>
                <div className="version-note">{v.note || <span className="muted">(no note)</span>}</div>
                <div className="muted small">{v.author ? `by ${v.author}` : "author unknown"}</div>
                <div className="row">
                  <button className="btn btn-small" data-testid={`open-version-${v.number}`} onClick={() => onOpen(v.number)}>
                    Open
                  </button>
                  {v.id !== app.published_version_id && (
                    <button className="btn btn-small" data-testid={`publish-version-${v.number}`} onClick={() => onPublish(v)}>
                      Publish
                    </button>
                  )}
                </div>
              </li>
            ))}
          </ul>
          {versions.length < total && (
            <button className="btn btn-small" onClick={() => load(versions.length)}>
              More…
            </button>
          )}
        </>
      )}
    </aside>
  );
}

function DiffView({ diff, a, b, onHighlight }: { diff: VersionDiff; a: number; b: number; onHighlight: () => void }) {
  const { nodes, edges, meta } = diff;
  const empty = !nodes.added.length && !nodes.removed.length && !nodes.changed.length && !edges.added.length && !edges.removed.length && !Object.keys(meta ?? {}).length;
  return (
    <div className="diff" data-testid="diff">
      <div className="row">
        <strong>
          v{a} → v{b}
        </strong>
        <button className="btn btn-small" data-testid="diff-highlight" onClick={onHighlight} disabled={empty}>
          Highlight on canvas
        </button>
      </div>
      {empty && <p className="muted">No difference (moves are not changes).</p>}
      <ul>
        {nodes.added.map((id) => (
          <li key={`na-${id}`} className="diff-added" data-testid="diff-node-added">
            + node <code>{id}</code>
          </li>
        ))}
        {nodes.removed.map((id) => (
          <li key={`nr-${id}`} className="diff-removed" data-testid="diff-node-removed">
            − node <code>{id}</code>
          </li>
        ))}
        {nodes.changed.map((c) => (
          <li key={`nc-${c.id}`} className="diff-changed" data-testid="diff-node-changed">
            ~ node <code>{c.id}</code> <span className="muted">({c.fields.join(", ")})</span>
          </li>
        ))}
        {edges.added.map((e) => (
          <li key={`ea-${edgeKey(e)}`} className="diff-added" data-testid="diff-edge-added">
            + edge <code>{edgeLabel(e)}</code>
          </li>
        ))}
        {edges.removed.map((e) => (
          <li key={`er-${edgeKey(e)}`} className="diff-removed" data-testid="diff-edge-removed">
            − edge <code>{edgeLabel(e)}</code>
          </li>
        ))}
        {Object.entries(meta ?? {}).map(([k, v]) => (
          <li key={`m-${k}`} className="diff-changed">
            ~ {k}: “{v.from}” → “{v.to}”
          </li>
        ))}
      </ul>
    </div>
  );
}

function edgeLabel(e: { source: { node: string; port?: string }; target: { node: string; port?: string }; branch?: string | null }): string {
  return `${e.source.node}.${e.source.port ?? "output"}${e.branch ? ` [${e.branch}]` : ""} → ${e.target.node}.${e.target.port ?? ""}`;
}
