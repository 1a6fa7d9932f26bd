// Which sources and tables the agents can query: every table by source, and a table's columns
// (name, type, key) on a click. A newcomer could not see what there was to ask about.

import { useEffect, useState } from "react";
import { request } from "../api/transport";

interface Column {
  name: string;
  type?: string;
  source_type?: string;
}

interface TableDetail {
  table: string;
  primary_key: string[];
  columns: Column[];
}

const e = encodeURIComponent;

/** Tables ("source.schema.table") grouped by source, in the server's order. */
export function bySource(tables: string[]): [string, string[]][] {
  const groups = new Map<string, string[]>();
  for (const t of tables) {
    const source = t.split(".")[0];
    groups.set(source, [...(groups.get(source) ?? []), t]);
  }
  return [...groups];
}

export function SchemaBrowser() {
  const [tables, setTables] = useState<string[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<{ name: string; detail: TableDetail | null } | null>(null);
  useEffect(() => {
    request<string[]>("GET", "/api/v1/tables").then(setTables, (err: unknown) => setError(err instanceof Error ? err.message : String(err)));
  }, []);
  const show = (table: string) => {
    if (open?.name === table) return setOpen(null);
    setOpen({ name: table, detail: null });
    request<TableDetail>("GET", `/api/v1/tables/${e(table)}`).then(
      (detail) => setOpen((o) => (o?.name === table ? { name: table, detail } : o)),
      (err: unknown) => setError(err instanceof Error ? err.message : String(err)),
    );
  };
  return (
    <details className="tqa-schema" data-testid="tqa-schema" open>
      <summary>Sources and tables</summary>
      {error && <div className="small error-text">{error}</div>}
      {tables?.length === 0 && <p className="small muted">No data source is configured (see docs/data.md).</p>}
      {tables &&
        bySource(tables).map(([source, list]) => (
          <div key={source} className="tqa-source" data-testid={`tqa-source-${source}`}>
            <strong>{source}</strong>
            <ul>
              {list.map((t) => (
                <li key={t}>
                  <button type="button" className="link" data-testid={`tqa-table-${t}`} onClick={() => show(t)}>
                    {t.split(".").slice(1).join(".")}
                  </button>
                  {open?.name === t && open.detail && (
                    <table className="tqa-columns small" data-testid="tqa-columns">
                      <tbody>
                        {open.detail.columns.map((c) => (
                          <tr key={c.name}>
                            <td>
                              {c.name}
                              {open.detail!.primary_key.includes(c.name) ? " 🔑" : ""}
                            </td>
                            <td className="muted">{c.source_type ?? c.type}</td>
                          </tr>
                        ))}
                      </tbody>
                    </table>
                  )}
                </li>
              ))}
            </ul>
          </div>
        ))}
    </details>
  );
}
