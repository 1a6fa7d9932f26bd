// Which control a JSON Schema property gets, and how typed text becomes a config value.

import type { JsonSchema } from "../api/types";

export type FieldKind =
  | "string"
  | "template"
  | "number"
  | "integer"
  | "boolean"
  | "enum"
  | "string_list"
  | "json"
  | "any"
  | "secret"
  | "secret_map";

export interface FieldInfo {
  name: string;
  kind: FieldKind;
  /** The schema without its null alternative. */
  schema: JsonSchema;
  nullable: boolean;
  required: boolean;
  title: string;
  description: string;
  default: unknown;
  hasDefault: boolean;
  options?: unknown[];
}

function resolveRef(schema: JsonSchema, root: JsonSchema): JsonSchema {
  if (schema.$ref && schema.$ref.startsWith("#/$defs/")) {
    const target = root.$defs?.[schema.$ref.slice("#/$defs/".length)];
    if (target) return { ...target, ...schema, $ref: undefined };
  }
  return schema;
}

function isNull(s: JsonSchema): boolean {
  return s.type === "null" || (Array.isArray(s.type) && s.type.length === 1 && s.type[0] === "null");
}

export function titleCase(name: string): string {
  const words = name.replace(/_/g, " ");
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The control for one config property. */
export function classifyField(name: string, raw: JsonSchema, required: boolean, root: JsonSchema = {}): FieldInfo {
  let schema = resolveRef(raw, root);
  let nullable = false;
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    const real = alternatives.filter((s) => !isNull(s)).map((s) => resolveRef(s, root));
    nullable = real.length < alternatives.length;
    if (real.length === 1) {
      const { anyOf: _a, oneOf: _o, ...outer } = schema;
      void _a;
      void _o;
      schema = { ...outer, ...real[0] };
    } else {
      schema = { ...schema, anyOf: real, oneOf: undefined };
    }
  } else if (Array.isArray(schema.type) && schema.type.includes("null")) {
    nullable = true;
    const types = schema.type.filter((t) => t !== "null");
    schema = { ...schema, type: types.length === 1 ? types[0] : types };
  }
  const kind = kindOf(name, schema);
  const info: FieldInfo = {
    name,
    kind,
    schema,
    nullable,
    required,
    title: (raw.title as string | undefined) ?? titleCase(name),
    description: String(raw.description ?? schema.description ?? ""),
    default: raw.default,
    hasDefault: "default" in raw,
  };
  if (kind === "enum") info.options = schema.enum ?? (schema.const !== undefined ? [schema.const] : []);
  return info;
}

function kindOf(name: string, s: JsonSchema): FieldKind {
  const secret = /secret/i.test(name);
  const type = Array.isArray(s.type) ? (s.type.length === 1 ? s.type[0] : undefined) : s.type;
  if (secret && type === "string") return "secret";
  if (secret && type === "object") {
    const ap = s.additionalProperties;
    if (ap && typeof ap === "object" && ap.type === "string") return "secret_map";
  }
  if (s.enum || s.const !== undefined) return "enum";
  if (s.anyOf && s.anyOf.length > 1) return "any";
  switch (type) {
    case "string":
      return isTemplateField(name, s) ? "template" : "string";
    case "integer":
      return "integer";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "array": {
      const items = s.items;
      return items && !Array.isArray(items) && items.type === "string" && !items.enum ? "string_list" : "json";
    }
    case "object":
      return "json";
    default:
      return "any";
  }
}

/** Every property of a config schema, in the schema's order. */
export function formFields(schema: JsonSchema): FieldInfo[] {
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).map(([name, prop]) =>
    classifyField(name, prop, required.has(name), schema),
  );
}

/** An input's text as the config value; `undefined` removes the key (the default applies). */
export function textToValue(info: FieldInfo, text: string): unknown {
  switch (info.kind) {
    case "number":
    case "integer": {
      if (text.trim() === "") return info.nullable && info.required ? null : undefined;
      const n = Number(text);
      if (Number.isNaN(n)) return text; // left for the server to refuse, with its message
      return n;
    }
    case "string":
    case "template":
    case "secret":
      if (text === "" && info.nullable) return info.required ? null : undefined;
      return text;
    case "string_list": {
      const items = text.split("\n").map((s) => s.trim()).filter((s) => s !== "");
      if (items.length === 0 && info.nullable) return undefined;
      return items;
    }
    case "any": {
      if (text.trim() === "") return undefined;
      try {
        return JSON.parse(text);
      } catch {
        return text; // not JSON: the text itself
      }
    }
    default:
      return text;
  }
}

/** A config value as the text its input shows. */
export function valueToText(info: FieldInfo, value: unknown): string {
  if (value === undefined || value === null) return "";
  switch (info.kind) {
    case "string_list":
      return Array.isArray(value) ? value.map(String).join("\n") : String(value);
    case "any":
      return typeof value === "string" && !looksLikeJson(value) ? value : JSON.stringify(value);
    case "json":
      return JSON.stringify(value, null, 2);
    default:
      return String(value);
  }
}

function looksLikeJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** Parse a JSON editor's text: the value, or the parse error's message. Empty text is "unset"
 *  (undefined) for an optional field. */
export function parseJsonText(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  if (text.trim() === "") return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

/** The config with one field set (undefined: removed). */
export function setField(config: Record<string, unknown>, name: string, value: unknown): Record<string, unknown> {
  const next = { ...config };
  if (value === undefined) delete next[name];
  else next[name] = value;
  return next;
}

/** Is this config field a Jinja2 template (multi-line editor, variables become ports)? */
export function isTemplateField(field: string, schema: { description?: unknown; title?: unknown }): boolean {
  const text = `${String(schema.description ?? "")} ${String(schema.title ?? "")}`;
  return /jinja|template/i.test(text) || ["template", "prompt", "system"].includes(field);
}
