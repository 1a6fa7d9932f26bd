// The canvas colours nodes by their run state: it hears of them only when they change, once
// per committed frame.

import { useEffect, useRef } from "react";
import type { NodeRunState } from "../../api/types";
import { nodeRunStates, sameNodeStates, type RunState } from "../runState";

export function useCanvasRunStates(run: RunState, onNodeStates: (states: Record<string, NodeRunState>) => void): void {
  const onNodeStatesRef = useRef(onNodeStates);
  useEffect(() => {
    onNodeStatesRef.current = onNodeStates;
  }, [onNodeStates]);
  const lastStates = useRef<Record<string, NodeRunState>>({});
  useEffect(() => {
    const states = nodeRunStates(run);
    if (!sameNodeStates(states, lastStates.current)) {
      lastStates.current = states;
      onNodeStatesRef.current(states);
    }
  }, [run]);
}
