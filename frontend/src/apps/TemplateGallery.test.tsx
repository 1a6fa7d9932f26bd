import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { TemplateGallery } from "./TemplateGallery";
import { freeSlug } from "./templates";

const hello = {
  id: "examples/hello",
  group: "Examples",
  name: "hello",
  description: "Says hello.",
  nodes: 2,
  preview: [
    { x: 0, y: 0, block: "text_input" },
    { x: 300, y: 0, block: "output" },
  ],
  edges: [[0, 1]],
};

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("TemplateGallery", () => {
  it("picks a free slug", () => {
    expect(freeSlug("Hello World", new Set())).toBe("hello-world");
    expect(freeSlug("hello", new Set(["hello", "hello-2"]))).toBe("hello-3");
  });

  it("makes an app, then keeps an invalid template as the app's draft", async () => {
    const calls: string[] = [];
    vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
      const method = init?.method ?? "GET";
      calls.push(`${method} ${url}`);
      const reply = (status: number, body: unknown) => new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
      if (url === "/api/v1/templates") return reply(200, [hello]);
      if (url === "/api/v1/templates/examples/hello") return reply(200, { ...hello, flow: { format: "dagwright.flow", version: 1, nodes: [], edges: [] } });
      if (url === "/api/v1/apps" && method === "POST") return reply(201, { slug: "hello-2", name: "hello" });
      if (url.endsWith("/versions")) return reply(422, { error: { code: "flow_invalid", message: "no output" } });
      return reply(200, {});
    });
    render(<TemplateGallery taken={new Set(["hello"])} />);
    const card = await screen.findByTestId("template-examples-hello");
    expect(card.textContent).toContain("Says hello.");
    expect(card.querySelectorAll("rect")).toHaveLength(2);
    fireEvent.click(card);
    await waitFor(() => expect(calls).toContain("PUT /api/v1/apps/hello-2/draft"));
  });
});
