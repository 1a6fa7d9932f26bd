// The run's timeline: one bar per node (parallel nodes on their own rows), live while it runs.

import { formatSeconds } from "../format";
import { ganttLayout, overlaps } from "../gantt";
import { topLevel } from "../iterations";
import type { RunState } from "../runState";

export function Timeline({
  run,
  liveNow,
  labels,
  selected,
  onSelect,
}: {
  run: RunState;
  liveNow: number;
  labels: Record<string, string>;
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  // Nodes inside sub-flows are shown by their sub-flow node's iterations, not as bars.
  const own = { ...run, order: topLevel(run.order), now: Math.max(run.now, liveNow) };
  const layout = ganttLayout(own);
  return (
    <div className="dw-gantt" data-testid="debug-timeline">
      {layout.bars.length === 0 ? (
        <div className="dw-muted">No node has run yet.</div>
      ) : (
        <>
          <div className="dw-gantt-row dw-gantt-axis">
            <span className="dw-gantt-label">
              {layout.maxParallel > 1 ? `up to ${layout.maxParallel} in parallel` : ""}
            </span>
            <span className="dw-gantt-track">
              {layout.ticks.map((tick) => (
                <span key={tick.ms} className="dw-gantt-tick" style={{ left: `${tick.pct}%` }}>
                  {tick.label}
                </span>
              ))}
            </span>
          </div>
          {layout.bars.map((bar) => {
            const parallel = layout.bars.some((other) => other !== bar && overlaps(bar, other));
            const title = `${bar.node} (${bar.status}): +${formatSeconds(bar.start / 1000)} → +${formatSeconds(bar.end / 1000)}, ${formatSeconds((bar.end - bar.start) / 1000)}${parallel ? ", in parallel with others" : ""}`;
            return (
              <div
                key={bar.node}
                className={`dw-gantt-row${selected === bar.node ? " dw-selected" : ""}`}
                onClick={() => onSelect(bar.node)}
                title={title}
                data-testid={`gantt-${bar.node}`}
              >
                <span className="dw-gantt-label">{labels[bar.node] ?? bar.node}</span>
                <span className="dw-gantt-track">
                  {layout.ticks.map((tick) => (
                    <span key={tick.ms} className="dw-gantt-grid" style={{ left: `${tick.pct}%` }} />
                  ))}
                  <span
                    className={`dw-gantt-bar dw-s-${bar.status}${bar.instant ? " dw-gantt-instant" : ""}`}
                    style={{ left: `${bar.leftPct}%`, width: bar.instant ? undefined : `${bar.widthPct}%` }}
                  />
                </span>
              </div>
            );
          })}
        </>
      )}
    </div>
  );
}
