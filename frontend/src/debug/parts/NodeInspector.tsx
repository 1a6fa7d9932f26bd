// One node of a run: its inputs, output (as a table or chart when it is one), tokens, messages
// and error, and re-running the flow from it.

import { ChartsOf } from "../../charts/ChartView";
import { JsonViewer } from "../JsonViewer";
import { TableMessages, TableView } from "../TableView";
import { formatCost, formatSeconds } from "../format";
import { streamedText, type NodeView } from "../runState";
import { asTable, tableOfMessage } from "../table";
import { StatusBadge, ScriptedLabel } from "./status";

export function NodeInspector({
  node,
  label,
  inFlow,
  canRerun,
  rerunHint,
  onRerun,
}: {
  node: NodeView;
  label: string;
  inFlow: boolean;
  canRerun: boolean;
  rerunHint: string;
  onRerun: () => void;
}) {
  const streamed = streamedText(node);
  const usage = node.usage;
  const outputTable = node.hasOutput ? asTable(node.output) : null;
  const messages = node.messages.filter((m) => tableOfMessage(m) === null);
  return (
    <div className="dw-inspector" data-testid="debug-inspector">
      <div className="dw-inspector-head">
        <strong className="dw-inspector-title">{label}</strong>
        {label !== node.id && <span className="dw-muted">{node.id}</span>}
        {node.block && <code className="dw-block">{node.block}</code>}
        <StatusBadge status={node.status} />
        {node.scripted && <ScriptedLabel />}
        <span className="dw-spacer" />
        <button
          type="button"
          data-testid="rerun-from-node"
          disabled={!canRerun}
          title={rerunHint}
          onClick={onRerun}
        >
          Run from here
        </button>
      </div>
      {!inFlow && <div className="dw-note">This node is not in the current flow.</div>}
      <dl className="dw-stats">
        <dt>duration</dt>
        <dd>{formatSeconds(node.duration)}</dd>
        {node.started !== null && (
          <>
            <dt>started</dt>
            <dd>+{formatSeconds(node.started)}</dd>
          </>
        )}
        {usage && (
          <>
            <dt>tokens</dt>
            <dd>
              {usage.prompt_tokens} prompt / {usage.completion_tokens} completion
            </dd>
            <dt>cost</dt>
            <dd>{formatCost(usage.cost)}</dd>
            <dt>calls</dt>
            <dd>{usage.calls}</dd>
          </>
        )}
        {node.model && (
          <>
            <dt>model</dt>
            <dd>{node.model}</dd>
          </>
        )}
        {node.branch && (
          <>
            <dt>branch</dt>
            <dd>{node.branch}</dd>
          </>
        )}
      </dl>
      {node.error && (
        <div
          className={node.status === "failed" ? "dw-error" : "dw-note"}
          data-testid="debug-node-error"
        >
          {node.status === "failed" ? (
            <>
              <div className="dw-error-title">Failed</div>
              <div className="dw-error-message">{node.error}</div>
            </>
          ) : (
            <>
              {node.status === "skipped"
                ? "Skipped: "
                : node.status === "cancelled"
                  ? "Cancelled: "
                  : node.status === "waiting"
                    ? "Waiting for input: "
                    : ""}
              {node.error}
            </>
          )}
        </div>
      )}
      {node.status === "reused" && (
        <div className="dw-note">Output reused from the earlier run (the node did not run again).</div>
      )}
      <h4>Output</h4>
      {node.status === "running" ? (
        <div className="dw-json" data-testid="debug-output">
          {streamed ? (
            <pre className="dw-pre dw-streaming">
              {streamed}
              <span className="dw-caret" />
            </pre>
          ) : (
            <div className="dw-muted">running…</div>
          )}
        </div>
      ) : (
        <>
        {node.hasOutput && <ChartsOf value={node.output} testId="debug-output-charts" />}
        {outputTable && <TableView table={outputTable} testId="debug-output-table" />}
        <JsonViewer
          value={node.hasOutput ? node.output : undefined}
          testId="debug-output"
          empty={
            node.status === "pending"
              ? "Not run."
              : node.status === "skipped"
                ? "Skipped: no output."
                : "No output."
          }
        />
        </>
      )}
      <h4>Inputs</h4>
      <JsonViewer
        value={node.inputs ?? undefined}
        empty={node.status === "reused" ? "Not recorded for a reused node." : "–"}
      />
      <TableMessages messages={node.messages} />
      {messages.length > 0 && (
        <>
          <h4>Messages</h4>
          <ul className="dw-messages">
            {messages.map((m, i) => (
              <li key={i}>
                <span className="dw-muted">+{formatSeconds(m.t)}</span> <code>{m.kind}</code>{" "}
                {JSON.stringify(m.data)}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
