// The TQA datasets (AutoTQA profiles): create one, edit its sources, SOP (each change a new
// version, with its history), example namespaces per agent and how many examples and learned
// hints a question gets; review its hints — learned candidates are confirmed, edited or dropped.

import { useEffect, useState } from "react";
import { describeError } from "../ui/toast";
import { tqaApi } from "./api";
import { EXAMPLE_ROLES, type ExampleRole, type HintStatus, type SopVersion, type TqaDataset, type TqaHint } from "./types";

type Problem = { code: string; message: string } | null;

export function DatasetsPanel() {
  const [datasets, setDatasets] = useState<TqaDataset[] | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [problem, setProblem] = useState<Problem>(null);
  const [newName, setNewName] = useState("");
  const [version, setVersion] = useState(0);

  useEffect(() => {
    let cancelled = false;
    tqaApi.datasets().then(
      (list) => {
        if (cancelled) return;
        setDatasets(list);
        setSelected((old) => old ?? list[0]?.name ?? null);
      },
      (e: unknown) => !cancelled && setProblem(describeError(e)),
    );
    return () => {
      cancelled = true;
    };
  }, [version]);

  const create = async () => {
    try {
      const made = await tqaApi.createDataset(newName.trim(), {});
      setNewName("");
      setSelected(made.name);
      setProblem(null);
      setVersion((v) => v + 1);
    } catch (e) {
      setProblem(describeError(e));
    }
  };

  const current = datasets?.find((d) => d.name === selected) ?? null;
  return (
    <section className="tqa-datasets" data-testid="tqa-datasets">
      <header className="row">
        <h2>TQA datasets</h2>
        <span className="spacer" />
        <input
          className="input"
          placeholder="new dataset name"
          data-testid="tqa-dataset-new-name"
          value={newName}
          onChange={(e) => setNewName(e.target.value)}
        />
        <button className="btn" data-testid="tqa-dataset-create" disabled={!newName.trim()} onClick={create}>
          Create
        </button>
      </header>
      <p className="muted small">
        A dataset names the data sources a question is about, its standard operating procedure (SOP), the few-shot example namespace of each
        agent and tool, and its common knowledge. The agents get them on every question that names the dataset.
      </p>
      {problem && (
        <div className="error-box" role="alert" data-testid="tqa-datasets-problem">
          <code>{problem.code}</code> {problem.message}
        </div>
      )}
      {datasets && datasets.length > 0 && (
        <nav className="row" data-testid="tqa-dataset-tabs">
          {datasets.map((d) => (
            <button
              key={d.name}
              className={`btn btn-small${d.name === selected ? " btn-primary" : ""}`}
              data-testid={`tqa-dataset-tab-${d.name}`}
              onClick={() => setSelected(d.name)}
            >
              {d.name}
            </button>
          ))}
        </nav>
      )}
      {datasets && datasets.length === 0 && <p className="muted">No dataset yet.</p>}
      {current && (
        <DatasetEditor
          key={`${current.name}-${current.updated_at}`}
          dataset={current}
          onSaved={() => setVersion((v) => v + 1)}
          onProblem={setProblem}
        />
      )}
      {current && <HintsEditor dataset={current.name} onProblem={setProblem} />}
    </section>
  );
}

function DatasetEditor({ dataset, onSaved, onProblem }: { dataset: TqaDataset; onSaved: () => void; onProblem: (p: Problem) => void }) {
  const [description, setDescription] = useState(dataset.description);
  const [sources, setSources] = useState(dataset.sources.join(", "));
  const [sop, setSop] = useState(dataset.sop);
  const [note, setNote] = useState("");
  const [namespaces, setNamespaces] = useState<Partial<Record<ExampleRole, string>>>(dataset.namespaces);
  const [examplesK, setExamplesK] = useState(String(dataset.examples_k));
  const [hintsK, setHintsK] = useState(String(dataset.hints_k));
  const [history, setHistory] = useState<SopVersion[] | null>(null);

  const save = async () => {
    const chosen = Object.fromEntries(Object.entries(namespaces).filter(([, ns]) => ns?.trim()).map(([role, ns]) => [role, ns!.trim()]));
    try {
      await tqaApi.updateDataset(dataset.name, {
        description,
        sources: sources
          .split(",")
          .map((s) => s.trim())
          .filter(Boolean),
        namespaces: chosen,
        examples_k: Number(examplesK),
        hints_k: Number(hintsK),
        sop,
        sop_note: note,
      });
      onProblem(null);
      onSaved();
    } catch (e) {
      onProblem(describeError(e));
    }
  };

  const showHistory = async () => {
    try {
      setHistory(await tqaApi.sops(dataset.name));
    } catch (e) {
      onProblem(describeError(e));
    }
  };

  return (
    <div className="tqa-dataset-editor" data-testid="tqa-dataset-editor">
      <div className="field">
        <label className="field-title" htmlFor="tqa-ds-description">
          Description
        </label>
        <input id="tqa-ds-description" className="input" value={description} onChange={(e) => setDescription(e.target.value)} />
      </div>
      <div className="field">
        <label className="field-title" htmlFor="tqa-ds-sources">
          Data sources <span className="muted">(comma-separated; empty: all)</span>
        </label>
        <input id="tqa-ds-sources" className="input mono" data-testid="tqa-ds-sources" value={sources} onChange={(e) => setSources(e.target.value)} />
      </div>
      <div className="field">
        <label className="field-title" htmlFor="tqa-ds-sop">
          SOP <span className="muted">(version {dataset.sop_version || "none"}; a change is saved as the next version)</span>
        </label>
        <textarea id="tqa-ds-sop" className="input" rows={5} data-testid="tqa-ds-sop" value={sop} onChange={(e) => setSop(e.target.value)} />
        <input className="input" placeholder="what this version changes" data-testid="tqa-ds-sop-note" value={note} onChange={(e) => setNote(e.target.value)} />
        <button type="button" className="btn btn-small" data-testid="tqa-ds-sop-history" onClick={showHistory}>
          SOP history
        </button>
        {history && (
          <ol className="small" data-testid="tqa-ds-sop-versions">
            {history.map((v) => (
              <li key={v.version}>
                <strong>v{v.version}</strong> {v.note && <span className="muted">({v.note})</span>} <span className="tqa-pre">{v.text}</span>
              </li>
            ))}
          </ol>
        )}
      </div>
      <fieldset className="field">
        <legend className="field-title">Few-shot example namespaces (retrieved per question)</legend>
        {(Object.keys(EXAMPLE_ROLES) as ExampleRole[]).map((role) => (
          <div className="row" key={role}>
            <label className="small" htmlFor={`tqa-ds-ns-${role}`} style={{ minWidth: "12em" }}>
              {role} <span className="muted">({EXAMPLE_ROLES[role]})</span>
            </label>
            <input
              id={`tqa-ds-ns-${role}`}
              className="input mono"
              data-testid={`tqa-ds-ns-${role}`}
              value={namespaces[role] ?? ""}
              onChange={(e) => setNamespaces((old) => ({ ...old, [role]: e.target.value }))}
            />
          </div>
        ))}
        <div className="row">
          <label className="small" htmlFor="tqa-ds-examples-k">
            examples per question
          </label>
          <input id="tqa-ds-examples-k" className="input" type="number" min={0} max={20} value={examplesK} onChange={(e) => setExamplesK(e.target.value)} />
          <label className="small" htmlFor="tqa-ds-hints-k">
            learned hints per question
          </label>
          <input id="tqa-ds-hints-k" className="input" type="number" min={0} max={20} value={hintsK} onChange={(e) => setHintsK(e.target.value)} />
        </div>
      </fieldset>
      <div className="row end">
        <button className="btn btn-primary" data-testid="tqa-ds-save" onClick={save}>
          Save
        </button>
      </div>
    </div>
  );
}

const STATUS_FILTERS: (HintStatus | "")[] = ["candidate", "confirmed", "dropped", ""];

function HintsEditor({ dataset, onProblem }: { dataset: string; onProblem: (p: Problem) => void }) {
  const [status, setStatus] = useState<HintStatus | "">("candidate");
  const [hints, setHints] = useState<TqaHint[] | null>(null);
  const [version, setVersion] = useState(0);
  const [text, setText] = useState("");

  useEffect(() => {
    let cancelled = false;
    tqaApi.hints(dataset, status || undefined).then(
      (list) => !cancelled && setHints(list),
      (e: unknown) => !cancelled && onProblem(describeError(e)),
    );
    return () => {
      cancelled = true;
    };
  }, [dataset, status, version, onProblem]);

  const act = async (work: () => Promise<unknown>) => {
    try {
      await work();
      onProblem(null);
      setVersion((v) => v + 1);
    } catch (e) {
      onProblem(describeError(e));
    }
  };

  return (
    <section className="tqa-hints" data-testid="tqa-hints">
      <header className="row">
        <h3>Common knowledge</h3>
        <span className="spacer" />
        {STATUS_FILTERS.map((s) => (
          <button
            key={s || "all"}
            className={`btn btn-small${s === status ? " btn-primary" : ""}`}
            data-testid={`tqa-hints-filter-${s || "all"}`}
            onClick={() => setStatus(s)}
          >
            {s || "all"}
          </button>
        ))}
      </header>
      <p className="muted small">
        Learned hints come from retries that succeeded after an error or an empty result; they are given to later questions like the one they
        were learned on. Confirm the good ones, edit them, drop the wrong ones (a dropped lesson is not learned again).
      </p>
      {hints?.length === 0 && <p className="muted small">None.</p>}
      <ul className="tqa-hint-list">
        {hints?.map((hint) => (
          <HintItem
            key={`${hint.id}-${hint.updated_at}`}
            hint={hint}
            onChange={(change) => act(() => tqaApi.updateHint(hint.id, change))}
            onDelete={() => act(() => tqaApi.deleteHint(hint.id))}
          />
        ))}
      </ul>
      <div className="row">
        <input className="input" placeholder="a hint for this dataset" data-testid="tqa-hint-new" value={text} onChange={(e) => setText(e.target.value)} />
        <button
          className="btn"
          data-testid="tqa-hint-add"
          disabled={!text.trim()}
          onClick={() =>
            act(async () => {
              await tqaApi.addHint(dataset, text.trim());
              setText("");
            })
          }
        >
          Add
        </button>
      </div>
    </section>
  );
}

function HintItem({
  hint,
  onChange,
  onDelete,
}: {
  hint: TqaHint;
  onChange: (change: { text?: string; status?: HintStatus }) => void;
  onDelete: () => void;
}) {
  const [editing, setEditing] = useState(false);
  const [text, setText] = useState(hint.text);
  return (
    <li className="tqa-hint" data-testid={`tqa-hint-${hint.id}`} data-status={hint.status}>
      <span className={`tqa-pill tqa-pill-${hint.status}`}>{hint.status}</span> <span className="muted small">{hint.source}</span>{" "}
      {editing ? (
        <textarea className="input" rows={3} data-testid={`tqa-hint-text-${hint.id}`} value={text} onChange={(e) => setText(e.target.value)} />
      ) : (
        <span className="tqa-pre">{hint.text}</span>
      )}
      {hint.question && (
        <div className="small muted">
          learned on “{hint.question}”{hint.details?.tables?.length ? ` · tables ${hint.details.tables.join(", ")}` : ""}
          {hint.conversation_id && (
            <>
              {" · "}
              <a href={`#/tqa/${encodeURIComponent(hint.conversation_id)}`}>the conversation</a>
            </>
          )}
        </div>
      )}
      <div className="row">
        {editing ? (
          <button
            className="btn btn-small btn-primary"
            data-testid={`tqa-hint-save-${hint.id}`}
            onClick={() => {
              setEditing(false);
              onChange({ text });
            }}
          >
            Save
          </button>
        ) : (
          <button className="btn btn-small" data-testid={`tqa-hint-edit-${hint.id}`} onClick={() => setEditing(true)}>
            Edit
          </button>
        )}
        {hint.status !== "confirmed" && (
          <button className="btn btn-small" data-testid={`tqa-hint-confirm-${hint.id}`} onClick={() => onChange({ status: "confirmed" })}>
            Confirm
          </button>
        )}
        {hint.status !== "dropped" && (
          <button className="btn btn-small" data-testid={`tqa-hint-drop-${hint.id}`} onClick={() => onChange({ status: "dropped" })}>
            Drop
          </button>
        )}
        <button className="btn btn-small btn-danger" data-testid={`tqa-hint-delete-${hint.id}`} onClick={onDelete}>
          Delete
        </button>
      </div>
    </li>
  );
}
