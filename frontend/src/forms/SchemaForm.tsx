// A config form generated from a block's JSON Schema: one control per property, each with
// data-testid="config-<field>". Secrets are picked by NAME; their values never reach here.

import { type ReactNode, memo, useId, useMemo, useState } from "react";
import type { JsonSchema } from "../api/types";
import { TemplateEditor } from "./TemplateEditor";
import { useTemplateVariables } from "./useTemplateVariables";
import {
  type FieldInfo,
  formFields,
  parseJsonText,
  setField,
  textToValue,
  valueToText,
} from "./schema";

export interface SchemaFormProps {
  schema: JsonSchema;
  value: Record<string, unknown>;
  /** The new config, and the field that changed (edits of one field coalesce in undo). */
  onChange: (next: Record<string, unknown>, field: string) => void;
  secrets: string[];
  /** Messages per field (from the server's invalid_config problems). */
  fieldErrors?: Record<string, string>;
  /** Only these fields in this order are shown at once, then `extra`; the rest fold under
   *  "Advanced" (opened when one of them has an error). Without it every field is shown. */
  fold?: { keep: string[]; extra?: ReactNode };
}

export const SchemaForm = memo(function SchemaForm({ schema, value, onChange, secrets, fieldErrors, fold }: SchemaFormProps) {
  const fields = useMemo(() => formFields(schema), [schema]);
  if (fields.length === 0) return <p className="muted">This block has no settings.</p>;
  const field = (info: FieldInfo) => (
    <Field
      key={info.name}
      info={info}
      value={value[info.name]}
      secrets={secrets}
      error={fieldErrors?.[info.name]}
      onChange={(v) => onChange(setField(value, info.name, v), info.name)}
    />
  );
  if (!fold) return <div className="schema-form">{fields.map(field)}</div>;
  const kept = fold.keep.flatMap((name) => fields.filter((f) => f.name === name));
  const rest = fields.filter((f) => !fold.keep.includes(f.name));
  return (
    <div className="schema-form">
      {kept.map(field)}
      {fold.extra}
      {rest.length > 0 && (
        <details className="advanced" data-testid="config-advanced" open={rest.some((f) => fieldErrors?.[f.name]) || undefined}>
          <summary>Advanced ({rest.map((f) => f.title).join(", ")})</summary>
          {rest.map(field)}
        </details>
      )}
    </div>
  );
});

interface FieldProps {
  info: FieldInfo;
  value: unknown;
  onChange: (value: unknown) => void;
  secrets: string[];
  error?: string;
}

export function Field({ info, value, onChange, secrets, error }: FieldProps) {
  const id = useId();
  const inline = info.kind === "boolean";
  return (
    <div className={`field field-${info.kind}${error ? " field-error" : ""}`}>
      {inline ? (
        <label className="field-inline" htmlFor={id}>
          <Control id={id} info={info} value={value} onChange={onChange} secrets={secrets} />
          <span className="field-title">{info.title}</span>
        </label>
      ) : (
        <>
          <label className="field-title" htmlFor={id}>
            {info.title}
            {info.required && <span className="required" title="required"> *</span>}
            {info.nullable && <span className="muted small"> (optional)</span>}
          </label>
          <Control id={id} info={info} value={value} onChange={onChange} secrets={secrets} />
        </>
      )}
      {info.description && <div className="field-help">{info.description}</div>}
      {error && (
        <div className="field-message" role="alert">
          {error}
        </div>
      )}
    </div>
  );
}

function placeholderOf(info: FieldInfo): string {
  if (!info.hasDefault || info.default === null || info.default === undefined || info.default === "") return "";
  return typeof info.default === "string" ? info.default : JSON.stringify(info.default);
}

/** Local text for an input whose value is parsed back: typing "1." or a half-written list
 *  must not be overwritten by the value it parses to. */
function useLocalText(external: string, same: (local: string) => boolean): [string, (t: string) => void] {
  const [text, setText] = useState(external);
  // A new value from outside replaces the text, unless the text already says it.
  const [seen, setSeen] = useState(external);
  if (seen !== external) {
    setSeen(external);
    if (!same(text)) setText(external);
  }
  return [text, setText];
}

interface ControlProps {
  id: string;
  info: FieldInfo;
  value: unknown;
  onChange: (value: unknown) => void;
  secrets: string[];
}

function Control(props: ControlProps) {
  switch (props.info.kind) {
    case "boolean":
      return <BooleanControl {...props} />;
    case "enum":
      return <EnumControl {...props} />;
    case "secret":
      return <SecretControl {...props} />;
    case "secret_map":
      return <SecretMapControl {...props} />;
    case "template":
      return <TemplateControl {...props} />;
    case "json":
      return <JsonControl {...props} />;
    case "string_list":
      return <TextParsedControl {...props} multiline />;
    case "number":
    case "integer":
    case "any":
      return <TextParsedControl {...props} />;
    default:
      return <StringControl {...props} />;
  }
}

function StringControl({ id, info, value, onChange }: ControlProps) {
  return (
    <input
      id={id}
      className="input"
      data-testid={`config-${info.name}`}
      type="text"
      value={typeof value === "string" ? value : value == null ? "" : String(value)}
      placeholder={placeholderOf(info)}
      pattern={info.schema.pattern}
      onChange={(e) => onChange(textToValue(info, e.target.value))}
    />
  );
}

function TextParsedControl({ id, info, value, onChange, multiline }: ControlProps & { multiline?: boolean }) {
  const external = valueToText(info, value);
  const [text, setText] = useLocalText(external, (local) => {
    const parsed = textToValue(info, local);
    return JSON.stringify(parsed) === JSON.stringify(value ?? undefined);
  });
  const update = (t: string) => {
    setText(t);
    onChange(textToValue(info, t));
  };
  const s = info.schema;
  let hint = "";
  if (info.kind === "any") hint = "JSON, or plain text";
  if (info.kind === "string_list") hint = "one per line";
  const numeric = info.kind === "number" || info.kind === "integer";
  let problem = "";
  if (numeric && text.trim() !== "") {
    const n = Number(text);
    if (Number.isNaN(n)) problem = "not a number";
    else if (info.kind === "integer" && !Number.isInteger(n)) problem = "a whole number is needed";
    else if (s.minimum !== undefined && n < s.minimum) problem = `at least ${s.minimum}`;
    else if (s.maximum !== undefined && n > s.maximum) problem = `at most ${s.maximum}`;
    else if (s.exclusiveMinimum !== undefined && n <= s.exclusiveMinimum) problem = `more than ${s.exclusiveMinimum}`;
  }
  return (
    <>
      {multiline ? (
        <textarea
          id={id}
          className="input"
          data-testid={`config-${info.name}`}
          rows={Math.min(8, Math.max(2, text.split("\n").length + 1))}
          value={text}
          placeholder={hint}
          onChange={(e) => update(e.target.value)}
        />
      ) : (
        <input
          id={id}
          className="input"
          data-testid={`config-${info.name}`}
          type="text"
          inputMode={numeric ? "decimal" : undefined}
          value={text}
          placeholder={placeholderOf(info) || hint}
          onChange={(e) => update(e.target.value)}
        />
      )}
      {problem && <div className="field-message">{problem}</div>}
    </>
  );
}

function BooleanControl({ id, info, value, onChange }: ControlProps) {
  if (info.nullable) {
    const current = value === true ? "true" : value === false ? "false" : "";
    return (
      <select id={id} className="input" data-testid={`config-${info.name}`} value={current} onChange={(e) => onChange(e.target.value === "" ? undefined : e.target.value === "true")}>
        <option value="">(not set)</option>
        <option value="true">yes</option>
        <option value="false">no</option>
      </select>
    );
  }
  const checked = typeof value === "boolean" ? value : info.default === true;
  return <input id={id} type="checkbox" data-testid={`config-${info.name}`} checked={checked} onChange={(e) => onChange(e.target.checked)} />;
}

function EnumControl({ id, info, value, onChange }: ControlProps) {
  const options = info.options ?? [];
  const current = value === undefined ? (info.hasDefault ? info.default : undefined) : value;
  const index = options.findIndex((o) => o === current);
  return (
    <select
      id={id}
      className="input"
      data-testid={`config-${info.name}`}
      value={index < 0 ? "" : String(index)}
      onChange={(e) => onChange(e.target.value === "" ? undefined : options[Number(e.target.value)])}
    >
      {(index < 0 || info.nullable) && <option value="">{info.nullable ? "(not set)" : "— choose —"}</option>}
      {options.map((o, i) => (
        <option key={i} value={String(i)}>
          {String(o)}
        </option>
      ))}
    </select>
  );
}

/** A secret's NAME, chosen from the names the server lists. */
export function SecretControl({ id, info, value, onChange, secrets }: ControlProps) {
  const current = typeof value === "string" ? value : "";
  return (
    <>
      <SecretSelect id={id} testId={`config-${info.name}`} value={current} secrets={secrets} onChange={(v) => onChange(v === "" ? undefined : v)} />
      {secrets.length === 0 && <div className="field-help">No secrets are stored yet: add one with PUT /api/v1/secrets/&lt;name&gt; (or a DAGWRIGHT_SECRET_&lt;NAME&gt; variable).</div>}
    </>
  );
}

function SecretSelect({ id, testId, value, secrets, onChange }: { id?: string; testId: string; value: string; secrets: string[]; onChange: (v: string) => void }) {
  const known = secrets.includes(value);
  return (
    <select id={id} className="input" data-testid={testId} value={value} onChange={(e) => onChange(e.target.value)}>
      <option value="">— choose a secret —</option>
      {secrets.map((name) => (
        <option key={name} value={name}>
          {name}
        </option>
      ))}
      {value && !known && <option value={value}>{value} (not in the secret store)</option>}
    </select>
  );
}

/** Header name -> secret name (http_request's secret_headers). */
function SecretMapControl({ info, value, onChange, secrets }: ControlProps) {
  const entries = useMemo(
    () => Object.entries(value && typeof value === "object" ? (value as Record<string, unknown>) : {}).map(([k, v]) => [k, String(v)] as [string, string]),
    [value],
  );
  const [rows, setRows] = useState<[string, string][]>(entries);
  // A new value from outside replaces the rows, unless their complete ones already say it.
  const [seen, setSeen] = useState(entries);
  if (seen !== entries) {
    setSeen(entries);
    if (JSON.stringify(Object.fromEntries(rows.filter(([k, v]) => k && v))) !== JSON.stringify(Object.fromEntries(entries))) setRows(entries);
  }
  const commit = (next: [string, string][]) => {
    setRows(next);
    // Only complete rows: a header without a secret (or the reverse) is still being written.
    const obj = Object.fromEntries(next.filter(([k, v]) => k.trim() !== "" && v !== ""));
    onChange(Object.keys(obj).length ? obj : undefined);
  };
  return (
    <div className="secret-map" data-testid={`config-${info.name}`}>
      {rows.map(([k, v], i) => (
        <div className="row" key={i}>
          <input
            className="input"
            placeholder="Header"
            aria-label="Header name"
            data-testid={`config-${info.name}-key-${i}`}
            value={k}
            onChange={(e) => commit(rows.map((r, j) => (j === i ? [e.target.value, r[1]] : r)))}
          />
          <SecretSelect testId={`config-${info.name}-secret-${i}`} value={v} secrets={secrets} onChange={(s) => commit(rows.map((r, j) => (j === i ? [r[0], s] : r)))} />
          <button className="icon-btn" aria-label="Remove" onClick={() => commit(rows.filter((_, j) => j !== i))}>
            ×
          </button>
        </div>
      ))}
      <button className="btn btn-small" data-testid={`config-${info.name}-add`} onClick={() => setRows([...rows, ["", ""]])}>
        + header from a secret
      </button>
    </div>
  );
}

function TemplateControl({ id, info, value, onChange }: ControlProps) {
  const text = typeof value === "string" ? value : "";
  const vars = useTemplateVariables(text);
  return (
    <>
      <TemplateEditor
        id={id}
        data-testid={`config-${info.name}`}
        rows={Math.min(16, Math.max(6, text.split("\n").length + 1))}
        value={text}
        placeholder={placeholderOf(info) || "Hello {{ name }}"}
        spellCheck={false}
        onChange={(e) => onChange(textToValue(info, e.target.value))}
      />
      <div className="template-vars" data-testid={`config-${info.name}-vars`}>
        {vars.length === 0 ? (
          <span className="muted small">no variables</span>
        ) : (
          <>
            <span className="muted small">input ports:</span>
            {vars.map((v) => (
              <span key={v} className="chip">
                {v}
              </span>
            ))}
          </>
        )}
      </div>
    </>
  );
}

function JsonControl({ id, info, value, onChange }: ControlProps) {
  const external = value === undefined || value === null ? "" : JSON.stringify(value, null, 2);
  const [text, setText] = useLocalText(external, (local) => {
    const parsed = parseJsonText(local);
    return parsed.ok && JSON.stringify(parsed.value) === JSON.stringify(value ?? undefined);
  });
  const parsed = parseJsonText(text);
  let typeError = "";
  if (parsed.ok && parsed.value !== undefined) {
    const t = info.schema.type;
    const v = parsed.value;
    if (t === "object" && (typeof v !== "object" || v === null || Array.isArray(v))) typeError = "an object { ... } is needed";
    if (t === "array" && !Array.isArray(v)) typeError = "a list [ ... ] is needed";
  }
  return (
    <>
      <textarea
        id={id}
        className={`input mono${parsed.ok && !typeError ? "" : " input-invalid"}`}
        data-testid={`config-${info.name}`}
        rows={Math.min(12, Math.max(3, text.split("\n").length + 1))}
        value={text}
        spellCheck={false}
        placeholder={info.schema.type === "array" ? "[]" : "{}"}
        onChange={(e) => {
          const t = e.target.value;
          setText(t);
          const p = parseJsonText(t);
          if (p.ok) onChange(p.value);
        }}
      />
      {!parsed.ok && (
        <div className="field-message" data-testid={`config-${info.name}-error`}>
          JSON: {parsed.error}
        </div>
      )}
      {typeError && <div className="field-message">{typeError}</div>}
    </>
  );
}
