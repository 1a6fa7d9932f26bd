// The MCP tool picker against a scripted server whose answers the test releases one by one:
// the tools listed belong to the server they were listed from, and a late answer for a server
// the form no longer names is dropped (its call cancelled).
import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { McpToolPicker } from "./McpToolPicker";

type Pending = { server: unknown; signal: AbortSignal | null | undefined; answer: (tools: string[]) => void };

function scriptedServer() {
  const pending: Pending[] = [];
  vi.stubGlobal("fetch", (url: string, init: RequestInit) => {
    expect(url).toBe("/api/v1/mcp/tools");
    return new Promise<Response>((resolve) => {
      // Answers even a cancelled call (as a reply already on the wire would): the form must
      // drop it itself.
      pending.push({
        server: JSON.parse(String(init.body)),
        signal: init.signal,
        answer: (tools) => resolve(new Response(JSON.stringify({ tools: tools.map((name) => ({ name, input_schema: {} })) }), { status: 200 })),
      });
    });
  });
  return pending;
}

const toolNames = () => [...screen.queryAllByRole("option")].map((o) => o.textContent).filter((t) => t !== "pick a tool");

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("McpToolPicker", () => {
  it("drops a late answer for the server the form named before", async () => {
    const pending = scriptedServer();
    const { rerender } = render(<McpToolPicker config={{ url: "http://old/mcp" }} onPick={() => {}} />);
    fireEvent.click(screen.getByRole("button", { name: "List the server's tools" }));
    expect(pending).toHaveLength(1);
    expect(pending[0].server).toEqual({ url: "http://old/mcp" });

    rerender(<McpToolPicker config={{ url: "http://new/mcp" }} onPick={() => {}} />);
    expect(pending[0].signal?.aborted).toBe(true);
    await act(async () => pending[0].answer(["old_tool"]));
    expect(toolNames()).toEqual([]);
    expect(screen.getByRole("button", { name: "List the server's tools" })).toBeTruthy();

    fireEvent.click(screen.getByRole("button", { name: "List the server's tools" }));
    expect(pending[1].server).toEqual({ url: "http://new/mcp" });
    await act(async () => pending[1].answer(["new_tool"]));
    expect(toolNames()).toEqual(["new_tool"]);
  });

  it("hides the tools listed once the url, command or token secret changes", async () => {
    const pending = scriptedServer();
    const { rerender } = render(<McpToolPicker config={{ url: "http://a/mcp" }} onPick={() => {}} />);
    fireEvent.click(screen.getByRole("button", { name: "List the server's tools" }));
    await act(async () => pending[0].answer(["add"]));
    expect(toolNames()).toEqual(["add"]);

    rerender(<McpToolPicker config={{ url: "http://a/mcp", token_secret: "MCP_TOKEN" }} onPick={() => {}} />);
    expect(toolNames()).toEqual([]);
    // Back to the server that was listed: its tools show again, and no call is under way.
    rerender(<McpToolPicker config={{ url: "http://a/mcp" }} onPick={() => {}} />);
    expect(toolNames()).toEqual(["add"]);
    expect(screen.getByRole("button", { name: "List again" })).toBeTruthy();
  });

  it("a listing cancelled by a change of server is not shown as still under way", async () => {
    scriptedServer();
    const { rerender } = render(<McpToolPicker config={{ command: ["python", "s.py"] }} onPick={() => {}} />);
    fireEvent.click(screen.getByRole("button", { name: "List the server's tools" }));
    expect(screen.getByRole("button", { name: "Listing tools…" })).toBeTruthy();
    rerender(<McpToolPicker config={{ url: "http://b/mcp" }} onPick={() => {}} />);
    rerender(<McpToolPicker config={{ command: ["python", "s.py"] }} onPick={() => {}} />);
    expect((screen.getByRole("button", { name: "List the server's tools" }) as HTMLButtonElement).disabled).toBe(false);
  });
});
