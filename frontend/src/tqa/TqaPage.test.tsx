import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { byteStream, jsonResponse, rawEvents, sseResponse } from "../debug/testutil";
import { parseRoute, routeHash } from "../router";
import { TqaPage } from "./TqaPage";
import { fixtures } from "./testutil";

const summaryOf = ({ turns: _turns, ...summary }: typeof fixtures.lucy) => summary;

function mockServer(routes: Record<string, (init?: RequestInit) => Response>) {
  const calls: { key: string; body?: unknown }[] = [];
  vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
    const key = `${init?.method ?? "GET"} ${url.split("?")[0]}`;
    calls.push({ key, body: init?.body ? JSON.parse(String(init.body)) : undefined });
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

describe("routes", () => {
  it("#/tqa and #/tqa/<id>", () => {
    expect(parseRoute("#/tqa")).toEqual({ page: "tqa", conversation: null });
    expect(parseRoute("#/tqa/abc")).toEqual({ page: "tqa", conversation: "abc" });
    expect(routeHash({ page: "tqa", conversation: "abc" })).toBe("#/tqa/abc");
    expect(parseRoute("#/apps/x")).toEqual({ page: "editor", slug: "x", version: null });
  });
});

describe("TqaPage", () => {
  it("asks with stream: true and shows the conversation turn by turn, then lists it", async () => {
    const calls = mockServer({
      "GET /api/v1/tqa/conversations": () => jsonResponse({ items: [summaryOf(fixtures.lucy)], total: 1, offset: 0, limit: 20 }),
      "POST /api/v1/tqa/ask": () => sseResponse(byteStream(rawEvents(fixtures.tomDepartmentSse), "close", 2)),
      "GET /api/v1/tqa/datasets": () => jsonResponse([]),
    });
    render(<TqaPage conversationId={null} />);
    expect(await screen.findByTestId(`tqa-conv-${fixtures.lucy.id}`)).toBeTruthy();
    expect(screen.getByTestId("tqa-empty")).toBeTruthy();
    expect((screen.getByTestId("tqa-scheduler") as HTMLSelectElement).value).toBe("fsm");
    fireEvent.change(screen.getByTestId("tqa-question"), { target: { value: "Which department does tom work in?" } });
    fireEvent.change(screen.getByTestId("tqa-max-rounds"), { target: { value: "8" } });
    fireEvent.change(screen.getByTestId("tqa-scheduler"), { target: { value: "rolling" } });
    fireEvent.click(screen.getByTestId("tqa-ask"));
    // (generous timeouts: the stream arrives in chunks, slower on a loaded machine)
    expect(await screen.findByTestId("tqa-turn-3", {}, { timeout: 5000 })).toBeTruthy();
    await waitFor(() => expect(screen.getByTestId("tqa-status").getAttribute("data-status")).toBe("completed"), { timeout: 5000 });
    expect(screen.getByTestId("tqa-answer-value").textContent).toBe("FINANCE");
    expect(screen.getByTestId("tqa-source").textContent).toBe("live");
    const ask = calls.find((c) => c.key === "POST /api/v1/tqa/ask")!;
    expect(ask.body).toEqual({ question: "Which department does tom work in?", scheduler: "rolling", max_rounds: 8, stream: true });
    expect(window.location.hash).toBe("#/tqa/bfcbf986bf3a4e699397e929f409976e");
    await waitFor(() => expect(calls.filter((c) => c.key === "GET /api/v1/tqa/conversations")).toHaveLength(2)); // listed again
  });

  it("replays a past conversation with the same components", async () => {
    mockServer({
      "GET /api/v1/tqa/conversations": () => jsonResponse({ items: [summaryOf(fixtures.lucy)], total: 1, offset: 0, limit: 20 }),
      [`GET /api/v1/tqa/conversations/${fixtures.lucy.id}`]: () => jsonResponse(fixtures.lucy),
    });
    render(<TqaPage conversationId={fixtures.lucy.id} />);
    expect(await screen.findByTestId("tqa-answer")).toBeTruthy();
    expect(screen.getByTestId("tqa-source").textContent).toBe("replay");
    expect(screen.getByTestId("tqa-tool-error-3").textContent).toContain("query_failed");
    expect(screen.getByTestId("tqa-sql-5")).toBeTruthy();
  });

  it("says why the server refused, and why a conversation could not be loaded", async () => {
    mockServer({
      "GET /api/v1/tqa/conversations": () => jsonResponse({ error: { code: "admin_token_invalid", message: "the admin token is wrong" } }, 401),
      "POST /api/v1/tqa/ask": () => jsonResponse({ error: { code: "invalid_request", message: "question: String should have at least 1 character" } }, 422),
    });
    const { unmount } = render(<TqaPage conversationId={null} />);
    expect((await screen.findByTestId("tqa-conversations-error")).textContent).toBe("admin_token_invalid the admin token is wrong");
    fireEvent.change(screen.getByTestId("tqa-question"), { target: { value: "x" } });
    await act(async () => fireEvent.click(screen.getByTestId("tqa-ask")));
    expect((await screen.findByTestId("tqa-error")).textContent).toContain("invalid_request question: String should have at least 1 character");
    unmount();
    render(<TqaPage conversationId="nope" />);
    expect((await screen.findByTestId("tqa-error")).textContent).toContain("not_found");
  });
});
