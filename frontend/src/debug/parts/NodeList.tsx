// Every node of the flow with its run status and duration; click one to inspect it.

import { formatSeconds, totalTokens } from "../format";
import { topLevel } from "../iterations";
import type { RunState } from "../runState";
import { StatusDot, ScriptedLabel } from "./status";

export function NodeList({
  run,
  labels,
  selected,
  onSelect,
}: {
  run: RunState;
  labels: Record<string, string>;
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  if (run.order.length === 0) return <div className="dw-muted">The flow has no nodes yet.</div>;
  return (
    <ul className="dw-nodes" role="listbox" aria-label="Nodes of the run">
      {topLevel(run.order).map((id) => {
        const node = run.nodes[id];
        const tokens = totalTokens(node.usage);
        return (
          <li
            key={id}
            role="option"
            aria-selected={selected === id}
            className={`dw-node-row${selected === id ? " dw-selected" : ""}`}
            data-testid={`debug-node-${id}`}
            data-status={node.status}
            onClick={() => onSelect(id)}
          >
            <StatusDot status={node.status} />
            <span className="dw-node-id">{labels[id] ?? id}</span>
            <span className="dw-node-block">{node.block ?? ""}</span>
            <span className="dw-node-meta">
              {node.scripted && <ScriptedLabel />}
              {tokens > 0 && <span title="tokens">{tokens} tok</span>}
              {node.duration !== null && <span>{formatSeconds(node.duration)}</span>}
              {node.status === "running" && node.tokens.length > 0 && <span className="dw-caret" />}
            </span>
          </li>
        );
      })}
    </ul>
  );
}
