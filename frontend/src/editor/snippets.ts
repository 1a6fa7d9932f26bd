// Ready-to-copy calls of a published app: curl, Python (httpx), Python openai client,
// JavaScript fetch.

import type { BlockMap, Graph } from "./graph";

export interface SnippetSet {
  url: string;
  curl: string;
  python: string;
  openai: string;
  javascript: string;
}

const EXAMPLE_BY_BLOCK: Record<string, unknown> = {
  text_input: "Hello",
  number_input: 1,
  boolean_input: true,
  json_input: { key: "value" },
  list_input: ["a", "b"],
};

/** Example inputs: each input node's default, else a value of its kind. */
export function exampleInputs(graph: Graph, blocks: BlockMap): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const n of graph.nodes) {
    const spec = blocks.get(n.data.block);
    if (spec?.role !== "flow_input") continue;
    const name = n.data.config.name;
    if (typeof name !== "string" || !name) continue;
    const def = n.data.config.default;
    out[name] = def !== undefined && def !== null ? def : (EXAMPLE_BY_BLOCK[n.data.block] ?? "...");
  }
  return out;
}

function pyLiteral(value: unknown, indent = ""): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map((v) => pyLiteral(v, indent)).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return "{}";
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${pyLiteral(v, indent)}`).join(", ")}}`;
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function buildSnippets(origin: string, slug: string, inputs: Record<string, unknown>, key = "dw_YOUR_KEY"): SnippetSet {
  const url = `${origin}/api/v1/apps/${slug}/run`;
  const body = JSON.stringify({ inputs });
  const firstText = Object.values(inputs).find((v) => typeof v === "string");
  const question = typeof firstText === "string" ? firstText : "Hello";
  const curl = [
    `curl -X POST ${url} \\`,
    `  -H "Authorization: Bearer ${key}" \\`,
    `  -H "Content-Type: application/json" \\`,
    `  -d ${shellQuote(body)}`,
  ].join("\n");
  const python = [
    "import httpx",
    "",
    "response = httpx.post(",
    `    ${JSON.stringify(url)},`,
    `    headers={"Authorization": "Bearer ${key}"},`,
    `    json={"inputs": ${pyLiteral(inputs)}},`,
    "    timeout=120,",
    ")",
    "response.raise_for_status()",
    'print(response.json()["outputs"])',
  ].join("\n");
  const openai = [
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url=${JSON.stringify(`${origin}/v1`)}, api_key=${JSON.stringify(key)})`,
    "reply = client.chat.completions.create(",
    `    model=${JSON.stringify(slug)},  # the app's slug`,
    `    messages=[{"role": "user", "content": ${JSON.stringify(question)}}],`,
    ")",
    "print(reply.choices[0].message.content)",
  ].join("\n");
  const javascript = [
    `const response = await fetch(${JSON.stringify(url)}, {`,
    `  method: "POST",`,
    `  headers: { "Authorization": "Bearer ${key}", "Content-Type": "application/json" },`,
    `  body: JSON.stringify({ inputs: ${JSON.stringify(inputs)} }),`,
    "});",
    "if (!response.ok) throw new Error((await response.json()).error.message);",
    "const { outputs } = await response.json();",
    "console.log(outputs);",
  ].join("\n");
  return { url, curl, python, openai, javascript };
}
