// The iterations of a sub-flow node (map items, repeat rounds, a subflow call) in the
// inspector: a strip of 1…n coloured by status; clicking one opens that iteration's nodes
// with their inputs and outputs. The grouping is iterations.ts.

import { useMemo, useState } from "react";

import { JsonViewer } from "./JsonViewer";
import { formatSeconds } from "./format";
import { iterationNodes, iterationsOf } from "./iterations";
import type { RunState } from "./runState";
import "./iterations.css";

const MAX_SHOWN = 500; // a strip longer than this says how many more there are

/** How the strip names a status: a pause reads as what it is, not as a failure. */
export function statusLabel(status: string): string {
  return status === "waiting" ? "waiting for input" : status;
}

export function IterationPanel({ run, nodeId }: { run: RunState; nodeId: string }) {
  const iterations = useMemo(() => iterationsOf(run, nodeId), [run, nodeId]);
  const [chosen, setChosen] = useState<string | null>(null);
  if (iterations.length === 0) return null;
  const current = iterations.find((it) => it.prefix === chosen) ?? null;
  const counts = new Map<string, number>();
  for (const it of iterations) counts.set(it.status, (counts.get(it.status) ?? 0) + 1);
  return (
    <div className="dw-iterations" data-testid={`iterations-${nodeId}`}>
      <h4>
        Iterations{" "}
        <span className="dw-muted">
          {iterations.length}
          {[...counts].map(([status, n]) => ` · ${n} ${statusLabel(status)}`).join("")}
        </span>
      </h4>
      <div className="dw-iteration-strip" role="tablist" aria-label={`Iterations of ${nodeId}`}>
        {iterations.slice(0, MAX_SHOWN).map((it) => {
          const number = it.index === null ? "call" : String(it.index + 1);
          const label = it.status === "waiting" ? `⏸ ${number}` : number;
          return (
            <button
              key={it.prefix}
              type="button"
              role="tab"
              aria-selected={it.prefix === chosen}
              className={`dw-iteration dw-it-${it.status}${it.prefix === chosen ? " dw-selected" : ""}`}
              data-testid={`iteration-${it.prefix.slice(0, -1)}`}
              data-status={it.status}
              title={`${it.prefix.slice(0, -1)}: ${statusLabel(it.status)}`}
              aria-label={`${it.prefix.slice(0, -1)}: ${statusLabel(it.status)}`}
              onClick={() => setChosen(it.prefix === chosen ? null : it.prefix)}
            >
              {label}
            </button>
          );
        })}
        {iterations.length > MAX_SHOWN && (
          <span className="dw-muted">+{iterations.length - MAX_SHOWN} more</span>
        )}
      </div>
      {current && (
        <div className="dw-iteration-nodes" data-testid="iteration-nodes">
          <div className="dw-muted">
            {current.prefix.slice(0, -1)}
            {current.started !== null && ` · +${formatSeconds(current.started)}`}
            {current.started !== null &&
              current.finished !== null &&
              ` · ${formatSeconds(current.finished - current.started)}`}
          </div>
          {iterationNodes(run, current).map(({ name, node }) => (
            <details key={node.id} data-testid={`iteration-node-${node.id}`} data-status={node.status}>
              <summary>
                <span className={`dw-it-dot dw-it-${node.status}`} /> <code>{name}</code>{" "}
                <span className="dw-muted">{node.block ?? ""}</span>{" "}
                <span className="dw-muted">{formatSeconds(node.duration)}</span>
                {node.error && <span className="dw-it-error"> {node.error}</span>}
              </summary>
              <h5>Output</h5>
              <JsonViewer value={node.hasOutput ? node.output : undefined} empty="No output." />
              <h5>Inputs</h5>
              <JsonViewer value={node.inputs ?? undefined} empty="–" />
            </details>
          ))}
        </div>
      )}
    </div>
  );
}
