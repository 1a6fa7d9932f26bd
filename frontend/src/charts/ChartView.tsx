// Draws chart values with vega-embed (SVG renderer: crisp, and selectable text). vega-embed is
// loaded on first use, so the editor pays for Vega only when a run returns a chart.

import { useEffect, useRef, useState } from "react";
import { findCharts, type ChartSpec } from "./charts";
import "./charts.css";

export function ChartView({ spec, testId = "chart" }: { spec: ChartSpec; testId?: string }) {
  const target = useRef<HTMLDivElement>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let finalize: (() => void) | undefined;
    let cancelled = false;
    // eslint-disable-next-line react-hooks/set-state-in-effect -- another chart: the last one's error goes
    setError(null);
    import("vega-embed")
      .then(({ default: embed }) => {
        if (cancelled || !target.current) return undefined;
        return embed(target.current, spec as never, { renderer: "svg", actions: false });
      })
      .then((result) => {
        if (!result) return;
        if (cancelled) result.finalize();
        else finalize = () => result.finalize();
      })
      .catch((e: unknown) => {
        if (!cancelled) setError(e instanceof Error ? e.message : String(e));
      });
    return () => {
      cancelled = true;
      finalize?.();
    };
  }, [spec]);
  return (
    <div className="dw-chart" data-testid={testId}>
      {error ? <div className="dw-chart-error">This chart cannot be drawn: {error}</div> : null}
      <div ref={target} />
    </div>
  );
}

// Every chart inside a value, each under the path it was found at; nothing when there is none.
export function ChartsOf({ value, testId = "charts" }: { value: unknown; testId?: string }) {
  const charts = findCharts(value);
  if (charts.length === 0) return null;
  return (
    <div className="dw-charts" data-testid={testId}>
      {charts.map(({ path, spec }) => (
        <figure key={path} className="dw-chart-figure">
          <figcaption className="dw-muted">{path}</figcaption>
          <ChartView spec={spec} />
        </figure>
      ))}
    </div>
  );
}
