// A table as a grid: a node's output or a `table` message (Chain-of-Table's step by step).

import { useState } from "react";
import { formatSeconds } from "./format";
import type { NodeMessageEntry } from "./runState";
import { tableOfMessage, type Table } from "./table";

/** Rows drawn before "show all": a grid of thousands of rows would stall the panel. */
export const SHOWN_ROWS = 50;

function cell(value: unknown): string {
  if (value === null || value === undefined) return "";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

export function TableView({ table, testId }: { table: Table; testId?: string }) {
  const [all, setAll] = useState(false);
  const rows = all ? table.rows : table.rows.slice(0, SHOWN_ROWS);
  const hidden = table.rows.length - rows.length;
  return (
    <div className="dw-table-wrap" data-testid={testId}>
      <table className="dw-table">
        <thead>
          <tr>
            {table.columns.map((c, i) => (
              <th key={i}>{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row, r) => (
            <tr key={r}>
              {table.columns.map((_, c) => (
                <td key={c} className={row[c] === null ? "dw-muted" : undefined}>
                  {row[c] === null ? "null" : cell(row[c])}
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      <div className="dw-muted">
        {table.rows.length} row{table.rows.length === 1 ? "" : "s"} × {table.columns.length} column
        {table.columns.length === 1 ? "" : "s"}
        {hidden > 0 && (
          <>
            {" "}
            <button type="button" className="dw-link" onClick={() => setAll(true)}>
              show all {table.rows.length}
            </button>
          </>
        )}
      </div>
    </div>
  );
}

/** The node's `table` messages, in order: each step's operation, why it was skipped if it
 *  was, and the table it left. */
export function TableMessages({ messages }: { messages: NodeMessageEntry[] }) {
  const steps = messages.flatMap((m) => {
    const table = tableOfMessage(m);
    return table ? [{ m, table }] : [];
  });
  if (steps.length === 0) return null;
  return (
    <>
      <h4>Tables</h4>
      {steps.map(({ m, table }, i) => (
        <div key={i} className="dw-table-step" data-testid="debug-table-step">
          <div>
            <span className="dw-muted">+{formatSeconds(m.t)}</span>{" "}
            <code>{typeof m.data.operation === "string" ? m.data.operation : "table"}</code>
            {typeof m.data.reason === "string" && m.data.reason && (
              <span className="dw-muted"> — {m.data.reason}</span>
            )}
          </div>
          <TableView table={table} />
        </div>
      ))}
    </>
  );
}
