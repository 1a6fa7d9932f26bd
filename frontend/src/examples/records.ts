// Examples from a file: JSON Lines (one object a line) or CSV (a header row, then one record a
// row; quoted fields may hold commas, quotes doubled, and line breaks).

export type ExampleRecord = Record<string, unknown>;

export function parseJsonl(text: string): ExampleRecord[] {
  const out: ExampleRecord[] = [];
  text.split(/\r?\n/).forEach((line, i) => {
    if (!line.trim()) return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new Error(`line ${i + 1} is not JSON`);
    }
    if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error(`line ${i + 1} is not a JSON object`);
    out.push(value as ExampleRecord);
  });
  return out;
}

function csvRows(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = "";
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') {
        field += '"';
        i++;
      } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ",") {
      row.push(field);
      field = "";
    } else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(field);
      rows.push(row);
      row = [];
      field = "";
    } else field += c;
  }
  if (field !== "" || row.length > 0) {
    row.push(field);
    rows.push(row);
  }
  return rows.filter((r) => r.some((f) => f !== ""));
}

export function parseCsv(text: string): ExampleRecord[] {
  const [header, ...rows] = csvRows(text);
  if (!header) return [];
  return rows.map((r) => Object.fromEntries(header.map((h, i) => [h.trim(), r[i] ?? ""])));
}

export function parseRecords(name: string, text: string): ExampleRecord[] {
  return /\.csv$/i.test(name) ? parseCsv(text) : parseJsonl(text);
}

/** Batches of at most `size` (the server takes 1,000 examples a call). */
export function batches<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
