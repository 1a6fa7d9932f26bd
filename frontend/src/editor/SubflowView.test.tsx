import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { SubFlow } from "../api/types";
import { blocks } from "../test/fixtures";
import { SubflowList, subflowInterface } from "./SubflowView";

beforeAll(() => {
  // jsdom has no ResizeObserver, which the canvas measures itself with.
  vi.stubGlobal(
    "ResizeObserver",
    class {
      observe() {}
      unobserve() {}
      disconnect() {}
    },
  );
});
afterEach(cleanup);

const classify: SubFlow = {
  description: "One question -> one label.",
  nodes: [
    { id: "question", block: "text_input", config: { name: "question" } },
    { id: "ask", block: "template", config: { template: "{{ question }}" } },
    { id: "label", block: "output", config: { name: "label" } },
  ],
  edges: [
    { source: { node: "question", port: "output" }, target: { node: "ask", port: "question" } },
    { source: { node: "ask", port: "output" }, target: { node: "label", port: "value" } },
  ],
};

describe("the document's sub-flows", () => {
  it("say what each takes and gives", () => {
    expect(subflowInterface(classify, blocks)).toEqual({ inputs: ["question"], outputs: ["label"] });
  });

  it("are listed and open as a read-only group", () => {
    render(<SubflowList subflows={{ classify }} blocks={blocks} />);
    expect(screen.getByTestId("subflow-classify").textContent).toContain("3 nodes · takes question · gives label");
    expect(screen.queryByTestId("subflow-viewer")).toBeNull();
    fireEvent.click(screen.getByTestId("open-subflow-classify"));
    const viewer = screen.getByTestId("subflow-viewer");
    expect(viewer.textContent).toContain("Sub-flow classify");
    expect(viewer.textContent).toContain("3 nodes");
    fireEvent.click(screen.getByTestId("close-subflow"));
    expect(screen.queryByTestId("subflow-viewer")).toBeNull();
  });
});
