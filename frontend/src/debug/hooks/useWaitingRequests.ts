// The requests a paused debug run waits on (human_input nodes, also inside map items and
// sub-flows): fetched once the run has stopped to wait, dropped when another run is shown.

import { useCallback, useEffect, useState } from "react";
import { humanApi, type HumanRequest } from "../../integrations/api";
import { isPaused, type RunState } from "../runState";

export function useWaitingRequests(run: RunState): {
  requests: HumanRequest[];
  error: string | null;
  reload: () => void;
} {
  const paused = isPaused(run) && run.runId !== null;
  const runId = paused ? run.runId : null;
  const [requests, setRequests] = useState<HumanRequest[]>([]);
  const [error, setError] = useState<string | null>(null);
  const reload = useCallback(() => {
    if (runId === null) return;
    humanApi.ofRun(runId).then(
      (items) => (setRequests(items.filter((r) => r.status === "waiting")), setError(null)),
      (e: unknown) => setError(e instanceof Error ? e.message : String(e)),
    );
  }, [runId]);
  useEffect(() => {
    // eslint-disable-next-line react-hooks/set-state-in-effect -- another run: its requests, not the last one's
    setRequests([]);
    setError(null);
    reload();
  }, [reload]);
  return { requests, error, reload };
}
