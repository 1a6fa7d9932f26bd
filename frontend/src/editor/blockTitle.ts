// How a block is named to a person: "Text input", not text_input; with its category's icon;
// and what kind of block it is by its role (the output block sits in the "input" category,
// with the inputs, but it is an output).

import type { BlockSpec } from "../api/types";

const ICONS: Record<string, string> = {
  input: "⇥",
  output: "⇤",
  data_process: "⚙",
  condition: "◆",
  llm: "✦",
  invoke: "↗",
  tool: "⚒",
};

const ACRONYMS = new Set(["llm", "json", "sql", "http", "api", "url", "csv", "mcp", "qa", "id"]);

export function blockTitle(name: string): string {
  const words = name.split(/[_\s]+/).filter(Boolean);
  return words
    .map((w, i) => (ACRONYMS.has(w.toLowerCase()) ? w.toUpperCase() : i === 0 ? w[0].toUpperCase() + w.slice(1) : w))
    .join(" ");
}

/** "output" for the flow's outputs, else the block's category. */
export function blockKind(spec: Pick<BlockSpec, "category" | "role"> | undefined): string {
  if (!spec) return "unknown";
  return spec.role === "flow_output" ? "output" : spec.category;
}

export function blockIcon(spec: Pick<BlockSpec, "category" | "role"> | undefined): string {
  return ICONS[blockKind(spec)] ?? "▪";
}
