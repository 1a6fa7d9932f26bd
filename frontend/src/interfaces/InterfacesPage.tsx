// Data-Copilot's interface libraries, per data source: each interface's signature (name,
// description, typed inputs, table output), the tables it reads and its code; edit the
// description and code (saved as a new version), delete it, and the requests no interface
// covered yet (the next design round's work).

import { useCallback, useEffect, useState } from "react";
import { describeError } from "../ui/toast";
import { interfacesApi } from "./api";
import { draftOf, draftProblem, edited, inputLabel, isChanged, type Draft } from "./logic";
import type { InterfaceEntry, SourceSummary, UncoveredRequest } from "./types";
import "./interfaces.css";

type Problem = { code: string; message: string };

export function InterfacesPage({ source }: { source: string | null }) {
  const [sources, setSources] = useState<SourceSummary[]>([]);
  const [error, setError] = useState<Problem | null>(null);
  useEffect(() => {
    interfacesApi.sources().then(setSources, (e: unknown) => setError(describeError(e)));
  }, []);
  return (
    <div className="dc-page">
      <header className="page-head">
        <h1>
          <a href="#/">dagwright</a> <span className="muted">Data-Copilot interfaces</span>
        </h1>
      </header>
      {error && (
        <p className="dc-error" role="alert">
          {error.message} <code>{error.code}</code>
        </p>
      )}
      <div className="dc-layout">
        <nav className="dc-sources" aria-label="Data sources">
          <h2>Sources</h2>
          {sources.length === 0 && <p className="muted">No data sources.</p>}
          <ul>
            {sources.map((s) => (
              <li key={s.name} className={s.name === source ? "selected" : ""}>
                <a href={`#/interfaces/${encodeURIComponent(s.name)}`} data-testid={`source-${s.name}`}>
                  {s.name}
                </a>{" "}
                <span className="muted">{s.kind}</span>
              </li>
            ))}
          </ul>
        </nav>
        <main className="dc-main">
          {source ? <SourceLibrary key={source} source={source} /> : <p className="muted">Pick a data source.</p>}
        </main>
      </div>
    </div>
  );
}

function SourceLibrary({ source }: { source: string }) {
  const [entries, setEntries] = useState<InterfaceEntry[] | null>(null);
  const [uncovered, setUncovered] = useState<UncoveredRequest[]>([]);
  const [error, setError] = useState<Problem | null>(null);
  const load = useCallback(() => {
    Promise.all([interfacesApi.list(source), interfacesApi.uncovered(source)]).then(
      ([list, open]) => {
        setEntries(list);
        setUncovered(open);
      },
      (e: unknown) => setError(describeError(e)),
    );
  }, [source]);
  useEffect(load, [load]);
  return (
    <>
      {error && (
        <p className="dc-error" role="alert">
          {error.message} <code>{error.code}</code>
        </p>
      )}
      <section aria-label="Interfaces">
        <h2>Interfaces of {source}</h2>
        {entries?.length === 0 && (
          <p className="muted">None yet: the data-copilot-design app builds a library from requests (docs/methods.md).</p>
        )}
        {entries?.map((entry) => (
          <InterfaceCard key={`${entry.name}@${entry.version}`} source={source} entry={entry} onChanged={load} />
        ))}
      </section>
      <section aria-label="Uncovered requests">
        <h2>Uncovered requests</h2>
        {uncovered.length === 0 ? (
          <p className="muted">None: every request so far was covered.</p>
        ) : (
          <ul className="dc-uncovered">
            {uncovered.map((u) => (
              <li key={u.id} data-testid="uncovered">
                {u.request} <span className="muted">— {u.reason}</span>
              </li>
            ))}
          </ul>
        )}
      </section>
    </>
  );
}

function InterfaceCard({ source, entry, onChanged }: { source: string; entry: InterfaceEntry; onChanged: () => void }) {
  const def = entry.interface;
  const [draft, setDraft] = useState<Draft | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<Problem | null>(null);
  const problem = draft ? draftProblem(def, draft) : null;

  const act = (work: Promise<unknown>, after: () => void) => {
    setBusy(true);
    setError(null);
    work.then(
      () => (after(), onChanged()),
      (e: unknown) => setError(describeError(e)),
    ).finally(() => setBusy(false));
  };
  const save = () => draft && act(interfacesApi.save(source, edited(def, draft)), () => setDraft(null));
  const remove = () => {
    if (window.confirm(`Delete the interface ${def.name} of ${source}? Plans can no longer call it.`)) {
      act(interfacesApi.remove(source, def.name), () => undefined);
    }
  };

  return (
    <article className="dc-card" data-testid={`interface-${def.name}`}>
      <header className="dc-card-head">
        <code className="dc-signature">{entry.signature}</code>
        <span className="muted">
          v{entry.version} · {entry.origin}
        </span>
        <span className="dc-spacer" />
        {!draft && (
          <button className="btn btn-small" disabled={busy} onClick={() => setDraft(draftOf(def))}>
            Edit
          </button>
        )}
        <button className="btn btn-small" disabled={busy} onClick={remove}>
          Delete
        </button>
      </header>
      {draft ? (
        <label className="dc-field">
          Description
          <textarea
            className="input"
            rows={2}
            aria-label="Description"
            value={draft.description}
            onChange={(e) => setDraft({ ...draft, description: e.target.value })}
          />
        </label>
      ) : (
        <p>{def.description}</p>
      )}
      <dl className="dc-sig">
        <dt>inputs</dt>
        <dd>
          {def.inputs.length === 0 ? (
            <span className="muted">none</span>
          ) : (
            <ul>
              {def.inputs.map((i) => (
                <li key={i.name}>
                  <code>{inputLabel(i)}</code>
                  {i.description && <span className="muted"> — {i.description}</span>}
                </li>
              ))}
            </ul>
          )}
        </dd>
        <dt>output</dt>
        <dd>
          <code>table</code>
        </dd>
        <dt>reads</dt>
        <dd>{def.tables.length ? def.tables.map((t) => <code key={t}>{t} </code>) : <span className="muted">no table</span>}</dd>
      </dl>
      {draft ? (
        <>
          <textarea
            className="input dc-code"
            aria-label="Code"
            spellCheck={false}
            rows={Math.min(30, draft.code.split("\n").length + 2)}
            value={draft.code}
            onChange={(e) => setDraft({ ...draft, code: e.target.value })}
          />
          {problem && <p className="dc-error">{problem}</p>}
          <div className="dc-actions">
            <button
              className="btn btn-primary btn-small"
              disabled={busy || problem !== null || !isChanged(def, draft)}
              onClick={save}
            >
              Save as v{entry.version + 1}
            </button>
            <button className="btn btn-small" disabled={busy} onClick={() => setDraft(null)}>
              Cancel
            </button>
          </div>
        </>
      ) : (
        <pre className="dc-code">{def.code}</pre>
      )}
      {error && (
        <p className="dc-error" role="alert">
          {error.message} <code>{error.code}</code>
        </p>
      )}
    </article>
  );
}
