// The bottom dock around the debug panel: a bar to fold it and an edge to drag its height.

import type { ReactNode } from "react";
import type { DebugDock as DockState } from "../hooks/useDebugDock";

export function DebugDock({ dock, children }: { dock: DockState; children: ReactNode }) {
  return (
    <section className={`debug-dock${dock.open ? "" : " collapsed"}`} data-testid="debug-dock">
      <div className="debug-bar">
        {dock.open && <div className="debug-resize" data-testid="debug-resize" onPointerDown={dock.startResize} title="Drag to resize" />}
        <button className="btn btn-ghost btn-small" data-testid="debug-toggle" aria-expanded={dock.open} onClick={dock.toggle}>
          {dock.open ? "▾" : "▸"} Debug
        </button>
      </div>
      <div className="debug-body" hidden={!dock.open}>
        {children}
      </div>
    </section>
  );
}
