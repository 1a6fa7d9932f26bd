import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { byteStream, jsonResponse, rawEvents, sseResponse } from "../debug/testutil";
import { conversationReducer, initialConversation } from "./conversation";
import { ConversationView } from "./ConversationView";
import { DatasetsPanel } from "./DatasetsPanel";
import { TqaPage } from "./TqaPage";
import { fixtures } from "./testutil";
import type { TqaDataset, TqaHint } from "./types";

const figure1: TqaDataset = {
  name: "figure1",
  description: "hr and payroll",
  sources: ["hr", "payroll"],
  namespaces: { planner: "fig-plans", text_to_sql: "fig-sql" },
  examples_k: 2,
  hints_k: 3,
  sop: "SOP v2: join hr and payroll by ID.",
  sop_version: 2,
  created_at: "2026-11-24T07:00:00+00:00",
  updated_at: "2026-11-24T07:10:00+00:00",
};

const candidate: TqaHint = {
  id: "h1",
  dataset: "figure1",
  text: "`... 'tom'` returned no rows (values are case-sensitive: Name has 'Tom', not 'tom'); this worked instead: `... 'Tom'`.",
  status: "candidate",
  source: "learned",
  question: "Which department does tom work in?",
  conversation_id: "c1",
  details: { tables: ["hr.main.Department", "hr.main.Employee"] },
  created_at: "2026-11-24T07:20:00+00:00",
  updated_at: "2026-11-24T07:20:00+00:00",
};

type Call = { key: string; body?: unknown };

function mockServer(routes: Record<string, (init?: RequestInit) => Response>): Call[] {
  const calls: Call[] = [];
  vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
    const key = `${init?.method ?? "GET"} ${url.split("?")[0]}`;
    calls.push({ key: `${key}${url.includes("?") ? `?${url.split("?")[1]}` : ""}`, body: init?.body ? JSON.parse(String(init.body)) : undefined });
    const route = routes[key];
    return route ? route(init) : jsonResponse({ error: { code: "not_found", message: `no route ${key}` } }, 404);
  });
  return calls;
}

beforeEach(() => {
  localStorage.clear();
  history.replaceState(null, "", "#/tqa");
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("the ask form picks a dataset", () => {
  it("shows the dataset's sources, SOP version and examples, and asks with its name (no raw SOP)", async () => {
    const calls = mockServer({
      "GET /api/v1/tqa/conversations": () => jsonResponse({ items: [], total: 0, offset: 0, limit: 20 }),
      "GET /api/v1/tqa/datasets": () => jsonResponse([figure1]),
      "POST /api/v1/tqa/ask": () => sseResponse(byteStream(rawEvents(fixtures.tomDepartmentSse), "close", 2)),
    });
    render(<TqaPage conversationId={null} />);
    await screen.findByRole("option", { name: "figure1" });
    expect(screen.queryByTestId("tqa-sop")).toBeNull();
    expect((screen.getByTestId("tqa-max-rounds") as HTMLInputElement).value).toBe("50");
    fireEvent.change(screen.getByTestId("tqa-dataset"), { target: { value: "figure1" } });
    const summary = screen.getByTestId("tqa-dataset-summary").textContent ?? "";
    expect(summary).toContain("sources: hr, payroll");
    expect(summary).toContain("SOP v2: join hr and payroll by ID.");
    expect(summary).toContain("examples: planner, text_to_sql (k 2)");
    fireEvent.change(screen.getByTestId("tqa-question"), { target: { value: "Which department does tom work in?" } });
    fireEvent.click(screen.getByTestId("tqa-ask"));
    await waitFor(() => expect(calls.some((c) => c.key === "POST /api/v1/tqa/ask")).toBe(true));
    expect(calls.find((c) => c.key === "POST /api/v1/tqa/ask")!.body).toEqual({
      question: "Which department does tom work in?",
      dataset: "figure1",
      scheduler: "fsm",
      max_rounds: 50,
      stream: true,
    });
  });
});

describe("DatasetsPanel", () => {
  it("saves a new SOP version with its note and the example namespaces, and shows the history", async () => {
    const calls = mockServer({
      "GET /api/v1/tqa/datasets": () => jsonResponse([figure1]),
      "PUT /api/v1/tqa/datasets/figure1": () => jsonResponse({ ...figure1, sop_version: 3 }),
      "GET /api/v1/tqa/datasets/figure1/sops": () =>
        jsonResponse([
          { version: 2, text: figure1.sop, note: "joins", created_at: "x" },
          { version: 1, text: "SOP v1", note: "the first version", created_at: "x" },
        ]),
      "GET /api/v1/tqa/hints": () => jsonResponse([]),
    });
    render(<DatasetsPanel />);
    const sop = (await screen.findByTestId("tqa-ds-sop")) as HTMLTextAreaElement;
    expect(sop.value).toBe(figure1.sop);
    fireEvent.change(sop, { target: { value: "SOP v3: check the department first." } });
    fireEvent.change(screen.getByTestId("tqa-ds-sop-note"), { target: { value: "departments" } });
    fireEvent.change(screen.getByTestId("tqa-ds-ns-critic"), { target: { value: "fig-verdicts" } });
    fireEvent.click(screen.getByTestId("tqa-ds-save"));
    await waitFor(() => expect(calls.some((c) => c.key === "PUT /api/v1/tqa/datasets/figure1")).toBe(true));
    expect(calls.find((c) => c.key === "PUT /api/v1/tqa/datasets/figure1")!.body).toEqual({
      description: "hr and payroll",
      sources: ["hr", "payroll"],
      namespaces: { planner: "fig-plans", text_to_sql: "fig-sql", critic: "fig-verdicts" },
      examples_k: 2,
      hints_k: 3,
      sop: "SOP v3: check the department first.",
      sop_note: "departments",
    });
    fireEvent.click(screen.getByTestId("tqa-ds-sop-history"));
    expect((await screen.findByTestId("tqa-ds-sop-versions")).textContent).toContain("v1 (the first version) SOP v1");
  });

  it("lists learned candidates, then confirms, edits and drops them", async () => {
    let hint = candidate;
    const calls = mockServer({
      "GET /api/v1/tqa/datasets": () => jsonResponse([figure1]),
      "GET /api/v1/tqa/hints": () => jsonResponse([hint]),
      "PUT /api/v1/tqa/hints/h1": (init) => {
        hint = { ...hint, ...(JSON.parse(String(init?.body)) as Partial<TqaHint>), updated_at: `${Math.random()}` };
        return jsonResponse(hint);
      },
    });
    render(<DatasetsPanel />);
    const item = await screen.findByTestId("tqa-hint-h1");
    expect(item.textContent).toContain("learned on “Which department does tom work in?” · tables hr.main.Department, hr.main.Employee");
    expect(calls.some((c) => c.key === "GET /api/v1/tqa/hints?dataset=figure1&status=candidate")).toBe(true);
    fireEvent.click(screen.getByTestId("tqa-hint-confirm-h1"));
    await waitFor(() => expect(screen.getByTestId("tqa-hint-h1").getAttribute("data-status")).toBe("confirmed"));
    fireEvent.click(screen.getByTestId("tqa-hint-edit-h1"));
    fireEvent.change(screen.getByTestId("tqa-hint-text-h1"), { target: { value: "Names are capitalised: 'Tom', 'Lucy'." } });
    fireEvent.click(screen.getByTestId("tqa-hint-save-h1"));
    await waitFor(() => expect(screen.getByTestId("tqa-hint-h1").textContent).toContain("Names are capitalised"));
    fireEvent.click(screen.getByTestId("tqa-hint-drop-h1"));
    await waitFor(() => expect(screen.getByTestId("tqa-hint-h1").getAttribute("data-status")).toBe("dropped"));
    expect(calls.filter((c) => c.key === "PUT /api/v1/tqa/hints/h1").map((c) => c.body)).toEqual([
      { status: "confirmed" },
      { text: "Names are capitalised: 'Tom', 'Lucy'." },
      { status: "dropped" },
    ]);
  });
});

describe("a conversation shows what its dataset gave", () => {
  it("SOP version, examples and the learned hints given and recorded", () => {
    const conversation = {
      ...fixtures.lucy,
      dataset: "figure1",
      sop: figure1.sop,
      profile: {
        name: "figure1",
        found: true,
        sop_version: 2,
        namespaces: figure1.namespaces as Record<string, string>,
        examples_k: 2,
        sources: ["hr", "payroll"],
        hints: [],
        learned_hints: [{ id: "h1", status: "confirmed" as const, similarity: 0.73 }],
        learned: ["h2"],
      },
    };
    const state = conversationReducer(initialConversation, { type: "loaded", conversation });
    render(<ConversationView state={state} />);
    expect(screen.getByText("SOP v2")).toBeTruthy();
    expect(screen.getByTestId("tqa-learned-used").textContent).toBe("1 learned hint(s) given");
    expect(screen.getByTestId("tqa-learned-new").textContent).toContain("learned 1 new candidate hint(s)");
    expect(screen.getByTestId("tqa-profile-used").textContent).toContain("examples for planner, text_to_sql (k 2)");
  });
});
