// Level of detail: zoomed out far enough that a node's text is unreadable, the canvas draws
// every node as a plain box in its category's colour. Painting 300 nodes' text and ports on
// every frame of a pan is what made a large flow stutter; a box costs next to nothing. The
// ports stay in the layout (hidden, not removed) so wires keep their ends and nothing is
// re-measured when the detail changes.

import { type ReactFlowState, useStore } from "@xyflow/react";
import { type RefObject, useEffect } from "react";

/** Below this zoom a node's 12 px text is under 5 px on screen. */
export const FAR_ZOOM = 0.4;

const isFar = (state: ReactFlowState) => state.transform[2] < FAR_ZOOM;

/** Sets `lod-far` on the canvas element while zoomed out; re-renders only when that flips. */
export function LevelOfDetail({ canvas }: { canvas: RefObject<HTMLElement | null> }) {
  const far = useStore(isFar);
  useEffect(() => {
    canvas.current?.classList.toggle("lod-far", far);
  }, [canvas, far]);
  return null;
}
