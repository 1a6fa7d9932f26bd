// May a value of one port type flow into another? The server answers with its matrix
// (GET /api/v1/types); pairs it does not list (types born of dynamic ports, or a server
// without the route) are decided here by the same rules as the server's
// registry/types.py `compatibility`, read off the type names. A name this cannot read is
// allowed: the server checks every edge again when the flow is saved.

import type { Compatibility, TypesResponse } from "../api/types";

export type TypeExpr =
  | { kind: "any" }
  | { kind: "none" }
  | { kind: "simple"; name: string }
  | { kind: "list"; item: TypeExpr }
  | { kind: "dict"; value: TypeExpr }
  | { kind: "union"; members: TypeExpr[] }
  | { kind: "literal"; values: string[] }
  | { kind: "generic"; name: string; args: TypeExpr[] };

function splitTop(text: string, sep: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === "\\") i++;
      else if (c === quote) quote = null;
      continue;
    }
    if (c === "'" || c === '"') quote = c;
    else if (c === "[") depth++;
    else if (c === "]") depth--;
    else if (depth === 0 && c === sep) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

const cache = new Map<string, TypeExpr>();

export function parseType(name: string): TypeExpr {
  const hit = cache.get(name);
  if (hit) return hit;
  const parsed = parseUncached(name.trim());
  cache.set(name, parsed);
  return parsed;
}

function parseUncached(text: string): TypeExpr {
  const members = splitTop(text, "|");
  if (members.length > 1) return { kind: "union", members: members.map(parseUncached) };
  if (text === "Any" || text === "" || text === "object") return { kind: "any" };
  if (text === "None" || text === "NoneType") return { kind: "none" };
  const open = text.indexOf("[");
  if (open > 0 && text.endsWith("]")) {
    const head = text.slice(0, open).trim();
    const inner = text.slice(open + 1, -1);
    if (head === "Literal") return { kind: "literal", values: splitTop(inner, ",") };
    const args = splitTop(inner, ",").map(parseUncached);
    if (head === "list" || head === "List" || head === "Sequence")
      return { kind: "list", item: args[0] ?? { kind: "any" } };
    if (head === "dict" || head === "Dict" || head === "Mapping")
      return { kind: "dict", value: args[1] ?? { kind: "any" } };
    if (head === "Optional") return { kind: "union", members: [args[0], { kind: "none" }] };
    if (head === "Union") return { kind: "union", members: args };
    return { kind: "generic", name: head, args };
  }
  if (text === "list") return { kind: "list", item: { kind: "any" } };
  if (text === "dict") return { kind: "dict", value: { kind: "any" } };
  return { kind: "simple", name: text };
}

function combine(results: Compatibility[]): Compatibility {
  if (results.every((r) => r === "yes")) return "yes";
  if (results.every((r) => r === "no")) return "no";
  return "check";
}

function best(results: Compatibility[]): Compatibility {
  if (results.includes("yes")) return "yes";
  if (results.includes("check")) return "check";
  return "no";
}

function literalBase(values: string[]): TypeExpr {
  const kinds = new Set(
    values.map((v) => {
      if (/^['"]/.test(v)) return "str";
      if (v === "True" || v === "False") return "bool";
      if (/^-?\d+$/.test(v)) return "int";
      if (/^-?\d*\.\d+$/.test(v)) return "float";
      if (v === "None") return "None";
      return "?";
    }),
  );
  if (kinds.size !== 1 || kinds.has("?")) return { kind: "any" };
  const only = [...kinds][0];
  return only === "None" ? { kind: "none" } : { kind: "simple", name: only };
}

/** The rules of the server's registry/types.py `compatibility`, on parsed names. "unknown"
 *  when a type (a pydantic model, say) cannot be judged from its name. */
export function compatExpr(s: TypeExpr, t: TypeExpr): Compatibility | "unknown" {
  if (t.kind === "any") return "yes";
  if (s.kind === "any") return "check";
  if (s.kind === "union") {
    const parts = s.members.map((m) => compatExpr(m, t));
    if (parts.includes("unknown")) return "unknown";
    return combine(parts as Compatibility[]);
  }
  if (t.kind === "union") {
    const parts = t.members.map((m) => compatExpr(s, m));
    const known = parts.filter((p): p is Compatibility => p !== "unknown");
    const verdict = best(known);
    if (verdict === "no" && parts.includes("unknown")) return "unknown";
    return verdict;
  }
  if (s.kind === "literal" && t.kind === "literal") {
    const tv = new Set(t.values);
    if (s.values.every((v) => tv.has(v))) return "yes";
    return s.values.some((v) => tv.has(v)) ? "check" : "no";
  }
  if (s.kind === "literal") {
    const base = literalBase(s.values);
    return base.kind === "any" ? "check" : compatExpr(base, t);
  }
  if (t.kind === "literal") {
    const base = literalBase(t.values);
    return compatExpr(s, base) === "no" ? "no" : "check";
  }
  if (s.kind === "list") return t.kind === "list" ? compatExpr(s.item, t.item) : "no";
  if (s.kind === "dict") return t.kind === "dict" ? compatExpr(s.value, t.value) : "no";
  if (t.kind === "list" || t.kind === "dict") {
    return s.kind === "generic" ? "unknown" : "no";
  }
  if (s.kind === "none" && t.kind === "none") return "yes";
  if (s.kind === "simple" && t.kind === "simple") {
    if (s.name === t.name) return "yes";
    if (s.name === "int" && t.name === "float") return "yes";
    const builtins = new Set(["str", "int", "float", "bool"]);
    if (builtins.has(s.name) && builtins.has(t.name)) return "no";
    return "unknown"; // models: subclassing is the server's to judge
  }
  if (s.kind === "none" || t.kind === "none") {
    const other = s.kind === "none" ? t : s;
    return other.kind === "simple" && !["str", "int", "float", "bool"].includes(other.name)
      ? "unknown"
      : "no";
  }
  return "unknown";
}

export interface ConnectionVerdict {
  ok: boolean;
  compat: Compatibility | "unknown";
  reason?: string;
}

/** Decide one edge: the server's matrix first, then the local rules, else allowed. */
export function checkTypes(
  source: string,
  target: string,
  matrix?: TypesResponse["compatibility"] | null,
): ConnectionVerdict {
  const fromServer = matrix?.[source]?.[target];
  const compat: Compatibility | "unknown" =
    fromServer ?? compatExpr(parseType(source), parseType(target));
  if (compat === "no") {
    return { ok: false, compat, reason: `${source} → ${target}: incompatible` };
  }
  return { ok: true, compat };
}

// ---------------------------------------------------------------------------------------------
// Port colours: one per type family, so a glance says what fits where.

const FAMILY_COLOURS: Record<string, string> = {
  str: "#2e9e5b",
  int: "#2f6fd6",
  float: "#2f6fd6",
  bool: "#d9822b",
  list: "#8b5cd6",
  dict: "#0f9bb0",
  none: "#9aa0a6",
  any: "#7c8591",
  literal: "#c2417a",
};

function familyOf(t: TypeExpr): string {
  switch (t.kind) {
    case "any":
      return "any";
    case "none":
      return "none";
    case "list":
      return "list";
    case "dict":
      return "dict";
    case "literal":
      return "literal";
    case "union": {
      const real = t.members.filter((m) => m.kind !== "none");
      return real.length ? familyOf(real[0]) : "none";
    }
    case "simple":
      return t.name;
    case "generic":
      return t.name;
  }
}

function hashHue(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
  return Math.abs(h) % 360;
}

const colourCache = new Map<string, string>();

export function typeColour(typeName: string): string {
  const hit = colourCache.get(typeName);
  if (hit) return hit;
  const family = familyOf(parseType(typeName));
  const colour = FAMILY_COLOURS[family] ?? `hsl(${hashHue(family)} 55% 45%)`;
  colourCache.set(typeName, colour);
  return colour;
}
