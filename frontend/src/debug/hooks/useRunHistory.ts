// The app's past runs (GET /api/v1/runs?app=), a page at a time; a newer request wins over
// an older one still on its way.

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
  const ticketRef = useRef(0);
  const offsetRef = useRef(0);

  const load = useCallback(
    async (offset: number) => {
      if (!appSlug) return;
      const ticket = ++ticketRef.current;
      setLoading(true);
      try {
        const next = await listRuns(appSlug, offset, RUNS_PAGE);
        if (ticket !== ticketRef.current) return;
        offsetRef.current = next.offset;
        setPage({ items: next.items, total: next.total, offset: next.offset });
        setError(null);
      } catch (e) {
        if (ticket === ticketRef.current) setError(describeError(e));
      } finally {
        if (ticket === ticketRef.current) setLoading(false);
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
  }, [load]);

  const reload = useCallback(() => void load(offsetRef.current), [load]);

  return { ...page, loading, error, load, reload };
}
