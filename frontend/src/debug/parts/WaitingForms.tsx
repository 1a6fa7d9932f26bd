// A debug run that stopped at human_input nodes: each request's form, answered here. The
// answer goes with the canvas's flow (a run of an unsaved flow goes on with it, as a re-run
// from a node does); once no request is left, the panel follows the run that goes on. What an
// answer did is said here (the forms may all be gone by then); an answer that could not start
// the continuation says why in its form, which stays.

import { useEffect, useRef, useState } from "react";
import { RequestForm } from "../../integrations/RequestForm";
import { answeredText, type Answered } from "../../integrations/api";
import { continuationOf, useWaitingRequests } from "../hooks/useWaitingRequests";
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
  const [notice, setNotice] = useState<{ runId: string; text: string } | null>(null);
  // Looking for the continuation stops once another run is shown.
  const shownRun = useRef<AbortSignal | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    shownRun.current = controller.signal;
    return () => controller.abort();
  }, [run.runId]);
  const said = notice !== null && notice.runId === run.runId ? notice.text : null;
  if (!error && requests.length === 0 && said === null) return null;
  const answered = (done: Answered) => {
    if (done.run_id !== null) return onResumed(done.run_id);
    const runId = run.runId;
    if (runId === null) return;
    setNotice({ runId, text: answeredText(done) });
    reload();
    const signal = shownRun.current;
    // No answer left, yet this one started nothing: another caller (a concurrent answer, the
    // sweep) starts the continuation; follow it once its requests name it.
    if ((done.waiting_for ?? 0) === 0 && signal)
      void continuationOf(runId, signal).then((next) => {
        if (next !== null && !signal.aborted) onResumed(next);
      });
  };
  return (
    <div className="dw-waiting" role="region" aria-label="Waiting for you" data-testid="debug-waiting">
      {requests.length > 0 && (
        <h4>The run waits for {requests.length === 1 ? "an answer" : `${requests.length} answers`}</h4>
      )}
      {said && (
        <p role="status" data-testid="debug-answered">
          {said}
        </p>
      )}
      {error && <p role="alert">{error}</p>}
      {requests.map((request) => (
        <RequestForm key={request.id} request={request} flow={flow} onAnswered={answered} />
      ))}
    </div>
  );
}
