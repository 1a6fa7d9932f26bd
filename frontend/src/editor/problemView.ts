// How validation problems are shown while a flow is being built: in plain words, each once,
// and only on the blocks the user has worked on — until they validate, save or run, when every
// problem counts. Right after dropping four blocks a newcomer saw five problems and red
// borders for things they had not started yet, and one template error four times.

import type { Problem } from "../api/types";

// Pydantic prefixes a validator's message with the kind of check (after the server's
// "config field 'x': " when there is one); the reader needs the message.
const PREFIXES = /(^|: )(Value error|Assertion failed), /g;

export function plainMessage(message: string): string {
  return message.replace(PREFIXES, "$1");
}

/** Plain messages, each (node, port, severity, message) once, in the server's order. */
export function tidyProblems(problems: Problem[]): Problem[] {
  const seen = new Set<string>();
  const out: Problem[] = [];
  for (const p of problems) {
    const message = plainMessage(p.message);
    const key = `${p.node ?? ""}\u0000${p.port ?? ""}\u0000${p.severity}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(message === p.message ? p : { ...p, message });
  }
  return out;
}

/** The problems to show: all of them once `everything` (after validate, save or run); else
 *  those on touched nodes (flow-level ones, like "no output", wait too). */
export function shownProblems(problems: Problem[], touched: ReadonlySet<string>, everything: boolean): Problem[] {
  if (everything) return problems;
  return problems.filter((p) => p.node !== null && touched.has(p.node));
}
