// The panel's toolbar: Run or Cancel, the run's status, duration, tokens and cost, and which
// past run is shown.

import { formatCost, formatSeconds, totalTokens } from "../format";
import { runScripted } from "../runState";
import type { DebugRun } from "../hooks/useDebugRun";
import { ScriptedLabel, StatusBadge } from "./status";

export function RunToolbar({ debug, onRun, onUseInputs }: {
  debug: DebugRun;
  onRun: () => void;
  /** Fill the form with the shown past run's inputs; absent when there is no form. */
  onUseInputs?: (inputs: Record<string, unknown>) => void;
}) {
  const { run, streaming: busy, live, clock, cancelling } = debug;
  const elapsed = live ? Math.max(run.now, clock) : (run.duration ?? (run.phase === "idle" ? null : run.now));
  return (
    <div className="dw-toolbar">
      {!busy && (
        <button type="button" className="dw-primary" data-testid="run" onClick={onRun} title="Run the current graph with the form's inputs">
          ▶ Run
        </button>
      )}
      {/* A queued or waiting run can be cancelled too (a waiting one's requests close). */}
      {(busy || (run.runId !== null && ["queued", "running", "waiting"].includes(run.phase))) && (
        <button type="button" className="dw-danger" data-testid="cancel" onClick={() => void debug.cancel()} disabled={cancelling}>
          {cancelling ? "Cancelling…" : "Cancel"}
        </button>
      )}
      <StatusBadge status={run.phase === "idle" ? "idle" : run.phase} testId="run-status" />
      {run.reuse && <span className="dw-chip dw-s-reused">from {run.reuse.fromNode}</span>}
      <span className="dw-totals">
        <span title="duration">{formatSeconds(elapsed)}</span>
        {run.usage && totalTokens(run.usage) > 0 && (
          <span title={`${run.usage.prompt_tokens} prompt / ${run.usage.completion_tokens} completion tokens, ${run.usage.calls} call(s)`}>
            {totalTokens(run.usage)} tok ({run.usage.prompt_tokens}/{run.usage.completion_tokens})
          </span>
        )}
        {run.usage && <span title="cost">{formatCost(run.usage.cost)}</span>}
        {runScripted(run) && <ScriptedLabel />}
      </span>
      <span className="dw-spacer" />
      {run.source === "record" && run.runId && (
        <span className="dw-viewing">
          past run {run.runId.slice(0, 8)}
          {run.inputs && onUseInputs && (
            <button type="button" className="dw-link" onClick={() => onUseInputs(run.inputs ?? {})}>
              use its inputs
            </button>
          )}
        </span>
      )}
    </div>
  );
}
