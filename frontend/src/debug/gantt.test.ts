// @vitest-environment node
import { describe, expect, it } from "vitest";
import { formatMs, ganttLayout, niceStep, overlaps } from "./gantt";
import { applyMessage, fromRecord, startingState } from "./runState";
import { fixtures, messagesOf } from "./testutil";

const flowNodes = (fixtures.parallelChatFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));
const state = messagesOf(fixtures.parallelChatSse).reduce(applyMessage, startingState(flowNodes));

describe("the timeline layout", () => {
  const layout = ganttLayout(state);
  const bar = (id: string) => layout.bars.find((b) => b.node === id)!;

  it("has one bar per node that ran or was skipped, in start order", () => {
    expect(layout.bars.map((b) => b.node).sort()).toEqual(flowNodes.map((n) => n.id).sort());
    const starts = layout.bars.map((b) => b.start);
    expect(starts).toEqual([...starts].sort((a, b) => a - b));
    expect(layout.bars[0].node).toBe("question");
  });

  it("shows the two model calls running in parallel", () => {
    expect(overlaps(bar("draft"), bar("summary"))).toBe(true);
    expect(layout.maxParallel).toBeGreaterThanOrEqual(2);
    // combine waits for both
    expect(bar("combine").start).toBeGreaterThanOrEqual(Math.max(bar("draft").end, bar("summary").end));
    expect(overlaps(bar("question"), bar("combine"))).toBe(false);
  });

  it("places bars on a relative millisecond axis", () => {
    const draft = bar("draft");
    expect(draft.start).toBeCloseTo(state.nodes.draft.started! * 1000, 6);
    expect(draft.end - draft.start).toBeCloseTo(state.nodes.draft.duration! * 1000, 3);
    expect(layout.totalMs).toBeCloseTo(state.duration! * 1000, 6);
    expect(draft.leftPct).toBeCloseTo((draft.start / layout.totalMs) * 100, 9);
    for (const b of layout.bars) {
      expect(b.leftPct).toBeGreaterThanOrEqual(0);
      expect(b.leftPct + b.widthPct).toBeLessThanOrEqual(100.000001);
    }
    expect(bar("big").instant).toBe(true);
    expect(bar("big").status).toBe("skipped");
    expect(layout.ticks[0]).toEqual({ ms: 0, pct: 0, label: "0" });
    expect(layout.ticks.length).toBeGreaterThanOrEqual(3);
    expect(layout.ticks.at(-1)!.pct).toBeLessThanOrEqual(100.000001);
  });

  it("draws a stored run the same way", () => {
    const recorded = ganttLayout(fromRecord(fixtures.parallelChatRecord, flowNodes));
    const rec = (id: string) => recorded.bars.find((b) => b.node === id)!;
    expect(overlaps(rec("draft"), rec("summary"))).toBe(true);
    expect(rec("draft").start).toBeCloseTo(bar("draft").start, 6);
  });

  it("stretches a running node's bar to now, and leaves pending nodes out", () => {
    const messages = messagesOf(fixtures.parallelChatSse);
    const firstToken = messages.findIndex((m) => m.data.includes('"kind":"token"'));
    const mid = messages.slice(0, firstToken + 1).reduce(applyMessage, startingState(flowNodes));
    const live = ganttLayout({ ...mid, now: mid.now + 0.5 });
    const running = live.bars.filter((b) => b.status === "running");
    expect(running.length).toBeGreaterThan(0);
    for (const b of running) expect(b.end).toBeCloseTo((mid.now + 0.5) * 1000, 6);
    expect(live.bars.some((b) => b.node === "combine")).toBe(false);
  });

  it("picks round tick steps and readable labels", () => {
    expect(niceStep(1000)).toBe(200);
    expect(niceStep(80)).toBe(20);
    expect(niceStep(3)).toBe(1);
    expect(niceStep(0.9)).toBeCloseTo(0.2, 12);
    expect(formatMs(0.25)).toBe("0.25 ms");
    expect(formatMs(12.345)).toBe("12.3 ms");
    expect(formatMs(1500)).toBe("1.5 s");
    expect(formatMs(125_000)).toBe("2 min 5 s");
  });
});
