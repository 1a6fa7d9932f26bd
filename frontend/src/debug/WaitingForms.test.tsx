import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { HumanRequest } from "../integrations/api";
import { WaitingForms } from "./parts/WaitingForms";
import { idleState, type RunState } from "./runState";
import { jsonResponse } from "./testutil";
import type { FlowDocument } from "./types";

const flow: FlowDocument = { format: "dagwright.flow", version: 1, name: "f", nodes: [], edges: [] };

function waitingRun(runId: string): RunState {
  return {
    ...idleState(),
    runId,
    phase: "waiting",
    done: true,
    error: { code: "waiting_for_human", message: "node 'ask' waits for a person", node: "ask" },
  };
}

function requestOf(runId: string, node: string): HumanRequest {
  return {
    id: `req-${runId}`,
    run_id: runId,
    app_id: null,
    node,
    message: `Approve ${runId}?`,
    form: { fields: [], choices: [] },
    status: "waiting",
    choice: null,
    resumed_run_id: null,
    expires_at: null,
    created_at: "2026-11-27T08:00:00Z",
  };
}

type Handler = (url: string, init: RequestInit) => Response | Promise<Response>;
let handler: Handler;

beforeEach(() => {
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: string | URL | Request, init: RequestInit = {}) => handler(String(input), init)),
  );
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

function page(items: HumanRequest[]) {
  return jsonResponse({ items, total: items.length, offset: 0, limit: 200 });
}

describe("the forms of a paused debug run", () => {
  it("ignores a late answer about a run no longer shown", async () => {
    let releaseA: () => void = () => undefined;
    handler = (url) => {
      const runId = new URL(url, "http://x").searchParams.get("run_id")!;
      if (runId === "run-a") return new Promise((resolve) => (releaseA = () => resolve(page([requestOf("run-a", "ask-a")]))));
      return page([requestOf("run-b", "ask-b")]);
    };
    const { rerender } = render(<WaitingForms run={waitingRun("run-a")} flow={flow} onResumed={() => undefined} />);
    rerender(<WaitingForms run={waitingRun("run-b")} flow={flow} onResumed={() => undefined} />);
    await screen.findByTestId("human-request-ask-b");
    releaseA();
    await new Promise((r) => setTimeout(r, 20));
    expect(screen.queryByTestId("human-request-ask-a")).toBeNull();
    expect(screen.getByTestId("human-request-ask-b")).toBeTruthy();
  });

  it("shows nothing once another run (not waiting) is shown", async () => {
    handler = () => page([requestOf("run-a", "ask-a")]);
    const { rerender } = render(<WaitingForms run={waitingRun("run-a")} flow={flow} onResumed={() => undefined} />);
    await screen.findByTestId("human-request-ask-a");
    rerender(<WaitingForms run={{ ...idleState(), runId: "run-c", phase: "succeeded" }} flow={flow} onResumed={() => undefined} />);
    await waitFor(() => expect(screen.queryByTestId("debug-waiting")).toBeNull());
  });

  it("says only what went wrong when the requests could not be loaded", async () => {
    handler = () => jsonResponse({ error: { code: "internal", message: "the store is down" } }, 500);
    render(<WaitingForms run={waitingRun("run-a")} flow={flow} onResumed={() => undefined} />);
    expect((await screen.findByRole("alert")).textContent).toContain("the store is down");
    expect(screen.queryByText(/waits for/)).toBeNull();
  });

  it("an answer that started nothing says so and follows the run once it goes on", async () => {
    const asked = requestOf("run-a", "ask-a");
    let answered = false;
    const bodies: unknown[] = [];
    handler = (_url, init) => {
      if (init.method === "POST") {
        answered = true;
        bodies.push(JSON.parse(String(init.body)));
        // Another caller claimed the continuation (the sweep): it starts it.
        return jsonResponse({ run_id: null, status: "running", waiting_for: 0 });
      }
      return page(answered ? [{ ...asked, status: "answered", resumed_run_id: "run-next" }] : [asked]);
    };
    const onResumed = vi.fn();
    render(<WaitingForms run={waitingRun("run-a")} flow={flow} onResumed={onResumed} />);
    fireEvent.click(await screen.findByRole("button", { name: "Answer" }));
    expect((await screen.findByTestId("debug-answered")).textContent).toBe("Answered: the run goes on in a moment.");
    await waitFor(() => expect(onResumed).toHaveBeenCalledWith("run-next"));
    expect(bodies[0]).toMatchObject({ values: {}, choice: null, flow });
    expect(screen.queryByTestId("human-request-ask-a")).toBeNull(); // answered: its form is gone
    expect(screen.queryByText(/waits for/)).toBeNull();
  });

  it("an answer that leaves others waiting says how many", async () => {
    const asked = [requestOf("run-a", "ask-a"), { ...requestOf("run-a", "ask-b"), id: "req-b" }];
    let answered = false;
    handler = (_url, init) => {
      if (init.method === "POST") {
        answered = true;
        return jsonResponse({ run_id: null, status: "waiting", waiting_for: 1 });
      }
      return page(answered ? asked.slice(1) : asked);
    };
    render(<WaitingForms run={waitingRun("run-a")} flow={flow} onResumed={() => undefined} />);
    expect(await screen.findByText("The run waits for 2 answers")).toBeTruthy();
    fireEvent.click(screen.getAllByRole("button", { name: "Answer" })[0]);
    expect((await screen.findByTestId("debug-answered")).textContent).toBe(
      "Answered: the run still waits for 1 more answer.",
    );
    expect(await screen.findByText("The run waits for an answer")).toBeTruthy();
  });
});
