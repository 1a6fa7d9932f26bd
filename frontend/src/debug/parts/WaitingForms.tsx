// A debug run that stopped at human_input nodes: each request's form, answered here. The
// answer goes with the canvas's flow (a run of an unsaved flow goes on with it, as a re-run
// from a node does); once no request is left, the panel follows the run that goes on.

import { RequestForm } from "../../integrations/RequestForm";
import type { Answered } from "../../integrations/api";
import { useWaitingRequests } from "../hooks/useWaitingRequests";
import type { RunState } from "../runState";
import type { FlowDocument } from "../types";

export function WaitingForms({
  run,
  flow,
  onResumed,
}: {
  run: RunState;
  flow: FlowDocument;
  /** The run that goes on, once every request of the paused run is answered. */
  onResumed: (runId: string) => void;
}) {
  const { requests, error, reload } = useWaitingRequests(run);
  if (!error && requests.length === 0) return null;
  const answered = (done: Answered) => {
    if (done.run_id !== null) onResumed(done.run_id);
    else reload();
  };
  return (
    <div className="dw-waiting" role="region" aria-label="Waiting for you" data-testid="debug-waiting">
      <h4>
        The run waits for {requests.length === 1 ? "an answer" : `${requests.length} answers`}
      </h4>
      {error && <p role="alert">{error}</p>}
      {requests.map((request) => (
        <RequestForm key={request.id} request={request} flow={flow} onAnswered={answered} />
      ))}
    </div>
  );
}
