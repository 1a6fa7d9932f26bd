// The app's past runs (GET /api/v1/runs?app=), a page at a time; a newer request aborts an
// older one still on its way, and so does leaving the panel (or the app).

import { useCallback, useEffect, useRef, useState } from "react";
import { listRuns } from "../connection";
import { describeError, type PanelError } from "../format";
import type { RunRecord } from "../types";

export const RUNS_PAGE = 20;

export interface RunHistory {
  items: RunRecord[];
  total: number;
  offset: number;
  loading: boolean;
  error: PanelError | null;
  load: (offset: number) => Promise<void>;
  /** Load the page shown again (a run ended). */
  reload: () => void;
}

export function useRunHistory(appSlug: string | null): RunHistory {
  const [page, setPage] = useState<{ items: RunRecord[]; total: number; offset: number }>({ items: [], total: 0, offset: 0 });
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<PanelError | null>(null);
  const fetching = useRef<AbortController | null>(null);
  const offsetRef = useRef(0);

  const load = useCallback(
    async (offset: number) => {
      if (!appSlug) return;
      fetching.current?.abort();
      const controller = new AbortController();
      fetching.current = controller;
      setLoading(true);
      try {
        const next = await listRuns(appSlug, offset, RUNS_PAGE, controller.signal);
        if (controller.signal.aborted) return;
        offsetRef.current = next.offset;
        setPage({ items: next.items, total: next.total, offset: next.offset });
        setError(null);
      } catch (e) {
        if (!controller.signal.aborted) setError(describeError(e));
      } finally {
        if (!controller.signal.aborted) setLoading(false);
      }
    },
    [appSlug],
  );

  useEffect(() => {
    offsetRef.current = 0;
    // eslint-disable-next-line react-hooks/set-state-in-effect -- another app: its runs, not the last one's
    setPage({ items: [], total: 0, offset: 0 });
    setError(null);
    void load(0);
    const stop = fetching; // whatever is on its way then: this page, or one asked for since
    return () => stop.current?.abort();
  }, [load]);

  const reload = useCallback(() => void load(offsetRef.current), [load]);

  return { ...page, loading, error, load, reload };
}
