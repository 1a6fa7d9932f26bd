// "Waiting for you": runs paused at a human_input node, each with its form. Answering resumes
// the run on the server (any replica) and the request leaves the list.

import { useCallback, useEffect, useState } from "react";
import { answeredText, humanApi, type HumanRequest } from "./api";
import { RequestForm } from "./RequestForm";

const PAGE = 50;

export function WaitingPage() {
  const [requests, setRequests] = useState<HumanRequest[] | null>(null);
  const [total, setTotal] = useState(0);
  const [error, setError] = useState<string | null>(null);
  // The answered request leaves the list: say here which run went on.
  const [resumed, setResumed] = useState<string | null>(null);
  // offset 0 starts the list again (after an answer); a later offset adds the next page.
  const load = useCallback((offset: number) => {
    humanApi.waiting(offset, PAGE).then(
      (page) => {
        setTotal(page.total);
        setRequests((prev) => (offset === 0 ? page.items : [...(prev ?? []), ...page.items]));
      },
      (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
    );
  }, []);
  useEffect(() => load(0), [load]);
  const shown = requests?.length ?? 0;
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
        <RequestForm key={r.id} request={r} onAnswered={(done) => (setResumed(answeredText(done)), load(0))} />
      ))}
      {shown < total && (
        <p className="muted">
          {shown} of {total} shown{" "}
          <button type="button" data-testid="human-more" onClick={() => load(shown)}>
            Show more
          </button>
        </p>
      )}
    </div>
  );
}
