// The "?" button and its popover listing the keyboard shortcuts.

import { useCallback, useRef } from "react";
import { useDismiss } from "../../ui/useDismiss";
import { SHORTCUTS } from "../hooks/useCommands";

export function ShortcutsHelp({ open, onOpenChange }: { open: boolean; onOpenChange: (open: boolean) => void }) {
  const helpRef = useRef<HTMLDivElement>(null);
  const close = useCallback(() => onOpenChange(false), [onOpenChange]);
  useDismiss(helpRef, open, close);
  return (
    <div className="help-wrap" ref={helpRef}>
      <button className="btn btn-ghost" data-testid="help" aria-expanded={open} onClick={() => onOpenChange(!open)} title="Keyboard shortcuts (?)">
        ?
      </button>
      {open && (
        <div className="popover" data-testid="shortcuts" role="dialog" aria-label="Keyboard shortcuts">
          <h3>Keyboard shortcuts</h3>
          <table>
            <tbody>
              {SHORTCUTS.map(([k, v]) => (
                <tr key={k}>
                  <td>
                    <kbd>{k}</kbd>
                  </td>
                  <td>{v}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p className="muted small">Drag a block from the palette onto the canvas; drag from an output port to an input port to connect.</p>
        </div>
      )}
    </div>
  );
}
