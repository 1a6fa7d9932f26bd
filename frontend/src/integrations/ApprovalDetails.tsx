// What an AutoTQA tool call waiting for approval will run: the conversation and turn, the
// tool, its app and role, and the input (its SQL or code when the input carries them).

import type { ToolApproval } from "./api";

export function ApprovalDetails({ approval }: { approval: ToolApproval }) {
  const input = typeof approval.input === "string" ? approval.input : JSON.stringify(approval.input, null, 2);
  return (
    <div className="human-approval" data-testid="approval-details">
      <p className="muted">
        conversation{" "}
        <a href={`#/tqa/${encodeURIComponent(approval.conversation_id)}`}>
          <code>{approval.conversation_id}</code>
        </a>
        , turn {approval.turn}: “{approval.question}”
      </p>
      <p>
        Tool <strong data-testid="approval-tool">{approval.tool}</strong> (app <code>{approval.app}</code>
        {approval.role ? <>, role {approval.role}</> : null})
      </p>
      <pre className="tqa-pre" data-testid="approval-input">
        {input}
      </pre>
      {approval.sql && (
        <pre className="tqa-pre" data-testid="approval-sql">
          {approval.sql}
        </pre>
      )}
      {approval.code && (
        <pre className="tqa-pre" data-testid="approval-code">
          {approval.code}
        </pre>
      )}
    </div>
  );
}
