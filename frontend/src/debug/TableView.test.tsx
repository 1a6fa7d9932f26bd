import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { NodeInspector } from "./parts/NodeInspector";
import { applyEvent, startingState, type NodeView } from "./runState";
import { asTable } from "./table";
import { SHOWN_ROWS, TableView } from "./TableView";
import type { RunEvent } from "./types";

afterEach(cleanup);

describe("asTable", () => {
  it("reads {columns, rows} with rows as arrays or as records", () => {
    expect(asTable({ columns: ["a", "b"], rows: [[1, "x"]] })).toEqual({
      columns: ["a", "b"],
      rows: [[1, "x"]],
    });
    // sql_query's output: records, with the columns' order given
    expect(asTable({ columns: ["b", "a"], rows: [{ a: 1, b: 2 }], row_count: 1 })).toEqual({
      columns: ["b", "a"],
      rows: [[2, 1]],
    });
    expect(asTable({ columns: ["a"], rows: [] })).toEqual({ columns: ["a"], rows: [] });
  });

  it("reads a list of flat records, columns in order of first appearance", () => {
    expect(asTable([{ a: 1 }, { b: null, a: 2 }])).toEqual({
      columns: ["a", "b"],
      rows: [
        [1, undefined],
        [2, null],
      ],
    });
  });

  it("refuses what is not a table", () => {
    expect(asTable([])).toBeNull();
    expect(asTable([{ a: { nested: 1 } }])).toBeNull();
    expect(asTable([1, 2])).toBeNull();
    expect(asTable({ columns: [1], rows: [[1]] })).toBeNull();
    expect(asTable({ columns: ["a"], rows: [[1], { a: 1 }] })).toBeNull();
    expect(asTable({ rows: [[1]] })).toBeNull();
    expect(asTable("a table")).toBeNull();
  });
});

describe("TableView", () => {
  it("draws the first rows and shows all on demand", () => {
    const rows = Array.from({ length: SHOWN_ROWS + 5 }, (_, i) => [i, i % 2 === 0 ? null : "odd"]);
    render(<TableView table={{ columns: ["n", "kind"], rows }} testId="grid" />);
    const grid = screen.getByTestId("grid");
    expect(within(grid).getAllByRole("columnheader").map((h) => h.textContent)).toEqual(["n", "kind"]);
    expect(within(grid).getAllByRole("row")).toHaveLength(SHOWN_ROWS + 1);
    expect(within(grid).getAllByRole("row")[1].textContent).toBe("0null");
    fireEvent.click(within(grid).getByRole("button", { name: `show all ${SHOWN_ROWS + 5}` }));
    expect(within(grid).getAllByRole("row")).toHaveLength(SHOWN_ROWS + 6);
  });
});

// Chain-of-Table's cot_apply as the runtime reports it: a `table` message per operation
// (blocks/chain_of_table.py), then its output with the table as records.
function cotApply(): NodeView {
  const events: RunEvent[] = [
    { type: "node_started", run_id: "r", t: 0.1, node: "apply", block: "cot_apply", inputs: {} },
    {
      type: "node_message",
      run_id: "r",
      t: 0.2,
      node: "apply",
      kind: "table",
      data: {
        operation: "f_select_row(row 2)",
        reason: null,
        columns: ["rank", "nation"],
        rows: [["2", "France"]],
      },
    },
    {
      type: "node_message",
      run_id: "r",
      t: 0.3,
      node: "apply",
      kind: "table",
      data: {
        operation: "skip f_add_column()",
        reason: "the table already has a column 'nation'",
        columns: ["rank", "nation"],
        rows: [["2", "France"]],
      },
    },
    { type: "node_message", run_id: "r", t: 0.35, node: "apply", kind: "log", data: { line: "done" } },
    {
      type: "node_finished",
      run_id: "r",
      t: 0.4,
      node: "apply",
      duration: 0.3,
      output: [{ rank: "2", nation: "France" }],
    },
  ];
  const state = events.reduce(applyEvent, startingState([{ id: "apply", block: "cot_apply" }]));
  return state.nodes.apply;
}

describe("the node inspector", () => {
  it("shows each table event and a table output as grids, other messages as before", () => {
    render(
      <NodeInspector node={cotApply()} label="apply" inFlow canRerun={false} rerunHint="" onRerun={() => {}} />,
    );
    const steps = screen.getAllByTestId("debug-table-step");
    expect(steps.map((s) => s.querySelector("code")?.textContent)).toEqual([
      "f_select_row(row 2)",
      "skip f_add_column()",
    ]);
    expect(steps[1].textContent).toContain("the table already has a column 'nation'");
    expect(within(steps[0]).getAllByRole("cell").map((c) => c.textContent)).toEqual(["2", "France"]);
    const output = screen.getByTestId("debug-output-table");
    expect(within(output).getAllByRole("columnheader").map((h) => h.textContent)).toEqual([
      "rank",
      "nation",
    ]);
    // the log line stays a message; the table events are not repeated there as JSON
    const messages = screen.getByRole("list");
    expect(within(messages).getAllByRole("listitem")).toHaveLength(1);
    expect(messages.textContent).toContain('{"line":"done"}');
  });
});
