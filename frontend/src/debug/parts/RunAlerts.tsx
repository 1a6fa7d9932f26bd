// What went wrong, above the panel's areas: a connection being resumed, the panel's own error
// (a refused start, a lost stream), and the run's failure, cancellation or interruption.

import { isFinal } from "../runState";
import type { DebugRun } from "../hooks/useDebugRun";
import { ErrorBox } from "./ErrorBox";

export function RunAlerts({ debug, onSelectNode }: { debug: DebugRun; onSelectNode: (id: string | null) => void }) {
  const { run, conn, error, streaming: busy } = debug;
  // A waiting run (its error says what it waits for) is not final: WaitingForms shows its forms.
  const runFailed = run.error && isFinal(run.phase) && run.phase !== "succeeded";
  return (
    <>
      {conn.status === "reconnecting" && (
        <div className="dw-reconnecting" role="status" data-testid="reconnecting">
          reconnecting… (attempt {conn.attempt}); events missed meanwhile will be caught up
        </div>
      )}
      {error && (
        <ErrorBox error={error} onSelectNode={(id) => onSelectNode(id)} onDismiss={() => debug.setError(null)}>
          {run.runId && !busy && !isFinal(run.phase) && (
            <button type="button" className="dw-link" onClick={() => void debug.openRun(run.runId!)}>
              load what the server recorded
            </button>
          )}
        </ErrorBox>
      )}
      {runFailed && (
        <ErrorBox
          error={{
            title:
              run.phase === "cancelled"
                ? "The run was cancelled"
                : run.phase === "interrupted"
                  ? "The run was interrupted"
                  : run.error!.node
                    ? `The run failed at ${run.error!.node}`
                    : "The run failed",
            message: run.error!.message,
          }}
        >
          {run.error!.node && (
            <button type="button" className="dw-link" onClick={() => onSelectNode(run.error!.node!)}>
              inspect {run.error!.node}
            </button>
          )}
        </ErrorBox>
      )}
    </>
  );
}
