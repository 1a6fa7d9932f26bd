import { cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../debug/testutil";
import { parseRoute, routeHash } from "../router";
import { InterfacesPage } from "./InterfacesPage";
import { draftOf, draftProblem, edited, inputLabel, isChanged } from "./logic";
import type { InterfaceDef, InterfaceEntry } from "./types";

// Shapes as the server answers them (tests/methods/test_data_copilot_api.py asserts them).
const costByService: InterfaceDef = {
  name: "cost_by_service",
  description: "Cost per service between two dates.",
  inputs: [
    { name: "start_date", type: "date", description: "first day", default: null },
    { name: "top", type: "int", description: "", default: 5 },
    { name: "unit", type: "str", description: "", default: "usd" },
  ],
  tables: ["pg.billing.daily_billing"],
  code: "def cost_by_service(daily_billing, start_date, top=5, unit='usd'):\n    return daily_billing\n",
  tests: [{ start_date: "2026-01-01" }],
};

const entry = (def: InterfaceDef, version: number): InterfaceEntry => ({
  name: def.name,
  version,
  origin: "designed",
  signature: `${def.name}(start_date: date, top: int = 5, unit: str = 'usd') -> table`,
  interface: def,
  created_at: "2026-11-24T08:00:00Z",
});

describe("the page's logic", () => {
  it("labels inputs as the server's signature does", () => {
    expect(costByService.inputs.map(inputLabel)).toEqual([
      "start_date: date",
      "top: int = 5",
      "unit: str = 'usd'",
    ]);
    expect(inputLabel({ name: "all", type: "bool", description: "", default: false })).toBe("all: bool = False");
  });

  it("refuses an empty description or code without the interface's function", () => {
    const draft = draftOf(costByService);
    expect(draftProblem(costByService, draft)).toBeNull();
    expect(draftProblem(costByService, { ...draft, description: "  " })).toMatch(/description is empty/);
    expect(draftProblem(costByService, { ...draft, code: "def other(x):\n    return x" })).toMatch(
      /define the function cost_by_service/,
    );
  });

  it("saves the whole stored definition with the edited fields", () => {
    const draft = { description: " Cost per service. ", code: "def cost_by_service(daily_billing):\n    return daily_billing\n" };
    expect(isChanged(costByService, draftOf(costByService))).toBe(false);
    expect(isChanged(costByService, draft)).toBe(true);
    expect(edited(costByService, draft)).toEqual({ ...costByService, description: "Cost per service.", code: draft.code });
  });

  it("#/interfaces and #/interfaces/<source>", () => {
    expect(parseRoute("#/interfaces")).toEqual({ page: "interfaces", source: null });
    expect(parseRoute("#/interfaces/my%20pg")).toEqual({ page: "interfaces", source: "my pg" });
    expect(routeHash({ page: "interfaces", source: "my pg" })).toBe("#/interfaces/my%20pg");
    expect(routeHash({ page: "interfaces", source: null })).toBe("#/interfaces");
  });
});

function mockServer(routes: Record<string, () => Response>) {
  const calls: { key: string; body?: unknown }[] = [];
  vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
    const key = `${init?.method ?? "GET"} ${url}`;
    calls.push({ key, body: init?.body ? JSON.parse(String(init.body)) : undefined });
    const route = routes[key];
    return route ? route() : jsonResponse({ error: { code: "not_found", message: `no route ${key}` } }, 404);
  });
  return calls;
}

const BASE = "/api/v1/data-copilot/pg";

beforeEach(() => history.replaceState(null, "", "#/interfaces/pg"));
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("InterfacesPage", () => {
  function serve(versions: { current: number }) {
    return mockServer({
      "GET /api/v1/sources": () => jsonResponse([{ name: "pg", kind: "postgres", description: "" }]),
      [`GET ${BASE}/interfaces`]: () =>
        jsonResponse(versions.current ? [entry(costByService, versions.current)] : []),
      [`GET ${BASE}/uncovered`]: () =>
        jsonResponse([{ id: "u1", request: "Forecast next month's cost", reason: "no forecasting interface" }]),
      [`PUT ${BASE}/interfaces/cost_by_service`]: () => {
        versions.current += 1;
        return jsonResponse({ name: "cost_by_service", version: versions.current, signature: "" });
      },
      [`DELETE ${BASE}/interfaces/cost_by_service`]: () => {
        versions.current = 0;
        return new Response(null, { status: 204 });
      },
    });
  }

  it("lists a source's interfaces with their signature and code, and its uncovered requests", async () => {
    serve({ current: 1 });
    render(<InterfacesPage source="pg" />);
    const card = await screen.findByTestId("interface-cost_by_service");
    expect(within(card).getByText(/^cost_by_service\(start_date: date/)).toBeTruthy();
    expect(card.textContent).toContain("v1 · designed");
    expect(card.textContent).toContain("Cost per service between two dates.");
    expect(within(card).getByText("top: int = 5")).toBeTruthy();
    expect(card.textContent).toContain("pg.billing.daily_billing");
    expect(card.querySelector("pre")?.textContent).toBe(costByService.code);
    expect((await screen.findByTestId("uncovered")).textContent).toContain("Forecast next month's cost");
    expect(screen.getByTestId("source-pg")).toBeTruthy();
  });

  it("saves an edit as a new version", async () => {
    const calls = serve({ current: 1 });
    render(<InterfacesPage source="pg" />);
    const card = await screen.findByTestId("interface-cost_by_service");
    fireEvent.click(within(card).getByRole("button", { name: "Edit" }));
    const save = within(card).getByRole("button", { name: "Save as v2" }) as HTMLButtonElement;
    expect(save.disabled).toBe(true); // nothing changed yet
    fireEvent.change(within(card).getByLabelText("Code"), { target: { value: "print(1)" } });
    expect(card.textContent).toContain("must define the function cost_by_service");
    expect(save.disabled).toBe(true);
    const code = "def cost_by_service(daily_billing):\n    return daily_billing.head(3)\n";
    fireEvent.change(within(card).getByLabelText("Code"), { target: { value: code } });
    fireEvent.change(within(card).getByLabelText("Description"), { target: { value: "The three first rows." } });
    fireEvent.click(save);
    await waitFor(() => expect(screen.getByTestId("interface-cost_by_service").textContent).toContain("v2"));
    const put = calls.find((c) => c.key.startsWith("PUT"));
    expect(put?.body).toEqual({ ...costByService, description: "The three first rows.", code });
  });

  it("deletes an interface once confirmed", async () => {
    const calls = serve({ current: 1 });
    const confirm = vi.fn(() => false);
    vi.stubGlobal("confirm", confirm);
    render(<InterfacesPage source="pg" />);
    const card = await screen.findByTestId("interface-cost_by_service");
    fireEvent.click(within(card).getByRole("button", { name: "Delete" }));
    expect(confirm).toHaveBeenCalledOnce();
    expect(calls.some((c) => c.key.startsWith("DELETE"))).toBe(false);
    confirm.mockReturnValue(true);
    fireEvent.click(within(card).getByRole("button", { name: "Delete" }));
    await waitFor(() => expect(screen.queryByTestId("interface-cost_by_service")).toBeNull());
    expect(calls.filter((c) => c.key.startsWith("DELETE"))).toHaveLength(1);
    expect(screen.getByText(/None yet/)).toBeTruthy();
  });
});
