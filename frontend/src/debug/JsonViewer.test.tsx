import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { JsonViewer } from "./JsonViewer";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("JsonViewer", () => {
  it("folds long strings, and unfolds them on demand", () => {
    const long = "x".repeat(1000);
    render(<JsonViewer value={{ text: long }} testId="v" />);
    const viewer = screen.getByTestId("v");
    expect(viewer.textContent).not.toContain(long);
    fireEvent.click(screen.getByText("show all 1,000 chars"));
    expect(viewer.textContent).toContain(long);
  });

  it("collapses and expands branches, and pages big arrays", () => {
    const items = Array.from({ length: 250 }, (_, i) => ({ i }));
    render(<JsonViewer value={{ items }} testId="v" />);
    const viewer = screen.getByTestId("v");
    expect(viewer.textContent).toContain("object {1}");
    // depth 2 and below start collapsed: each item shows as "1 keys"
    expect(screen.getAllByText(/1 keys/).length).toBe(100);
    fireEvent.click(screen.getByText("show 150 more of 150"));
    expect(screen.getAllByText(/1 keys/).length).toBe(250);
    fireEvent.click(screen.getAllByText(/1 keys/)[0]);
    expect(viewer.textContent).toContain('"i": 0');
  });

  it("copies the whole value", async () => {
    const writeText = vi.fn(async () => undefined);
    vi.stubGlobal("navigator", { clipboard: { writeText } });
    render(<JsonViewer value={{ a: [1, 2] }} testId="v" />);
    fireEvent.click(screen.getByText("Copy JSON"));
    await waitFor(() => expect(writeText).toHaveBeenCalledWith('{\n  "a": [\n    1,\n    2\n  ]\n}'));
    expect(await screen.findByText("Copied")).toBeTruthy();
  });

  it("says when a stored value was truncated by the server", () => {
    render(<JsonViewer value={{ truncated: true, size: 300000, preview: '{"a": "b' }} testId="v" />);
    expect(screen.getByTestId("v").textContent).toContain("Stored value truncated: 300,000 bytes");
  });
});

describe("JsonViewer strings", () => {
  it("shows strings as JSON (straight quotes, escapes), so what is selected pastes as JSON", () => {
    render(<JsonViewer value={{ say: 'a "quoted"\nline' }} testId="json-strings" />);
    const text = screen.getByTestId("json-strings").textContent ?? "";
    expect(text).toContain('"say": "a \\"quoted\\"\\nline"');
    expect(text).not.toMatch(/[“”]/);
  });
});
