// "Waiting for you": runs paused at a human_input node, each with its form. Answering resumes
// the run on the server (any replica) and the request leaves the list.

import { useCallback, useEffect, useState } from "react";
import { humanApi, type Answered, type HumanRequest } from "./api";
import { RequestForm } from "./RequestForm";

export function WaitingPage() {
  const [requests, setRequests] = useState<HumanRequest[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The answered request leaves the list: say here which run went on.
  const [resumed, setResumed] = useState<string | null>(null);
  const refresh = useCallback(() => {
    humanApi.waiting().then(setRequests, (e: unknown) => setError(e instanceof Error ? e.message : String(e)));
  }, []);
  useEffect(refresh, [refresh]);
  return (
    <div className="eval-page">
      <header className="page-head">
        <h1>
          <a href="#/">dagwright</a> <span className="muted">waiting for you</span>
        </h1>
      </header>
      {error && <p role="alert">{error}</p>}
      {resumed && <p data-testid="human-resumed">{resumed}</p>}
      {requests?.length === 0 && <p className="muted">No run is waiting for an answer.</p>}
      {requests?.map((r) => (
        <RequestForm key={r.id} request={r} onAnswered={(done) => (setResumed(answeredText(done)), refresh())} />
      ))}
    </div>
  );
}

/** What the page says an answer did. */
export function answeredText(done: Answered): string {
  if (done.run_id !== null) return `Answered: the run goes on as ${done.run_id}.`;
  const more = done.waiting_for ?? 0;
  return more > 0
    ? `Answered: the run still waits for ${more} more answer${more === 1 ? "" : "s"}.`
    : "Answered: the run goes on in a moment.";
}
