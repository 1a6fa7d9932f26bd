import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AppList, slugify } from "./AppList";

type Handler = (url: string, init?: RequestInit) => { status: number; body?: unknown };

function mockFetch(handler: Handler) {
  const calls: { url: string; method: string; body?: unknown }[] = [];
  vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
    calls.push({ url, method: init?.method ?? "GET", body: init?.body ? JSON.parse(String(init.body)) : undefined });
    const { status, body } = url === "/api/v1/templates" ? { status: 200, body: [] } : handler(url, init);
    return new Response(body === undefined ? null : JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  });
  return calls;
}

const app = { id: "1", slug: "hello", name: "Hello", description: "", published_version_id: null, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z" };

beforeEach(() => localStorage.clear());
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("AppList", () => {
  it("lists apps with their test ids", async () => {
    mockFetch(() => ({ status: 200, body: { items: [app], total: 1, offset: 0, limit: 200 } }));
    render(<AppList />);
    expect(await screen.findByTestId("app-hello")).toBeTruthy();
    expect(screen.getByTestId("new-app")).toBeTruthy();
  });

  it("a file that fails to import says why (the server's code and message)", async () => {
    mockFetch((url, init) => {
      if (url.startsWith("/api/v1/apps/import") && init?.method === "POST")
        return { status: 422, body: { error: { code: "invalid_input", message: "format: not a dagwright app export" } } };
      return { status: 200, body: { items: [], total: 0, offset: 0, limit: 200 } };
    });
    render(<AppList />);
    const input = screen.getByTestId("import-file") as HTMLInputElement;
    const file = new File(['{"format": "nope"}'], "bad.json", { type: "application/json" });
    fireEvent.change(input, { target: { files: [file] } });
    const error = await screen.findByTestId("import-error");
    expect(error.textContent).toContain("invalid_input");
    expect(error.textContent).toContain("not a dagwright app export");
    expect(error.textContent).toContain("bad.json");
  });

  it("a file that is not JSON is refused before any upload", async () => {
    const calls = mockFetch(() => ({ status: 200, body: { items: [], total: 0, offset: 0, limit: 200 } }));
    render(<AppList />);
    const file = new File(["not json"], "x.json");
    fireEvent.change(screen.getByTestId("import-file"), { target: { files: [file] } });
    expect((await screen.findByTestId("import-error")).textContent).toContain("not JSON");
    expect(calls.filter((c) => c.method === "POST")).toHaveLength(0);
  });

  it("shows a server error instead of a blank page", async () => {
    mockFetch(() => ({ status: 500, body: { error: { code: "internal", message: "database is locked" } } }));
    render(<AppList />);
    const error = await screen.findByTestId("apps-error");
    expect(error.textContent).toContain("internal");
    expect(error.textContent).toContain("database is locked");
  });

  it("creates an app from its name (slug derived)", async () => {
    const calls = mockFetch((_url, init) => (init?.method === "POST" ? { status: 201, body: { ...app, slug: "my-app", name: "My App" } } : { status: 200, body: { items: [], total: 0, offset: 0, limit: 200 } }));
    render(<AppList />);
    fireEvent.click(screen.getByTestId("new-app"));
    fireEvent.change(screen.getByTestId("new-app-name"), { target: { value: "My App" } });
    expect((screen.getByTestId("new-app-slug") as HTMLInputElement).value).toBe("my-app");
    fireEvent.click(screen.getByTestId("new-app-create"));
    await waitFor(() => expect(calls.some((c) => c.method === "POST")).toBe(true));
    expect(calls.find((c) => c.method === "POST")!.body).toEqual({ slug: "my-app", name: "My App", description: "" });
    await waitFor(() => expect(window.location.hash).toBe("#/apps/my-app"));
  });

  it("slugifies names", () => {
    expect(slugify("  Héllo, World! ")).toBe("hello-world");
  });
});
