// How a run or a node stands, drawn the same everywhere: a dot, a badge, and the label that
// marks a scripted (not a model's) answer.

import type { NodeRunStatus } from "../../api/types";
import type { RunPhase } from "../runState";

export function StatusDot({ status }: { status: NodeRunStatus | RunPhase | string }) {
  return <span className={`dw-dot dw-s-${status}`} aria-hidden="true" />;
}

export function StatusBadge({ status, testId }: { status: string; testId?: string }) {
  return (
    <span className={`dw-badge dw-s-${status}`} data-testid={testId} data-status={status}>
      {status}
    </span>
  );
}

export function ScriptedLabel() {
  return (
    <span
      className="dw-scripted"
      title="Answered by dagwright's scripted model, not a real model: configure a provider to use one"
    >
      scripted
    </span>
  );
}
