// The requests a paused debug run waits on (human_input nodes, also inside map items and
// sub-flows): fetched once the run has stopped to wait. What was fetched is kept with the run
// it is of, so a late answer about a run no longer shown is never shown (nor answered with the
// canvas's flow); a newer fetch aborts the one still on its way.

import { useCallback, useEffect, useRef, useState } from "react";
import { humanApi, type HumanRequest } from "../../integrations/api";
import { isPaused, type RunState } from "../runState";

interface Loaded {
  runId: string;
  requests: HumanRequest[];
  error: string | null;
}

export function useWaitingRequests(run: RunState): {
  requests: HumanRequest[];
  error: string | null;
  reload: () => void;
} {
  const runId = isPaused(run) ? run.runId : null;
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const fetching = useRef<AbortController | null>(null);
  const load = useCallback((): AbortController | null => {
    fetching.current?.abort();
    fetching.current = null;
    if (runId === null) return null;
    const controller = new AbortController();
    fetching.current = controller;
    humanApi.ofRun(runId, controller.signal).then(
      (items) => {
        if (!controller.signal.aborted) setLoaded({ runId, requests: items.filter((r) => r.status === "waiting"), error: null });
      },
      (e: unknown) => {
        if (controller.signal.aborted) return;
        const error = e instanceof Error ? e.message : String(e);
        setLoaded((prev) => ({ runId, requests: prev?.runId === runId ? prev.requests : [], error }));
      },
    );
    return controller;
  }, [runId]);
  useEffect(() => {
    const controller = load();
    return () => controller?.abort();
  }, [load]);
  const reload = useCallback(() => void load(), [load]);
  const shown = loaded !== null && loaded.runId === runId ? loaded : null;
  return { requests: shown?.requests ?? [], error: shown?.error ?? null, reload };
}

/** The run a paused run went on as when another caller started it (an answer that found the
 *  continuation claimed, the sweep): its requests name it once it runs. Asked again each
 *  second for a while; null when it is not known by then (or `signal` stopped the asking). */
export async function continuationOf(runId: string, signal: AbortSignal, tries = 15): Promise<string | null> {
  for (let i = 0; i < tries && !signal.aborted; i++) {
    try {
      const found = (await humanApi.ofRun(runId, signal)).find((r) => r.resumed_run_id !== null);
      if (found) return found.resumed_run_id;
    } catch {
      if (signal.aborted) return null; // else asked again: a failure of the moment
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  return null;
}
