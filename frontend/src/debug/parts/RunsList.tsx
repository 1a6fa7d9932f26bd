// The app's past runs, newest first, a page at a time; click one to open it.

import { formatSeconds, formatTime, totalTokens, type PanelError } from "../format";
import type { RunRecord } from "../types";
import { ErrorBox } from "./ErrorBox";
import { StatusDot } from "./status";

export function RunsList({
  appSlug,
  runs,
  total,
  offset,
  limit,
  loading,
  error,
  currentRunId,
  onOpen,
  onPage,
  onRefresh,
}: {
  appSlug: string | null;
  runs: RunRecord[];
  total: number;
  offset: number;
  limit: number;
  loading: boolean;
  error: PanelError | null;
  currentRunId: string | null;
  onOpen: (id: string) => void;
  onPage: (offset: number) => void;
  onRefresh: () => void;
}) {
  return (
    <div className="dw-runs" data-testid="debug-runs">
      {appSlug === null ? (
        <div className="dw-muted">Save the flow as an app to keep and browse its runs.</div>
      ) : (
        <>
          <div className="dw-runs-bar">
            <span className="dw-muted">
              {total === 0 ? "No runs yet" : `${offset + 1}–${Math.min(offset + limit, total)} of ${total}`}
            </span>
            <span className="dw-spacer" />
            <button type="button" disabled={offset === 0 || loading} onClick={() => onPage(Math.max(0, offset - limit))}>
              Newer
            </button>
            <button type="button" disabled={offset + limit >= total || loading} onClick={() => onPage(offset + limit)}>
              Older
            </button>
            <button type="button" disabled={loading} onClick={onRefresh}>
              {loading ? "Loading…" : "Refresh"}
            </button>
          </div>
          {error && <ErrorBox error={error} />}
          <ul className="dw-runs-list">
            {runs.map((run) => (
              <li
                key={run.id}
                className={`dw-run-row${run.id === currentRunId ? " dw-selected" : ""}`}
                data-testid={`debug-run-${run.id}`}
                data-status={run.status}
                onClick={() => onOpen(run.id)}
                title={run.error?.message ?? run.id}
              >
                <StatusDot status={run.status} />
                <span className="dw-run-status">{run.status}</span>
                <span className="dw-run-time">{formatTime(run.created_at)}</span>
                <span className="dw-run-mode">{run.mode}</span>
                <span className="dw-run-duration">{formatSeconds(run.duration)}</span>
                <span className="dw-run-tokens">{run.usage ? `${totalTokens(run.usage)} tok` : ""}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
