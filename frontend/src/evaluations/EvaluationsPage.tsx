// Evaluations: the datasets (import one from a file on the server), an app version run over a
// dataset (progress while it runs), the report of an evaluation (score with its interval,
// breakdowns, latency chart, failures linked to their runs), and two evaluations compared.

import { useCallback, useEffect, useState } from "react";
import { navigate } from "../router";
import { describeError } from "../ui/toast";
import { evalApi, primaryScore } from "./api";
import type { Bin, Comparison, DatasetSummary, EvaluationRecord, Group, Report, StartBody } from "./types";
import "./evaluations.css";

const POLL_MS = 1000;

function fixed(value: number | null | undefined, digits = 4): string {
  return value === null || value === undefined ? "–" : value.toFixed(digits);
}

export function EvaluationsPage({ evaluationId }: { evaluationId: string | null }) {
  const [datasets, setDatasets] = useState<DatasetSummary[]>([]);
  const [evaluations, setEvaluations] = useState<EvaluationRecord[]>([]);
  const [evaluationCount, setEvaluationCount] = useState(0);
  const [error, setError] = useState<{ code: string; message: string } | null>(null);
  const [compareWith, setCompareWith] = useState<string | null>(null);
  const [version, setVersion] = useState(0);

  const refresh = useCallback(() => setVersion((v) => v + 1), []);
  useEffect(() => {
    Promise.all([evalApi.datasets(), evalApi.evaluations()]).then(
      ([d, e]) => {
        setDatasets(d);
        setEvaluations(e.items);
        setEvaluationCount(e.total);
      },
      (e: unknown) => setError(describeError(e)),
    );
  }, [version]);

  return (
    <div className="eval-page">
      <header className="page-head">
        <h1>
          <a href="#/">dagwright</a> <span className="muted">evaluations</span>
        </h1>
      </header>
      {error && (
        <p className="eval-error" role="alert">
          {error.message} <code>{error.code}</code>
        </p>
      )}
      <div className="eval-layout">
        <aside className="eval-side">
          <DatasetsBox datasets={datasets} onImported={refresh} />
          <StartBox datasets={datasets} onStarted={(id) => (refresh(), navigate(`#/evaluations/${encodeURIComponent(id)}`))} />
          <section className="eval-box" aria-label="Evaluations">
            <h2>Evaluations</h2>
            {evaluations.length === 0 && <p className="muted">None yet.</p>}
            <ul className="eval-list">
              {evaluations.map((row) => (
                <li key={row.id} className={row.id === evaluationId ? "selected" : ""}>
                  <a href={`#/evaluations/${encodeURIComponent(row.id)}`} data-testid={`evaluation-${row.id}`}>
                    {row.label} <span className="muted">{row.metric}</span>
                  </a>
                  <span className={`eval-status eval-${row.status}`}>{row.status}</span>
                  <span className="eval-score">{fixed(primaryScore(row))}</span>
                  {evaluationId && row.id !== evaluationId && (
                    <button className="btn btn-small" onClick={() => setCompareWith(row.id)} data-testid={`compare-${row.id}`}>
                      compare
                    </button>
                  )}
                </li>
              ))}
            </ul>
            {evaluationCount > evaluations.length && (
              <p className="muted" data-testid="evaluations-more">
                The newest {evaluations.length} of {evaluationCount}.
              </p>
            )}
          </section>
        </aside>
        <main className="eval-main">
          {evaluationId ? (
            compareWith ? (
              <CompareView a={compareWith} b={evaluationId} onClose={() => setCompareWith(null)} />
            ) : (
              <EvaluationView key={evaluationId} id={evaluationId} onFinished={refresh} />
            )
          ) : (
            <p className="muted">Choose an evaluation, or run one.</p>
          )}
        </main>
      </div>
    </div>
  );
}

function DatasetsBox({ datasets, onImported }: { datasets: DatasetSummary[]; onImported: () => void }) {
  const [form, setForm] = useState({ name: "", kind: "wikitq", path: "", split: "dev" });
  const [error, setError] = useState<string | null>(null);
  const [upload, setUpload] = useState({ name: "", kind: "generic" });
  const uploadFile = async (file: File) => {
    setError(null);
    try {
      await evalApi.upload(upload.name || file.name.replace(/\.[^.]*$/, "").toLowerCase(), upload.kind, file);
      onImported();
    } catch (e) {
      setError(describeError(e).message);
    }
  };
  const submit = async () => {
    setError(null);
    try {
      await evalApi.importDataset(form);
      onImported();
    } catch (e) {
      setError(describeError(e).message);
    }
  };
  return (
    <section className="eval-box" aria-label="Datasets">
      <h2>Datasets</h2>
      <ul className="eval-list">
        {datasets.map((d) => (
          <li key={d.id}>
            <strong>{d.name}</strong> <span className="muted">{d.kind} · {d.metric}</span>{" "}
            {Object.entries(d.splits).map(([split, n]) => (
              <span key={split} className="eval-chip">
                {split}: {n}
              </span>
            ))}
          </li>
        ))}
      </ul>
      <details>
        <summary>Upload a file (generic or FeTaQA)</summary>
        <div className="eval-form">
          <input className="input" placeholder="name" aria-label="upload name" value={upload.name} onChange={(e) => setUpload({ ...upload, name: e.target.value })} />
          <select className="input" aria-label="upload kind" value={upload.kind} onChange={(e) => setUpload({ ...upload, kind: e.target.value })}>
            <option>generic</option>
            <option>fetaqa</option>
          </select>
          <input
            type="file"
            accept=".jsonl,.csv,.tsv"
            aria-label="upload file"
            data-testid="upload-file"
            onChange={(e) => {
              const file = e.target.files?.[0];
              e.target.value = "";
              if (file) uploadFile(file);
            }}
          />
        </div>
      </details>
      <details>
        <summary>Import a file on the server</summary>
        <div className="eval-form">
          <input className="input" placeholder="name" aria-label="dataset name" value={form.name} onChange={(e) => setForm({ ...form, name: e.target.value })} />
          <select className="input" aria-label="kind" value={form.kind} onChange={(e) => setForm({ ...form, kind: e.target.value })}>
            {["wikitq", "tabfact", "fetaqa", "spider", "generic"].map((k) => (
              <option key={k}>{k}</option>
            ))}
          </select>
          <input className="input" placeholder="/path/under/a/source/root" aria-label="path" value={form.path} onChange={(e) => setForm({ ...form, path: e.target.value })} />
          <input className="input" placeholder="split" aria-label="split" value={form.split} onChange={(e) => setForm({ ...form, split: e.target.value })} />
          <button className="btn btn-primary" onClick={submit} disabled={!form.name || !form.path}>
            Import
          </button>
          {error && <p className="eval-error">{error}</p>}
        </div>
      </details>
    </section>
  );
}

function StartBox({ datasets, onStarted }: { datasets: DatasetSummary[]; onStarted: (id: string) => void }) {
  const [body, setBody] = useState<StartBody>({ app: "", version: "", dataset: "", split: "dev", concurrency: 4 });
  const [error, setError] = useState<string | null>(null);
  const dataset = body.dataset || datasets[0]?.name || "";
  const start = async () => {
    setError(null);
    try {
      const started = await evalApi.start({ ...body, dataset });
      onStarted(started.id);
    } catch (e) {
      setError(describeError(e).message);
    }
  };
  return (
    <section className="eval-box" aria-label="Run an evaluation">
      <h2>Run an evaluation</h2>
      <div className="eval-form">
        <input className="input" placeholder="app (slug)" aria-label="app" value={body.app} onChange={(e) => setBody({ ...body, app: e.target.value })} />
        <input className="input" placeholder="version (default: published)" aria-label="version" value={body.version} onChange={(e) => setBody({ ...body, version: e.target.value })} />
        <select className="input" aria-label="dataset" value={dataset} onChange={(e) => setBody({ ...body, dataset: e.target.value })}>
          {datasets.map((d) => (
            <option key={d.id}>{d.name}</option>
          ))}
        </select>
        <input className="input" aria-label="split to run" value={body.split} onChange={(e) => setBody({ ...body, split: e.target.value })} />
        <input className="input" type="number" min={1} placeholder="limit" aria-label="limit" value={body.limit ?? ""} onChange={(e) => setBody({ ...body, limit: e.target.value ? Number(e.target.value) : undefined })} />
        <input className="input" type="number" min={1} max={64} aria-label="concurrency" value={body.concurrency} onChange={(e) => setBody({ ...body, concurrency: Number(e.target.value) || 1 })} />
        <button className="btn btn-primary" onClick={start} disabled={!body.app.trim() || !dataset} data-testid="start-evaluation">
          Run
        </button>
        {error && <p className="eval-error">{error}</p>}
      </div>
    </section>
  );
}

function EvaluationView({ id, onFinished }: { id: string; onFinished: () => void }) {
  const [record, setRecord] = useState<EvaluationRecord | null>(null);
  const [report, setReport] = useState<Report | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = () =>
      evalApi.evaluation(id).then(
        (r) => {
          if (cancelled) return;
          setRecord(r);
          if (r.status === "completed" || (r.aggregate && !r.running_here)) {
            evalApi.report(id).then((rep) => !cancelled && (setReport(rep), onFinished()), (e: unknown) => !cancelled && setError(describeError(e).message));
          } else if (r.running_here) {
            timer = setTimeout(load, POLL_MS);
          }
        },
        (e: unknown) => !cancelled && setError(describeError(e).message),
      );
    load();
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [id, onFinished]);

  if (error) return <p className="eval-error">{error}</p>;
  if (!record) return <p className="muted">Loading…</p>;
  const progress = record.progress;
  return (
    <article className="eval-box" aria-label="Evaluation">
      <h2>
        {record.label} <span className="muted">{record.metric} · {record.split}</span>{" "}
        <span className={`eval-status eval-${record.status}`}>{record.status}</span>
      </h2>
      {(record.running_here || record.status === "running") && progress && (
        <div className="eval-progress" data-testid="progress">
          <progress max={progress.total} value={progress.done} /> {progress.done}/{progress.total} · {progress.rate.toFixed(1)} ex/s · ETA{" "}
          {progress.eta === null ? "?" : `${Math.round(progress.eta)} s`} · {progress.tokens} tokens · cost {progress.cost.toFixed(4)} · {progress.errors} errors{" "}
          <button className="btn btn-small" onClick={() => evalApi.cancel(id)}>
            Stop
          </button>
        </div>
      )}
      {record.status === "failed" && record.error && (
        <p className="eval-error" data-testid="evaluation-failed">
          Failed: {record.error.message} <code>{record.error.code}</code>. Start it again to go on with the examples left.
        </p>
      )}
      {report && <ReportView report={report} />}
    </article>
  );
}

function Bars({ groups }: { groups: Group[] }) {
  return (
    <table className="eval-bars">
      <tbody>
        {groups.map((g) => (
          <tr key={g.value}>
            <td>{g.value}</td>
            <td className="eval-bar-cell">
              <span className="eval-bar" style={{ width: `${Math.round(g.mean * 100)}%` }} />
            </td>
            <td>{g.mean.toFixed(3)}</td>
            <td className="muted">n={g.count}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function Histogram({ bins, unit }: { bins: Bin[]; unit: string }) {
  const top = Math.max(1, ...bins.map((b) => b.count));
  return (
    <div className="eval-histogram" role="img" aria-label={`histogram (${unit})`}>
      {bins.map((b) => (
        <span key={b.from} className="eval-column" title={`${b.from.toFixed(3)}–${b.to.toFixed(3)} ${unit}: ${b.count}`} style={{ height: `${(b.count / top) * 100}%` }} />
      ))}
    </div>
  );
}

function ReportView({ report }: { report: Report }) {
  return (
    <div className="eval-report" data-testid="report">
      <p className="eval-headline">
        <strong>
          {report.primary} {fixed(report.value)}
        </strong>{" "}
        over {report.examples} examples · mean example score {fixed(report.mean_example_score)} ({Math.round(report.ci.confidence * 100)}% CI{" "}
        {fixed(report.ci.low)}–{fixed(report.ci.high)})
      </p>
      <p className="muted">
        {report.cost.tokens_per_example.toFixed(0)} tokens and cost {report.cost.cost_per_example.toFixed(5)} per example · latency mean{" "}
        {fixed(report.latency.mean, 3)} s, p95 {fixed(report.latency.p95, 3)} s · {report.errors} errors
      </p>
      {Object.entries(report.breakdowns).map(([key, groups]) => (
        <section key={key}>
          <h3>by {key}</h3>
          <Bars groups={groups} />
        </section>
      ))}
      {report.charts.latency_histogram.length > 0 && (
        <section>
          <h3>latency</h3>
          <Histogram bins={report.charts.latency_histogram} unit="s" />
        </section>
      )}
      <section>
        <h3>failures ({report.failures.length})</h3>
        <table className="eval-failures">
          <thead>
            <tr>
              <th>id</th>
              <th>question</th>
              <th>prediction</th>
              <th>gold</th>
              <th>run</th>
            </tr>
          </thead>
          <tbody>
            {report.failures.map((f) => (
              <tr key={f.id}>
                <td>{f.id}</td>
                <td>{f.question}</td>
                <td>{f.error ? <span className="eval-error">{f.error.message}</span> : JSON.stringify(f.prediction)}</td>
                <td>{JSON.stringify(f.gold)}</td>
                <td>
                  {f.trace && (
                    <a href={f.trace} target="_blank" rel="noreferrer">
                      trace
                    </a>
                  )}
                  {f.run_id && <FeedbackCell runId={f.run_id} />}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
    </div>
  );
}

/** A correction for a failed example's run: kept as a few-shot example of the app. */
function FeedbackCell({ runId }: { runId: string }) {
  const [correction, setCorrection] = useState("");
  const [state, setState] = useState<string | null>(null);
  const send = async () => {
    try {
      const given = await evalApi.feedback(runId, { score: 0, ...(correction.trim() ? { correction: correction.trim() } : {}) });
      setState(given.example_namespace ? `kept in ${given.example_namespace}` : "scored");
    } catch (e) {
      setState(describeError(e).message);
    }
  };
  return (
    <span className="eval-feedback">
      <input className="input" placeholder="right answer" aria-label={`correction for ${runId}`} value={correction} onChange={(e) => setCorrection(e.target.value)} />
      <button className="btn btn-small" onClick={send} data-testid={`feedback-${runId}`}>
        Correct
      </button>
      {state && <span className="muted">{state}</span>}
    </span>
  );
}

function CompareView({ a, b, onClose }: { a: string; b: string; onClose: () => void }) {
  const [result, setResult] = useState<Comparison | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    evalApi.compare(a, b).then(setResult, (e: unknown) => setError(describeError(e).message));
  }, [a, b]);
  if (error) return <p className="eval-error">{error}</p>;
  if (!result) return <p className="muted">Comparing…</p>;
  return (
    <article className="eval-box" aria-label="Comparison" data-testid="comparison">
      <h2>
        {result.a.label} → {result.b.label} <span className="muted">{result.metric}</span>{" "}
        <button className="btn btn-small" onClick={onClose}>
          Close
        </button>
      </h2>
      <p className="eval-headline">
        {fixed(result.mean_a)} → {fixed(result.mean_b)}: <strong>{result.difference >= 0 ? "+" : ""}{fixed(result.difference)}</strong> ({Math.round(result.ci.confidence * 100)}% CI{" "}
        {fixed(result.ci.low)} to {fixed(result.ci.high)}) over {result.examples} examples · {result.test.name} p = {result.test.p_value.toPrecision(3)}
      </p>
      <p>
        better in {result.b.label} ({result.gained.length}): {result.gained.join(", ") || "–"}
      </p>
      <p>
        better in {result.a.label} ({result.lost.length}): {result.lost.join(", ") || "–"}
      </p>
    </article>
  );
}
