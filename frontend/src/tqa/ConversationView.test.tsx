import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { conversationReducer, foldMessages, initialConversation } from "./conversation";
import { ConversationView, RowsTable, TurnCard } from "./ConversationView";
import { fixtures, messagesOf } from "./testutil";

afterEach(cleanup);

const lucy = conversationReducer(initialConversation, { type: "loaded", conversation: fixtures.lucy });

describe("a tool turn", () => {
  it("shows the SQL (monospace, with a copy button) and the rows as an HTML table", () => {
    render(<TurnCard turn={lucy.turns[5]} />);
    const card = screen.getByTestId("tqa-turn-5");
    expect(card.getAttribute("data-agent")).toBe("Executor");
    expect(screen.getByTestId("tqa-sql-5").textContent).toBe(
      "SELECT s.Bonus FROM hr.main.Employee e JOIN payroll.main.salary s ON s.ID = e.ID WHERE e.Name = 'Lucy'",
    );
    expect(screen.getByTestId("tqa-sql-5").tagName).toBe("PRE");
    expect(screen.getByTestId("tqa-sql-5-copy")).toBeTruthy();
    const table = screen.getByTestId("tqa-rows-5");
    expect(table.tagName).toBe("TABLE");
    expect([...table.querySelectorAll("th")].map((th) => th.textContent)).toEqual(["Bonus"]);
    expect([...table.querySelectorAll("tbody td")].map((td) => td.textContent)).toEqual(["2100"]);
    expect(screen.getByTestId("tqa-rows-5-count").textContent).toBe("1 row");
    expect(screen.getByTestId("tqa-scheduler-5").textContent).toContain("FSM: Engineer → Executor: it asked for a tool");
    expect(screen.getByTestId("tqa-turn-5-scripted")).toBeTruthy(); // the text-to-SQL tool's model was scripted
    expect(screen.getByTestId("tqa-turn-5-usage").textContent).toMatch(/tokens/);
  });

  it("shows a failed query's error and the hints handed back to the Engineer", () => {
    render(<TurnCard turn={lucy.turns[3]} />);
    expect(screen.getByTestId("tqa-tool-error-3").textContent).toContain("query_failed");
    expect(screen.getByTestId("tqa-tool-error-3").textContent).toContain('does not have a column named "YearEndBonus"');
    expect(screen.queryByTestId("tqa-rows-3")).toBeNull();
    const hints = screen.getByTestId("tqa-hints-3");
    expect(within(hints).getAllByRole("listitem")[0].textContent).toBe("hr.main.Employee has the columns: ID, Name, Email, Depno");
  });

  it("draws the first 50 rows and says how many more", () => {
    const rows = Array.from({ length: 120 }, (_, i) => ({ id: i, name: i % 2 ? null : `n${i}` }));
    render(<RowsTable columns={["id", "name"]} rows={rows} rowCount={120} testId="tqa-rows-9" />);
    expect(screen.getByTestId("tqa-rows-9").querySelectorAll("tbody tr")).toHaveLength(50);
    expect(screen.getByTestId("tqa-rows-9-more").textContent).toBe("70 more");
    expect(screen.getByTestId("tqa-rows-9").querySelectorAll("tbody tr")[1].textContent).toBe("1NULL");
    fireEvent.click(screen.getByText(/show all 120/));
    expect(screen.getByTestId("tqa-rows-9").querySelectorAll("tbody tr")).toHaveLength(120);
  });

  it("shows an agent's failure as a turn", () => {
    const turn = { ...lucy.turns[2], content: null, text: "", usage: null, error: { code: "model_output", message: "the model's answer is not valid JSON" } };
    render(<TurnCard turn={turn} />);
    expect(screen.getByTestId("tqa-turn-2-error").textContent).toBe("model_output the model's answer is not valid JSON");
  });
});

describe("the ending", () => {
  it("a round-limit ending is shown as no answer", () => {
    const state = foldMessages(messagesOf(fixtures.roundLimitSse));
    render(<ConversationView state={state} />);
    const status = screen.getByTestId("tqa-status");
    expect(status.getAttribute("data-status")).toBe("round_limit");
    expect(status.getAttribute("role")).toBe("alert");
    expect(status.textContent).toContain("Round limit reached: no answer");
    expect(status.textContent).toContain("This is not an answer");
    expect(status.textContent).toContain("round_limit");
    expect(screen.queryByTestId("tqa-answer")).toBeNull();
    expect(screen.getByTestId("tqa-conversation").getAttribute("data-status")).toBe("round_limit");
    expect(screen.getByTestId("tqa-total-tokens").textContent).toContain("1,264");
  });

  it("a completed conversation shows its answer, evidence and groundedness, labelled scripted", () => {
    const state = foldMessages(messagesOf(fixtures.tomDepartmentSse));
    render(<ConversationView state={state} />);
    expect(screen.getByTestId("tqa-status").textContent).toContain("Completed: answered");
    const answer = screen.getByTestId("tqa-answer");
    expect(answer.getAttribute("data-form")).toBe("value");
    expect(screen.getByTestId("tqa-answer-value").textContent).toBe("FINANCE");
    expect(screen.getByTestId("tqa-grounded").getAttribute("data-grounded")).toBe("true");
    expect(screen.getByTestId("tqa-evidence-sql-0").textContent).toContain("WHERE e.Name = 'Tom'");
    expect(screen.getByTestId("tqa-evidence-rows-0").textContent).toContain("FINANCE");
    expect(screen.getByTestId("tqa-answer-scripted")).toBeTruthy();
    expect(screen.getByTestId("tqa-scripted-note")).toBeTruthy();
    // every turn has its card, with its agent
    expect(screen.getByTestId("tqa-turn-7").getAttribute("data-agent")).toBe("Critic");
    expect(screen.getByTestId("tqa-rows-3-count").textContent).toBe("0 rows");
  });

  it("a filled format shows the filled text and its fields", () => {
    const state = foldMessages(messagesOf(fixtures.tomDepartmentSse));
    const summary = {
      ...state.summary!,
      answer: { ...state.summary!.answer!, form: "template", value: 1569, text: "Year-end bonus of Tom: 1569", fields: { name: "Tom", bonus: 1569 } },
    };
    render(<ConversationView state={{ ...state, summary }} />);
    expect(screen.getByTestId("tqa-answer-filled").textContent).toBe("Year-end bonus of Tom: 1569");
  });
});
