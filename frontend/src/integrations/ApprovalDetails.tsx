// What an AutoTQA tool call waiting for approval will run: the conversation and turn, the
// tool, its app and role, the input, and its SQL and program — for a tool that plans (the
// Python tool), the ones it wrote before asking, which are what runs once approved.

import type { ToolApproval } from "./api";

export function ApprovalDetails({ approval }: { approval: ToolApproval }) {
  const input = typeof approval.input === "string" ? approval.input : JSON.stringify(approval.input, null, 2);
  const planned = approval.plan != null;
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
      {planned && (
        <p className="muted" data-testid="approval-planned">
          The tool wrote this SQL and program without running them
          {approval.plan_run_id ? (
            <>
              {" "}
              (run <code>{approval.plan_run_id}</code>)
            </>
          ) : null}
          ; approved, exactly these run.
        </p>
      )}
      {approval.sql && (
        <>
          {planned && <h4>SQL that will run</h4>}
          <pre className="tqa-pre">
            <code className="language-sql" data-testid="approval-sql">
              {approval.sql}
            </code>
          </pre>
        </>
      )}
      {approval.code && (
        <>
          {planned && <h4>Python program that will run</h4>}
          <pre className="tqa-pre">
            <code className="language-python" data-testid="approval-code">
              {approval.code}
            </code>
          </pre>
        </>
      )}
    </div>
  );
}
