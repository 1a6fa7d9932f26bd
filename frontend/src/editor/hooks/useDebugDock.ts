// The bottom dock the debug panel lives in: open or folded, and its height (dragged by its
// top edge, kept in localStorage). The panel mounts just after the canvas has drawn, so a big
// flow shows (and takes clicks) first.

import { type PointerEvent as ReactPointerEvent, useCallback, useEffect, useState } from "react";

const DEBUG_HEIGHT_KEY = "dagwright.debugHeight";
const MIN_HEIGHT = 120;
/** The height of the folded dock's bar. */
export const FOLDED_HEIGHT = 34;

export interface DebugDock {
  open: boolean;
  toggle: () => void;
  height: number;
  startResize: (e: ReactPointerEvent) => void;
  /** False for the first frame: the panel is not mounted yet. */
  mounted: boolean;
}

/** The height kept from the last visit (null: none, or storage blocked). */
function storedHeight(): string | null {
  try {
    return localStorage.getItem(DEBUG_HEIGHT_KEY);
  } catch {
    return null;
  }
}

export function useDebugDock(): DebugDock {
  const [open, setOpen] = useState(true);
  // A dock dragged tall is restored at most half the window: else the next visit opens on a
  // strip of canvas.
  const [height, setHeight] = useState(() =>
    Math.max(MIN_HEIGHT, Math.min(Number(storedHeight()) || 220, Math.round(window.innerHeight / 2))),
  );
  const startResize = useCallback(
    (e: ReactPointerEvent) => {
      e.preventDefault();
      const startY = e.clientY;
      const startH = height;
      let latest = startH;
      const move = (ev: PointerEvent) => {
        latest = Math.max(MIN_HEIGHT, Math.min(window.innerHeight - 160, startH + (startY - ev.clientY)));
        setHeight(latest);
      };
      const up = () => {
        window.removeEventListener("pointermove", move);
        window.removeEventListener("pointerup", up);
        try {
          localStorage.setItem(DEBUG_HEIGHT_KEY, String(latest));
        } catch {
          // storage blocked: the height holds for this visit
        }
      };
      window.addEventListener("pointermove", move);
      window.addEventListener("pointerup", up);
    },
    [height],
  );
  const toggle = useCallback(() => setOpen((o) => !o), []);

  const [mounted, setMounted] = useState(false);
  useEffect(() => {
    const t = setTimeout(() => setMounted(true), 0);
    return () => clearTimeout(t);
  }, []);

  return { open, toggle, height, startResize, mounted };
}
