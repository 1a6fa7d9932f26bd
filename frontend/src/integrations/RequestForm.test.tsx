import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { answeredText, type HumanRequest } from "./api";
import { RequestForm } from "./RequestForm";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

function json(data: unknown, status = 200): Response {
  return new Response(JSON.stringify(data), { status, headers: { "Content-Type": "application/json" } });
}

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

  it("shows the SQL and program a tool that plans wrote, as code, saying they are what runs", () => {
    const plan = { sql: "SELECT Bonus FROM payroll.main.salary", code: "result = int(df.Bonus.sum())" };
    const planned: HumanRequest = {
      ...approval,
      form: {
        ...approval.form,
        approval: {
          ...approval.form.approval!,
          tool: "python_on_tables",
          role: "python",
          input: { task: "Add up the Bonus" },
          plan,
          plan_run_id: "run9",
          ...plan,
        },
      },
    };
    render(<RequestForm request={planned} onAnswered={() => undefined} />);
    const sql = screen.getByTestId("approval-sql");
    const code = screen.getByTestId("approval-code");
    expect(sql.tagName).toBe("CODE");
    expect(sql.textContent).toBe(plan.sql);
    expect(code.tagName).toBe("CODE");
    expect(code.textContent).toBe(plan.code);
    expect(code.parentElement?.tagName).toBe("PRE");
    expect(screen.getByText("Python program that will run")).toBeTruthy();
    expect(screen.getByTestId("approval-planned").textContent).toContain("run9");
  });

  it("says which conversation goes on once answered", () => {
    expect(answeredText({ run_id: null, status: "running", conversation_id: "c1" })).toBe(
      "Answered: the AutoTQA conversation c1 goes on.",
    );
  });
});

describe("a run's request form", () => {
  const request: HumanRequest = {
    ...approval,
    id: "r2",
    run_id: "run1",
    conversation_id: null,
    node: "ask",
    message: "Publish?",
    form: {
      fields: [
        { name: "publish", type: "boolean", label: "Publish", required: true, default: null },
        { name: "note", type: "text", label: "Note", required: false, default: null },
      ],
      choices: [],
    },
  };

  it("sends a required box left unticked as false, marks it required, and clears an old problem", async () => {
    const bodies: unknown[] = [];
    const answers = [
      json({ error: { code: "too_many_requests", message: "try again" } }, 429),
      json({ run_id: "run2", status: "running", waiting_for: 0 }),
    ];
    vi.stubGlobal(
      "fetch",
      vi.fn(async (_input: unknown, init: RequestInit = {}) => {
        bodies.push(JSON.parse(String(init.body)));
        return answers.shift()!;
      }),
    );
    const onAnswered = vi.fn();
    render(<RequestForm request={request} onAnswered={onAnswered} />);
    expect(screen.getByText(/Publish \*/)).toBeTruthy();
    fireEvent.click(screen.getByRole("button", { name: "Answer" }));
    await screen.findByRole("alert");
    expect(bodies[0]).toEqual({ values: { publish: false }, choice: null });
    fireEvent.click(screen.getByLabelText("Publish"));
    fireEvent.click(screen.getByRole("button", { name: "Answer" }));
    expect(screen.queryByRole("alert")).toBeNull(); // the last try's problem is gone
    await waitFor(() => expect(onAnswered).toHaveBeenCalledWith({ run_id: "run2", status: "running", waiting_for: 0 }));
    expect(bodies[1]).toEqual({ values: { publish: true }, choice: null });
  });
});
