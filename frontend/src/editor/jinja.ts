// The variables a Jinja2 template reads, as jinja2.meta.find_undeclared_variables finds them
// on the server: each becomes an input port. This reading is the editor's immediate estimate
// while the user types; POST /api/v1/blocks/{block}/ports has the last word.

const KEYWORDS = new Set([
  "and", "or", "not", "in", "is", "if", "else", "elif", "endif", "for", "endfor", "set",
  "endset", "macro", "endmacro", "call", "endcall", "filter", "endfilter", "with", "endwith",
  "block", "endblock", "extends", "include", "import", "from", "as", "recursive", "true",
  "false", "none", "True", "False", "None", "loop", "super", "self", "varargs", "kwargs",
  "raw", "endraw", "ignore", "missing", "context", "without", "scoped", "required", "do",
  "continue", "break", "autoescape", "endautoescape", "trans", "endtrans", "pluralize",
  "range", "lipsum", "dict", "cycler", "joiner", "namespace", "caller",
]);

type Token = { kind: "name" | "string" | "number" | "op"; text: string };

function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const c = expr[i];
    if (/\s/.test(c)) {
      i++;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < expr.length && expr[j] !== c) j += expr[j] === "\\" ? 2 : 1;
      tokens.push({ kind: "string", text: expr.slice(i, j + 1) });
      i = j + 1;
    } else if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < expr.length && /[A-Za-z0-9_]/.test(expr[j])) j++;
      tokens.push({ kind: "name", text: expr.slice(i, j) });
      i = j;
    } else if (/[0-9]/.test(c)) {
      let j = i + 1;
      while (j < expr.length && /[0-9._]/.test(expr[j])) j++;
      tokens.push({ kind: "number", text: expr.slice(i, j) });
      i = j;
    } else {
      const two = expr.slice(i, i + 2);
      const op = ["==", "!=", "<=", ">=", "//", "**"].includes(two) ? two : c;
      tokens.push({ kind: "op", text: op });
      i += op.length;
    }
  }
  return tokens;
}

/** The names an expression reads that it did not bind (attributes, filters, tests, keyword
 *  arguments and keywords excluded). */
function readNames(tokens: Token[], bound: Set<string>, out: string[]): void {
  for (let k = 0; k < tokens.length; k++) {
    const t = tokens[k];
    if (t.kind !== "name" || KEYWORDS.has(t.text)) continue;
    const prev = tokens[k - 1];
    const next = tokens[k + 1];
    if (prev && prev.kind === "op" && (prev.text === "." || prev.text === "|")) continue;
    if (prev && prev.kind === "name" && prev.text === "is") continue;
    if (prev && prev.kind === "name" && prev.text === "not" && tokens[k - 2]?.text === "is")
      continue;
    if (next && next.kind === "op" && next.text === "=") continue; // keyword argument
    if (bound.has(t.text) || out.includes(t.text)) continue;
    out.push(t.text);
  }
}

/** The template's undeclared variables, in order of first use. A template that does not
 *  parse gives what could be read; the server reports the parse error. */
export function templateVariables(template: string): string[] {
  const out: string[] = [];
  const bound = new Set<string>();
  const tagRe = /\{#[\s\S]*?#\}|\{%-?\s*raw\s*-?%\}[\s\S]*?\{%-?\s*endraw\s*-?%\}|\{\{-?([\s\S]*?)-?\}\}|\{%-?([\s\S]*?)-?%\}/g;
  let match: RegExpExecArray | null;
  while ((match = tagRe.exec(template)) !== null) {
    if (match[1] !== undefined) {
      readNames(tokenize(match[1]), bound, out);
    } else if (match[2] !== undefined) {
      const tokens = tokenize(match[2]);
      const head = tokens[0]?.text;
      if (head === "for") {
        const inAt = tokens.findIndex((t) => t.kind === "name" && t.text === "in");
        const targets = tokens.slice(1, inAt < 0 ? tokens.length : inAt);
        readNames(tokens.slice(inAt + 1), bound, out);
        for (const t of targets) if (t.kind === "name") bound.add(t.text);
      } else if (head === "set" || head === "with") {
        const eq = tokens.findIndex((t) => t.kind === "op" && t.text === "=");
        const targets = tokens.slice(1, eq < 0 ? tokens.length : eq);
        if (eq >= 0) readNames(tokens.slice(eq + 1), bound, out);
        for (const t of targets) if (t.kind === "name") bound.add(t.text);
      } else if (head === "macro" || head === "import" || head === "from" || head === "block") {
        // Names declared here are not inputs.
        for (const t of tokens.slice(1)) if (t.kind === "name") bound.add(t.text);
      } else {
        readNames(tokens.slice(1), bound, out);
      }
    }
  }
  return out;
}

/** Does this text look like a template (so its variables matter)? */
export function looksLikeTemplate(text: string): boolean {
  return /\{\{|\{%/.test(text);
}
