import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { useState } from "react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { NodeRunState } from "../api/types";
import type { HumanRequest } from "../integrations/api";
import { DebugPanel } from "./DebugPanel";
import { byteStream, fixtures, jsonResponse, rawEvents, sseResponse } from "./testutil";
import type { FlowDocument } from "./types";

type Handler = (url: string, init: RequestInit) => Response | Promise<Response>;

let routes: Record<string, Handler>;
let calls: { method: string; url: string; body: unknown; headers: Record<string, string> }[];

function route(method: string, url: string): Handler | undefined {
  const path = url.split("?")[0];
  return routes[`${method} ${url}`] ?? routes[`${method} ${path}`];
}

beforeEach(() => {
  calls = [];
  routes = {
    "GET /api/v1/runs": () =>
      jsonResponse({ items: [{ ...fixtures.parallelChatRecord, nodes: [] }], total: 1, offset: 0, limit: 20 }),
    [`GET /api/v1/runs/${fixtures.parallelChatRecord.id}`]: () => jsonResponse(fixtures.parallelChatRecord),
  };
  vi.stubGlobal(
    "fetch",
    vi.fn(async (input: string | URL | Request, init: RequestInit = {}) => {
      const url = String(input);
      const method = init.method ?? "GET";
      calls.push({
        method,
        url,
        body: init.body ? JSON.parse(String(init.body)) : undefined,
        headers: (init.headers ?? {}) as Record<string, string>,
      });
      const handler = route(method, url);
      if (!handler) return jsonResponse({ error: { code: "not_found", message: `no route ${method} ${url}` } }, 404);
      return handler(url, init);
    }),
  );
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

function streamOf(text: string, chunk = 61) {
  const chunks: string[] = [];
  for (let i = 0; i < text.length; i += chunk) chunks.push(text.slice(i, i + chunk));
  return sseResponse(byteStream(chunks));
}

function Harness({
  flow,
  appSlug = "demo",
  onStates,
}: {
  flow: FlowDocument;
  appSlug?: string | null;
  onStates?: (s: Record<string, NodeRunState>) => void;
}) {
  const [selected, setSelected] = useState<string | null>(null);
  return (
    <DebugPanel
      flow={flow}
      appSlug={appSlug}
      selectedNodeId={selected}
      onSelectNode={setSelected}
      onNodeStates={(s) => onStates?.(s)}
    />
  );
}

const flow = fixtures.parallelChatFlow;

// The run of fixtures.mapWaitingSse and the request its map item "memo" waits on.
const WAITING_RUN = "7fee90236ca04a8a86bbb883efc0d826";
const askRequest: HumanRequest = {
  id: "dd166500d0704667a485febbbeb1bce0",
  run_id: WAITING_RUN,
  app_id: null,
  node: "each[1]/ask",
  message: "Approve memo?",
  form: { fields: [], choices: ["approve", "reject"] },
  status: "waiting",
  choice: null,
  resumed_run_id: null,
  expires_at: null,
  created_at: "2026-11-27T08:00:00Z",
};

describe("DebugPanel", () => {
  it("runs the graph and shows every node live, the inspector, the timeline and past runs", { timeout: 15000 }, async () => {
    // Event by event, 5 ms apart: the canvas sees the nodes run.
    routes["POST /api/v1/runs/debug"] = () =>
      sseResponse(byteStream(rawEvents(fixtures.parallelChatSse), "close", 5));
    const states: Record<string, NodeRunState>[] = [];
    render(<Harness flow={flow} onStates={(s) => states.push(s)} />);

    expect((screen.getByTestId("debug-input-question") as HTMLInputElement).value).toBe("Who is Tom?");
    expect(screen.getByTestId("run-status").textContent).toBe("idle");
    expect(screen.getByTestId("debug-node-draft").getAttribute("data-status")).toBe("pending");
    await screen.findByTestId(`debug-run-${fixtures.parallelChatRecord.id}`);

    fireEvent.change(screen.getByTestId("debug-input-question"), { target: { value: "Who is Ann?" } });
    fireEvent.click(screen.getByTestId("run"));

    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"), {
      timeout: 8000,
    });
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.url).toBe("/api/v1/runs/debug");
    expect(post.body).toMatchObject({ flow, inputs: { question: "Who is Ann?" }, app: "demo", stream: true });

    expect(screen.getByTestId("debug-node-draft").getAttribute("data-status")).toBe("succeeded");
    expect(screen.getByTestId("debug-node-big").getAttribute("data-status")).toBe("skipped");
    const last = states.at(-1)!;
    expect(last.draft.status).toBe("succeeded");
    expect(last.big.status).toBe("skipped");
    expect(last.draft.tokens).toBeGreaterThan(0);
    expect(states.some((s) => Object.values(s).some((n) => n.status === "running"))).toBe(true);

    // the run's result, then a node's details
    expect(screen.getByTestId("run-outputs").textContent).toContain("\"count\": 3");
    fireEvent.click(screen.getByTestId("debug-node-draft"));
    const output = await screen.findByTestId("debug-output");
    expect(output.textContent).toContain("[scripted reply]");
    const inspector = screen.getByTestId("debug-inspector");
    expect(inspector.querySelector(".dw-scripted")!.textContent).toBe("scripted");
    expect(inspector.textContent).toMatch(/\d+ prompt \/ \d+ completion/);

    const timeline = screen.getByTestId("debug-timeline");
    expect(within(timeline).getByTestId("gantt-draft")).toBeTruthy();
    expect(within(timeline).getByTestId("gantt-summary")).toBeTruthy();
    expect(timeline.textContent).toContain("in parallel");

    expect(calls.filter((c) => c.url.startsWith("/api/v1/runs?")).length).toBeGreaterThanOrEqual(2);
    expect(calls.find((c) => c.url.startsWith("/api/v1/runs?"))!.url).toContain("app=demo");
  });

  it("re-runs from the selected node, reusing the last run's upstream outputs", async () => {
    routes["POST /api/v1/runs/debug"] = (_url, init) =>
      JSON.parse(String(init.body)).reuse ? streamOf(fixtures.reuseSse) : streamOf(fixtures.parallelChatSse);
    render(<Harness flow={flow} />);
    fireEvent.click(screen.getByTestId("run"));
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"));
    fireEvent.click(screen.getByTestId("debug-node-combine"));
    const rerun = screen.getByTestId("rerun-from-node") as HTMLButtonElement;
    expect(rerun.disabled).toBe(false);
    fireEvent.click(rerun);
    await waitFor(() =>
      expect(screen.getByTestId("debug-node-draft").getAttribute("data-status")).toBe("reused"),
    );
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"));
    const body = calls.filter((c) => c.method === "POST").at(-1)!.body as Record<string, unknown>;
    expect(body.reuse).toEqual({ run_id: fixtures.parallelChatRecord.id, from_node: "combine" });
    expect(screen.getByTestId("debug-node-combine").getAttribute("data-status")).toBe("succeeded");
  });

  it("shows a refused run readably: the problems, each linking to its node", async () => {
    routes["POST /api/v1/runs/debug"] = () =>
      jsonResponse(
        {
          error: {
            code: "flow_invalid",
            message: "the flow has 1 error(s): ...",
            problems: [
              { code: "unknown_block", message: "unknown block 'nope'", node: "draft", port: null, severity: "error" },
            ],
          },
        },
        422,
      );
    render(<Harness flow={flow} />);
    fireEvent.click(screen.getByTestId("run"));
    const error = await screen.findByTestId("debug-error");
    expect(error.textContent).toContain("The flow is not valid");
    expect(error.textContent).toContain("unknown block 'nope'");
    expect(screen.getByTestId("run-status").textContent).toBe("idle");
    fireEvent.click(within(error).getByText("draft"));
    expect(screen.getByTestId("debug-inspector").textContent).toContain("draft");
  });

  it("shows a failed node's error", async () => {
    const failFlow: FlowDocument = {
      format: "dagwright.flow",
      version: 1,
      nodes: [
        { id: "t", block: "text_input", config: { name: "t", default: "not json" } },
        { id: "p", block: "from_json", config: {} },
        { id: "o", block: "output", config: { name: "o" } },
      ],
      edges: [],
    };
    routes["POST /api/v1/runs/debug"] = () => streamOf(fixtures.failSse);
    render(<Harness flow={failFlow} appSlug={null} />);
    expect(screen.getByTestId("debug-runs").textContent).toContain("Save the flow");
    fireEvent.click(screen.getByTestId("run"));
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("failed"));
    expect(screen.getByText("The run failed at p")).toBeTruthy();
    expect(screen.getByTestId("debug-node-p").getAttribute("data-status")).toBe("failed");
    fireEvent.click(screen.getByText("inspect p"));
    expect(screen.getByTestId("debug-node-error").textContent).toContain(
      "ValueError: input 'text' is not valid JSON",
    );
  });

  it("catches up after a lost connection, showing reconnecting… meanwhile", async () => {
    const events = rawEvents(fixtures.parallelChatSse);
    routes["POST /api/v1/runs/debug"] = () =>
      sseResponse(byteStream([events.slice(0, 18).join("")], "error"));
    const runId = fixtures.parallelChatRecord.id;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    routes[`GET /api/v1/runs/${runId}/events`] = async (_url, init) => {
      await gate;
      const last = Number((init.headers as Record<string, string>)["Last-Event-ID"]);
      return streamOf(events.slice(last + 1).join(""));
    };
    render(<Harness flow={flow} />);
    fireEvent.click(screen.getByTestId("run"));
    expect((await screen.findByTestId("reconnecting")).textContent).toContain("reconnecting…");
    release();
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"), {
      timeout: 3000,
    });
    expect(screen.queryByTestId("reconnecting")).toBeNull();
    const resume = calls.find((c) => c.url.endsWith("/events"))!;
    expect(resume.headers["Last-Event-ID"]).toBe("17");
    fireEvent.click(screen.getByTestId("debug-node-summary"));
    const output = screen.getByTestId("debug-output").textContent!;
    expect(output.match(/\[scripted reply\]/g)).toHaveLength(1); // no token twice
  });

  it("opens a past run from the list in the same views", async () => {
    render(<Harness flow={flow} />);
    fireEvent.click(await screen.findByTestId(`debug-run-${fixtures.parallelChatRecord.id}`));
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"));
    expect(screen.getByTestId("debug-node-bigout").getAttribute("data-status")).toBe("skipped");
    expect(screen.getByText(/past run/)).toBeTruthy();
    expect(within(screen.getByTestId("debug-timeline")).getByTestId("gantt-draft")).toBeTruthy();
  });

  it("ignores a past run's record that arrives after a newer run started", async () => {
    // Run A is clicked, then Run is pressed before A's record arrives: A's late record must
    // not replace the new run, nor may the new run's events apply on top of A.
    const stale = { ...fixtures.parallelChatRecord, id: "stale-run-a", status: "failed", nodes: [] };
    routes["GET /api/v1/runs"] = () => jsonResponse({ items: [stale], total: 1, offset: 0, limit: 20 });
    let release: () => void = () => undefined;
    routes["GET /api/v1/runs/stale-run-a"] = () =>
      new Promise<Response>((resolve) => (release = () => resolve(jsonResponse(stale))));
    routes["POST /api/v1/runs/debug"] = () => streamOf(fixtures.parallelChatSse);
    render(<Harness flow={flow} />);
    fireEvent.click(await screen.findByTestId("debug-run-stale-run-a"));
    await waitFor(() => expect(calls.some((c) => c.url === "/api/v1/runs/stale-run-a")).toBe(true));
    fireEvent.click(screen.getByTestId("run"));
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"));
    release();
    await new Promise((r) => setTimeout(r, 50));
    expect(screen.getByTestId("run-status").textContent).toBe("succeeded");
    expect(screen.queryByText(/past run/)).toBeNull();
    expect(screen.getByTestId("debug-node-draft").getAttribute("data-status")).toBe("succeeded");
  });

  it("chats with a conversational flow: each message runs it, the reply streams in", async () => {
    const chatFlow: FlowDocument = {
      format: "dagwright.flow",
      version: 1,
      name: "answer_question",
      nodes: [
        { id: "question", block: "text_input", config: { name: "question" } },
        { id: "draft", block: "chat", config: { prompt: "{{ question }}" } },
        { id: "out", block: "output", config: { name: "answer" } },
      ],
      edges: [
        { source: { node: "question" }, target: { node: "draft", port: "question" } },
        { source: { node: "draft" }, target: { node: "out", port: "value" } },
      ],
    };
    // The recorded stream's "answer" output is the combined text; fine for the transcript.
    routes["POST /api/v1/runs/debug"] = () => streamOf(fixtures.parallelChatSse);
    render(<Harness flow={chatFlow} />);
    expect(screen.getByRole("tab", { name: "Chat" }).getAttribute("aria-selected")).toBe("true");
    expect(screen.getByRole("tab", { name: "Form" }).getAttribute("aria-selected")).toBe("false");
    const input = screen.getByLabelText("Message");
    expect(input).toBe(screen.getByTestId("chat-input"));
    fireEvent.change(input, { target: { value: "Who is Tom?" } });
    fireEvent.click(screen.getByTestId("chat-send"));
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("succeeded"));
    const post = calls.find((c) => c.method === "POST")!;
    expect((post.body as { inputs: unknown }).inputs).toEqual({ question: "Who is Tom?" });
    await waitFor(() =>
      expect(document.querySelector(".dw-msg-assistant")!.textContent).toContain("[scripted reply]"),
    );
    expect(document.querySelector(".dw-msg-user")!.textContent).toContain("Who is Tom?");
    expect(within(document.querySelector(".dw-msg-assistant") as HTMLElement).getByText("scripted")).toBeTruthy();
  });

  it("shows a paused run as waiting, with its request's form, not as failed", async () => {
    routes["POST /api/v1/runs/debug"] = () => streamOf(fixtures.mapWaitingSse);
    routes["GET /api/v1/human/requests"] = () => jsonResponse({ items: [askRequest], total: 1, offset: 0, limit: 200 });
    render(<Harness flow={fixtures.mapWaitingFlow} />);
    fireEvent.click(screen.getByTestId("run"));
    await waitFor(() => expect(screen.getByTestId("run-status").textContent).toBe("waiting"));
    await screen.findByTestId("human-request-each[1]/ask");
    expect(screen.getByText("The run waits for an answer")).toBeTruthy();
    expect(screen.queryByText(/The run failed/)).toBeNull();
    expect(screen.getByTestId("cancel")).toBeTruthy(); // a waiting run can be cancelled
    fireEvent.click(screen.getByTestId("debug-node-each"));
    const rerun = screen.getByTestId("rerun-from-node") as HTMLButtonElement;
    expect(rerun.disabled).toBe(true);
    expect(rerun.title).toMatch(/waits for an answer/);
  });

  it("stops asking for past runs once the panel is gone", async () => {
    let signal: AbortSignal | null | undefined;
    routes["GET /api/v1/runs"] = (_url, init) => {
      signal = init.signal;
      return new Promise<Response>(() => undefined); // never answers
    };
    const { unmount } = render(<Harness flow={flow} />);
    await waitFor(() => expect(signal).toBeTruthy());
    expect(signal!.aborted).toBe(false);
    unmount();
    expect(signal!.aborted).toBe(true);
  });
});
