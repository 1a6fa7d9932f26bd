// One human_input request's form: its message, a typed input per field (a checkbox for a
// boolean, a number box for numbers), and a button per choice. Shared by the "waiting for
// you" page and the debug panel, which sends the canvas's flow with the answer.

import { useState } from "react";
import { ApiError } from "../api/transport";
import { ApprovalDetails } from "./ApprovalDetails";
import { fieldValue, humanApi, type Answered, type FormField, type HumanRequest } from "./api";

export function RequestForm({
  request,
  flow,
  onAnswered,
}: {
  request: HumanRequest;
  /** Sent with the answer: the flow a debug run of an unsaved flow goes on with. */
  flow?: unknown;
  onAnswered: (done: Answered) => void;
}) {
  const [texts, setTexts] = useState<Record<string, string>>({});
  const [problem, setProblem] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const submit = (choice: string | null) => {
    const values: Record<string, unknown> = {};
    for (const field of request.form.fields) {
      const text = texts[field.name];
      // A checkbox always shows a value, and that is the answer (unchecked on purpose: false).
      if (field.type === "boolean") values[field.name] = shownChecked(field, text ?? "");
      else if (text !== undefined && text !== "") values[field.name] = fieldValue(field.type, text);
    }
    setProblem(null);
    setSending(true);
    humanApi.answer(request.id, values, choice, flow).then(
      (done) => (setSending(false), onAnswered(done)),
      (e: unknown) => (setSending(false), setProblem(e instanceof ApiError ? e.message : String(e))),
    );
  };
  const choices = request.form.choices;
  return (
    <section className="eval-box" aria-label={`Request ${request.id}`} data-testid={`human-request-${request.node}`}>
      <p className="human-message">{request.message}</p>
      {request.form.approval ? (
        <ApprovalDetails approval={request.form.approval} />
      ) : (
        <p className="muted">
          run <code>{request.run_id}</code>, node <code>{request.node}</code>
          {request.expires_at && <> — answer before {new Date(request.expires_at).toLocaleString()}</>}
        </p>
      )}
      {request.form.fields.map((field) => (
        <FieldInput
          key={field.name}
          field={field}
          text={texts[field.name] ?? ""}
          onText={(text) => setTexts({ ...texts, [field.name]: text })}
        />
      ))}
      <div className="human-actions">
        {(choices.length === 0 ? [null] : choices).map((choice) => (
          <button key={choice ?? ""} className="btn btn-primary" disabled={sending} onClick={() => submit(choice)}>
            {choice ?? "Answer"}
          </button>
        ))}
      </div>
      {problem && <p role="alert">{problem}</p>}
    </section>
  );
}

/** A checkbox's state: as ticked or unticked, else the field's default. */
function shownChecked(field: FormField, text: string): boolean {
  return text === "" ? field.default === true : text === "true";
}

function FieldInput({ field, text, onText }: { field: FormField; text: string; onText: (text: string) => void }) {
  const label = field.label || field.name;
  const marker = field.required && field.default == null ? " *" : "";
  if (field.type === "boolean") {
    return (
      <label className="human-field">
        <input
          type="checkbox"
          aria-label={label}
          checked={shownChecked(field, text)}
          onChange={(e) => onText(String(e.target.checked))}
        />{" "}
        {label}
        {marker}
      </label>
    );
  }
  return (
    <label className="human-field">
      {label}
      {marker}
      <input
        className="input"
        aria-label={label}
        type={field.type === "integer" || field.type === "number" ? "number" : "text"}
        placeholder={field.default == null ? "" : String(field.default)}
        value={text}
        onChange={(e) => onText(e.target.value)}
      />
    </label>
  );
}
