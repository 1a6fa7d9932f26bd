// What the canvas draws over the graph without being part of it: validation problems, run
// states from the debug panel, diff highlights. Kept outside the nodes so that a validation
// or a run re-draws only the nodes whose decoration changed, and never touches undo history.

import { createContext, useContext, useSyncExternalStore } from "react";
import type { NodeRunState, Problem } from "../api/types";

export type DiffMark = "added" | "removed" | "changed";

export interface NodeDecoration {
  problems: Problem[];
  run?: NodeRunState;
  diff?: DiffMark;
  diffFields?: string[];
}

const EMPTY: NodeDecoration = Object.freeze({ problems: [] }) as NodeDecoration;

export class DecorationStore {
  private problems = new Map<string, Problem[]>();
  private runs: Record<string, NodeRunState> = {};
  private diff = new Map<string, { mark: DiffMark; fields?: string[] }>();
  private cache = new Map<string, NodeDecoration>();
  private listeners = new Set<() => void>();
  flowProblems: Problem[] = [];
  allProblems: Problem[] = [];

  subscribe = (listener: () => void) => {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  };

  get = (id: string): NodeDecoration => {
    const hit = this.cache.get(id);
    if (hit) return hit;
    const problems = this.problems.get(id);
    const run = this.runs[id];
    const diff = this.diff.get(id);
    if (!problems && !run && !diff) return EMPTY;
    const made: NodeDecoration = { problems: problems ?? [], run, diff: diff?.mark, diffFields: diff?.fields };
    this.cache.set(id, made);
    return made;
  };

  private changed(ids: Iterable<string>) {
    for (const id of ids) this.cache.delete(id);
    for (const l of this.listeners) l();
  }

  setProblems(problems: Problem[]) {
    const touched = new Set(this.problems.keys());
    this.problems = new Map();
    this.flowProblems = [];
    this.allProblems = problems;
    for (const p of problems) {
      if (p.node) {
        const list = this.problems.get(p.node);
        if (list) list.push(p);
        else this.problems.set(p.node, [p]);
        touched.add(p.node);
      } else this.flowProblems.push(p);
    }
    this.changed(touched);
  }

  setRunStates(states: Record<string, NodeRunState>) {
    const touched = new Set([...Object.keys(this.runs), ...Object.keys(states)]);
    this.runs = states;
    this.changed(touched);
  }

  setDiff(marks: Map<string, { mark: DiffMark; fields?: string[] }>) {
    const touched = new Set([...this.diff.keys(), ...marks.keys()]);
    this.diff = marks;
    this.changed(touched);
  }

  /** A node renamed: its decorations follow. */
  clearNode(id: string) {
    this.problems.delete(id);
    this.changed([id]);
  }
}

export const DecorationContext = createContext<DecorationStore>(new DecorationStore());

export function useNodeDecoration(id: string): NodeDecoration {
  const store = useContext(DecorationContext);
  return useSyncExternalStore(store.subscribe, () => store.get(id));
}
