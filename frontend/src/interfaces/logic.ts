// What the interfaces page decides, apart from drawing it: how an input reads in a signature,
// whether an edit may be saved, and the definition a save sends.

import type { InterfaceDef, InterfaceInput } from "./types";

/** The fields the page edits; the rest of the definition is kept as stored. */
export interface Draft {
  description: string;
  code: string;
}

export function draftOf(def: InterfaceDef): Draft {
  return { description: def.description, code: def.code };
}

/** `start_date: date`, `top: int = 5`, as the server's signature writes it (Python's repr for
 *  strings and booleans, so the page and the planning prompt agree). */
export function inputLabel(input: InterfaceInput): string {
  if (input.default === null || input.default === undefined) return `${input.name}: ${input.type}`;
  return `${input.name}: ${input.type} = ${pythonRepr(input.default)}`;
}

function pythonRepr(value: unknown): string {
  if (typeof value === "string") return `'${value.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;
  if (typeof value === "boolean") return value ? "True" : "False";
  return JSON.stringify(value);
}

export function isChanged(def: InterfaceDef, draft: Draft): boolean {
  return draft.description.trim() !== def.description || draft.code !== def.code;
}

/** Why the draft cannot be saved, or null. The server runs the code only when it is called, so
 *  the one thing checked here is what every call needs: a function named as the interface. */
export function draftProblem(def: InterfaceDef, draft: Draft): string | null {
  if (!draft.description.trim()) return "The description is empty: the planner picks interfaces by it.";
  const defines = new RegExp(`^def\\s+${def.name}\\s*\\(`, "m");
  if (!defines.test(draft.code)) return `The code must define the function ${def.name}(...).`;
  return null;
}

/** The whole definition to PUT (a new version): the stored one with the draft's fields. */
export function edited(def: InterfaceDef, draft: Draft): InterfaceDef {
  return { ...def, description: draft.description.trim(), code: draft.code };
}
