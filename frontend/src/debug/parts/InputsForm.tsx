// The run form: one field per input node of the flow, with the parse error beside it.

import type { ReactNode } from "react";
import type { FormValues, InputField } from "../inputs";

export function InputsForm({
  fields,
  values,
  errors,
  onChange,
  onSubmit,
}: {
  fields: InputField[];
  values: FormValues;
  errors: Record<string, string>;
  onChange: (name: string, value: string) => void;
  onSubmit?: () => void;
}) {
  if (fields.length === 0) return <div className="dw-muted">This flow takes no inputs.</div>;
  return (
    <div className="dw-form">
      {fields.map((field) => {
        const id = `dw-input-${field.nodeId}`;
        const value = values[field.name] ?? "";
        const common = {
          id,
          "data-testid": `debug-input-${field.name}`,
          "aria-invalid": errors[field.name] ? true : undefined,
        };
        let control: ReactNode;
        if (field.kind === "boolean") {
          control = (
            <select {...common} value={value} onChange={(e) => onChange(field.name, e.target.value)}>
              {!field.required && (
                <option value="">
                  {field.default !== undefined ? `default (${String(field.default)})` : "not set"}
                </option>
              )}
              <option value="true">true</option>
              <option value="false">false</option>
            </select>
          );
        } else if (field.kind === "number") {
          control = (
            <input
              {...common}
              type="text"
              inputMode="decimal"
              value={value}
              placeholder={field.required ? "a number" : "empty: the default"}
              onChange={(e) => onChange(field.name, e.target.value)}
              onKeyDown={(e) => e.key === "Enter" && onSubmit?.()}
            />
          );
        } else {
          const multiline = field.kind === "json" || value.includes("\n") || value.length > 60;
          control = multiline ? (
            <textarea
              {...common}
              rows={field.kind === "json" ? Math.min(8, Math.max(3, value.split("\n").length)) : 3}
              value={value}
              spellCheck={field.kind === "text"}
              placeholder={placeholder(field)}
              onChange={(e) => onChange(field.name, e.target.value)}
              onKeyDown={(e) => e.key === "Enter" && (e.metaKey || e.ctrlKey) && onSubmit?.()}
            />
          ) : (
            <input
              {...common}
              type="text"
              value={value}
              placeholder={placeholder(field)}
              onChange={(e) => onChange(field.name, e.target.value)}
              onKeyDown={(e) => e.key === "Enter" && onSubmit?.()}
            />
          );
        }
        return (
          <div key={field.name} className="dw-field">
            <label htmlFor={id}>
              <span className="dw-field-name">{field.label}</span>
              <span className="dw-field-kind">
                {field.kind}
                {field.required ? " · required" : ""}
              </span>
            </label>
            {control}
            {field.description && <div className="dw-field-help">{field.description}</div>}
            {errors[field.name] && <div className="dw-field-error">{errors[field.name]}</div>}
          </div>
        );
      })}
    </div>
  );
}

function placeholder(field: InputField): string {
  if (field.kind === "json") return "JSON, e.g. {\"key\": 1}";
  if (field.kind === "list") return "a JSON list, or values separated by commas";
  return field.required ? "" : "empty: the default";
}
