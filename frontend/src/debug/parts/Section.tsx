// A foldable area of the panel with a title and, on the right of its summary, controls that
// do not fold it when clicked.

import type { ReactNode } from "react";

export function Section({ title, extra, className, children }: {
  title: ReactNode;
  extra?: ReactNode;
  className?: string;
  children: ReactNode;
}) {
  return (
    <details className={`dw-section ${className ?? ""}`} open>
      <summary>
        <span className="dw-section-title">{title}</span>
        {extra && (
          <span className="dw-section-extra" onClick={(e) => e.preventDefault()}>
            {extra}
          </span>
        )}
      </summary>
      <div className="dw-section-body">{children}</div>
    </details>
  );
}
