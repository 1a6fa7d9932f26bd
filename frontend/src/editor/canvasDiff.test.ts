import { describe, expect, it } from "vitest";
import type { FlowDocument } from "../api/types";
import { canvasDiff, isEmptyDiff } from "./canvasDiff";

const doc = (nodes: FlowDocument["nodes"], edges: FlowDocument["edges"] = []): FlowDocument => ({ format: "dagwright.flow", version: 1, name: "f", nodes, edges }) as FlowDocument;

describe("canvasDiff", () => {
  it("names added, removed and changed blocks and counts wires; moves do not count", () => {
    const before = doc(
      [
        { id: "a", block: "text_input", config: { name: "q" }, position: { x: 0, y: 0 } },
        { id: "b", block: "template", config: { template: "{{ x }}" } },
      ],
      [{ source: { node: "a", port: "output" }, target: { node: "b", port: "x" } }],
    );
    const moved = doc([{ ...before.nodes![0], position: { x: 50, y: 9 } }, before.nodes![1]], before.edges);
    expect(isEmptyDiff(canvasDiff(before, moved))).toBe(true);
    const after = doc([{ id: "a", block: "text_input", config: { name: "question" } }, { id: "c", block: "output", config: {} }]);
    expect(canvasDiff(before, after)).toEqual({ added: ["c"], removed: ["b"], changed: ["a"], wiresAdded: 0, wiresRemoved: 1 });
  });
});
