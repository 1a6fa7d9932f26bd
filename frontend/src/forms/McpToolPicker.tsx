// The mcp_tool block's server, shown: its tools listed from the server itself, one picked
// as the node's `tool`, and the picked tool's input schema (each argument's type, whether it
// is required, its description) so the node's `inputs` and `arguments` can be filled in.

import { useEffect, useRef, useState } from "react";
import { ApiError } from "../api/transport";
import { argumentsOf, listMcpTools, serverOf, type McpTool } from "./mcpTools";

export function McpToolPicker({
  config,
  onPick,
}: {
  config: Record<string, unknown>;
  onPick: (tool: string) => void;
}) {
  const server = serverOf(config);
  // What was listed (or refused) is kept with the server it came from: a changed url,
  // command or token secret shows nothing until that server is listed.
  const key = server === null ? null : JSON.stringify(server);
  const [listed, setListed] = useState<{ key: string; tools: McpTool[] } | null>(null);
  const [problem, setProblem] = useState<{ key: string; message: string } | null>(null);
  const [loading, setLoading] = useState<{ key: string; call: AbortController } | null>(null);
  // The call under way, cancelled when the server changes or the form closes.
  const calls = useRef(new Set<AbortController>());
  useEffect(() => {
    const inFlight = calls.current;
    return () => {
      inFlight.forEach((c) => c.abort());
      inFlight.clear();
    };
  }, [key]);
  const list = () => {
    if (server === null || key === null) return;
    const inFlight = calls.current;
    inFlight.forEach((c) => c.abort());
    inFlight.clear();
    const call = new AbortController();
    inFlight.add(call);
    setLoading({ key, call });
    setProblem(null);
    listMcpTools(server, { signal: call.signal }).then(
      (found) => {
        if (call.signal.aborted) return;
        inFlight.delete(call);
        setLoading(null);
        setListed({ key, tools: found });
      },
      (e: unknown) => {
        if (call.signal.aborted) return;
        inFlight.delete(call);
        setLoading(null);
        setProblem({ key, message: e instanceof ApiError ? e.message : String(e) });
      },
    );
  };
  const tools = listed !== null && listed.key === key ? listed.tools : null;
  // A call cancelled by a change of server is not under way for it when it comes back.
  const busy = loading !== null && loading.key === key && !loading.call.signal.aborted;
  const chosen = tools?.find((t) => t.name === config.tool) ?? null;
  return (
    <div className="mcp-tools" data-testid="mcp-tools">
      <button type="button" className="btn" disabled={server === null || busy} onClick={list}>
        {busy ? "Listing tools…" : tools === null ? "List the server's tools" : "List again"}
      </button>
      {server === null && <span className="muted"> Give the server's url (or command) first.</span>}
      {problem !== null && problem.key === key && <p role="alert">{problem.message}</p>}
      {tools !== null && (
        <label className="field">
          Tool
          <select aria-label="Tool" value={chosen?.name ?? ""} onChange={(e) => onPick(e.target.value)}>
            <option value="" disabled>
              {tools.length === 0 ? "the server lists no tool" : "pick a tool"}
            </option>
            {tools.map((t) => (
              <option key={t.name} value={t.name}>
                {t.title && t.title !== t.name ? `${t.name} — ${t.title}` : t.name}
              </option>
            ))}
          </select>
        </label>
      )}
      {chosen && <ToolSchema tool={chosen} />}
    </div>
  );
}

function ToolSchema({ tool }: { tool: McpTool }) {
  const args = argumentsOf(tool);
  return (
    <div data-testid="mcp-tool-schema">
      {tool.description && <p className="muted">{tool.description}</p>}
      {args.length === 0 ? (
        <p className="muted">It takes no arguments.</p>
      ) : (
        <table className="mcp-args">
          <thead>
            <tr>
              <th>argument</th>
              <th>type</th>
              <th />
              <th>description</th>
            </tr>
          </thead>
          <tbody>
            {args.map((a) => (
              <tr key={a.name} data-testid={`mcp-arg-${a.name}`}>
                <td>
                  <code>{a.name}</code>
                </td>
                <td>{a.type}</td>
                <td>{a.required ? "required" : a.default === undefined ? "optional" : `default ${JSON.stringify(a.default)}`}</td>
                <td>{a.description}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
