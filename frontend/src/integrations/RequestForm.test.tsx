import { cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import type { HumanRequest } from "./api";
import { RequestForm } from "./RequestForm";
import { answeredText } from "./WaitingPage";

afterEach(cleanup);

const approval: HumanRequest = {
  id: "r1",
  run_id: null,
  conversation_id: "c1",
  app_id: null,
  node: "turn 2: run_sql",
  message: "AutoTQA's Engineer asks to run the tool 'run_sql'.",
  form: {
    fields: [{ name: "comment", type: "text", label: "Comment", required: false, default: "" }],
    choices: ["approve", "reject"],
    approval: {
      conversation_id: "c1",
      question: "How many?",
      turn: 2,
      tool: "run_sql",
      app: "sql-app",
      role: null,
      input: { sql: "SELECT count(*) FROM t" },
      sql: "SELECT count(*) FROM t",
    },
  },
  status: "waiting",
  choice: null,
  resumed_run_id: null,
  expires_at: null,
  created_at: "2026-11-27T08:00:00Z",
};

describe("a tool call's approval", () => {
  it("shows the tool, its app, its input and the SQL it will run, with approve and reject", () => {
    render(<RequestForm request={approval} onAnswered={() => undefined} />);
    expect(screen.getByTestId("approval-tool").textContent).toBe("run_sql");
    expect(screen.getByTestId("approval-input").textContent).toContain('"sql": "SELECT count(*) FROM t"');
    expect(screen.getByTestId("approval-sql").textContent).toBe("SELECT count(*) FROM t");
    expect(screen.getByRole("link").getAttribute("href")).toBe("#/tqa/c1");
    expect(screen.getByRole("button", { name: "approve" })).toBeTruthy();
    expect(screen.getByRole("button", { name: "reject" })).toBeTruthy();
    expect(screen.queryByText(/^run /)).toBeNull(); // no run: a conversation waits
  });

  it("says which conversation goes on once answered", () => {
    expect(answeredText({ run_id: null, status: "running", conversation_id: "c1" })).toBe(
      "Answered: the AutoTQA conversation c1 goes on.",
    );
  });
});
