// "Waiting for you": runs paused at a human_input node, each with its form. Answering resumes
// the run on the server (any replica) and the request leaves the list.

import { useCallback, useEffect, useState } from "react";
import { ApiError } from "../api/http";
import { fieldValue, humanApi, type HumanRequest } from "./api";

export function WaitingPage() {
  const [requests, setRequests] = useState<HumanRequest[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The answered request leaves the list: say here which run went on.
  const [resumed, setResumed] = useState<string | null>(null);
  const refresh = useCallback(() => {
    humanApi.waiting().then(setRequests, (e: unknown) => setError(e instanceof Error ? e.message : String(e)));
  }, []);
  useEffect(refresh, [refresh]);
  return (
    <div className="eval-page">
      <header className="page-head">
        <h1>
          <a href="#/">dagwright</a> <span className="muted">waiting for you</span>
        </h1>
      </header>
      {error && <p role="alert">{error}</p>}
      {resumed && <p data-testid="human-resumed">Answered: the run goes on as {resumed}.</p>}
      {requests?.length === 0 && <p className="muted">No run is waiting for an answer.</p>}
      {requests?.map((r) => (
        <RequestForm key={r.id} request={r} onAnswered={(runId) => (setResumed(runId), refresh())} />
      ))}
    </div>
  );
}

export function RequestForm({ request, onAnswered }: { request: HumanRequest; onAnswered: (runId: string) => void }) {
  const [texts, setTexts] = useState<Record<string, string>>({});
  const [problem, setProblem] = useState<string | null>(null);
  const submit = (choice: string | null) => {
    const values: Record<string, unknown> = {};
    for (const field of request.form.fields) {
      const text = texts[field.name];
      if (text !== undefined && text !== "") values[field.name] = fieldValue(field.type, text);
    }
    humanApi.answer(request.id, values, choice).then(
      (done) => onAnswered(done.run_id),
      (e: unknown) => setProblem(e instanceof ApiError ? e.message : String(e)),
    );
  };
  const choices = request.form.choices;
  return (
    <section className="eval-box" aria-label={`Request ${request.id}`} data-testid={`human-request-${request.node}`}>
      <p className="human-message">{request.message}</p>
      <p className="muted">
        run <code>{request.run_id}</code>, node <code>{request.node}</code>
        {request.expires_at && <> — answer before {new Date(request.expires_at).toLocaleString()}</>}
      </p>
      {request.form.fields.map((field) => (
        <label key={field.name} className="human-field">
          {field.label || field.name}
          {field.required && field.default == null ? " *" : ""}
          <input
            className="input"
            aria-label={field.label || field.name}
            type={field.type === "integer" || field.type === "number" ? "number" : "text"}
            placeholder={field.default == null ? "" : String(field.default)}
            value={texts[field.name] ?? ""}
            onChange={(e) => setTexts({ ...texts, [field.name]: e.target.value })}
          />
        </label>
      ))}
      <div className="human-actions">
        {choices.length === 0 ? (
          <button className="btn btn-primary" onClick={() => submit(null)}>
            Answer
          </button>
        ) : (
          choices.map((choice) => (
            <button key={choice} className="btn btn-primary" onClick={() => submit(choice)}>
              {choice}
            </button>
          ))
        )}
      </div>
      {problem && <p role="alert">{problem}</p>}
    </section>
  );
}
