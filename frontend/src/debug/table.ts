// Recognising tables among node outputs and messages, so the inspector can show them as a grid
// rather than JSON: {columns, rows} (rows as arrays or records: sql_query, Chain-of-Table's
// `table` events) or a list of flat records (a DataFrame's records).

export interface Table {
  columns: string[];
  rows: unknown[][];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isFlat(record: Record<string, unknown>): boolean {
  return Object.values(record).every((v) => v === null || typeof v !== "object");
}

function fromRecords(records: Record<string, unknown>[], given?: string[]): Table {
  // Columns in order of first appearance: records of one table may each miss some keys.
  const columns = given ? [...given] : [];
  const known = new Set(columns);
  for (const record of records) {
    for (const key of Object.keys(record)) {
      if (!known.has(key)) {
        known.add(key);
        columns.push(key);
      }
    }
  }
  return { columns, rows: records.map((r) => columns.map((c) => r[c])) };
}

/** The value as a table, or null when it is not one. An empty list is not a table (nothing
 *  says it has columns); {columns, rows: []} is, so an empty result shows its header. */
export function asTable(value: unknown): Table | null {
  if (Array.isArray(value)) {
    if (value.length === 0 || !value.every((r) => isRecord(r) && isFlat(r))) return null;
    return fromRecords(value as Record<string, unknown>[]);
  }
  if (!isRecord(value)) return null;
  const { columns, rows } = value;
  if (!Array.isArray(columns) || !columns.every((c) => typeof c === "string")) return null;
  if (!Array.isArray(rows)) return null;
  if (rows.every((r) => Array.isArray(r))) return { columns, rows: rows as unknown[][] };
  if (rows.every(isRecord)) return fromRecords(rows as Record<string, unknown>[], columns);
  return null;
}

/** A `table` message's grid (Chain-of-Table emits one per operation: {operation, reason,
 *  columns, rows}), or null when the message is not a table. */
export function tableOfMessage(message: { kind: string; data: Record<string, unknown> }): Table | null {
  return message.kind === "table" ? asTable(message.data) : null;
}
