// The embedding service in the browser (#/examples): namespaces of few-shot examples; upload
// a JSONL or CSV file with a progress bar; search with scores; delete an example or a
// namespace. Until now it had an API and a CLI only.

import { useCallback, useEffect, useState } from "react";
import { describeError, toastError } from "../ui/toast";
import { type Example, type Hit, type Namespace, examplesApi } from "./api";
import { batches, parseRecords } from "./records";

const BATCH = 200;

function NewNamespace({ onCreated }: { onCreated: (ns: Namespace) => void }) {
  const [name, setName] = useState("");
  const [embedder, setEmbedder] = useState("hashing:256");
  const [keys, setKeys] = useState("question");
  const [text, setText] = useState("question");
  const [error, setError] = useState<string | null>(null);
  const create = async () => {
    setError(null);
    try {
      const keyFields = keys.split(",").map((k) => k.trim()).filter(Boolean);
      onCreated(await examplesApi.createNamespace({ name: name.trim(), embedder: embedder.trim(), key_fields: keyFields, text_field: text.trim() }));
      setName("");
    } catch (e) {
      const { code, message } = describeError(e);
      setError(`${code}: ${message}`);
    }
  };
  return (
    <form
      className="examples-new"
      data-testid="ns-new"
      onSubmit={(e) => {
        e.preventDefault();
        void create();
      }}
    >
      <h3>New namespace</h3>
      <label className="field-title">
        Name <input className="input" data-testid="ns-name" value={name} onChange={(e) => setName(e.target.value)} required />
      </label>
      <label className="field-title">
        Embedder <input className="input" data-testid="ns-embedder" value={embedder} onChange={(e) => setEmbedder(e.target.value)} />
      </label>
      <label className="field-title">
        Key fields (comma-separated: an example with the same keys is replaced) <input className="input" data-testid="ns-keys" value={keys} onChange={(e) => setKeys(e.target.value)} />
      </label>
      <label className="field-title">
        Text field (what is embedded and searched) <input className="input" data-testid="ns-text" value={text} onChange={(e) => setText(e.target.value)} />
      </label>
      {error && (
        <div className="field-message" data-testid="ns-error">
          {error}
        </div>
      )}
      <button className="btn btn-primary" data-testid="ns-create" type="submit" disabled={!name.trim()}>
        Create
      </button>
    </form>
  );
}

function Upload({ ns, onDone }: { ns: string; onDone: () => void }) {
  const [progress, setProgress] = useState<{ done: number; total: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const upload = async (file: File) => {
    setError(null);
    let records;
    try {
      records = parseRecords(file.name, await file.text());
    } catch (e) {
      setError(`${file.name}: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    setProgress({ done: 0, total: records.length });
    try {
      let done = 0;
      for (const batch of batches(records, BATCH)) {
        await examplesApi.upsert(ns, batch);
        done += batch.length;
        setProgress({ done, total: records.length });
      }
      onDone();
    } catch (e) {
      const { code, message } = describeError(e);
      setError(`${code}: ${message}`);
    }
  };
  return (
    <div className="examples-upload">
      <label className="btn">
        Upload JSONL or CSV…
        <input
          type="file"
          hidden
          accept=".jsonl,.json,.csv,text/csv,application/json"
          data-testid="examples-file"
          onChange={(e) => {
            const file = e.target.files?.[0];
            e.target.value = "";
            if (file) void upload(file);
          }}
        />
      </label>
      {progress && (
        <span className="examples-progress">
          <progress data-testid="examples-progress" value={progress.done} max={Math.max(1, progress.total)} />{" "}
          <span data-testid="examples-progress-text">
            {progress.done} / {progress.total}
          </span>
        </span>
      )}
      {error && (
        <div className="field-message" role="alert" data-testid="examples-upload-error">
          {error}
        </div>
      )}
    </div>
  );
}

function Search({ ns }: { ns: string }) {
  const [text, setText] = useState("");
  const [hits, setHits] = useState<Hit[] | null>(null);
  const search = async () => {
    try {
      setHits(await examplesApi.query(ns, text, 5));
    } catch (e) {
      toastError(e, "Search failed");
    }
  };
  return (
    <form
      className="examples-search row"
      onSubmit={(e) => {
        e.preventDefault();
        void search();
      }}
    >
      <input className="input" data-testid="examples-query" placeholder="Search by meaning…" value={text} onChange={(e) => setText(e.target.value)} />
      <button className="btn" data-testid="examples-search" type="submit" disabled={!text.trim()}>
        Search
      </button>
      {hits && (
        <ol className="examples-hits" data-testid="examples-hits">
          {hits.length === 0 && <li className="muted">No match.</li>}
          {hits.map((h) => (
            <li key={h.id} data-testid="examples-hit">
              <span className="examples-score" data-testid="examples-score">
                {h.score.toFixed(3)}
              </span>{" "}
              <code>{JSON.stringify(h.payload)}</code>
            </li>
          ))}
        </ol>
      )}
    </form>
  );
}

function NamespaceView({ ns, onDeleted }: { ns: Namespace; onDeleted: () => void }) {
  const [items, setItems] = useState<Example[] | null>(null);
  const [count, setCount] = useState<number | null>(null);
  const load = useCallback(() => {
    examplesApi.list(ns.name).then((p) => setItems(p.items), (e: unknown) => toastError(e, "Could not list the examples"));
    examplesApi.namespace(ns.name).then((n) => setCount(n.count ?? null), () => undefined);
  }, [ns.name]);
  useEffect(load, [load]);
  const removeNamespace = async () => {
    if (!window.confirm(`Delete the namespace ${ns.name} and all its examples?`)) return;
    try {
      await examplesApi.deleteNamespace(ns.name);
      onDeleted();
    } catch (e) {
      toastError(e, "Could not delete the namespace");
    }
  };
  const removeExample = async (id: string) => {
    try {
      await examplesApi.deleteExample(ns.name, id);
      load();
    } catch (e) {
      toastError(e, "Could not delete the example");
    }
  };
  return (
    <section className="examples-ns" data-testid={`ns-view-${ns.name}`}>
      <header className="row">
        <h2>{ns.name}</h2>
        <span className="muted small">
          {ns.embedder} · {ns.dimension} dims · keys {ns.key_fields.join(", ")} · text “{ns.text_field}”
          {count !== null && <span data-testid="ns-count"> · {count} examples</span>}
        </span>
        <span className="spacer" />
        <button className="btn btn-danger btn-small" data-testid="ns-delete" onClick={() => void removeNamespace()}>
          Delete namespace
        </button>
      </header>
      <Upload ns={ns.name} onDone={load} />
      <Search ns={ns.name} />
      <h3>Examples</h3>
      {items?.length === 0 && <p className="muted">No examples yet: upload a file.</p>}
      <ul className="examples-list">
        {items?.map((x) => (
          <li key={x.id} data-testid="example">
            <code>{JSON.stringify(x.payload)}</code>
            <button className="btn btn-small" data-testid={`example-delete-${x.id}`} onClick={() => void removeExample(x.id)}>
              Delete
            </button>
          </li>
        ))}
      </ul>
    </section>
  );
}

export function ExamplesPage() {
  const [namespaces, setNamespaces] = useState<Namespace[] | null>(null);
  const [current, setCurrent] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = useCallback(() => {
    examplesApi.namespaces().then(setNamespaces, (e: unknown) => {
      const { code, message } = describeError(e);
      setError(`${code}: ${message}`);
    });
  }, []);
  useEffect(load, [load]);
  const chosen = namespaces?.find((n) => n.name === current) ?? null;
  return (
    <div className="examples-page" data-testid="examples-page">
      <header className="page-head">
        <a className="btn" href="#/">
          ← Apps
        </a>
        <h1>Few-shot examples</h1>
      </header>
      {error && (
        <div className="error-box" role="alert">
          {error}
        </div>
      )}
      <div className="examples-layout">
        <aside>
          <h3>Namespaces</h3>
          {namespaces?.length === 0 && <p className="muted small">None yet.</p>}
          <ul className="examples-namespaces">
            {namespaces?.map((n) => (
              <li key={n.name}>
                <button className={`link${n.name === current ? " active" : ""}`} data-testid={`ns-${n.name}`} onClick={() => setCurrent(n.name)}>
                  {n.name}
                </button>
              </li>
            ))}
          </ul>
          <NewNamespace
            onCreated={(ns) => {
              load();
              setCurrent(ns.name);
            }}
          />
        </aside>
        <main>
          {chosen ? (
            <NamespaceView
              key={chosen.name}
              ns={chosen}
              onDeleted={() => {
                setCurrent(null);
                load();
              }}
            />
          ) : (
            <p className="muted">Pick a namespace, or make one.</p>
          )}
        </main>
      </div>
    </div>
  );
}
