// The run as a whole, when no node is selected: when it started, its outputs (and charts of
// them) and its inputs.

import { ChartsOf } from "../../charts/ChartView";
import { formatTime } from "../format";
import { JsonViewer } from "../JsonViewer";
import { isFinal, type RunState } from "../runState";

export function RunResult({ run, failedToStart }: { run: RunState; failedToStart: boolean }) {
  if (run.phase === "idle") {
    return (
      <div className="dw-muted">
        {failedToStart ? "Nothing ran." : "Fill in the inputs and press Run (or open a past run). Click a node to inspect it."}
      </div>
    );
  }
  return (
    <div className="dw-result">
      {run.phase === "starting" && <div className="dw-muted">Starting…</div>}
      {run.startedAt && (
        <div className="dw-muted">
          {run.flowName ? `${run.flowName} · ` : ""}started {formatTime(new Date(run.startedAt * 1000).toISOString())}
          {run.runId ? ` · run ${run.runId}` : ""}
        </div>
      )}
      <h4>Outputs</h4>
      <JsonViewer value={run.outputs ?? undefined} testId="run-outputs" empty={isFinal(run.phase) ? "No outputs." : "Not finished yet."} />
      <ChartsOf value={run.outputs} testId="run-charts" />
      {run.inputs && (
        <>
          <h4>Inputs</h4>
          <JsonViewer value={run.inputs} />
        </>
      )}
    </div>
  );
}
