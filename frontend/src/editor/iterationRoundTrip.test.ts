import { describe, expect, it } from "vitest";
import type { FlowDocument } from "../api/types";
import { blocks } from "../test/fixtures";
import { flowToGraph, graphToFlow } from "./graph";

// A document like flows/examples/classify_questions.json: a map over a sub-flow stored in
// the document, whose model node carries an error policy. The canvas draws the top-level
// graph only; the sub-flows and every node's on_error must come back as they went in.
const classify: FlowDocument = {
  format: "dagwright.flow",
  version: 1,
  name: "classify_questions",
  description: "Classifies questions in parallel.",
  nodes: [
    { id: "questions", block: "list_input", config: { name: "questions" }, position: { x: 0, y: 0 } },
    {
      id: "each",
      block: "map",
      config: { subflow: "classify", item: "question", output: "label", concurrency: 4 },
      on_error: { retry: 1, backoff: 0.5, fallback: "default", default: [] },
      position: { x: 300, y: 0 },
    },
    { id: "labels", block: "output", config: { name: "labels" }, position: { x: 600, y: 0 } },
  ],
  edges: [
    { source: { node: "questions", port: "output" }, target: { node: "each", port: "items" } },
    { source: { node: "each", port: "output" }, target: { node: "labels", port: "value" } },
  ],
  subflows: {
    classify: {
      description: "One question -> one label.",
      nodes: [
        { id: "question", block: "text_input", config: { name: "question" } },
        {
          id: "ask",
          block: "chat",
          config: { prompt: "{{ question }}" },
          on_error: { retry: 2, backoff: 0.2 },
        },
        { id: "label", block: "output", config: { name: "label" } },
      ],
      edges: [
        { source: { node: "question", port: "output" }, target: { node: "ask", port: "question" } },
        { source: { node: "ask", port: "output" }, target: { node: "label", port: "value" } },
      ],
    },
  },
};

describe("documents with sub-flows and error policies", () => {
  it("round-trip through the editor's graph", () => {
    const graph = flowToGraph(classify, blocks);
    expect(graph.nodes[1].data.on_error).toEqual(classify.nodes?.[1].on_error);
    const meta = { name: classify.name, description: classify.description, subflows: classify.subflows };
    expect(graphToFlow(graph, meta)).toEqual(classify);
  });

  it("leave documents without them as they were", () => {
    const graph = flowToGraph({ ...classify, subflows: undefined }, blocks);
    const doc = graphToFlow(graph, { name: classify.name });
    expect("subflows" in doc).toBe(false);
  });
});

describe("a sub-flow node's ports", () => {
  it("are the sub-flow's inputs, but those the node fills in itself", () => {
    const doc: FlowDocument = {
      ...classify,
      subflows: {
        classify: {
          nodes: [
            { id: "question", block: "text_input", config: { name: "question" } },
            { id: "context", block: "text_input", config: { name: "context" } },
            { id: "hint", block: "text_input", config: { name: "hint", default: "none" } },
          ],
          edges: [],
        },
      },
    };
    const each = flowToGraph(doc, blocks).nodes.find((n) => n.id === "each");
    const inputs = each?.data.ports.inputs.filter((p) => !p.missing) ?? [];
    expect(inputs.map((p) => [p.name, p.type, p.required])).toEqual([
      ["context", "str", true],
      ["hint", "str", false],
    ]);
  });
});
