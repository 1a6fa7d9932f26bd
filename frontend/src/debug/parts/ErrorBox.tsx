// A failure the panel shows: its title, message, the node it names (click to inspect) and a
// way to dismiss it.

import type { ReactNode } from "react";
import type { PanelError } from "../format";

export function ErrorBox({
  error,
  onSelectNode,
  onDismiss,
  children,
}: {
  error: PanelError;
  onSelectNode?: (id: string) => void;
  onDismiss?: () => void;
  children?: ReactNode;
}) {
  return (
    <div className="dw-error" role="alert" data-testid="debug-error">
      <div className="dw-error-title">
        {error.title}
        {onDismiss && (
          <button type="button" className="dw-link dw-error-close" onClick={onDismiss}>
            dismiss
          </button>
        )}
      </div>
      <div className="dw-error-message">{error.message}</div>
      {error.problems && error.problems.length > 0 && (
        <ul className="dw-problems">
          {error.problems.map((p, i) => (
            <li key={i} className={`dw-problem-${p.severity}`}>
              {p.node ? (
                <button type="button" className="dw-link" onClick={() => onSelectNode?.(p.node!)}>
                  {p.node}
                  {p.port ? `.${p.port}` : ""}
                </button>
              ) : (
                <span className="dw-muted">flow</span>
              )}{" "}
              <code>{p.code}</code> {p.message}
            </li>
          ))}
        </ul>
      )}
      {children}
    </div>
  );
}
