import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { IterationPanel } from "./IterationStrip";
import { isNested, iterationNodes, iterationsOf, topLevel } from "./iterations";
import { applyMessage, startingState, type RunState } from "./runState";
import { fixtures, messagesOf } from "./testutil";

// A real stream: `parse` maps the sub-flow `parse_one` (text -> from_json -> value) over
// ["1", "oops", "[2]"], two at a time, skipping the item that fails.
function mapRun(): RunState {
  const nodes = (fixtures.mapFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));
  return messagesOf(fixtures.mapSse).reduce(applyMessage, startingState(nodes));
}

// A real stream: `each` maps over three drafts; "memo" (item 1) asks a person, the others
// go on by themselves, and the run stops to wait.
function waitingRun(): RunState {
  const nodes = (fixtures.mapWaitingFlow.nodes ?? []).map((n) => ({ id: n.id, block: n.block }));
  return messagesOf(fixtures.mapWaitingSse).reduce(applyMessage, startingState(nodes));
}

afterEach(cleanup);

describe("iterations from a real map stream", () => {
  const state = mapRun();

  it("keeps the flow's own nodes apart from the sub-flow's", () => {
    expect(state.phase).toBe("succeeded");
    expect(state.outputs).toEqual({ values: [1, [2]] });
    expect(topLevel(state.order)).toEqual(["texts", "parse", "values"]);
    expect(state.order.filter(isNested)).toContain("parse[1]/json");
  });

  it("groups the nested nodes by item, with a status each", () => {
    const iterations = iterationsOf(state, "parse");
    expect(iterations.map((it) => [it.index, it.status])).toEqual([
      [0, "succeeded"],
      [1, "failed"],
      [2, "succeeded"],
    ]);
    expect(iterations[1].prefix).toBe("parse[1]/");
    const nodes = iterationNodes(state, iterations[2]);
    expect(nodes.map((n) => n.name)).toEqual(["text", "json", "value"]);
    expect(nodes[1].node.inputs).toEqual({ text: "[2]" });
    expect(nodes[1].node.output).toEqual([2]);
    expect(iterationNodes(state, iterations[1])[1].node.error).toMatch(/oops|JSON/i);
    expect(iterationsOf(state, "texts")).toEqual([]);
  });
});

describe("the iteration strip", () => {
  it("shows 1…n coloured by status and opens an iteration's nodes", () => {
    render(
      <div className="dw-debug">
        <IterationPanel run={mapRun()} nodeId="parse" />
      </div>,
    );
    const strip = screen.getByTestId("iterations-parse");
    expect(within(strip).getByText(/3 · 2 succeeded · 1 failed/)).toBeTruthy();
    const second = screen.getByTestId("iteration-parse[1]");
    expect(second.textContent).toBe("2");
    expect(second.getAttribute("data-status")).toBe("failed");
    expect(screen.queryByTestId("iteration-nodes")).toBeNull();
    fireEvent.click(second);
    const opened = screen.getByTestId("iteration-nodes");
    expect(within(opened).getByTestId("iteration-node-parse[1]/json").getAttribute("data-status")).toBe(
      "failed",
    );
    fireEvent.click(second);
    expect(screen.queryByTestId("iteration-nodes")).toBeNull();
  });
});

describe("a map item waiting for a person", () => {
  const state = waitingRun();

  it("is waiting, not failed, and so are its asking node and the map", () => {
    expect(state.error?.code).toBe("waiting_for_human");
    expect(iterationsOf(state, "each").map((it) => [it.index, it.status])).toEqual([
      [0, "succeeded"],
      [1, "waiting"],
      [2, "succeeded"],
    ]);
    expect(state.nodes["each[1]/ask"].status).toBe("waiting");
    expect(state.nodes["each[1]/ask"].error).toMatch(/waiting for an answer to request .*: Approve memo\?/);
    expect(state.nodes["each"].status).toBe("waiting");
    expect(Object.values(state.nodes).filter((n) => n.status === "failed")).toEqual([]);
  });

  it("shows in the strip with its own colour, mark and label", () => {
    render(
      <div className="dw-debug">
        <IterationPanel run={state} nodeId="each" />
      </div>,
    );
    const strip = screen.getByTestId("iterations-each");
    expect(within(strip).getByText(/3 · 2 succeeded · 1 waiting for input/)).toBeTruthy();
    const asking = screen.getByTestId("iteration-each[1]");
    expect(asking.getAttribute("data-status")).toBe("waiting");
    expect(asking.className).toContain("dw-it-waiting");
    expect(asking.textContent).toBe("⏸ 2");
    expect(asking.getAttribute("title")).toBe("each[1]: waiting for input");
    expect(screen.getByTestId("iteration-each[0]").textContent).toBe("1");
    fireEvent.click(asking);
    const opened = screen.getByTestId("iteration-nodes");
    expect(within(opened).getByTestId("iteration-node-each[1]/ask").getAttribute("data-status")).toBe("waiting");
    // the nodes after the question never ran: the stream names none of them
    expect(within(opened).queryByTestId("iteration-node-each[1]/said")).toBeNull();
  });
});
