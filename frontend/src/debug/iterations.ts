// Iterations of sub-flow nodes (map items, repeat rounds, a subflow call) from the run state.
// The runtime names a sub-flow's nodes by path — `refine[2]/check` is node `check` of round 2
// of `refine`, `call/check` that of the single call `call` (docs/flow-format.md) — so both a
// live stream and a stored run give them as nodes of their own; this groups them back under
// the node that ran them. Pure functions: IterationStrip.tsx only renders them.

import type { NodeRunStatus } from "../api/types";
import type { NodeView, RunState } from "./runState";

export interface IterationView {
  index: number | null; // the item or round; null for a subflow node's single call
  prefix: string; // how its nodes' ids start: "refine[2]/" or "call/"
  status: NodeRunStatus;
  nodes: string[]; // the ids (paths) of its own nodes, not of sub-flows nested in them
  started: number | null;
  finished: number | null;
}

/** Whether a node id is a path into a sub-flow (node ids themselves never hold "/"). */
export function isNested(id: string): boolean {
  return id.includes("/");
}

/** The flow's own nodes, in order: the nested ones are shown under their sub-flow node. */
export function topLevel(order: string[]): string[] {
  return order.some(isNested) ? order.filter((id) => !isNested(id)) : order;
}

// Worst first: one failed node fails the iteration, one waiting for a person makes it wait
// (a pause is no failure: the nodes after it never ran), one running keeps it running.
const RANK: NodeRunStatus[] = [
  "failed",
  "cancelled",
  "waiting",
  "running",
  "succeeded",
  "reused",
  "skipped",
  "pending",
];

function combine(statuses: NodeRunStatus[]): NodeRunStatus {
  let best = RANK.length - 1;
  for (const status of statuses) best = Math.min(best, Math.max(0, RANK.indexOf(status)));
  const status = RANK[best];
  // A finished iteration whose nodes were all skipped or reused still ran.
  return status === "skipped" || status === "reused" ? "succeeded" : status;
}

/** The iterations of `nodeId` (itself possibly a path), by index, from its nested nodes. */
export function iterationsOf(state: RunState, nodeId: string): IterationView[] {
  const found = new Map<string, { index: number | null; nodes: string[] }>();
  const single = `${nodeId}/`;
  const indexed = `${nodeId}[`;
  for (const id of state.order) {
    let prefix: string;
    let index: number | null;
    if (id.startsWith(single)) {
      prefix = single;
      index = null;
    } else if (id.startsWith(indexed)) {
      const close = id.indexOf("]/", indexed.length);
      if (close < 0) continue;
      index = Number(id.slice(indexed.length, close));
      if (!Number.isInteger(index)) continue;
      prefix = id.slice(0, close + 2);
    } else continue;
    if (isNested(id.slice(prefix.length))) continue; // a node of a sub-flow nested deeper
    const entry = found.get(prefix) ?? { index, nodes: [] };
    entry.nodes.push(id);
    found.set(prefix, entry);
  }
  const views: IterationView[] = [];
  for (const [prefix, { index, nodes }] of found) {
    const shown = nodes.map((id) => state.nodes[id]).filter((n): n is NodeView => Boolean(n));
    const starts = shown.map((n) => n.started).filter((t): t is number => t !== null);
    const ends = shown.map((n) => n.finished).filter((t): t is number => t !== null);
    views.push({
      index,
      prefix,
      status: combine(shown.map((n) => n.status)),
      nodes,
      started: starts.length ? Math.min(...starts) : null,
      finished: ends.length && ends.length === shown.length ? Math.max(...ends) : null,
    });
  }
  return views.sort((a, b) => (a.index ?? -1) - (b.index ?? -1));
}

/** An iteration's nodes with their id inside the sub-flow (`check`, not `refine[2]/check`). */
export function iterationNodes(
  state: RunState,
  iteration: IterationView,
): { name: string; node: NodeView }[] {
  return iteration.nodes
    .filter((id) => state.nodes[id])
    .map((id) => ({ name: id.slice(iteration.prefix.length), node: state.nodes[id] }));
}
