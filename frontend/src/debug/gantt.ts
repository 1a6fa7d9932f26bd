// The timeline's layout: one bar per node from its start to its finish on a relative
// millisecond axis, so that nodes that ran in parallel show as overlapping bars.

import type { NodeRunStatus } from "../api/types";
import type { RunState } from "./runState";

export interface GanttBar {
  node: string;
  block: string | null;
  status: NodeRunStatus;
  start: number; // ms since the run started
  end: number;
  leftPct: number;
  widthPct: number;
  instant: boolean; // no duration to draw (skipped, or reused with no recorded time)
}

export interface GanttTick {
  ms: number;
  pct: number;
  label: string;
}

export interface GanttLayout {
  bars: GanttBar[];
  totalMs: number;
  ticks: GanttTick[];
  maxParallel: number; // the most nodes running at one time
}

export function formatMs(ms: number): string {
  if (ms === 0) return "0";
  if (ms < 1) return `${trim(ms, 3)} ms`;
  if (ms < 1000) return `${trim(ms, ms < 10 ? 2 : ms < 100 ? 1 : 0)} ms`;
  if (ms < 60_000) return `${trim(ms / 1000, 2)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms - minutes * 60_000) / 1000)} s`;
}

function trim(value: number, digits: number): string {
  return String(Number(value.toFixed(digits)));
}

/** A round step (1, 2 or 5 times a power of ten) giving about `count` ticks over `total`. */
export function niceStep(total: number, count = 5): number {
  const raw = total / count;
  if (!(raw > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(raw));
  const scaled = raw / power;
  const nice = scaled <= 1 ? 1 : scaled <= 2 ? 2 : scaled <= 5 ? 5 : 10;
  return nice * power;
}

export function overlaps(a: GanttBar, b: GanttBar): boolean {
  return a.start < b.end && b.start < a.end;
}

export function ganttLayout(state: RunState): GanttLayout {
  const raw: Omit<GanttBar, "leftPct" | "widthPct">[] = [];
  const nowMs = state.now * 1000;
  for (const id of state.order) {
    const node = state.nodes[id];
    if (!node || node.status === "pending") continue;
    let start: number | null = null;
    let end: number | null = null;
    if (node.started !== null) start = node.started * 1000;
    else if (node.finished !== null && node.duration !== null)
      start = (node.finished - node.duration) * 1000;
    if (node.finished !== null) end = node.finished * 1000;
    else if (node.status === "running") end = Math.max(nowMs, start ?? 0);
    else if (start !== null && node.duration !== null) end = start + node.duration * 1000;
    if (start === null) start = end ?? 0;
    if (end === null) end = start;
    raw.push({
      node: id,
      block: node.block,
      status: node.status,
      start,
      end: Math.max(end, start),
      instant: end <= start,
    });
  }
  raw.sort((a, b) => a.start - b.start || a.end - b.end);
  let totalMs = Math.max(nowMs, (state.duration ?? 0) * 1000);
  for (const bar of raw) totalMs = Math.max(totalMs, bar.end);
  if (!(totalMs > 0)) totalMs = 1;
  const bars = raw.map((bar) => ({
    ...bar,
    leftPct: (bar.start / totalMs) * 100,
    widthPct: ((bar.end - bar.start) / totalMs) * 100,
  }));
  const step = niceStep(totalMs);
  const ticks: GanttTick[] = [];
  for (let ms = 0; ms <= totalMs + step * 1e-9; ms += step) {
    const at = Number(ms.toPrecision(12));
    ticks.push({ ms: at, pct: (at / totalMs) * 100, label: formatMs(at) });
  }
  return { bars, totalMs, ticks, maxParallel: maxParallel(bars) };
}

function maxParallel(bars: GanttBar[]): number {
  const points: [number, number][] = [];
  for (const bar of bars) {
    if (bar.instant) continue;
    points.push([bar.start, 1], [bar.end, -1]);
  }
  points.sort((a, b) => a[0] - b[0] || a[1] - b[1]); // an end before a start at the same time
  let running = 0;
  let most = 0;
  for (const [, delta] of points) {
    running += delta;
    most = Math.max(most, running);
  }
  return most;
}
